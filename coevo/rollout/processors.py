"""Control processors: small rules in the agent loop, each off by default, searchable by its field, and
showing the model one template. CoTrace (arXiv 2610.10426) found that of the harness edits it accepted,
53% were loop/repeat breakers and 26% step budgets or self-verification rules; these are those.

- `recovery.repeat_limit`: the run of a command that makes N gets the repeat_hint template; asking for it
  once more ends the episode as 'repeat_limit' (verified like 'turn_limit').
- `context.step_budget_notice`: every observation ends with the turns left (step_budget template).
- `recovery.self_check`: once per episode, a submit sent before the last command's output was seen is
  held: the self_check template answers it, and the next submit is accepted.
- `recovery.empty_reply_retry`: an empty reply is dropped, not a format error, and sampled again once with
  a shorter prompt (only the last observation verbatim).

The episode (coevo.rollout.episode) asks them at fixed points of its turn; every firing is counted in
`Trajectory.processors`, so failure analysis can see which rule shaped an episode.
"""

from __future__ import annotations

import json
from collections import Counter

from coevo.harness import Harness, ToolCall
from coevo.harness.prompts import repeat_hint_text, self_check_text, step_budget_text
from coevo.rollout.trajectory import Trajectory


class Processors:
    """One episode's processors: what they remember between turns, and what they add to its chat."""

    def __init__(self, harness: Harness, traj: Trajectory):
        self.harness, self.traj = harness, traj
        self.runs: Counter[str] = Counter()
        """How often each call (same tool, same arguments) was asked for, under recovery.repeat_limit."""
        self.self_checked = False
        """The self_check nudge was given (it is given once per episode)."""
        self.retrying = False
        """The next request is an empty reply's retry."""

    def fire(self, name: str) -> None:
        self.traj.processors[name] = self.traj.processors.get(name, 0) + 1

    # -- recovery.empty_reply_retry ----------------------------------------------------------------------
    def drop_empty(self, text: str) -> bool:
        """True when this reply is empty and is dropped, to be sampled again with a shorter prompt; a retry
        that is empty again is not dropped (the format error answers it)."""
        was_retry, self.retrying = self.retrying, False
        if not self.harness.recovery.empty_reply_retry or was_retry or text.strip():
            return False
        self.retrying = True
        self.fire("empty_reply_retry")
        self.traj.errors.append(f"turn {self.traj.turns}: empty reply, sampled again with a shorter prompt")
        return True

    def keep_last(self, keep: int | None) -> int | None:
        """Observations the next prompt shows verbatim: the history policy's `keep`, or 1 for a retry."""
        return 1 if self.retrying else keep

    # -- recovery.repeat_limit ---------------------------------------------------------------------------
    def repeat_over(self, call: ToolCall) -> str | None:
        """Count `call`; the cause to end the episode with when it is asked for past the limit, else None."""
        limit = self.harness.recovery.repeat_limit
        if limit is None:
            return None
        key = _key(call)
        self.runs[key] += 1
        if self.runs[key] <= limit:
            return None
        self.fire("repeat_limit")
        return f"`{call.display()[:80]}` asked for {self.runs[key]} times (recovery.repeat_limit={limit})"

    def repeat_hint(self, call: ToolCall, text: str) -> str:
        """A result's observation text, with the repeat_hint template when this run made the limit."""
        limit = self.harness.recovery.repeat_limit
        if limit is None or self.runs[_key(call)] != limit:
            return text
        self.fire("repeat_hint")
        return f"{text}\n{repeat_hint_text(self.harness, call.display())}"

    # -- recovery.self_check -----------------------------------------------------------------------------
    def hold_submit(self, blind: bool) -> str | None:
        """The self_check nudge when a submit sent `blind` (no output seen since the last command, or no
        command yet) is held; None when the submit is accepted."""
        if not self.harness.recovery.self_check or self.self_checked or not blind:
            return None
        self.self_checked = True
        self.fire("self_check")
        return self_check_text(self.harness)

    # -- context.step_budget_notice ----------------------------------------------------------------------
    def with_budget(self, texts: list[str]) -> list[str]:
        """An observation's texts, the last one followed by the turns left when the notice is on."""
        if not self.harness.context.step_budget_notice:
            return texts
        self.fire("step_budget")
        notice = step_budget_text(self.harness, self.harness.limits.max_turns - self.traj.turns)
        return [*texts[:-1], f"{texts[-1]}\n{notice}"] if texts else [notice]


def _key(call: ToolCall) -> str:
    return json.dumps([call.name, call.arguments], sort_keys=True)
