"""`TrainSpec`: every setting of the inner loop, as data. A search space sets a field as `train.<field>`
(`train.mismatch.<field>` for the mismatch watch); `TrainSpec.with_overrides` applies dotted overrides
through coevo.config, like every other config.

Fields named like TRL's `GRPOConfig` options pass through unchanged; `trl` takes any other GRPOConfig
option. Importing this module is cheap (no torch, no TRL).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from coevo.config import apply_overrides, validate
from coevo.errors import ConfigError
from coevo.train.lora import LoraSpec


class TrainSpecError(ConfigError, ValueError):
    """A training spec (file, config section or override) is invalid. Also a ValueError: the trainer's callers caught ValueError
    for a bad spec before this class existed."""


class MismatchSpec(BaseModel):
    """Thresholds on the train/rollout logprob mismatch, checked on every step's rollouts."""

    model_config = ConfigDict(extra="forbid")

    action: Literal["warn", "skip", "halt"] = "warn"
    """On a breach: `warn` logs it; `skip` masks the whole batch out of the loss; `halt` stops the run with an
    error (the last checkpoint stays)."""
    min_pearson: float = Field(0.9, ge=-1, le=1)
    """Breach when the Pearson correlation of trainer and rollout logprobs (model tokens) falls below this."""
    max_mean_abs_diff: float = Field(0.1, ge=0)
    """Breach when the mean |trainer - rollout| logprob over model tokens exceeds this."""
    max_kl: float = Field(0.05, ge=0)
    """Breach when the approximate KL(rollout || trainer) per model token (k3 estimator) exceeds this."""


TRL_FIELDS = ("learning_rate", "lr_scheduler_type", "warmup_steps", "weight_decay", "max_grad_norm", "loss_type",
              "beta", "epsilon", "epsilon_high", "scale_rewards", "num_iterations", "importance_sampling_level",
              "mask_truncated_completions", "off_policy_mask_threshold")
"""TrainSpec fields that are TRL `GRPOConfig` options of the same name and meaning: passed through as they are
(coevo.train.grpo.grpo_config); tests/test_grpo.py checks each is still a GRPOConfig field."""


