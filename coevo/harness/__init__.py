"""The harness: everything around the model, as data.

    spec.py       the fields as pydantic sections (templates, action_format, tools, recovery, context,
                  limits, decoding); `HarnessSpec` is their data, with no knowledge of templates
    load.py       `Harness` (a HarnessSpec whose templates render), `load_harness(path)` and
                  `Harness.with_overrides({"dotted.path": value})`, through coevo.config
    templates.py  sandboxed, strict Jinja rendering of prompts/*.j2, errors naming file and line
    prompts.py    each message the model reads (system, instance, observation, format error)
    formats.py    action formats: `parse_action` (reply -> tool calls) and `render_action` (its inverse)
    tools.py      tool schemas, ToolCall / ToolResult, and running a call in a sandbox
    fingerprint.py  a hash of what the model sees of a harness, and of nothing else
    demos.py      in-context demonstrations: pools of verified episodes, chosen per task, rendered
                  by the harness; demos_build.py and cli.py: `coevo demos build|own`
"""

from coevo.harness.errors import FormatError, HarnessError
from coevo.harness.formats import parse_action, render_action
from coevo.harness.load import Harness, harness_from_dict, load_harness
from coevo.harness.tools import ToolCall, ToolResult, tool_schemas

__all__ = [
    "FormatError", "Harness", "HarnessError", "ToolCall", "ToolResult", "harness_from_dict", "load_harness",
    "parse_action", "render_action", "tool_schemas",
]
