"""What the model reads: each message of an episode, rendered from the harness's templates."""

from __future__ import annotations

from typing import TYPE_CHECKING

from coevo.harness.formats import render_action
from coevo.harness.templates import render_template
from coevo.harness.tools import TOOL_PARAMS, ToolResult, enabled_tools

if TYPE_CHECKING:
    from coevo.harness.spec import HarnessSpec


def render(harness: HarnessSpec, slot: str, **variables) -> str:
    """Render the template the harness names for `slot` (a field of `Templates`)."""
    return render_template(harness.prompts_path, getattr(harness.templates, slot), variables)


def system_prompt(harness: HarnessSpec) -> str:
    tools = [{"name": n, "description": getattr(harness.tools, n).description, "parameters": list(TOOL_PARAMS[n])}
             for n in enabled_tools(harness)]
    submit = render_action(harness, [], submit=True) if harness.tools.submit.enabled else ""
    return render(harness, "system", tools=tools, action_format=harness.action_format.kind,
                  example=render_action(harness, ["ls -la"], submit=False), submit_example=submit,
                  submit_command=harness.action_format.submit_command, max_turns=harness.limits.max_turns)


def instance_prompt(harness: HarnessSpec, instruction: str, task: str, initial_observation: str | None) -> str:
    return render(harness, "instance", instruction=instruction.strip(), task=task,
                  initial_observation=initial_observation)


def observation_text(harness: HarnessSpec, result: ToolResult) -> str:
    """One tool result, followed by the timeout notice or the non-zero-exit hint when the recovery
    policy asks for them."""
    parts = [render(harness, "observation", tool=result.tool, command=result.command, output=result.output,
                    exit_code=result.exit_code, timed_out=result.timed_out)]
    if result.timed_out and harness.recovery.timeout_notice:
        parts.append(render(harness, "timeout", command=result.command,
                            timeout_s=harness.limits.command_timeout_s))
    elif result.exit_code not in (0, None) and harness.recovery.nonzero_exit_hint:
        parts.append(render(harness, "nonzero_exit_hint", command=result.command, exit_code=result.exit_code))
    return "\n".join(p for p in parts if p)


def format_error_text(harness: HarnessSpec, error: str, retries_left: int) -> str:
    return render(harness, "format_error", error=error, retries_left=retries_left,
                  example=render_action(harness, ["ls -la"], submit=False))


def repeat_hint_text(harness: HarnessSpec, command: str) -> str:
    return render(harness, "repeat_hint", command=command, limit=harness.recovery.repeat_limit)


def step_budget_text(harness: HarnessSpec, turns_left: int) -> str:
    return render(harness, "step_budget", turns_left=turns_left, max_turns=harness.limits.max_turns)


def self_check_text(harness: HarnessSpec) -> str:
    return render(harness, "self_check")


def check_harness(harness: HarnessSpec) -> None:
    """Fail at load time, not mid-rollout: the format can express the enabled tools, and every template
    renders (syntax, variables, sandbox) with sample values."""
    if harness.action_format.kind == "bash_block":
        extra = [t for t in enabled_tools(harness) if t not in ("bash", "submit")]
        if extra or not harness.tools.bash.enabled:
            raise ValueError(f"action_format 'bash_block' can express only the bash and submit tools; "
                             f"enable tools.bash and disable {', '.join(extra) or 'nothing else'}")
    if not enabled_tools(harness):
        raise ValueError("no tool is enabled; enable at least tools.bash")
    if harness.action_format.constrained:  # the grammar compiles and accepts the prompt's own examples
        from coevo.harness.grammar import check_grammar

        check_grammar(harness)
    system_prompt(harness)
    instance_prompt(harness, "Create /app/hello.txt.", "sample-task", "total 0")
    instance_prompt(harness, "Create /app/hello.txt.", "sample-task", None)
    observation_text(harness, ToolResult(tool="bash", command="ls", output="x", exit_code=0))
    observation_text(harness, ToolResult(tool="bash", command="ls", output="", exit_code=None, timed_out=True))
    render(harness, "timeout", command="sleep 99", timeout_s=harness.limits.command_timeout_s)
    render(harness, "nonzero_exit_hint", command="false", exit_code=1)
    format_error_text(harness, "No JSON object found.", 1)
    # The processors' templates only where the processor is on: a harness folder written before they
    # existed (an exported bundle's prompts/) has no such file and needs none.
    if harness.recovery.repeat_limit is not None:
        repeat_hint_text(harness, "ls")
    if harness.context.step_budget_notice:
        step_budget_text(harness, harness.limits.max_turns - 1)
    if harness.recovery.self_check:
        self_check_text(harness)
