"""Failures drive the harness search: the incumbent's failed episodes, clustered by cause, focus the next
h-phase on the harness dimensions that address the largest cluster (CoTrace routes failures to the
harness and verified successes to the weights).

    format_error   a reply the harness could not parse ended or marred the episode
    timeout        a command was killed at the harness's command timeout
    no_submit      the episode ran out of turns, tokens or context before submitting
    tool_error     it submitted after a command that failed (nonzero exit)
    wrong_output   it submitted, every command succeeded, and the verifier said no
    boundary       a sandbox or policy failure (nothing a harness can change)

Every evaluation's clusters ride on its Pair (`failures`); each h-phase logs its incumbent's as
`failures/<cause>` metrics (step = generation) and enqueues, before Optuna samples, one trial per value
change of the focus dimensions present in the space: the incumbent's harness with one of them changed.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from coevo.config import get_dotted
from coevo.outcomes import FAILURE_STATUSES, passed

CAUSES = ("format_error", "timeout", "no_submit", "tool_error", "wrong_output", "boundary")

FOCUS = {
    "format_error": ["action_format.constrained", "demonstrations.k", "action_format.kind",
                     "recovery.format_error_feedback", "recovery.max_format_retries", "templates.system",
                     "limits.max_tokens_per_turn"],
    "timeout": ["recovery.timeout_notice", "limits.command_timeout_s", "limits.max_turns"],
    "no_submit": ["recovery.repeat_limit", "context.step_budget_notice", "demonstrations.k", "limits.max_turns",
                  "limits.max_tokens_per_turn", "templates.system"],
    "tool_error": ["recovery.self_check", "recovery.nonzero_exit_hint", "initial_observation",
                   "tools.read_file.enabled", "tools.write_file.enabled", "context.output_tail_chars",
                   "templates.observation"],
    "wrong_output": ["demonstrations.k", "recovery.self_check", "templates.instance", "templates.system",
                     "initial_observation", "templates.observation", "recovery.nonzero_exit_hint"],
    "boundary": [],
}
"""The harness dimensions that can address each cause, most direct first: constrained decoding removes
format errors by construction, and demonstrations show a model that cannot act yet what an action is
(issue 35); then the structural and runtime knobs."""


def cause(t) -> str | None:
    """Why an episode failed; None when it passed."""
    if passed(t):
        return None
    if t.status in FAILURE_STATUSES:
        return "boundary"
    if t.status == "format_errors" or (t.format_errors and t.status != "submitted"):
        return "format_error"
    if t.status == "timeout" or t.timeouts:
        return "timeout"
    if t.status != "submitted":
        return "no_submit"
    failed = any(r.exit_code not in (0, None) for s in t.steps for r in s.results)
    return "tool_error" if failed else "wrong_output"


def clusters(trajectories) -> dict[str, int]:
    """Failed episodes per cause, every cause present (0 when none)."""
    counts = Counter(c for c in map(cause, trajectories) if c)
    return {c: counts[c] for c in CAUSES}


def largest(failures: dict[str, int]) -> str | None:
    """The cause with the most failures that some harness dimension addresses."""
    ranked = sorted((n, c) for c, n in failures.items() if n and FOCUS.get(c))
    return ranked[-1][1] if ranked else None


def focused_trials(space, harness, failures: dict[str, int], limit: int) -> list[dict[str, Any]]:
    """Up to `limit` parameter sets: `harness`'s own value of every space dimension, with one focus
    dimension of the largest cluster changed to another value of the space."""
    target = largest(failures)
    if target is None or limit < 1:
        return []
    params = {p.path: p for p in space.harness_params}
    here = {path: get_dotted(harness.model_dump(mode="json"), path, None) for path in params}
    out = []
    # A dimension whose `when` does not hold for the harness is not in effect: changing it changes nothing.
    for path in (d for d in FOCUS[target] if d in params and params[d].active(here)):
        for value in _alternatives(params[path], here[path]):
            out.append({**{k: v for k, v in here.items() if _fits(params[k], v)}, path: value})
    return out[:limit]


def describe(failures: dict[str, int]) -> str:
    total = sum(failures.values())
    if not total:
        return "no failures"
    parts = ", ".join(f"{c} {n}" for c, n in sorted(failures.items(), key=lambda x: -x[1]) if n)
    return f"{total} failed episodes: {parts}"


def _alternatives(param, current) -> list:
    if param.type == "categorical":
        return [c for c in param.choices if c != current]
    step = param.step or (1 if param.type == "int" else (param.high - param.low) / 4)
    near = [current + step, current - step] if _fits(param, current) else [param.low, param.high]
    return [v for v in near if param.low <= v <= param.high]


def _fits(param, value) -> bool:
    if param.type == "categorical":
        return value in param.choices
    if not isinstance(value, int | float) or isinstance(value, bool) or not param.low <= value <= param.high:
        return False
    return param.type != "int" or (value - param.low) % (param.step or 1) == 0  # on Optuna's grid
