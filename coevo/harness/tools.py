"""The tools a harness can bind: their schemas, the call/result records, and how a call runs in a sandbox."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from coevo import Sandbox
from coevo.harness.errors import FormatError

if TYPE_CHECKING:
    from coevo.harness.spec import HarnessSpec

TOOL_PARAMS: dict[str, dict[str, str]] = {
    "bash": {"command": "The shell command to run."},
    "read_file": {"path": "Path of the file to read."},
    "write_file": {"path": "Path of the file to write.", "content": "The full new content."},
    "submit": {},
}
"""Every tool's parameters (all strings) with their descriptions; one source for parsers and schemas."""


class ToolCall(BaseModel):
    name: str
    """One of TOOL_PARAMS."""
    arguments: dict[str, Any] = {}
    """Parameter name -> value, as parsed from the reply."""

    def display(self) -> str:
        """What a human (and the observation template's `command`) sees for this call."""
        if self.name == "bash":
            return str(self.arguments.get("command", ""))
        return f"{self.name} {' '.join(str(v)[:80] for v in self.arguments.values())}".strip()


class ToolResult(BaseModel):
    tool: str
    """The tool that ran."""
    command: str
    """ToolCall.display() of the call."""
    output: str
    """What the model is shown, already capped head+tail by the harness's context policy."""
    exit_code: int | None = 0
    """The command's status; None when it was killed; 1 for a failed file operation."""
    timed_out: bool = False
    """The command was killed at the harness's command timeout."""
    duration_s: float = 0.0
    """Wall-clock seconds the call took in the sandbox."""

    @property
    def failed(self) -> bool:
        return self.timed_out or self.exit_code != 0


def enabled_tools(harness: HarnessSpec) -> list[str]:
    return [name for name in TOOL_PARAMS if getattr(harness.tools, name).enabled]


def tool_schemas(harness: HarnessSpec) -> list[dict]:
    """OpenAI/Qwen function schemas of the enabled tools (for `tools=` in chat templates and prompts)."""
    return [
        {"type": "function", "function": {
            "name": name,
            "description": getattr(harness.tools, name).description,
            "parameters": {"type": "object",
                           "properties": {p: {"type": "string", "description": d}
                                          for p, d in TOOL_PARAMS[name].items()},
                           "required": list(TOOL_PARAMS[name])},
        }}
        for name in enabled_tools(harness)
    ]


def check_calls(harness: HarnessSpec, calls: list[ToolCall]) -> None:
    """Raise FormatError (written for the model) unless every call names an enabled tool with its params."""
    allowed = enabled_tools(harness)
    for call in calls:
        if call.name not in allowed:
            raise FormatError(f"Unknown tool '{call.name}'. Available tools: {', '.join(allowed)}.")
        params = TOOL_PARAMS[call.name]
        missing = [p for p in params if p not in call.arguments]
        extra = [a for a in call.arguments if a not in params]
        if missing or extra:
            want = ", ".join(params) or "no arguments"
            raise FormatError(f"Tool '{call.name}' takes {want}; got {', '.join(call.arguments) or 'none'}.")
        bad = [p for p, v in call.arguments.items() if not isinstance(v, str)]
        if bad:
            raise FormatError(f"Tool '{call.name}': argument '{bad[0]}' must be a string.")


def truncate(text: str, head: int, tail: int) -> str:
    """Keep `head` chars from the start and `tail` from the end, with a marker saying what was cut."""
    if len(text) <= head + tail:
        return text
    omitted = len(text) - head - tail
    return f"{text[:head]}\n[... {omitted} characters omitted ...]\n{text[len(text) - tail:] if tail else ''}"


def execute(harness: HarnessSpec, sandbox: Sandbox, call: ToolCall) -> ToolResult:
    """Run one non-submit call. A failing command or file operation is a result, not an exception;
    a sandbox that broke down raises (SandboxError), and the episode ends with 'sandbox_error'."""
    if call.name == "bash":
        r = sandbox.run(call.arguments["command"], timeout=harness.limits.command_timeout_s)
        result = ToolResult(tool="bash", command=call.display(), output=r.output, exit_code=r.exit_code,
                            timed_out=r.timed_out, duration_s=r.duration_s)
    elif call.name in ("read_file", "write_file"):
        output, code = _file_op(sandbox, call)
        result = ToolResult(tool=call.name, command=call.display(), output=output, exit_code=code)
    else:
        raise ValueError(f"execute() got tool '{call.name}'; submit is handled by the agent loop")
    ctx = harness.context
    return result.model_copy(update={"output": truncate(result.output, ctx.output_head_chars,
                                                        ctx.output_tail_chars)})


def _file_op(sandbox: Sandbox, call: ToolCall) -> tuple[str, int]:
    args = call.arguments
    try:
        if call.name == "read_file":
            return sandbox.read_file(args["path"]).decode("utf-8", errors="replace"), 0
        sandbox.write_file(args["path"], args["content"])
        return f"wrote {len(args['content'])} characters to {args['path']}", 0
    except OSError as e:  # missing file, permission, a directory: the model should see why
        return f"error: {e}", 1
