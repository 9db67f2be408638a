"""`coevo warmstart`: play every task's solution through the harness with the oracle policy, keep the
episodes the verifier passed, and fine-tune the model on them (assistant-only SFT).

The oracle runs through the real rollout engine, sandboxes and verifier, so the conversations are
exactly what the harness shows a model (its prompts, action format, observations and truncation), and
a solution that does not pass under this harness is left out rather than taught.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path

from coevo.train.sft import SFTSettings, train_sft


def oracle_trajectories(harness, tasks: list, tokenizer, seed: int = 0) -> list:
    """One oracle episode per task, tokenized with `tokenizer` (so context limits apply as for the model)."""
    from coevo.policy.scripted import OraclePolicy
    from coevo.rollout import rollout

    policy = OraclePolicy(harness, tasks, tokenizer=tokenizer)
    return rollout(tasks, harness, policy, n_per_task=1, seed=seed)


def passed(trajectories: list) -> list:
    return [t for t in trajectories if t.status == "submitted" and t.reward >= 1.0]


def run_warmstart(model: Path, harness_path: Path, tasks_dir: Path, split: str, out: Path,
                  epochs: float | None = None, lr: float | None = None, seed: int = 0,
                  repeats: int = 1) -> str:
    """Oracle episodes on `split`, SFT from `model` to `out`; returns a one-paragraph report.

    Writes `out/oracle.jsonl` (every oracle episode) and `out/warmstart.json` (settings and numbers).
    `repeats` copies each conversation into the dataset that many times per epoch.
    """
    from transformers import AutoTokenizer

    from coevo.harness import load_harness
    from coevo.rollout.trajectory import save_trajectories
    from coevo.tasks import load_taskset

    harness = load_harness(harness_path)
    tasks = [t for t in load_taskset(tasks_dir).split(split) if t.solution is not None]
    if not tasks:
        raise ValueError(f"{tasks_dir}: no tasks with solution/solve.sh in split '{split}'")
    tokenizer = AutoTokenizer.from_pretrained(model)
    t0 = time.perf_counter()
    trajectories = oracle_trajectories(harness, tasks, tokenizer, seed)
    good = passed(trajectories)
    t_oracle = time.perf_counter() - t0
    if not good:
        raise ValueError(f"warmstart: none of the {len(tasks)} oracle episodes passed under {harness_path}; "
                         f"first failure: {_cause(trajectories[0])}")
    settings = SFTSettings(seed=seed)
    settings.epochs = epochs or settings.epochs
    settings.lr = lr or settings.lr
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    save_trajectories(out / "oracle.jsonl", trajectories)
    conversations = [t.messages for t in good] * repeats
    t1 = time.perf_counter()
    train_sft(model, conversations, out, settings, source=f"warmstart ({harness_path})")
    t_sft = time.perf_counter() - t1
    numbers = {"tasks": len(tasks), "oracle_passed": len(good), "oracle_s": round(t_oracle, 1),
               "sft_s": round(t_sft, 1), "conversations": len(conversations), "harness": str(harness_path),
               "split": split, "settings": asdict(settings)}
    (out / "warmstart.json").write_text(json.dumps(numbers, indent=1) + "\n")
    kept = {id(t) for t in good}
    failed = [f"{t.task} ({_cause(t)})" for t in trajectories if id(t) not in kept]
    return (f"oracle: {len(good)}/{len(tasks)} {split} tasks passed under {harness.name} in {t_oracle:.1f}s"
            + (f"; left out: {', '.join(failed[:5])}{' ...' if len(failed) > 5 else ''}" if failed else "")
            + f"\nSFT: {len(conversations)} conversations x {settings.epochs:g} epochs at lr {settings.lr:g} "
            f"in {t_sft:.0f}s -> {out}")


def _cause(t) -> str:
    return f"status {t.status}, reward {t.reward:g}" + (f": {t.error or t.verify_error}" if (
        t.error or t.verify_error) else "")
