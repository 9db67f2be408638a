"""The record of one episode: a token-in/token-out buffer for training and messages for humans."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from coevo.harness.tools import ToolCall, ToolResult
from coevo.outcomes import Status


class Step(BaseModel):
    """One model turn: what it replied, what that was parsed into, and what the tools returned."""

    reply: str
    """The model's text, as returned by the policy."""
    calls: list[ToolCall] = []
    """What the reply was parsed into; a submit is the last call."""
    results: list[ToolResult] = []
    """One per call that ran (a submit has none)."""
    format_error: str | None = None
    """The parser's message when the reply was unparseable (then calls and results are empty)."""
    tokens: int = 0
    """Tokens the model sampled in this turn."""


class Trajectory(BaseModel):
    task: str
    """The task's name (its folder name)."""
    family: str = ""
    """The task's family, for per-family pass rates."""
    harness: str
    """The harness's name."""
    harness_fingerprint: str = ""
    """`coevo.harness.fingerprint`: a hash of what the model saw of the harness (rendered templates, tool
    schema, action format, output and history processing), so that successes match the harness they
    were sampled under."""
    sample: int = 0
    """Index of this episode among the n_per_task episodes of its task (the GRPO group)."""
    segment: int = 0
    """Which token record of its episode this is. coevo's own loop writes one per episode (0); an agent
    behind `coevo serve` that re-renders its chat breaks an episode into several (coevo.serve.sessions),
    each carrying the episode's outcome. `episodes()` merges them for counting."""

    prompt_ids: list[int] = []
    """The first prompt (system + instance + generation prompt), as tokenized once."""
    completion_ids: list[int] = []
    """Append-only: every sampled token exactly as sampled, and every observation's suffix tokens."""
    completion_mask: list[int] = []
    """1 for a sampled model token, 0 for an environment (observation / chat scaffolding) token."""
    logprobs: list[float] = []
    """Rollout log-probability per completion token; 0.0 for environment tokens."""
    routing: list[list[list[int]]] = []
    """A Mixture-of-Experts policy's experts per completion token, [layers][top_k] each: those chosen at the
    forward step that produced the token (the step its logprob comes from); -1 (never an expert) for
    environment tokens. Empty for a dense model or a policy that does not record (coevo.train.routing)."""
    logprob_source: Literal["model", "constrained"] = "model"
    """Which distribution `logprobs` are of (coevo.Completion.logprob_source): "constrained" when the replies
    were sampled under the action format's grammar, renormalised over the tokens it allowed; a training
    forward matches them only with the same masks applied (coevo.train.mismatch replays them)."""
    messages: list[dict] = []
    """The chat as the model saw it (full history; under `last_k` older observations were elided)."""
    task_message: int = 1
    """Index in `messages` of the task's own first user message (after any demonstration turns)."""
    demonstrations: list[str] = []
    """The tasks whose verified episodes opened the chat (harness field `demonstrations`), in order."""
    steps: list[Step] = []

    status: Status | None = None
    """How the episode ended; None only while it runs."""
    error: str | None = None
    """The cause, when the status is a failure or a limit (e.g. the exception text)."""
    reward: float = 0.0
    checks: dict[str, float] = {}
    """Per-check partial credit from the verifier's reward.json."""
    verify_error: str | None = None
    """Why the verifier could not give a reward (the reward is then 0)."""

    turns: int = 0
    """Model replies (generate calls) in the episode, including unparseable ones."""
    format_errors: int = 0
    """Unparseable replies."""
    timeouts: int = 0
    """Commands killed at limits.command_timeout_s."""
    tokens: int = 0
    """Model tokens sampled over the episode (estimated at 4 characters each for text-only policies)."""
    errors: list[str] = []
    """Every error seen, in order: format errors, failed commands, the final cause."""
    processors: dict[str, int] = Field(default_factory=dict)
    """How often each control processor fired (coevo.rollout.processors): repeat_hint, repeat_limit,
    step_budget, self_check, empty_reply_retry; a processor that never fired is absent."""
    drift: int | None = None
    """Tokens that differ between the buffer and a full re-render + tokenize of the final chat (None
    without a tokenizer). Measured and logged, never trained on."""
    timing: dict[str, float] = Field(default_factory=dict)
    """Seconds: start, generate, tools, verify, total."""

    @property
    def model_tokens(self) -> list[int]:
        return [t for t, m in zip(self.completion_ids, self.completion_mask) if m]


def grouped(trajectories: Iterable[Trajectory]) -> list[list[Trajectory]]:
    """The records of each episode, in order: a record with segment > 0 continues the latest episode of its
    task and sample (a served agent that re-rendered its chat); every other record starts one."""
    out: list[list[Trajectory]] = []
    latest: dict[tuple[str, int], list[Trajectory]] = {}
    for t in trajectories:
        key = (t.task, t.sample)
        if t.segment == 0 or key not in latest:
            latest[key] = []
            out.append(latest[key])
        latest[key].append(t)
    return out


def episodes(trajectories: Iterable[Trajectory]) -> list[Trajectory]:
    """One record per episode, for summaries (pass@1 counts episodes, not token records): later segments
    are folded into a copy of the first (turns, tokens and drift added up, the last chat kept). Train on the
    segments themselves: their tokens are not contiguous."""
    out = []
    for first, *rest in grouped(trajectories):
        if rest:
            first = first.model_copy(deep=True)
            for t in rest:
                first.turns, first.tokens = first.turns + t.turns, first.tokens + t.tokens
                first.drift, first.messages = (first.drift or 0) + (t.drift or 0), t.messages
        out.append(first)
    return out


def save_trajectories(path: str | Path, trajectories: Iterable[Trajectory], append: bool = False) -> Path:
    """Write one JSON object per line."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a" if append else "w") as f:
        for t in trajectories:
            f.write(t.model_dump_json() + "\n")
    return path


def load_trajectories(path: str | Path) -> list[Trajectory]:
    """Read a JSONL file written by `save_trajectories`; a bad line is an error naming file and line."""
    path = Path(path)
    out = []
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(Trajectory.model_validate_json(line))
        except ValueError as e:
            raise ValueError(f"{path}:{i}: not a trajectory record ({str(e).splitlines()[0]})") from None
    return out


def task_instruction(t: Trajectory) -> str:
    """The task's own first user message: after the demonstration turns that may open the chat."""
    if t.demonstrations and t.task_message < len(t.messages):
        return t.messages[t.task_message].get("content") or ""
    return next((m.get("content") or "" for m in t.messages if m.get("role") == "user"), "")