class RolloutPolicy(BaseModel):
    """`backend` plus the backend's own options (coevo.vllm.policy.VLLMPolicy's: base_url, python,
    max_model_len, kv_cache_gb, extra_args, ...)."""

    model_config = ConfigDict(extra="allow")

    backend: Literal["hf", "vllm"] = "hf"

    @property
    def options(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class TrainSpec(BaseModel):
    """One inner-loop run, whatever trains in it: GRPO (batch shape, TRL loss options, reward, mismatch watch,
    checkpoints), self-SFT on verified successes and its harvest, oracle replay, LoRA; and the weights
    channel's mode (coevo.train.weights) choosing among them. (It was `GRPOSpec` until it grew past GRPO.)"""

    model_config = ConfigDict(extra="forbid")

    steps: int = Field(20, ge=1)
    """Total optimizer steps of the run (a resumed run continues up to this count)."""
    group_size: int = Field(4, ge=2)
    """Episodes per task per step (TRL `num_generations`): the GRPO group whose rewards are compared."""
    tasks_per_step: int = Field(4, ge=1)
    """Distinct tasks per step; one step rolls out tasks_per_step * group_size episodes."""
    micro_batch_size: int | None = Field(None, ge=1)
    """Episodes per forward/backward pass (gradients accumulate to one optimizer step); None: all at once.
    Must divide tasks_per_step * group_size."""
    learning_rate: float = Field(1e-4, gt=0)
    """AdamW peak learning rate."""
    lr_scheduler_type: Literal["constant", "constant_with_warmup", "linear", "cosine"] = "constant"
    """Learning-rate schedule over `steps` (transformers' names)."""
    warmup_steps: int = Field(0, ge=0)
    """Linear warmup steps (schedules with warmup)."""
    weight_decay: float = Field(0.0, ge=0)
    """AdamW decoupled weight decay."""
    max_grad_norm: float = Field(1.0, gt=0)
    """Gradient clipping norm."""
    loss_type: Literal["grpo", "bnpo", "dr_grpo", "dapo", "cispo", "sapo", "luspo", "vespo"] = "dapo"
    """TRL GRPO loss aggregation (`dapo`: token-level over the whole batch)."""
    beta: float = Field(0.0, ge=0)
    """KL penalty toward the starting model (0: no reference model is loaded)."""
    epsilon: float = Field(0.2, gt=0)
    """PPO-style clipping range of the importance ratio."""
    epsilon_high: float | None = Field(None, gt=0)
    """Upper clipping range (DAPO's clip-higher); None: same as epsilon."""
    scale_rewards: Literal["group", "batch", "none"] = "group"
    """Divide advantages by the group's reward std (`group`), the batch's (`batch`), or not (`none`)."""
    num_iterations: int = Field(1, ge=1)
    """Optimizer passes over each step's rollouts (TRL's mu); >1 makes later passes off-policy."""
    importance_sampling_level: Literal["token", "sequence"] = "token"
    """Importance ratio per token (GRPO) or per sequence (GSPO)."""
    mask_truncated_completions: bool = False
    """Leave episodes that did not end on a stop token (limits, cut replies) out of the loss."""
    off_policy_mask_threshold: float | None = Field(None, gt=0)
    """Drop negative-advantage episodes whose mean KL(rollout || trainer) passes this (DeepSeek-V3.2 OPSM)."""
    temperature: float | None = Field(None, gt=0)
    """Sampling temperature of training rollouts; None: the harness's `decoding.temperature` (> 0)."""
    reward: Literal["binary", "partial"] = "binary"
    """`binary`: the verifier's reward; `partial`: the mean of its per-check credits (reward.json)."""
    drop_no_signal_groups: bool = False
    """Mask groups whose rewards are all equal (zero advantage) out of the loss and its token count."""
    screen_samples: int = Field(0, ge=0)
    """Before step 1, roll out every task this many times and train only on the families whose episodes
    disagree (coevo.train.screen); 0: train on every task. Groups of never- or always-solved families carry
    no signal."""
    fresh_instances: bool = False
    """Train on never-seen instances of the (screened) tasks' families, drawn from their generated suite, one
    per task slot of the run, instead of on the tasks themselves (coevo.train.fresh). With 9 instances per
    family the tiny model memorises them: +20 points on its own train tasks, none on new instances."""
    rollout_dtype: Literal["fp32", "bf16"] = "fp32"
    """Precision of the rollout copy of the model (training stays fp32); bf16 shows a real mismatch on CPU."""
    rollout_policy: RolloutPolicy = Field(default_factory=lambda: RolloutPolicy())
    """The engine that samples rollouts and harvests: hf, coevo's KV-cached decoder in this process (the
    CPU default), or vllm, a vLLM server (coevo.vllm) that gets the trainer's weights after every step. A
    search config's `policy: {backend: vllm, ...}` sets it for every training of the run."""
    routing_replay: bool = False
    """Mixture-of-Experts models only (an error on a dense one): the training forward (GRPO's loss and the
    mismatch watch) takes the experts each sampled token's rollout step chose, with routing weights still from
    the live router (R3; coevo.train.routing). Turn it on when the rollout's routing flips in training
    (`routing/flip_frac`, logged for every MoE run), e.g. under a bf16 rollout copy."""
    mismatch: MismatchSpec = MismatchSpec()
    """Train/rollout logprob mismatch thresholds and what a breach does."""
    max_minutes: float | None = Field(None, gt=0)
    """Wall-time budget of one call: stop, with a checkpoint, after the step that passes it; None: none."""
    save_steps: int = Field(1, ge=1)
    """Write a checkpoint every this many steps (and at the last step)."""
    keep_checkpoints: int = Field(2, ge=1)
    """Checkpoints kept; older ones are deleted only after a newer one is complete."""
    save_rollouts: bool = True
    """Write each step's trajectories to RUN_DIR/rollouts/step-N.jsonl."""
    seed: int = 0
    """Seed of data order, initialisation and rollout sampling (each step samples with seed + step)."""
    report_to: Literal["auto", "none", "mlflow"] = "auto"
    """`auto`: MLflow when MLFLOW_TRACKING_URI is set or an MLflow run is active, else none."""
    mode: Literal["rl", "sft", "auto"] = "rl"
    """`rl`: GRPO; `sft`: fine-tune on the model's own verified successes (coevo.train.harvest); `auto`:
    harvest first, then GRPO on the frontier when it has at least `min_frontier` tasks, else self-SFT."""
    harvest_samples: int = Field(4, ge=1)
    """Episodes per task of the harvest (sft, auto): pass@k's k."""
    gap_weight: int = Field(2, ge=1)
    """Distinct successes kept of a task solved in some samples but not all (one of a task solved in all)."""
    min_frontier: int | None = Field(None, ge=1)
    """`auto`: frontier tasks GRPO needs; None: tasks_per_step."""
    sft_epochs: float = Field(2.0, gt=0)
    """Self-SFT passes over the harvested examples."""
    sft_learning_rate: float = Field(1e-3, gt=0)
    """Self-SFT peak learning rate (cosine schedule)."""
    sft_batch_size: int = Field(8, ge=1)
    """Self-SFT conversations per optimizer step. A nested trial's few examples (16 at 2 epochs) get 8 steps
    at 4 instead of 4 at 8, for the same compute."""
    replay_ratio: float = Field(0.0, ge=0)
    """Self-SFT: oracle demonstrations replayed per own success (each task's solution played under the same
    harness, tasks the model did not solve first), so that a few successes do not erase what the warm start
    taught; 0: own successes only."""
    replay_min: int = Field(0, ge=0)
    """Self-SFT: at least this many oracle demonstrations, own successes or not. A model as shipped that
    solves nothing yet still learns the harness's action format from verified oracle episodes rendered
    under that very harness (a harness-aware warm start); 0: replay_ratio alone decides."""
    # The two free-form sections: under them the rest of a dotted path is one key.
    trl: dict[str, Any] = {}
    """Any other TRL `GRPOConfig` option, passed through as is (e.g. {"top_entropy_quantile": 0.2})."""
    lr_multipliers: dict[str, Annotated[float, Field(gt=0)]] = {}
    """Learning-rate multiplier per parameter-name pattern (fnmatch), e.g. {"model.norm.*": 50}: the first
    matching pattern wins, other parameters train at `learning_rate`. Every pattern must match a parameter.
    GRPO's first gain on a small model is sharpening the output distribution; the final norm's gain is
    its temperature, and at a rate safe for the rest of the model it moves too slowly for a short run."""
    lora: LoraSpec = LoraSpec()
    """LoRA adapters (coevo.train.lora) for GRPO and self-SFT; `lora.rank` 0 (the default): full weights.
    Checkpoints stay plain model folders (adapter merged in; the adapter itself in their adapter/)."""

    def with_overrides(self, overrides: dict[str, Any]) -> TrainSpec:
        """A new validated spec with dotted fields replaced: {"beta": 0.01, "mismatch.action": "skip"};
        under `trl` and `lr_multipliers` the rest of the path is one key ("lr_multipliers.model.norm.weight")."""
        data = apply_overrides(self.model_dump(), overrides, TrainSpec, TrainSpecError)
        return spec_from_dict(data, source="training spec with overrides")

    @property
    def batch_size(self) -> int:
        """Episodes per step."""
        return self.tasks_per_step * self.group_size


def spec_from_dict(data: dict[str, Any], source: str) -> TrainSpec:
    """Validate a spec mapping; errors name `source` and each bad field with what is valid."""
    spec = validate(TrainSpec, data, source, TrainSpecError)
    if spec.micro_batch_size is not None and spec.batch_size % spec.micro_batch_size:
        raise TrainSpecError(f"{source}: micro_batch_size={spec.micro_batch_size} must divide tasks_per_step * "
                            f"group_size = {spec.batch_size}")
    return spec
