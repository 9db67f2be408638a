"""Oracle replay for self-SFT: the model's own verified successes mixed with oracle demonstrations.

Self-SFT on a handful of own successes pulls the whole model toward those few tasks, and what the warm start
taught about the rest fades. So `train.replay_ratio` demonstrations per own example are mixed in: each
task's `solution/solve.sh` played through the incumbent harness by the oracle (coevo.train.warmstart), in
the same token-in/token-out rows, the model's tokens only in the loss. Tasks the model solved in no sample
come first (what it stands to forget, or never learnt), then the others, each group in a seeded order; a
demonstration the verifier does not pass under this harness is left out and the next task taken instead.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from pathlib import Path

REPLAY_FILE = "replay.jsonl"


@dataclass
class Replay:
    rows: list[dict] = field(default_factory=list)
    """Token rows of the passing oracle demonstrations, as the harvest's rows."""
    asked: int = 0
    """Demonstrations wanted: ceil(replay_ratio x own examples), at least replay_min."""
    tasks: list[str] = field(default_factory=list)
    """Tasks whose demonstrations went in."""
    left_out: list[str] = field(default_factory=list)
    """Tasks whose oracle episode did not pass under the harness."""

    def summary(self) -> dict[str, float]:
        return {"replay/oracle_examples": float(len(self.rows)), "replay/asked": float(self.asked),
                "replay/left_out": float(len(self.left_out))}


def replay_count(own: int, ratio: float, minimum: int = 0) -> int:
    return max(math.ceil(own * ratio - 1e-9), minimum)


def ordered(tasks: list, never: set[str], seed: int) -> list:
    """Tasks with a solution, those never solved first, each group shuffled by `seed`."""
    rng = random.Random(seed)
    first = [t for t in tasks if t.solution is not None and t.name in never]
    rest = [t for t in tasks if t.solution is not None and t.name not in never]
    rng.shuffle(first)
    rng.shuffle(rest)
    return first + rest


def replay(model_dir: Path, harness, tasks: list, never: list[str], own: int, ratio: float, out: Path,
           seed: int = 0, backend: str = "local", image_map: dict[str, str] | None = None,
           minimum: int = 0) -> Replay:
    """`ceil(ratio x own)` (at least `minimum`) oracle demonstrations under `harness`, tokenized by `model_dir`'s tokenizer. The
    episodes are kept in out/replay.jsonl: a resumed run reuses them."""
    from transformers import AutoTokenizer

    from coevo.rollout import load_trajectories, save_trajectories
    from coevo.train.harvest import token_row
    from coevo.train.warmstart import demonstrations, oracle_trajectories

    result = Replay(asked=replay_count(own, ratio, minimum))
    path = Path(out) / REPLAY_FILE
    if path.is_file():
        episodes = load_trajectories(path)
    else:
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        queue, episodes = ordered(tasks, set(never), seed), []
        while queue and len(demonstrations(episodes)) < result.asked:
            need = result.asked - len(demonstrations(episodes))
            batch, queue = queue[:need], queue[need:]
            episodes += oracle_trajectories(harness, batch, tokenizer, seed, backend, image_map)
        save_trajectories(path.with_suffix(".staging"), episodes).rename(path)
    good = demonstrations(episodes)
    result.rows = [token_row(t) for t in good]
    result.tasks = [t.task for t in good]
    kept = {id(t) for t in good}
    result.left_out = [t.task for t in episodes if id(t) not in kept]
    return result
