"""Action formats: a parser (reply text -> tool calls, or FormatError for the model) and its inverse
renderer (commands -> reply text, used by the oracle policy and for the example in the system prompt).

    json        Terminus-2: {"analysis": .., "plan": .., "commands": [{"keystrokes": "ls\\n"}], "task_complete": false}
    tool_call   Qwen: <tool_call>{"name": "bash", "arguments": {"command": "ls"}}</tool_call>, one or more
    bash_block  mini-swe-agent: exactly one ```bash block; a last line equal to the submit command submits
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

from coevo.harness.errors import FormatError
from coevo.harness.tools import ToolCall, check_calls

if TYPE_CHECKING:
    from coevo.harness.spec import HarnessSpec

SUBMIT = ToolCall(name="submit")


def parse_action(harness: HarnessSpec, text: str) -> list[ToolCall]:
    """The tool calls in a reply, in order (a submit ends the list); FormatError if there are none or
    the reply is malformed."""
    kind = harness.action_format.kind
    if kind == "json":
        calls = _parse_json(text)
    elif kind == "tool_call":
        calls = _parse_tool_calls(text)
    else:
        calls = _parse_bash_block(text, harness.action_format.submit_command)
    check_calls(harness, calls)
    return calls


def render_action(harness: HarnessSpec, commands: list[str], submit: bool) -> str:
    """A reply, in the harness's action format, that runs `commands` with bash and then submits if asked
    (a native agent's harness writes its own agent's format)."""
    from coevo.native.spec import is_native

    if is_native(harness):
        return harness.render_action(commands, submit)
    if not commands and not submit:
        raise ValueError("render_action needs at least one command or submit=True")
    kind = harness.action_format.kind
    if kind == "json":
        return json.dumps({"commands": [{"keystrokes": c + "\n"} for c in commands], "task_complete": submit})
    if kind == "tool_call":
        calls = [ToolCall(name="bash", arguments={"command": c}) for c in commands] + [SUBMIT] * submit
        return "\n".join(f"<tool_call>\n{json.dumps(c.model_dump())}\n</tool_call>" for c in calls)
    lines = [*commands, harness.action_format.submit_command] if submit else commands
    return "```bash\n" + "\n".join(lines) + "\n```"


# -- json ------------------------------------------------------------------------------------------
def _parse_json(text: str) -> list[ToolCall]:
    start = text.find("{")
    if start < 0:
        raise FormatError('No JSON object found. Reply with one JSON object: {"commands": [...], '
                          '"task_complete": false}.')
    try:
        data, _ = json.JSONDecoder().raw_decode(text[start:])
    except json.JSONDecodeError as e:
        raise FormatError(f"Invalid JSON: {e.msg} (line {e.lineno}, column {e.colno}).") from None
    if not isinstance(data, dict):
        raise FormatError("The reply must be a JSON object.")
    commands = data.get("commands", [])
    done = data.get("task_complete", False)
    if not isinstance(commands, list) or not isinstance(done, bool):
        raise FormatError('"commands" must be a list and "task_complete" true or false.')
    calls = [_json_command(i, c) for i, c in enumerate(commands)]
    if done:
        calls.append(SUBMIT)
    if not calls:
        raise FormatError('No commands and "task_complete" is false: give at least one command.')
    return calls


def _json_command(i: int, item: object) -> ToolCall:
    if isinstance(item, dict) and isinstance(item.get("keystrokes", item.get("command")), str):
        keys = item.get("keystrokes", item.get("command"))
        return ToolCall(name="bash", arguments={"command": keys.removesuffix("\n")})
    if isinstance(item, dict) and isinstance(item.get("tool"), str):
        return ToolCall(name=item["tool"], arguments={k: v for k, v in item.items() if k != "tool"})
    raise FormatError(f'commands[{i}] must be an object with "keystrokes" (a string), e.g. '
                      '{"keystrokes": "ls\\n"}.')


# -- tool_call -------------------------------------------------------------------------------------
_TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)


def _parse_tool_calls(text: str) -> list[ToolCall]:
    bodies = _TOOL_CALL.findall(text)
    if not bodies:
        hint = " (a <tool_call> is not closed)" if "<tool_call>" in text else ""
        raise FormatError(f"No tool call found{hint}. Use <tool_call>{{\"name\": \"bash\", \"arguments\": "
                          '{"command": "ls"}}</tool_call>.')
    calls = [_tool_call(i, body) for i, body in enumerate(bodies)]
    cut = next((i for i, c in enumerate(calls) if c.name == "submit"), len(calls))
    return calls[: cut + 1]


def _tool_call(i: int, body: str) -> ToolCall:
    try:
        data = json.loads(body)
    except json.JSONDecodeError as e:
        raise FormatError(f"Tool call {i + 1}: invalid JSON: {e.msg} (column {e.colno}).") from None
    args = data.get("arguments", {}) if isinstance(data, dict) else None
    if isinstance(args, str):  # some models emit arguments as a JSON string
        try:
            args = json.loads(args)
        except json.JSONDecodeError:
            args = None
    if not isinstance(data, dict) or not isinstance(data.get("name"), str) or not isinstance(args, dict):
        raise FormatError(f'Tool call {i + 1} must be {{"name": <tool>, "arguments": {{...}}}}.')
    return ToolCall(name=data["name"], arguments=args)


# -- bash_block ------------------------------------------------------------------------------------
_BASH_BLOCK = re.compile(r"```(?:bash|sh)[ \t]*\n(.*?)```", re.DOTALL)


def _parse_bash_block(text: str, submit_command: str) -> list[ToolCall]:
    blocks = _BASH_BLOCK.findall(text)
    if len(blocks) != 1:
        raise FormatError(f"Found {len(blocks)} ```bash blocks; reply with exactly one. To finish, make "
                          f"its last line: {submit_command}")
    lines = blocks[0].rstrip().splitlines()
    submit = bool(lines) and lines[-1].strip() == submit_command
    script = "\n".join(lines[:-1] if submit else lines).strip("\n")
    calls = [ToolCall(name="bash", arguments={"command": script})] if script.strip() else []
    if not calls and not submit:
        raise FormatError("The ```bash block is empty.")
    return calls + [SUBMIT] * submit
