"""The harness's fields, as data: every field a search may vary has a dotted path.

`HarnessSpec` knows nothing of templates, so that the modules which render and parse with a harness
(prompts, formats, tools) can name its type without importing their own caller. `Harness` (load.py)
is a HarnessSpec whose templates are known to render.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

import coevo

DEFAULT_PROMPTS_DIR = Path(coevo.__file__).resolve().parent.parent / "prompts"
"""Where templates are looked up when a harness does not say (the repository's `prompts/`)."""
DEFAULT_DEMOS_POOL = DEFAULT_PROMPTS_DIR.parent / "harnesses" / "demos" / "oracle.jsonl"
"""The oracle pool built from the bundled tasks' train split (`coevo demos build`), used when `demonstrations.pool`
is unset."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Templates(_Section):
    """Jinja template files, relative to the harness's prompts directory."""

    system: str = "system_terse.j2"
    """System prompt. Variables: tools, action_format, example, submit_command, max_turns."""
    instance: str = "instance.j2"
    """First user message. Variables: instruction, task, initial_observation (None when off)."""
    observation: str = "observation.j2"
    """One tool result. Variables: tool, command, output, exit_code, timed_out."""
    format_error: str = "format_error.j2"
    """Reply to an unparseable turn. Variables: error, example, retries_left."""
    timeout: str = "timeout.j2"
    """Appended to a timed-out command's result. Variables: command, timeout_s."""
    nonzero_exit_hint: str = "nonzero_exit_hint.j2"
    """Appended to a failed command's result. Variables: command, exit_code."""
    repeat_hint: str = "repeat_hint.j2"
    """Appended to a command's result on its recovery.repeat_limit-th run. Variables: command, limit."""
    step_budget: str = "step_budget.j2"
    """Appended to every observation under context.step_budget_notice. Variables: turns_left, max_turns."""
    self_check: str = "self_check.j2"
    """Answer to a submit sent before any output was seen, under recovery.self_check. Variables: none."""


class ActionFormat(_Section):
    kind: Literal["json", "tool_call", "bash_block"] = "json"
    """How a reply encodes actions: Terminus-2 JSON, Qwen `<tool_call>` tags, or one ```bash block."""
    submit_command: str = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
    """bash_block only: a block whose last line is this command submits the episode."""
    native_tools: bool = False
    """Also pass the tool schemas to the tokenizer's chat template (`tools=`), as Qwen models expect."""
    constrained: bool = False
    """Sample replies under the format's grammar (coevo.harness.grammar), so that every reply parses."""


class ToolSpec(_Section):
    enabled: bool = True
    """Whether the model may call this tool; disabled tools are neither described nor accepted."""
    description: str = ""
    """One line shown to the model in the system prompt and the tool schema."""


class Tools(_Section):
    bash: ToolSpec = ToolSpec(description="Run a shell command in /app and see its output.")
    """Run one command in the episode's persistent shell."""
    read_file: ToolSpec = ToolSpec(enabled=False, description="Read a file.")
    """Return a file's contents (capped like command output)."""
    write_file: ToolSpec = ToolSpec(enabled=False, description="Write content to a file.")
    """Create or overwrite a file with the given content."""
    submit: ToolSpec = ToolSpec(description="Finish the task; the work is then checked.")
    """End the episode with status 'submitted'."""


class Recovery(_Section):
    format_error_feedback: bool = True
    """Answer an unparseable reply with the format_error template; when off, drop it and sample again."""
    max_format_retries: int = Field(2, ge=0)
    """Episode ends with 'format_errors' after this many consecutive unparseable replies plus one."""
    timeout_notice: bool = True
    """Append the timeout template when a command is killed at its timeout."""
    nonzero_exit_hint: bool = False
    """Append the nonzero_exit_hint template when a command exits with a non-zero status."""
    max_consecutive_errors: int | None = Field(None, ge=1)
    """Episode ends with 'error_limit' after this many turns in a row with any error; None: no cap."""
    repeat_limit: int | None = Field(None, ge=2)
    """Loop breaker: the run of a command (same tool, same arguments) that makes this many in the episode gets
    the repeat_hint template; asking for it once more ends the episode with 'repeat_limit', without running it
    (the work is still verified). None: off."""
    self_check: bool = False
    """Once per episode, refuse a submit sent without having seen the last command's output (it came in the
    same reply as commands, or no command ran yet): the commands run, the self_check template follows their
    output, and the next submit is accepted."""
    empty_reply_retry: bool = False
    """Drop an empty (whitespace-only) reply instead of answering it with the format_error template, and
    sample again once with a shorter prompt (only the last observation kept verbatim); an empty retry is a
    format error as usual."""


class ContextPolicy(_Section):
    output_head_chars: int = Field(600, ge=0)
    """Characters kept from the start of a long tool output."""
    output_tail_chars: int = Field(600, ge=0)
    """Characters kept from the end of a long tool output; the middle is replaced by a marker."""
    history: Literal["full", "last_k"] = "full"
    """`full` shows every observation; `last_k` replaces all but the last k with `elided_text`."""
    k: int = Field(3, ge=1)
    """Observations kept verbatim under `last_k`."""
    elided_text: str = "[older output omitted]"
    """What an elided observation is replaced with."""
    step_budget_notice: bool = False
    """Append the step_budget template (turns left before limits.max_turns) to every observation."""


class Limits(_Section):
    max_turns: int = Field(12, ge=1)
    """Episode ends with 'turn_limit' after this many model replies."""
    max_tokens_per_turn: int = Field(256, ge=1)
    """Most tokens the model may sample in one reply."""
    max_episode_tokens: int = Field(3072, ge=1)
    """Episode ends with 'token_limit' once its completion buffer (model + environment tokens) reaches this."""
    max_context_tokens: int = Field(2048, ge=1)
    """Episode ends with 'context_exceeded' when prompt plus max_tokens_per_turn would pass this."""
    wall_time_s: float = Field(300.0, gt=0)
    """Episode ends with 'timeout' when its own time passes this (checked between turns). Its own time is
    what the episode itself spent: starting its sandbox, its commands, and its share of generation (a
    batched local model reports each row's prefill and its share of every decoding step it took part in;
    other policies split each call evenly). Waiting for other episodes of the batch is not counted."""
    command_timeout_s: float = Field(20.0, gt=0)
    """A single command is killed after this many seconds."""


class Decoding(_Section):
    temperature: float = Field(1.0, ge=0)
    """Sampling temperature; 0 is greedy."""
    top_p: float = Field(1.0, gt=0, le=1)
    """Nucleus sampling mass."""


class Demonstrations(_Section):
    """Verified episodes shown before the task, rendered in this harness's own format (coevo/harness/demos.py)."""

    k: int = Field(0, ge=0, le=3)
    """How many demonstrations each episode opens with; 0 turns them off."""
    source: Literal["oracle", "own", "both"] = "oracle"
    """Which pool they come from: the oracle's solutions, the model's own verified successes, or both (own first)."""
    pick: Literal["same_family", "nearest", "random"] = "same_family"
    """How a task's demonstrations are chosen: its family's first, the nearest instructions, or at random
    (seeded by the task's name). Never the task itself."""
    placement: Literal["turns", "system"] = "turns"
    """`turns`: earlier user/assistant/observation messages before the task; `system`: appended to the system prompt."""
    pool: Path | None = None
    """The oracle pool (JSONL, from `coevo demos build`; relative to the harness file's folder, or to the working
    directory in an override); None: the bundled pool of the bundled tasks."""
    own_pool: Path | None = None
    """The model's own verified successes (JSONL, from `coevo demos own`); needed by source `own` and `both`."""


class HarnessSpec(_Section):
    name: str
    """Short identifier, recorded in every trajectory."""
    description: str = ""
    """One line for humans."""
    prompts_dir: Path | None = None
    """Folder the template names resolve against; None: the repository's `prompts/`."""
    templates: Templates = Templates()
    """Which Jinja file renders each message."""
    action_format: ActionFormat = ActionFormat()
    """How replies encode tool calls, and how the oracle writes them."""
    tools: Tools = Tools()
    """Which tools are bound, with the descriptions the model sees."""
    recovery: Recovery = Recovery()
    """What happens after format errors, timeouts and failed commands."""
    context: ContextPolicy = ContextPolicy()
    """How much of each output and of the history the model sees."""
    limits: Limits = Limits()
    """When an episode is cut off."""
    decoding: Decoding = Decoding()
    """Sampling parameters."""
    demonstrations: Demonstrations = Demonstrations()
    """In-context demonstrations: solved episodes the model reads before its task (off by default)."""
    initial_observation: str | None = None
    """A command whose output the first user message shows (e.g. `ls -la /app`); None: nothing."""

    @property
    def prompts_path(self) -> Path:
        return self.prompts_dir or DEFAULT_PROMPTS_DIR

    def episode_token_bound(self) -> int:
        """The longest token buffer an episode can reach (what dr_grpo's normaliser reads)."""
        return self.limits.max_episode_tokens + self.limits.max_tokens_per_turn

    def to_yaml(self) -> str:
        """The harness as YAML that `load_harness` reads back (prompts_dir made absolute)."""
        data = self.model_dump(mode="json")
        data["prompts_dir"] = str(self.prompts_path.resolve())
        return yaml.safe_dump(data, sort_keys=False)

