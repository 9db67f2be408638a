"""The bridge from TRL's `GRPOTrainer` to our rollout engine: `GRPORollout` is the trainer's `rollout_func`
and its reward function.

Per step: push the trainer's weights into the rollout copy of the model, roll out every task of the batch
under the harness (its recovery and context policies active, as in evaluation), check that the loss region
is exactly the sampled tokens, measure the train/rollout mismatch, and hand TRL one row per prompt:
`prompt_ids`, the multi-turn `completion_ids` from the token buffer, rollout `logprobs` and `env_mask`
(0 for environment tokens). The rewards ride along as an extra column that the reward function returns,
and the step's own metrics go through the reward function's `log_metric` (TRL's public path), so they
land in TRL's logs and every reporter (console, MLflow).

What TRL's `rollout_func` contract asks: prompts arrive already repeated `num_generations` times, and
exactly one row per prompt must come back.
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter, defaultdict
from pathlib import Path

from coevo.errors import CoevoError
from coevo.outcomes import FAILURE_STATUSES, credit, passed
from coevo.rollout import rollout, save_trajectories
from coevo.rollout.trajectory import Trajectory
from coevo.train import mismatch as mm
from coevo.train.lora import sync_weights
from coevo.train.spec import TrainSpec
from coevo.train.timeline import Timeline

log = logging.getLogger(__name__)


class TrainingHalted(CoevoError):
    """The inner loop stopped on purpose: loss-region drift, or a mismatch past its threshold under `halt`."""


class _Recorder:
    """Wraps the rollout policy: keeps every sampled completion (per task) and times the generate calls."""

    def __init__(self, policy, timeline: Timeline):
        self.policy, self.timeline = policy, timeline
        self.tokenizer, self.model = policy.tokenizer, policy.model  # a native harness serves it (its context)
        self.sampled: dict[str, set[tuple[int, ...]]] = defaultdict(set)

    def generate(self, requests, params):
        with self.timeline.span("generate"):
            completions = self.policy.generate(requests, params)
        for r, c in zip(requests, completions):
            self.sampled[r.meta.get("task", "")].add(tuple(c.token_ids))
        return completions


class GRPORollout:
    def __init__(self, tasks: list, harness, policy, spec: TrainSpec, run_dir: Path | None = None, log=log.warning,
                 sandboxes: tuple[str, dict[str, str] | None] = ("local", None), routing=None):
        """`policy`: the rollout engine (`rollout_policy`): an HFPolicy, the rollout copy of the model, whose
        weights are overwritten every step, or a VLLMPolicy, pushed the weights every step.
        `sandboxes`: (backend, image_map) of the episodes, as the rollout engine takes them. `routing`: an
        MoE trainer model's `coevo.train.routing.RoutingReplay`, told each step's rows and recorded routing."""
        self.tasks = {t.name: t for t in tasks}
        self.backend, self.image_map = sandboxes
        self.harness, self.policy, self.spec, self.run_dir, self.log = harness, policy, spec, run_dir, log
        self.routing = routing
        self.pad_id = policy.pad_id
        self.stats: dict[str, float] = {}
        """The last step's metrics; the reward function reports them."""
        self.trajectories: list[Trajectory] = []
        self.last_step = -1
        """The trainer step (0-based) of the last rollout."""
        self.segments_dropped = 0
        """The last step's token records left out: all but the last segment of a native agent's episodes."""

    # -- TRL's rollout_func -------------------------------------------------------------------------
    def __call__(self, prompts: list[str], trainer) -> dict:
        t0 = time.monotonic()
        step = self.last_step = trainer.state.global_step
        model = trainer.accelerator.unwrap_model(trainer.model)
        self._push_weights(model, step)
        timeline = Timeline()
        recorder = _Recorder(self.policy, timeline)
        trajectories = self._rollout(prompts, recorder, timeline, seed=self.spec.seed * 1_000_003 + step)
        self.trajectories = trajectories
        t_roll = time.monotonic() - t0
        rows = rows_from_trajectories(trajectories, self.pad_id)
        loss_drift = sum(loss_region_drift(t, ids, mask, recorder.sampled)
                         for t, ids, mask in zip(trajectories, rows["completion_ids"], rows["env_mask"]))
        if loss_drift:
            raise TrainingHalted(f"step {step + 1}: {loss_drift} loss-region tokens are not the sampled ids; "
                                 "the token buffer re-tokenized model output (see the rollout's drift)")
        rewards = [reward_of(t, self.spec.reward) for t in trajectories]
        if self.routing is not None:  # before the mismatch forward: the watch replays (or watches) it too
            self.routing.remember(rows["prompt_ids"], rows["completion_ids"], [t.routing for t in trajectories])
            self.routing.reset_counts()
            unrecorded = sum(1 for t in trajectories if any(t.completion_mask) and not t.routing)
            if unrecorded and self.spec.routing_replay:
                self.log(f"step {step + 1}: routing_replay: {unrecorded} episodes carry no recorded routing (the "
                         "local KV-cached policy records it, served or not); their tokens route live")
        t1 = time.monotonic()
        if any(t.logprob_source == "constrained" for t in trajectories):
            # Masked rollout logprobs against a forward with the grammar's masks replayed (the numerics),
            # and against the plain forward TRL trains on (the grammar's gap): coevo/train/mismatch.py.
            from coevo.harness.grammar import action_grammar

            masked, plain = mm.grammar_logprobs(model, rows["prompt_ids"], rows["completion_ids"], rows["env_mask"],
                                                action_grammar(self.harness), self.policy.tokenizer,
                                                trainer.args.temperature, self.policy.stop_ids[0])
            mismatch, metrics = mm.constrained_metrics(masked, plain, rows["logprobs"], rows["env_mask"])
        else:
            trainer_lp = mm.trainer_logprobs(model, rows["prompt_ids"], rows["completion_ids"], self.pad_id,
                                             trainer.args.per_device_train_batch_size)
            mismatch = mm.measure(trainer_lp, rows["logprobs"], rows["env_mask"])
            metrics = mismatch.as_metrics()
        t_mismatch = time.monotonic() - t1
        if self.routing is not None:
            metrics.update(self.routing.metrics())
        skipped = self._judge(mismatch, step)
        self.stats = {
            **episode_stats(trajectories, rewards), **metrics,
            "mismatch/breach": float(bool(mm.breaches(mismatch, self.spec.mismatch))),
            "mismatch/skipped": float(skipped), "tokens/loss_region_drift": float(loss_drift),
            "tokens/segments_dropped": float(self.segments_dropped),
            **self._mask_groups(rows["env_mask"], rewards, skipped),
            **timeline.breakdown(t_roll), "time/mismatch": t_mismatch,
            "time/rollout_func": time.monotonic() - t0,
        }
        if self.run_dir is not None and self.spec.save_rollouts:
            save_trajectories(self.run_dir / "rollouts" / f"step-{step + 1}.jsonl", trajectories)
        return {**rows, "coevo_reward": rewards}

    def _push_weights(self, model, step: int) -> None:
        """The "weight sync" to the rollout engine: merged into the local copy, or saved for a vLLM server
        to load (a LoRA adapter under a new name, or full weights in place); the last two steps' are kept."""
        if not hasattr(self.policy, "push_weights"):
            sync_weights(self.policy.model, model)
            return
        import shutil

        folder = (self.run_dir or Path(".")) / "rollout_weights"
        self.policy.push_weights(model, folder / f"step-{step}")
        for old in folder.glob("step-*"):
            if int(old.name.removeprefix("step-")) < step - 1:
                shutil.rmtree(old, ignore_errors=True)

    def _rollout(self, prompts: list[str], recorder: _Recorder, timeline: Timeline,
                 seed: int) -> list[Trajectory]:
        """Roll out each distinct prompt's task as often as it appears; rows come back in prompt order."""
        counts = Counter(prompts)
        unknown = [p for p in counts if p not in self.tasks]
        if unknown:
            raise ValueError(f"rollout_func: prompts {unknown[:3]} are not names of the tasks it was given")
        if len(set(counts.values())) != 1:
            raise ValueError(f"rollout_func: tasks appear unequally often in one batch ({dict(counts)}); "
                             "each must appear num_generations times")
        from coevo.verify import verify


        def timed_verify(task, sandbox):
            with timeline.span("verify"):
                return verify(task, sandbox)

        names = list(counts)
        trajectories = rollout([self.tasks[n] for n in names], self.harness, recorder,
                               n_per_task=counts[names[0]], seed=seed, verify=timed_verify,
                               backend=self.backend, image_map=self.image_map)
        # TRL takes one row per prompt. A native agent's episode may leave several token records (it
        # re-rendered its chat): its last one, which holds the actions that ended it, is trained on.
        last = {(t.task, t.sample): t for t in trajectories}
        self.segments_dropped = len(trajectories) - len(last)
        queues: dict[str, list[Trajectory]] = defaultdict(list)
        for t in last.values():
            queues[t.task].append(t)
        return [queues[p].pop(0) for p in prompts]

    def _mask_groups(self, env_mask: list[list[int]], rewards: list, skipped: bool) -> dict[str, float]:
        """Mask no-signal groups (when asked) or the whole batch (a skipped step) out of the loss and out of
        its token count; TRL groups rows by position, num_generations at a time, as we do here."""
        size = self.spec.group_size
        n_groups = len(rewards) // size
        no_signal = no_signal_groups(rewards, size)
        dropped = set(no_signal) if self.spec.drop_no_signal_groups else set()
        if skipped:
            dropped = set(range(n_groups))
        for g in dropped:
            for i in range(g * size, (g + 1) * size):
                env_mask[i] = [0] * len(env_mask[i])
        return {"groups/no_signal": float(len(no_signal)), "groups/dropped": float(len(dropped)),
                "groups/no_signal_frac": len(no_signal) / max(1, n_groups)}

    def _judge(self, mismatch: mm.Mismatch, step: int) -> bool:
        """Apply the mismatch thresholds: warn, skip (returns True) or halt."""
        problems = mm.breaches(mismatch, self.spec.mismatch)
        if not problems:
            return False
        action = self.spec.mismatch.action
        message = f"step {step + 1}: train/rollout mismatch: {'; '.join(problems)}"
        if action == "halt":
            raise TrainingHalted(f"{message} (mismatch.action=halt)")
        tail = "; batch masked out of the loss" if action == "skip" else ""
        self.log(f"{message}{tail}")
        return action == "skip"

    # -- TRL's reward function ----------------------------------------------------------------------
    def reward_func(self):
        """The verifier's reward, carried from the rollout; also reports the step's metrics via log_metric."""

        def verifier(prompts, completions, coevo_reward, log_metric=None, **_) -> list[float | None]:
            if log_metric is not None:
                for name, value in self.stats.items():
                    log_metric(name, value)
            return coevo_reward

        return verifier


