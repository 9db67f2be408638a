"""`coevo warmstart`: play every task's solution through the harness with the oracle policy, keep the
episodes the verifier passed, and fine-tune the model on them (assistant-only SFT).

The oracle runs through the real rollout engine, sandboxes and verifier, so the conversations are
exactly what the harness shows a model (its prompts, action format, observations and truncation), and
a solution that does not pass under this harness is left out rather than taught.
"""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from coevo.train.sft import SFTSettings, train_sft


def oracle_trajectories(harness, tasks: list, tokenizer, seed: int = 0, chunk: int = 32) -> list:
    """One oracle episode per task, tokenized with `tokenizer` (so context limits apply as for the model).

    Run `chunk` tasks at a time: the engine keeps a sandbox open for every episode of a call, and the
    sandboxes share one process limit (RLIMIT_NPROC of their uid)."""
    from coevo.policy.scripted import OraclePolicy
    from coevo.rollout import rollout

    policy = OraclePolicy(harness, tasks, tokenizer=tokenizer)
    return [t for i in range(0, len(tasks), chunk)
            for t in rollout(tasks[i: i + chunk], harness, policy, n_per_task=1, seed=seed)]


def extra_tasks(tasks_dir: Path, out: Path, per_family: int, seed: int) -> list:
    """Fresh instances of a generated suite's families, for training only (data augmentation).

    Drawn with another seed than the suite's, never from a held-out family, and never with the
    instruction of one of the suite's dev or test tasks, so evaluation stays clean.
    """
    from coevo.tasks import load_taskset
    from coevo.tasks.generate import MANIFEST, generate_suite

    manifest = json.loads((Path(tasks_dir) / MANIFEST).read_text()) if (Path(tasks_dir) / MANIFEST).is_file() else {}
    if manifest.get("generator") != "coevo tasks generate":
        raise ValueError(f"{tasks_dir}: augmentation needs a suite written by `coevo tasks generate` "
                         f"(its {MANIFEST} names the generator); use augment=0 for other task folders")
    generate_suite(out, seed=int(manifest["seed"]) + 1000 + seed, per_family=per_family)
    held_out = set(manifest.get("held_out_families", []))
    reserved = {t.instruction for t in load_taskset(tasks_dir).tasks if t.split in ("dev", "test")}
    return [t for t in load_taskset(out).tasks if t.family not in held_out and t.instruction not in reserved]


def passed(trajectories: list) -> list:
    return [t for t in trajectories if t.status == "submitted" and t.reward >= 1.0]


def run_warmstart(model: Path, harness_path: Path, tasks_dir: Path, split: str, out: Path,
                  settings: SFTSettings | None = None, augment: int = 0) -> str:
    """Oracle episodes on `split` (plus `augment` fresh instances per family, see `extra_tasks`), then SFT
    from `model` to `out`; returns a short report.

    Writes `out/oracle.jsonl` (every oracle episode on the split), `out/oracle_extra.jsonl` (on the extra
    instances) and `out/warmstart.json` (settings and numbers).
    """
    from transformers import AutoTokenizer

    from coevo.harness import load_harness
    from coevo.rollout.trajectory import save_trajectories
    from coevo.tasks import load_taskset

    harness = load_harness(harness_path)
    tasks = [t for t in load_taskset(tasks_dir).split(split) if t.solution is not None]
    if not tasks:
        raise ValueError(f"{tasks_dir}: no tasks with solution/solve.sh in split '{split}'")
    settings = settings or SFTSettings()
    seed = settings.seed
    tokenizer = AutoTokenizer.from_pretrained(model)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    trajectories = oracle_trajectories(harness, tasks, tokenizer, seed)
    save_trajectories(out / "oracle.jsonl", trajectories)
    extra = []
    if augment:
        with tempfile.TemporaryDirectory() as tmp:
            extra = oracle_trajectories(harness, extra_tasks(tasks_dir, Path(tmp), augment, seed), tokenizer, seed)
        save_trajectories(out / "oracle_extra.jsonl", extra)
    t_oracle = time.perf_counter() - t0
    good = passed(trajectories) + passed(extra)
    if not good:
        raise ValueError(f"warmstart: none of the {len(tasks)} oracle episodes passed under {harness_path}; "
                         f"first failure: {_cause(trajectories[0])}")
    t1 = time.perf_counter()
    train_sft(model, [t.messages for t in good], out, settings, source=f"warmstart ({harness_path})")
    t_sft = time.perf_counter() - t1
    numbers = {"tasks": len(tasks), "oracle_passed": len(passed(trajectories)), "extra_tasks": len(extra),
               "extra_passed": len(passed(extra)), "conversations": len(good), "oracle_s": round(t_oracle, 1),
               "sft_s": round(t_sft, 1), "harness": str(harness_path), "split": split, "settings": asdict(settings)}
    (out / "warmstart.json").write_text(json.dumps(numbers, indent=1) + "\n")
    return "\n".join([
        f"oracle: {numbers['oracle_passed']}/{len(tasks)} {split} tasks passed under {harness.name}"
        + (f", {numbers['extra_passed']}/{len(extra)} extra instances" if augment else "")
        + f" in {t_oracle:.1f}s" + _left_out(trajectories + extra),
        f"SFT: {len(good)} conversations x {settings.epochs:g} epochs at lr {settings.lr:g} in {t_sft:.0f}s -> {out}",
    ])


def _left_out(trajectories: list) -> str:
    failed = [f"{t.task} ({_cause(t)})" for t in trajectories if t.status != "submitted" or t.reward < 1.0]
    return f"; left out: {', '.join(failed[:5])}{' ...' if len(failed) > 5 else ''}" if failed else ""


def _cause(t) -> str:
    return f"status {t.status}, reward {t.reward:g}" + (f": {t.error or t.verify_error}" if (
        t.error or t.verify_error) else "")
