"""The harvest: k episodes per task under the training harness, sorted into what each weights channel can
use. One sampling pass serves both: the tasks whose episodes disagree are GRPO's frontier (its groups have
a signal), and the verified successes are self-SFT's examples.

Self-SFT (`train.mode: sft`) trains on the model's own successes, token in / token out: the prompt and
completion ids exactly as sampled, the environment's tokens masked, nothing re-tokenized. A success counts
only when its harness fingerprint is the training harness's (the tokens the model learns from must be the
ones this harness shows it), it ended by submitting (a success that ran out of turns would teach never
to submit), and it passed the verifier. Tasks solved in some samples but not all get `gap_weight` copies
of distinct successes: the gap between pass@k and pass@1 is what fine-tuning can close (GapFT,
arXiv 2609.35793); a task solved in every sample adds one copy, since there is little left to learn.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

from coevo.outcomes import passed

HARVEST_FILE = "harvest.json"


@dataclass
class Harvest:
    rows: list[dict] = field(default_factory=list)
    """Token rows to fine-tune on: {"input_ids": prompt + completion, "assistant_masks": 0 prompt, mask}."""
    frontier: list[str] = field(default_factory=list)
    """Tasks whose episodes disagree under the reward: GRPO groups with a signal."""
    solved_every: list[str] = field(default_factory=list)
    """Tasks passed in every sample (the curriculum retires these)."""
    never: list[str] = field(default_factory=list)
    """Tasks passed in no sample."""
    episodes: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    """Episodes not trained on, by why: failed, not_submitted, fingerprint, beyond_gap_weight."""

    def summary(self) -> dict[str, float]:
        return {"harvest/episodes": self.episodes, "harvest/examples": len(self.rows),
                "harvest/frontier_tasks": len(self.frontier), "harvest/solved_every": len(self.solved_every),
                "harvest/never_solved": len(self.never),
                **{f"harvest/dropped_{why}": n for why, n in sorted(self.dropped.items())}}

    def describe(self) -> str:
        dropped = ", ".join(f"{n} {why}" for why, n in sorted(self.dropped.items()) if n) or "none"
        return (f"harvest: {self.episodes} episodes -> {len(self.rows)} examples; {len(self.frontier)} frontier "
                f"tasks, {len(self.solved_every)} solved in every sample, {len(self.never)} never; dropped: {dropped}")


def harvest(trajectories: list, fingerprint: str, reward_of, gap_weight: int = 2) -> Harvest:
    """Sort `trajectories` (k episodes per task, any order) into a Harvest; `reward_of(t)` is the training
    reward. A served agent's episode may be several token records (segments, sharing its outcome): it is
    counted once, and a success is trained on as all of them."""
    from coevo.rollout.trajectory import grouped

    by_task: dict[str, list[list]] = defaultdict(list)
    for segments in grouped(trajectories):  # [0] carries the episode's outcome
        by_task[segments[0].task].append(segments)
    out, dropped = Harvest(), Counter()
    for task, episodes in by_task.items():
        out.episodes += len(episodes)
        rewards = [r for r in (reward_of(segments[0]) for segments in episodes) if r is not None]
        if rewards and min(rewards) < max(rewards):
            out.frontier.append(task)
        wins = [segments for segments in episodes if passed(segments[0])]
        (out.solved_every if len(wins) == len(episodes) else out.never if not wins else []).append(task)
        dropped["failed"] += len(episodes) - len(wins)
        usable = []
        for segments in wins:
            t = segments[0]
            why = ("fingerprint" if t.harness_fingerprint != fingerprint else "not_submitted"
                   if t.status != "submitted" else "no_tokens" if not all(s.prompt_ids for s in segments) else None)
            if why:
                dropped[why] += 1
            else:
                usable.append(segments)
        copies = 1 if len(wins) == len(episodes) else gap_weight
        dropped["beyond_gap_weight"] += max(0, len(usable) - copies)
        out.rows += [token_row(s) for segments in usable[:copies] for s in segments]
    out.dropped = dict(dropped)
    return out


def token_row(t) -> dict:
    """A trajectory as one SFT row of its exact tokens; only the model's own tokens carry loss."""
    return {"input_ids": list(t.prompt_ids) + list(t.completion_ids),
            "assistant_masks": [0] * len(t.prompt_ids) + list(t.completion_mask)}


def save(h: Harvest, out: Path) -> None:
    data = {k: v for k, v in asdict(h).items() if k != "rows"}
    (Path(out) / HARVEST_FILE).write_text(json.dumps({**data, "examples": len(h.rows)}, indent=1) + "\n")
