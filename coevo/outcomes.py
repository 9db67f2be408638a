"""The outcome vocabulary, defined once: how an episode can end, what counts as passed, how partial
credit is read, and the names of the summary metrics every report, table and tracker uses."""

from __future__ import annotations

from typing import Literal

Status = Literal["submitted", "turn_limit", "token_limit", "context_exceeded", "timeout", "format_errors",
                 "error_limit", "repeat_limit", "sandbox_error", "policy_error"]
"""How an episode ended; exactly one per episode. `error_limit`: recovery.max_consecutive_errors hit;
`repeat_limit`: a command asked for past recovery.repeat_limit (verified like turn_limit)."""

FAILURE_STATUSES = ("sandbox_error", "policy_error")
"""Failures at a boundary: recorded with their cause, scored 0 without running the verifier."""

SUMMARY_METRICS = ("pass_at_1", "ci_low", "ci_high", "mean_reward", "mean_turns", "format_error_rate", "timeouts",
                   "mean_tokens", "episodes")
"""The fields of an evaluation summary that are logged, compared and exported, in display order."""


def passed(traj) -> bool:
    """The verifier gave full reward and nothing went wrong verifying. Not the status: an episode that
    hit its turn limit with the work done still passes, as under Harbor."""
    return traj.reward >= 1.0 and not traj.verify_error


def credit(traj) -> float:
    """Partial credit: the mean of the verifier's reward.json checks, else its reward."""
    return sum(traj.checks.values()) / len(traj.checks) if traj.checks else traj.reward
