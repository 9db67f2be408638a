"""The harness: everything around the model, as data.

    spec.py       the pydantic Harness (sections: templates, action_format, tools, recovery, context,
                  limits, decoding) and `Harness.with_overrides({"dotted.path": value})`
    load.py       `load_harness(path)`: harnesses/*.yaml -> Harness, errors naming file and field
    templates.py  sandboxed, strict Jinja rendering of prompts/*.j2, errors naming file and line
    prompts.py    each message the model reads (system, instance, observation, format error)
    formats.py    action formats: `parse_action` (reply -> tool calls) and `render_action` (its inverse)
    tools.py      tool schemas, ToolCall / ToolResult, and running a call in a sandbox
"""

from coevo.harness.errors import FormatError, HarnessError
from coevo.harness.formats import parse_action, render_action
from coevo.harness.load import harness_from_dict, load_harness
from coevo.harness.spec import Harness
from coevo.harness.tools import ToolCall, ToolResult, tool_schemas

__all__ = [
    "FormatError", "Harness", "HarnessError", "ToolCall", "ToolResult", "harness_from_dict", "load_harness",
    "parse_action", "render_action", "tool_schemas",
]
