"""`coevo warmstart`: play every task's solution through the harness with the oracle policy, keep the
episodes the verifier passed, and fine-tune the model on them (loss on the model's tokens only).

The oracle runs through the real rollout engine, sandboxes and verifier, so the episodes are exactly what
the harness shows a model (its prompts, tool schemas, action format, observations and truncation), token
for token, and a solution that does not pass under this harness is left out rather than taught.

Given several harnesses (the search's w0 samples them from its space), the tasks are dealt among them:
a model that has seen one template and one action format scores 0 under any other, and a harness search
over structure would have nowhere to move. Each demonstration is trained on as the tokens its own harness
rendered.
"""

from __future__ import annotations

import json
import logging
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from coevo.outcomes import passed
from coevo.train.harvest import token_row
from coevo.train.sft import SFTSettings, train_sft

log = logging.getLogger(__name__)

AUGMENT = 60
"""Extra instances per family that `coevo warmstart` trains on by default, when the task folder is a
suite `coevo tasks generate` wrote. The skill to learn is copying the instruction's names and values into
the right commands; the train split alone (9 instances per family) is far too few examples of it."""


def default_augment(tasks_dir: Path) -> int:
    from coevo.tasks.generate import generated_manifest

    return AUGMENT if generated_manifest(tasks_dir) else 0


def oracle_trajectories(harnesses, tasks: list, tokenizer, seed: int = 0, backend: str = "local",
                        image_map: dict[str, str] | None = None) -> list:
    """One oracle episode per task, tokenized with `tokenizer` (so context limits apply as for the model),
    in `backend`'s sandboxes (see coevo.sandbox.make_sandbox). `harnesses`: one harness, or a list the tasks
    are dealt among in turn (task i under harness i mod n); trajectories come back in task order."""
    from coevo.policy.scripted import OraclePolicy
    from coevo.rollout import rollout

    harnesses = harnesses if isinstance(harnesses, list) else [harnesses]
    dealt: dict[int, list] = {}
    for i, task in enumerate(tasks):
        dealt.setdefault(i % len(harnesses), []).append(task)
    done = {}
    for k, share in dealt.items():
        for t in rollout(share, harnesses[k], OraclePolicy(harnesses[k], share, tokenizer=tokenizer), n_per_task=1,
                         seed=seed, backend=backend, image_map=image_map):
            done[t.task] = t
    return [done[t.name] for t in tasks]


def extra_tasks(tasks_dir: Path, out: Path, per_family: int, seed: int) -> list:
    """Fresh instances of a generated suite's families, for training only (data augmentation).

    Drawn with another seed than the suite's, never from a held-out family, and never with the
    instruction of one of the suite's dev or test tasks, so evaluation stays clean.
    """
    from coevo.tasks import load_taskset
    from coevo.tasks.generate import MANIFEST, generate_suite, generated_manifest

    manifest = generated_manifest(tasks_dir) if tasks_dir is not None else None
    if manifest is None:
        raise ValueError(f"{tasks_dir}: augmentation needs a suite written by `coevo tasks generate` "
                         f"(its {MANIFEST} names the generator); use augment=0 for other task folders")
    generate_suite(out, seed=int(manifest["seed"]) + 1000 + seed, per_family=per_family)
    held_out = set(manifest.get("held_out_families", []))
    reserved = {t.instruction for t in load_taskset(tasks_dir).tasks if t.split in ("dev", "test")}
    return [t for t in load_taskset(out).tasks if t.family not in held_out and t.instruction not in reserved]


def demonstrations(trajectories: list) -> list:
    """Passed episodes that also ended by submitting: a demonstration that runs out of turns would teach
    the model never to submit."""
    return [t for t in trajectories if passed(t) and t.status == "submitted"]


