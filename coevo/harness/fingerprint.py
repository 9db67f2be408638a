"""A harness's fingerprint: a hash of what the model sees of it, and of nothing else.

Two harnesses that differ only in knobs the model never reads (decoding, wall time, the name) share a
fingerprint; any change to a rendered template, the tool schema, the action format or how outputs and
history are processed changes it. Verified successes are matched to the harness they were sampled
under by this hash, so that training data and the harness it trains for cannot drift apart unnoticed.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING

from coevo.harness.prompts import format_error_text, instance_prompt, observation_text, system_prompt
from coevo.harness.tools import ToolResult, tool_schemas
from coevo.native.spec import is_native

if TYPE_CHECKING:
    from coevo.harness.spec import HarnessSpec

_SAMPLE_RESULTS = (
    ToolResult(tool="bash", command="ls", output="a.txt", exit_code=0),
    ToolResult(tool="bash", command="false", output="", exit_code=1),
    ToolResult(tool="bash", command="sleep 99", output="", exit_code=None, timed_out=True),
)
"""One ordinary, one failed and one timed-out result: each recovery notice shows in one of them."""


def seen_by_model(harness: HarnessSpec) -> dict:
    """Every message the harness can show the model, rendered with fixed sample values, plus the
    processing that decides which parts of real outputs and history reach it."""
    return {
        "system": system_prompt(harness),
        "instance": instance_prompt(harness, "Create /app/hello.txt.", "sample-task", "total 0"),
        "instance_without_observation": instance_prompt(harness, "Create /app/hello.txt.", "sample-task", None),
        "observations": [observation_text(harness, r) for r in _SAMPLE_RESULTS],
        "format_error": format_error_text(harness, "No JSON object found.", 1)
        if harness.recovery.format_error_feedback else None,
        "tools": tool_schemas(harness),
        "action_format": harness.action_format.model_dump(),
        "context": harness.context.model_dump(),
        "initial_observation": harness.initial_observation,
    }


def fingerprint(harness: HarnessSpec) -> str:
    """The first 16 hex digits of the sha256 of `seen_by_model` (canonical JSON)."""
    seen = harness.seen_by_model() if is_native(harness) else seen_by_model(harness)
    text = json.dumps(seen, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
