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

from coevo.harness.demos import seen as demos_seen
from coevo.harness.prompts import (
    format_error_text,
    instance_prompt,
    observation_text,
    repeat_hint_text,
    self_check_text,
    step_budget_text,
    system_prompt,
)
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
    seen = {
        "system": system_prompt(harness),
        "instance": instance_prompt(harness, "Create /app/hello.txt.", "sample-task", "total 0"),
        "instance_without_observation": instance_prompt(harness, "Create /app/hello.txt.", "sample-task", None),
        "observations": [observation_text(harness, r) for r in _SAMPLE_RESULTS],
        "format_error": format_error_text(harness, "No JSON object found.", 1)
        if harness.recovery.format_error_feedback else None,
        "tools": tool_schemas(harness),
        # constrained sampling changes what the model writes, not what it reads; it is recorded (true
        # only) so that a constrained harness's episodes train apart from an unconstrained one's
        "action_format": harness.action_format.model_dump(exclude=set() if harness.action_format.constrained
                                                          else {"constrained"}),
        "context": harness.context.model_dump(exclude={"step_budget_notice"}),  # under "processors"
        "initial_observation": harness.initial_observation,
    }
    if processors := processors_seen(harness):  # absent when all are off: their fields alone change nothing
        seen["processors"] = processors
    if demonstrations := demos_seen(harness):  # absent when off, like the processors
        seen["demonstrations"] = demonstrations
    return seen


def processors_seen(harness: HarnessSpec) -> dict:
    """What each control processor that is on (coevo.rollout.processors) adds to what the model sees."""
    rec, shown = harness.recovery, {}
    if rec.repeat_limit is not None:
        shown["repeat_hint"] = [rec.repeat_limit, repeat_hint_text(harness, "ls")]
    if harness.context.step_budget_notice:
        shown["step_budget"] = step_budget_text(harness, harness.limits.max_turns - 1)
    if rec.self_check:
        shown["self_check"] = self_check_text(harness)
    if rec.empty_reply_retry:
        shown["empty_reply_retry"] = True  # the retry's prompt elides older output (context.elided_text)
    return shown


def fingerprint(harness: HarnessSpec) -> str:
    """The first 16 hex digits of the sha256 of `seen_by_model` (canonical JSON)."""
    seen = harness.seen_by_model() if is_native(harness) else seen_by_model(harness)
    text = json.dumps(seen, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