def rollout_policy(model_dir: Path, spec: TrainSpec, log_dir: Path | None = None, device: str = "auto"):
    """The engine that samples a training's episodes (`spec.rollout_policy`): coevo's local decoder, or a
    vLLM server (its log in `log_dir`)."""
    dtype = {"fp32": "float32", "bf16": "bfloat16"}[spec.rollout_dtype]
    if spec.rollout_policy.backend == "vllm":
        from coevo.vllm.policy import VLLMPolicy

        return VLLMPolicy(model_dir, dtype=dtype, **{"seed": spec.seed, "log_dir": log_dir,
                                                     **spec.rollout_policy.options})
    from coevo.policy.hf import HFPolicy

    return HFPolicy(model_dir, device=device, dtype=dtype)


def rows_from_trajectories(trajectories: list[Trajectory], pad_id: int) -> dict[str, list]:
    """TRL's rows: token buffer as completion, completion_mask as env_mask. A trajectory without tokens (a
    boundary failure before the first prompt) becomes a one-token placeholder that the loss never sees."""
    rows: dict[str, list] = {"prompt_ids": [], "completion_ids": [], "logprobs": [], "env_mask": []}
    for t in trajectories:
        empty = not t.completion_ids
        rows["prompt_ids"].append(list(t.prompt_ids) or [pad_id])
        rows["completion_ids"].append([pad_id] if empty else list(t.completion_ids))
        rows["logprobs"].append([0.0] if empty else list(t.logprobs))
        rows["env_mask"].append([0] if empty else list(t.completion_mask))
    return rows


