"""`coevo check`'s time estimate of a search config: what its schedule runs (model episodes, oracle episodes,
LoRA trainings), counted from the plan, priced by one oracle episode timed on this machine and per-model-size
constants. An estimate: serial, with every reply at its token budget and every oracle replay passing."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

GEN_S_PER_TOKEN = 0.0066
"""Seconds per generated token per 100 M parameters, batched, on 2 CPU cores: SmolLM2-135M's KV path made 32
rows x 64 tokens in 18.3 s (STACK.md, "vLLM's CPU build"). A model episode is priced at its whole token budget
(limits.max_turns x limits.max_tokens_per_turn) plus the measured oracle episode (sandbox, verifier): an upper
bound when replies stop early."""
SFT_S_PER_EXAMPLE = 1.8
"""Seconds per training example and epoch per 100 M parameters, LoRA SFT on 2 CPU cores: SmolLM2-135M, rank 16,
38 oracle episodes x 3 epochs in 282 s (RESULTS.md, the smollm2 search's w1)."""
TRAINING_OVERHEAD_S = 10.0
"""Per LoRA training: loading the model, the trainer's set-up, writing the adapter."""
TINY_PARAMS = 1.1e6
"""The tiny model a search builds when `model` is empty (coevo/train/model.py)."""
NO_MODEL = ("oracle", "synthetic", "scripted")
"""Policy backends that score pairs without generating from the model."""


@dataclass
class Part:
    """One line of the time estimate: episodes scored by the model, oracle episodes, LoRA trainings."""

    name: str
    model: int = 0
    oracle: int = 0
    trainings: int = 0
    examples: int = 0
    """Training examples per training (upper bound: every oracle episode passes)."""
    seconds: float = 0.0


def estimate(c) -> tuple[list[Part], str]:
    """The parts of `c`'s search (a preflight Context) with their estimated seconds, and a one-line detail."""
    from coevo.native.spec import is_native
    from coevo.policy import make_policy
    from coevo.rollout import rollout
    from coevo.sandbox import make_sandbox

    task = next(t for t in c.tasks if t.split == "dev")
    policy = make_policy("oracle", harness=c.base, tasks=[task])
    if is_native(c.base):  # served to the agent: the oracle's text needs token ids
        policy.tokenizer = oracle_tokenizer(c)
    started = time.monotonic()
    [traj] = rollout([task], c.base, policy, make_sandbox=lambda t: make_sandbox(t, c.config.sandbox),
                     tokenizer=policy.tokenizer)
    oracle_s = time.monotonic() - started
    if traj.reward != 1.0:
        raise ValueError(f"oracle episode on {task.name} under {c.config.harness}: status {traj.status}, "
                         f"reward {traj.reward} ({traj.error or 'the harness cannot play the solution'})")
    params = model_params(c.config.model)
    backend = (c.config.policy or {}).get("backend", "hf")
    turns, tokens = turn_budget(c.base)
    generation = 0.0 if backend in NO_MODEL else GEN_S_PER_TOKEN * params / 1e8 * turns * tokens
    parts, skipped = estimate_parts(c)
    epochs = float(c.config.train.get("sft_epochs", 2.0))
    for p in parts:
        training = TRAINING_OVERHEAD_S + SFT_S_PER_EXAMPLE * params / 1e8 * p.examples * epochs
        p.seconds = p.model * (oracle_s + generation) + p.oracle * oracle_s + p.trainings * training
    total = sum(p.seconds for p in parts)
    left_out = f"; not estimated: {', '.join(skipped)}" if skipped else ""
    return parts, (f"one oracle episode ({task.name}) took {oracle_s:.1f}s; a model episode ~{oracle_s + generation:.1f}s "
            f"({params / 1e6:.1f}M parameters, {turns} turns x {tokens} tokens); "
            f"estimated total ~{total / 60:.1f} min serial{left_out} (an estimate, table below)")


def turn_budget(harness) -> tuple[int, int]:
    """(turns, tokens per turn) of an episode at its limits: coevo's own harnesses' `limits`, a native
    agent's step limit (0, unlimited, is priced as 10 steps) and its decoding's max_tokens."""
    from coevo.native.spec import is_native

    if is_native(harness):
        return int(harness.agent_settings.get("step_limit") or 10), harness.decoding.max_tokens
    return harness.limits.max_turns, harness.limits.max_tokens_per_turn


def oracle_tokenizer(c):
    """The config's model's tokenizer, or else a small one trained on the tasks (no model is built here)."""
    if c.config.model is not None and (Path(c.config.model) / "config.json").is_file():
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(str(c.config.model))
    from coevo.train.model import corpus, train_tokenizer, wrap_tokenizer

    return wrap_tokenizer(train_tokenizer(corpus(c.config.tasks, None, [c.base])))


def estimate_parts(c) -> tuple[list[Part], list[str]]:
    """What the schedule runs, counted from the plan: every phase's episodes and LoRA trainings, the fair arms,
    the ratchet's promotion scores and the final table. GRPO updates (w-phases; a nested trial's episodes are
counted) and the warm start are not counted."""
    from coevo.search.config import make_plan
    from coevo.search.instructions.spec import EvolveParam
    from coevo.search.schedule import Kind, count, parse_phases

    config = c.config
    plan = make_plan(config, c.splits["train"], c.splits["dev"], c.splits["test"],
                     len(c.space.train_params) if c.space else 0)
    phases = parse_phases(config.schedule)
    n_phases = count(phases, Kind.N)
    train = dict(config.train)
    replays = min(plan.train_tasks, train.get("replay_min") or plan.train_tasks)  # no own success assumed
    harvest = plan.train_tasks * train.get("harvest_samples", 4) if train.get("mode", "rl") != "rl" else 0
    evolve = plan.trials * plan.dev_tasks * plan.samples
    grpo = (plan.inner_grpo_steps or 0) * train.get("tasks_per_step", 4) * train.get("group_size", 4)
    inner = f" + {plan.inner_grpo_steps} GRPO steps" if grpo else ""  # episodes counted, updates not
    # with GRPO and pruning, a trial's SFT adapter is first scored on one evolve batch (nested.py)
    check = -(-plan.dev_tasks // plan.batches) * plan.samples if grpo and config.pruning else 0
    checked = " + 1 SFT check batch" if check else ""
    gepa = sum(p.evolve.budget for p in c.space.params if isinstance(p, EvolveParam)) if c.space else 0
    parts, skipped = [], [p.name for p in phases if p.kind in (Kind.W0, Kind.W)]
    for p in phases:
        if p.kind is Kind.H:
            reflective = f" + {gepa} GEPA episodes" if gepa else ""
            parts.append(Part(f"{p.name}: {plan.trials} trials x {plan.dev_tasks} dev{reflective}",
                              model=evolve + gepa))
        elif p.kind is Kind.N:
            parts.append(Part(f"{p.name}: {plan.trials} trials x ({plan.dev_tasks} dev + {replays} replays + "
                              f"1 training{inner}{checked})", model=evolve + plan.trials * (harvest + grpo + check),
                              oracle=plan.trials * replays, trainings=plan.trials, examples=replays))
    decisions = count(phases, Kind.H) + 2 * count(phases, Kind.W) + n_phases
    if config.arms:
        searched = (count(phases, Kind.H) + n_phases) * plan.trials
        parts.append(Part(f"arm harness-only: {searched} trials x {plan.dev_tasks} dev",
                          model=searched * plan.dev_tasks * plan.samples))
        if n_phases:
            trainings = n_phases * plan.trials
            parts.append(Part(f"arm weights-only: {trainings} trainings{inner} x {config.splits.promotion} "
                              "promotion", model=trainings * (harvest + grpo + config.splits.promotion * plan.samples),
                              oracle=trainings * replays, trainings=trainings, examples=replays))
        decisions += 2
    parts.append(Part(f"promotion: {decisions} decisions x 2 x {config.splits.promotion}",
                      model=decisions * 2 * config.splits.promotion * plan.samples))
    held = c.splits["test"] if config.splits.held_out is None else min(config.splits.held_out, c.splits["test"])
    rows = 6 if config.arms else 4
    parts.append(Part(f"final table: {rows} rows x ({plan.test_tasks} test + {held} held-out)",
                      model=rows * (plan.test_tasks + held) * plan.samples))
    return parts, skipped


def model_params(model: Path | None) -> float:
    """Parameters of a model folder, counted from its safetensors headers (no weights read); the tiny
    model's count when the config builds it."""
    import json
    import math
    import struct

    if model is None or not Path(model).is_dir():
        return TINY_PARAMS
    total = 0
    for weights in Path(model).glob("*.safetensors"):
        with open(weights, "rb") as f:
            header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
        total += sum(math.prod(t["shape"]) for k, t in header.items() if k != "__metadata__")
    return float(total or TINY_PARAMS)


def estimate_table(parts: list[Part]):
    """The time estimate as a table: what runs, how many episodes and trainings, and minutes, with a total."""
    from rich import box
    from rich.table import Table

    table = Table("part", "model eps", "oracle eps", "LoRA", "min", box=box.SIMPLE,
                  title="Time estimate (an estimate: serial, on this machine's oracle speed and per-model-size "
                        "constants; coevo/search/estimate.py)")
    for p in parts:
        table.add_row(p.name, str(p.model), str(p.oracle), str(p.trainings), f"{p.seconds / 60:.1f}")
    total = [sum(getattr(p, k) for p in parts) for k in ("model", "oracle", "trainings")]
    table.add_row("total", *map(str, total), f"{sum(p.seconds for p in parts) / 60:.1f}", style="bold")
    return table