def warm_start(model: Path, harness, tasks: list, out: Path, settings: SFTSettings, augment: int = 0,
               suite: Path | None = None, source: str = "warmstart", backend: str = "local",
               image_map: dict[str, str] | None = None) -> dict:
    """Oracle episodes on `tasks` (plus `augment` fresh instances per family of the generated `suite`,
    see `extra_tasks`) under `harness` (or a list of harnesses, see `oracle_trajectories`), then SFT from
    `model` to `out` on their tokens; returns the numbers (also in out/warmstart.json).

    Writes `out/oracle.jsonl` (every oracle episode on `tasks`) and `out/oracle_extra.jsonl` (on the
    extra instances), so a user can see what was taught and what was left out."""
    from transformers import AutoTokenizer

    from coevo.rollout.trajectory import save_trajectories

    tokenizer = AutoTokenizer.from_pretrained(model)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    log.info(f"{source}: oracle episodes on {len(tasks)} tasks"
             + (f" (+ {augment} extra instances per family)" if augment else ""))
    trajectories = oracle_trajectories(harness, tasks, tokenizer, settings.seed, backend, image_map)
    save_trajectories(out / "oracle.jsonl", trajectories)
    extra = []
    if augment:
        with tempfile.TemporaryDirectory() as tmp:
            extra = oracle_trajectories(harness, extra_tasks(suite, Path(tmp), augment, settings.seed), tokenizer,
                                        settings.seed, backend, image_map)
        save_trajectories(out / "oracle_extra.jsonl", extra)
    t_oracle = time.perf_counter() - t0
    good = demonstrations(trajectories) + demonstrations(extra)
    names = ", ".join(dict.fromkeys(t.harness for t in trajectories))
    if not good:
        raise ValueError(f"{source}: none of the {len(trajectories)} oracle episodes passed under {names}; "
                         f"first failure: {_cause(trajectories[0])}")
    t1 = time.perf_counter()
    log.info(f"{source}: SFT on {len(good)} passed oracle episodes (of {len(trajectories) + len(extra)}) "
             f"in {t_oracle:.1f}s")
    train_sft(model, [token_row(t) for t in good], out, settings, source=source)
    numbers = {"tasks": len(tasks), "oracle_passed": len(demonstrations(trajectories)), "extra_tasks": len(extra),
               "extra_passed": len(demonstrations(extra)), "conversations": len(good), "oracle_s": round(t_oracle, 1),
               "sft_s": round(time.perf_counter() - t1, 1), "harness": names,
               "settings": {**asdict(settings), "lora": settings.lora.model_dump()},
               "left_out": _left_out(trajectories + extra)}
    (out / "warmstart.json").write_text(json.dumps(numbers, indent=1) + "\n")
    return numbers


def run_warmstart(model: Path, harness_path: Path, tasks_dir: Path, split: str, out: Path,
                  settings: SFTSettings | None = None, augment: int | None = None, backend: str = "local",
                  image_map: dict[str, str] | None = None) -> str:
    """`coevo warmstart`: `warm_start` on a split of a task folder; returns a short report. `augment`
    None: `default_augment`."""
    from coevo.harness import load_harness
    from coevo.sandbox import backends_for
    from coevo.tasks import load_taskset

    harness = load_harness(harness_path)
    tasks = [t for t in load_taskset(tasks_dir).split(split) if t.solution is not None]
    if not tasks:
        raise ValueError(f"{tasks_dir}: no tasks with solution/solve.sh in split '{split}'")
    backends_for(tasks, backend)  # fails here, not as every oracle episode left out, when it cannot run them
    settings = settings or SFTSettings()
    augment = default_augment(tasks_dir) if augment is None else augment
    n = warm_start(model, harness, tasks, out, settings, augment, tasks_dir, source=f"warmstart ({harness_path})",
                   backend=backend, image_map=image_map)
    return "\n".join([
        f"oracle: {n['oracle_passed']}/{len(tasks)} {split} tasks passed under {harness.name}"
        + (f", {n['extra_passed']}/{n['extra_tasks']} extra instances" if augment else "")
        + f" in {n['oracle_s']:.1f}s" + n["left_out"],
        (f"SFT: {n['conversations']} conversations x {settings.epochs:g} epochs at lr {settings.lr:g} in "
         f"{n['sft_s']:.0f}s -> {out}"),
    ])


def _left_out(trajectories: list) -> str:
    failed = [f"{t.task} ({_cause(t)})" for t in trajectories if t.status != "submitted" or t.reward < 1.0]
    return f"; left out: {', '.join(failed[:5])}{' ...' if len(failed) > 5 else ''}" if failed else ""


def _cause(t) -> str:
    return f"status {t.status}, reward {t.reward:g}" + (f": {t.error or t.verify_error}" if (
        t.error or t.verify_error) else "")
