"""The h-phase hook: before Optuna samples, each `evolve: gepa` key of the space gets its choices from a
GEPA run on the start pair (the incumbent's checkpoint and harness), scored on the evolve set only.

The result is saved in the run folder (runs/<name>/gepa/<phase>-<slot>/result.json) once GEPA is done,
and GEPA keeps its own resumable state beside it, so a resumed run (or a `--join` worker) reads the
choices back instead of running GEPA again, and a killed GEPA continues where it stopped (gepa 0.1.4
scores its seed on the evolve set again before it reads its state: one evaluation repeated).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from coevo.search.context import RunContext
from coevo.search.errors import SearchError
from coevo.search.instructions.lineage import TemplateStore, run_prompts
from coevo.search.instructions.spec import EvolveParam, EvolveSpec, key_problem
from coevo.search.state import Pair


def evolve_instructions(ctx: RunContext, phase: str, run_id: str, start: Pair | None = None) -> None:
    """Set the choices of every evolve key for `phase`: GEPA's saved result, or a new GEPA run on
    `start` (default: the incumbent)."""
    for param in evolve_params(ctx):
        param.choices = phase_choices(ctx, param, phase, run_id, start or ctx.incumbent.pair)


def arm_instructions(ctx: RunContext, phases: list[str], run_id: str, start: Pair) -> None:
    """The harness-only arm chooses among what the run's generation-0 h-phases evolved (the union of
    their choices, which `widened` lays over their copied trials); without such phases GEPA runs for the
    arm itself, on `start`."""
    for param in evolve_params(ctx):
        names = [n for phase in phases or ["arm-harness"] for n in phase_choices(ctx, param, phase, run_id, start)]
        param.choices = list(dict.fromkeys(names))


def widened(space, trials: list) -> list:
    """Copies of finished trials whose evolve keys take the space's current (wider) choices: Optuna
    refuses one key with two choice lists in one study."""
    import copy

    current = {p.path: p.distribution() for p in space.params if isinstance(p, EvolveParam)}
    out = []
    for trial in trials:
        trial = copy.deepcopy(trial)
        trial.distributions = {k: current.get(k, d) for k, d in trial.distributions.items()}
        out.append(trial)
    return out


def evolve_params(ctx: RunContext) -> list[EvolveParam]:
    return [p for p in ctx.inputs.space.params if isinstance(p, EvolveParam)]


def phase_choices(ctx: RunContext, param: EvolveParam, phase: str, run_id: str, start: Pair) -> list[str]:
    folder = ctx.run_dir / "gepa" / f"{phase}-{param.slot}"
    done = folder / "result.json"
    if not done.is_file():
        result = run_gepa(ctx, param, phase, run_id, start, folder)
        if result["candidates"]:
            enqueue(ctx, phase, param.path, result["candidates"][0]["name"])
        done.write_text(json.dumps(result, indent=1) + "\n")
    return json.loads(done.read_text())["choices"]


def run_gepa(ctx: RunContext, param: EvolveParam, phase: str, run_id: str, start: Pair, folder: Path) -> dict:
    import gepa

    from coevo.search.instructions.adapter import HarnessAdapter
    from coevo.search.instructions.tracking import log_result

    spec, config = param.evolve, ctx.inputs.config
    folder.mkdir(parents=True, exist_ok=True)
    store = TemplateStore(run_prompts(ctx.run_dir), param.slot, phase, folder)
    kept = kept_names(ctx, param, start, folder / "kept.json")
    seed_name, seed_text = kept[1], store.known(kept[1])
    store.known(kept[0])
    adapter = HarnessAdapter(param.slot, store, lambda name: ctx.inputs.scoring_harness({**start.overrides,
                                                                                        param.path: name}),
                             rollouts(ctx, start), config.objective, reflection_lm(spec, config.space, param.path),
                             ctx.log)
    evolve = [t for batch in ctx.evaluator.evolve_batches for t in batch]  # the evolve set now (curriculum.py)
    ctx.log(f"gepa {phase} {param.path}: evolving {seed_name} on {len(evolve)} evolve tasks, "
            f"budget {spec.budget} episodes, reflection LM {spec.reflection_lm}")
    started = time.monotonic()
    result = gepa.optimize(seed_candidate={param.slot: seed_text}, trainset=evolve, valset=evolve,
                           adapter=adapter, max_metric_calls=spec.budget, reflection_minibatch_size=spec.minibatch,
                           run_dir=str(folder / "state"), seed=config.seed, raise_on_exception=False,
                           track_best_outputs=False, cache_evaluation=True, display_progress_bar=False,
                           logger=FileLog(folder / "gepa.log"), stop_callbacks=perfect)
    summary = summarize(result, store, spec, kept, round(time.monotonic() - started, 1))
    log_result(ctx.tracker, run_id, phase, param.path, spec, summary, store)
    best = summary["candidates"][0] if summary["candidates"] else None
    ctx.log(f"gepa {phase} {param.path}: {len(summary['candidates'])} evolved text(s), "
            f"{len(summary['rejected'])} rejected, {summary['metric_calls']} episodes; seed "
            f"{summary['seed_score']:.3f}" + (f", best {best['name']} {best['score']:.3f}" if best else ""))
    return summary


def kept_names(ctx: RunContext, param: EvolveParam, start: Pair, path: Path) -> list[str]:
    """The templates that stay choices whatever GEPA finds: the base's, the start pair's (GEPA's seed) and
    the pool's (so the phase can seed its study with the pool). Written when GEPA first starts, so that a
    resumed GEPA ends with the same choices."""
    if not path.is_file():
        base = getattr(ctx.inputs.base.templates, param.slot)
        pooled = [p.overrides[param.path] for p in ctx.ledger.state.pool if param.path in p.overrides]
        path.write_text(json.dumps([base, start.overrides.get(param.path, base), *pooled]) + "\n")
    return json.loads(path.read_text())


def perfect(state) -> bool:
    """Stop once a candidate scores full marks on every evolve task: GEPA would spend the rest of its
    budget skipping perfect minibatches."""
    return max(state.program_full_scores_val_set, default=0.0) >= 1.0


class FileLog:
    """GEPA's log (every iteration, every proposed text) goes to the run folder, not the search's output."""

    def __init__(self, path: Path):
        self.path = path

    def log(self, message: str) -> None:
        with self.path.open("a") as f:
            f.write(message + "\n")


def enqueue(ctx: RunContext, phase: str, key: str, name: str) -> None:
    """GEPA's best text is the phase's first trial: Optuna need not rediscover what GEPA measured."""
    from coevo.search.study import phase_study

    study = phase_study(ctx, phase)
    study.enqueue_trial({key: name}, skip_if_exists=True)


def summarize(result, store: TemplateStore, spec: EvolveSpec, kept: list[str], seconds: float) -> dict:
    """What the phase keeps: the choices (`kept`: the base's, the seed's and the pool's templates, then
    the best `keep` evolved texts) and each candidate's evolve score and parents."""
    slot, seed_name = store.slot, kept[1]
    names = [store.write(c[slot]) for c in result.candidates]
    candidates = [{"name": names[i], "score": result.val_aggregate_scores[i],
                   "parents": [names[p] for p in result.parents[i] if p is not None],
                   "found_after": result.discovery_eval_counts[i]}  # episodes GEPA had spent when it proposed it
                  for i in range(1, len(names)) if names[i] not in kept]
    candidates.sort(key=lambda c: -c["score"])
    choices = list(dict.fromkeys([*kept, *(c["name"] for c in candidates[:spec.keep])]))
    return {"slot": slot, "phase": store.phase, "seed": seed_name, "seed_score": result.val_aggregate_scores[0],
            "choices": choices, "candidates": candidates, "rejected": store.rejected(),
            "metric_calls": result.total_metric_calls, "seconds": seconds, "reflection_lm": spec.reflection_lm}


def rollouts(ctx: RunContext, start: Pair):
    """(tasks, harness) -> trajectories: the start pair's policy, the search's samples, seed and sandbox."""
    from functools import partial

    from coevo.rollout import rollout
    from coevo.sandbox import make_sandbox

    config = ctx.inputs.config

    def run(tasks: list, harness) -> list:
        policy = ctx.evaluator.policy(harness, start.checkpoint, tasks)
        return rollout(tasks, harness, policy, n_per_task=ctx.inputs.plan.samples, seed=config.seed,
                       make_sandbox=partial(make_sandbox, backend=config.sandbox))

    return run


def reflection_lm(spec: EvolveSpec, source: Path, key: str):
    """prompt -> reply through dspy.LM. The key is read from the environment here and lives only in
    memory: no cache, no retries that could outlive the timeout."""
    import dspy

    problem = key_problem(spec)
    if problem:
        raise SearchError(f"{source}: '{key}': {problem}")
    # A server without auth still gets a syntactically valid key.
    api_key = os.environ[spec.api_key_env] if spec.api_key_env else "none"
    lm = dspy.LM(spec.reflection_lm, api_base=spec.api_base, api_key=api_key, cache=False, num_retries=0,
                 timeout=spec.timeout_s, max_tokens=spec.max_tokens)

    def call(prompt: str) -> str:
        outputs = lm(prompt)
        first = outputs[0] if outputs else ""
        return first["text"] if isinstance(first, dict) else str(first)

    return call