def loss_region_drift(t: Trajectory, ids: list[int], mask: list[int], sampled: dict[str, set]) -> int:
    """Tokens in the loss region (mask 1) of what goes to TRL that are not exactly what the policy sampled:
    each maximal run of mask-1 tokens must be one whole sampled completion of this task, and together they
    must be the trajectory's model tokens."""
    runs = mm.model_runs(ids, mask)
    # A served agent's calls do not say which task they serve: those completions are filed under "".
    bad = sum(len(r) for r in runs if tuple(r) not in sampled.get(t.task, ()) and tuple(r) not in sampled.get("", ()))
    region = [tok for r in runs for tok in r]
    return bad if region == t.model_tokens else max(bad, len(region), len(t.model_tokens))


def reward_of(t: Trajectory, kind: str) -> float | None:
    """The verifier's reward (`binary`: 1 on success; `partial`: mean check credit). None for a boundary
    failure (sandbox / policy error): TRL leaves such a row out of its group's baseline (advantage 0)."""
    if t.status in FAILURE_STATUSES:
        return None
    return float(passed(t)) if kind == "binary" else credit(t)


def no_signal_groups(rewards: list[float | None], group_size: int) -> list[int]:
    """Indices of groups whose scored rewards are all equal: zero advantage, no learning signal."""
    out = []
    for g in range(len(rewards) // group_size):
        scored = {r for r in rewards[g * group_size: (g + 1) * group_size] if r is not None}
        if len(scored) <= 1:
            out.append(g)
    return out


def episode_stats(trajectories: list[Trajectory], rewards: list[float | None]) -> dict[str, float]:
    scored = [r for r in rewards if r is not None]
    mean = sum(scored) / len(scored) if scored else 0.0
    std = math.sqrt(sum((r - mean) ** 2 for r in scored) / len(scored)) if scored else 0.0
    n = max(1, len(trajectories))
    drifts = [t.drift or 0 for t in trajectories]
    model_tokens = sum(sum(t.completion_mask) for t in trajectories)
    return {
        "reward/mean": mean, "reward/std": std,
        "pass_rate": sum(passed(t) for t in trajectories) / n,
        "episodes/failed": float(sum(t.status in FAILURE_STATUSES for t in trajectories)),
        "episodes/submitted_frac": sum(t.status == "submitted" for t in trajectories) / n,
        "episodes/mean_turns": sum(t.turns for t in trajectories) / n,
        "tokens/model": float(model_tokens),
        "tokens/env": float(sum(len(t.completion_mask) for t in trajectories) - model_tokens),
        "tokens/prompt": float(sum(len(t.prompt_ids) for t in trajectories)),
        "drift/mean": sum(drifts) / n, "drift/max": float(max(drifts, default=0)),
        "drift/episodes": float(sum(d > 0 for d in drifts)),
    }
