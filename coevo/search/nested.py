"""The n-phase: nested trials, the card's literal shape (an inner TRL loop inside each outer Optuna trial).

After SFT under a harness H0, H0 wins every comparison (lock-in): every other harness is scored on weights
that learned H0's format. So here a harness is only ever scored with weights trained under it. Each trial:

1. samples a harness H (and train.* values) from the space, as an h-trial does;
2. renders its training data under H: every train task's oracle episode (solution/solve.sh played through
   H by the real rollout engine, kept only when the verifier passes it; `train.replay_min` caps how many
   when set), plus, when `train.mode` is sft or auto, the start model's own verified successes sampled
   under H (the harvest: matched to H by fingerprint, token in / token out);
3. trains a LoRA adapter by SFT from the phase's start weights (the incumbent's checkpoint when the phase
   began; `train.lora`, rank 8 when the config trains full weights, `train.sft_epochs`,
   `train.sft_learning_rate`, one seed for every trial so that only H differs), then, with
   `plan.inner_grpo_steps` > 0, goes on training that adapter by GRPO under H on the train tasks
   (coevo/search/inner.py: the inner loop, its folder layout and its resume);
4. scores the pair (H, adapter) on the evolve set batch by batch, reporting after each batch to Optuna's
   pruner, which may stop it. With GRPO steps, the SFT adapter is first scored on the first evolve batch
   and reported as step 0, so the pruner can stop a bad pair before its GRPO steps (the evolve batches
   then report as steps 1, 2, ...).

Each trial's adapter lives in runs/<name>/adapters/<phase>-t<k>/adapter (peft's folder over the start
weights, published by rename), beside what it was trained on (coevo/search/inner.py). Trials are scored
from the adapter loaded over the resident base, with no merged folder. Only the phase's best pair is merged,
into checkpoints/<phase> (a plain model folder with its adapter in adapter/), because everything downstream
reads plain folders: the ratchet, which then decides on it on the promotion tasks, the final table, the
next phases and `coevo export`. The merged folder becomes the next generation's checkpoint, accepted or not,
as after a w-phase.

Resume: a killed trial is re-run by Optuna with its parameters, in the same slot (the count of trials
finished before it: its label and its folder), so a published adapter is reused, a half-done SFT is
trained again from scratch and a GRPO run continues from its last checkpoint. Each trial draws from a sampler seeded by its slot, so a resumed phase proposes
what a straight run would (tests/test_search_nested.py kills a run in every phase, six times, and
compares its final table and trials with a straight run's).

Workers (coevo/search/workers.py): the phase is open to them once its `seeded` step is recorded, after its
start pair and GEPA's texts. A worker's trial is named by its number, in adapters/<phase>-w<number>, and
the owner's loop counts it towards the budget, so the owner's slots skip the numbers that workers filled;
a published adapter is reused only when it was trained under the trial's own values.

Where this departs from issue 36: the inner pruning point is one (after SFT, before GRPO), not one every
few GRPO steps, because each check costs an evolve batch and GRPO's learning-rate schedule is set for the
whole run; no trial starts from an earlier trial's adapter (no PBT); and adapters are merged for the best
pair of a phase rather than only on `coevo export`.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from coevo.search.context import RunContext
from coevo.search.inner import record_training, train_adapter
from coevo.search.ratchet import Candidate
from coevo.search.state import Budget, Pair


def nested_phase(ctx: RunContext, name: str, run_id: str) -> None:
    from coevo.search.harness_phase import close_phase
    from coevo.search.instructions.evolve import evolve_instructions
    from coevo.search.study import phase_study, run_trials, top_trials

    config, ledger = ctx.inputs.config, ctx.ledger
    start = ledger.memo_pair("start", lambda: ctx.incumbent.pair)
    evolve_instructions(ctx, name, run_id, start)
    study = phase_study(ctx, name)  # its sampler is set per trial (run_trials)
    ledger.memo("seeded", lambda: {"trials": 0})  # open to workers (coevo/search/workers.py); none seeded
    objective = NestedObjective(ctx, name, run_id, study.study_name, start)
    run_trials(ctx, study, ctx.inputs.plan.trials, objective, config.seed + ctx.inputs.phases.index(name))
    top = [t for t in top_trials(study, ctx.inputs.plan.top_k) if "adapter" in t.user_attrs]
    accepted = False
    if top:
        best = merged_best(ctx, name, trial_pair(ctx, top[0], start))
        accepted = ctx.incumbent.challenge(Candidate(best, name), run_id, "challenge").accepted
        ledger.state.pool = [best, *(trial_pair(ctx, t, start) for t in top[1:])]
    close_phase(ctx, name, run_id, study, top[0].value if top else 0.0, accepted)


class NestedObjective:
    """One nested trial: a harness, an adapter trained under it, the pair scored on the evolve set. A failure
    scores 0 with its cause recorded (Optuna user attr + MLflow tag), never a crash of the run."""

    def __init__(self, ctx: RunContext, name: str, run_id: str, study_name: str, start: Pair):
        self.ctx, self.name, self.run_id, self.study_name, self.start = ctx, name, run_id, study_name, start
        self.slot: int | None = None
        """Trials finished before this one (set by `run_trials`): its label and its folder, the same for a
        killed trial's retry and in a straight run. None (a worker's trial): its number, in <phase>-w<n>."""
        self.calls = 0
        """Trials this process ran (a worker reports it)."""

    def __call__(self, trial) -> float:
        import optuna

        from coevo.search.scoring import Pruned
        from coevo.search.space import split_overrides

        ctx = self.ctx
        self.calls += 1
        overrides, train = split_overrides(ctx.inputs.space.suggest(trial, ctx.inputs.space.params))
        if self.slot is None:  # a worker's trial
            label, folder = f"{self.name} #w{trial.number}", f"{self.name}-w{trial.number}"
        else:
            label, folder = f"{self.name} #{self.slot}", f"{self.name}-t{self.slot}"
        trial_run = ctx.tracker.start(label, self.run_id, {"phase": self.name, "trial": trial.number,
                                                           "study": self.study_name, "nested": "1"})
        inner = self.judges_sft
        check = self.sft_check(trial, trial_run, label, overrides, train) if inner else None
        try:
            adapter, info = train_adapter(ctx, self.start, overrides, train, ctx.run_dir / "adapters" / folder,
                                          seed=ctx.inputs.config.seed + self.start.generation, after_sft=check)
            record_training(ctx, trial_run, adapter, info)
            trial.set_user_attr("adapter", str(adapter))
            trial.set_user_attr("trained_fingerprint", info["harness_fingerprint"])
            tags = {"trial": trial.number, "study": self.study_name, "adapter": str(adapter),
                    "trained_fingerprint": info["harness_fingerprint"]}  # what coevo ui shows beside the score
            pair, _ = ctx.evaluator.evaluate(f"{label} eval", trial_run, overrides, str(adapter),
                                             self.start.generation + 1, label, trial=trial, train=train, tags=tags,
                                             first_step=1 if inner else 0)
        except Pruned as p:
            ctx.tracker.end(trial_run)
            ctx.log(f"{label}: {p}")
            raise optuna.TrialPruned(str(p)) from None
        except Exception as e:  # noqa: BLE001 - boundary: a failing trial is data, the study goes on
            cause = f"{type(e).__name__}: {e}"
            trial.set_user_attr("error", cause[:2000])
            ctx.tracker.tags(trial_run, {"error": cause[:5000]})
            ctx.tracker.end(trial_run, "FAILED")
            ctx.log(f"{label}: failed, scored 0: {cause[:300]}")
            return 0.0
        for key, value in {**pair.to_trial_attrs(), "label": label}.items():
            trial.set_user_attr(key, value)
        ctx.tracker.metrics(trial_run, {"objective": pair.score, "pass_at_1": pair.pass_at_1})
        ctx.tracker.end(trial_run)
        ctx.log(f"{label}: dev {pair.brief()} ({info['oracle_examples']} oracle + {info['own_examples']} own "
                "examples)")
        return pair.score

    @property
    def judges_sft(self) -> bool:
        """Whether a trial's SFT adapter is scored before its GRPO steps (an inner pruning point): only when
        GRPO steps follow and the config prunes."""
        return bool(self.ctx.inputs.plan.inner_grpo_steps) and self.ctx.inputs.config.pruning

    def sft_check(self, trial, trial_run: str, label: str, overrides: dict[str, Any],
                  train: dict[str, Any]) -> Callable[[Path], None]:
        """Inner step 0: the SFT adapter scored on the first evolve batch and reported to the pruner, which
        may stop the trial there (Pruned) instead of after its GRPO steps. A resumed trial whose SFT
        adapter was published scores it again (the same episodes: the batch's seed is fixed)."""
        from coevo.search.scoring import Pruned

        def check(sft: Path) -> None:
            pair, report = self.ctx.evaluator.evaluate(
                f"{label} sft eval", trial_run, overrides, str(sft), self.start.generation + 1, label,
                task_batches=self.ctx.evaluator.evolve_batches[:1], train=train,
                tags={"trial": trial.number, "study": self.study_name, "role": "inner", "adapter": str(sft)})
            trial.report(pair.score, 0)
            trial.set_user_attr("sft_objective", pair.score)
            self.ctx.tracker.metrics(trial_run, {"inner/sft_objective": pair.score})
            self.ctx.log(f"{label}: SFT adapter on evolve batch 1: objective {pair.score:.3f}")
            if trial.should_prune():
                raise Pruned(0, pair.score, report, where="after its SFT, before its GRPO steps")

        return check


def trial_pair(ctx: RunContext, trial, start: Pair) -> Pair:
    """A finished nested trial as a Pair: its harness with its adapter."""
    from coevo.search.context import find_checkpoint
    from coevo.search.space import split_overrides

    attrs = trial.user_attrs
    overrides, train = split_overrides(ctx.inputs.space.resolve(trial.params))
    pair = Pair.from_trial(trial, overrides, attrs["adapter"], start.generation + 1,
                           attrs.get("label", f"#{trial.number}"), train=train)
    find_checkpoint(ctx, pair)  # a worker's adapter is recorded under its own path to the run folder
    return pair


def merged_best(ctx: RunContext, name: str, pair: Pair) -> Pair:
    """The phase's best pair with its adapter merged into checkpoints/<phase> (once; a resumable step): the
    next generation's checkpoint, and the candidate the ratchet decides on."""
    from coevo.train.lora import merge_adapter

    def merged() -> Pair:
        out = ctx.run_dir / "checkpoints" / name
        if not (out / "config.json").is_file():
            staging = out.with_name(f"{name}.staging")
            shutil.rmtree(staging, ignore_errors=True)
            merge_adapter(pair.checkpoint, staging)
            staging.rename(out)
        ctx.ledger.state.checkpoints.append(str(out))
        return pair.model_copy(update={"checkpoint": str(out)})

    return ctx.ledger.memo_pair("merged", merged)


def weights_arm(ctx: RunContext, run_id: str) -> tuple[Pair, int]:
    """The weights-only arm of a nested schedule: as many inner trainings as the run's nested trials, from
    generation 0 under the base harness (train.* values drawn from the space when it has any, and a seed
    per training), the best picked on the promotion tasks."""
    from coevo.search.schedule import WEIGHTS_ARM, Kind, count
    from coevo.search.space import split_overrides

    state, space = ctx.ledger.state, ctx.inputs.space
    budget = ctx.inputs.plan.trials * count(ctx.inputs.schedule, Kind.N)
    state.budgets[WEIGHTS_ARM] = Budget(unit="LoRA trainings (nested trials) from generation 0 under the base harness")
    draws = space.sample(budget, ctx.inputs.config.seed, space.train_params) if space.train_params else []
    scored = [arm_training(ctx, run_id, i, split_overrides(draws[i])[1] if i < len(draws) else {})
              for i in range(budget)]
    scored = [(mean, pair) for mean, pair in scored if pair is not None]
    return (max(scored, key=lambda s: s[0])[1] if scored else state.baseline), budget


def arm_training(ctx: RunContext, run_id: str, i: int, train: dict[str, Any]) -> tuple[float, Pair | None]:
    """The weights arm's i-th training (a resumable step) and its mean promotion score; None when it failed."""
    config, baseline = ctx.inputs.config, ctx.ledger.state.baseline

    def trained() -> dict:
        try:
            adapter, _ = train_adapter(ctx, baseline, {}, train, ctx.run_dir / "adapters" / f"arm-weights-{i}",
                                       seed=config.seed + baseline.generation + i)
            pair = Pair(train=train, checkpoint=str(adapter), generation=1, source=f"arm weights-only #{i}")
            scores = ctx.incumbent.promotion_scores(pair, run_id)
            return {"pair": pair.model_dump(), "mean": sum(scores.values()) / max(1, len(scores))}
        except Exception as e:  # noqa: BLE001 - boundary: a failed training is left out of the arm's pick
            ctx.log(f"arm weights-only: training {i} failed: {type(e).__name__}: {e}"[:400])
            return {"pair": None, "mean": 0.0}

    done = ctx.ledger.memo(f"arm nested {i}", trained)
    return done["mean"], Pair.model_validate(done["pair"]) if done["pair"] else None
