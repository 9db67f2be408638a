"""The search config (`coevo search CONFIG.yaml`) and the plan that its one `budget` dial sets.

    name: quickstart
    tasks: tasks
    harness: harnesses/terminus_json.yaml
    space: search_spaces/default.yaml
    schedule: "w0 -> h -> w -> h"
    budget: 1.0

Everything else has a default: the tiny model is built into the run folder when `model` is empty, the
Optuna and MLflow stores are sqlite files in `runs/<name>/`, sandboxes are local. Relative paths are
resolved against the config file's folder's parent when the file lives in `search_spaces/` or
`configs/`, else against the file's folder, so a config works from any working directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from coevo.config import read_mapping, validate
from coevo.search.errors import SearchError
from coevo.train.warmstart import default_augment


class Plan(BaseModel):
    """What the budget buys. Every field may be set in the config's `plan:` section; unset ones follow
    from `budget` (see `make_plan`)."""

    model_config = ConfigDict(extra="forbid")
    trials: int | None = Field(None, ge=1)
    """Finished (complete or pruned) Optuna trials per h-phase."""
    train_trials: int | None = Field(None, ge=1)
    """GRPO runs per w-phase when the space has train.* keys (1: the config's options only)."""
    grpo_steps: int | None = Field(None, ge=1)
    """GRPO optimizer steps per w-phase."""
    inner_grpo_steps: int | None = Field(None, ge=0)
    """GRPO optimizer steps in each nested trial (and each weights-arm training) after its LoRA SFT, on the
    same adapter under the trial's harness (coevo/search/inner.py); 0: SFT only."""
    warmstart_epochs: float | None = Field(None, gt=0)
    """SFT passes over the oracle conversations in w0."""
    warmstart_harnesses: int | None = Field(None, ge=0)
    """Harnesses besides the base that w0 samples from the space and deals its demonstrations among, each
    then scored on the evolve set (the w0 robustness table, and the first trials of h1)."""
    warmstart_augment: int | None = Field(None, ge=0)
    """Extra generated instances per family that w0 also trains on (a suite from `coevo tasks generate`
    only; 0 for other task folders)."""
    dev_tasks: int | None = Field(None, ge=1)
    """Dev tasks each trial is scored on (a fixed, family-stratified subset; all when larger)."""
    test_tasks: int | None = Field(None, ge=1)
    """Held-out test tasks of the final table (family-stratified subset; all when larger)."""
    train_tasks: int | None = Field(None, ge=1)
    """Train tasks for w0 and GRPO (family-stratified subset; all when larger)."""
    batches: int | None = Field(None, ge=1)
    """Dev batches per trial; an intermediate pass rate is reported after each (pruning points)."""
    samples: int | None = Field(None, ge=1)
    """Episodes per task in every evaluation."""
    top_k: int | None = Field(None, ge=1)
    """Harnesses re-scored on each new checkpoint."""


class Splits(BaseModel):
    """The sizes and seed of the task roles beside the evolve set (dev, which `plan.dev_tasks` sizes)."""

    model_config = ConfigDict(extra="forbid")
    promotion: int = Field(60, ge=1)
    """Tasks that accept or reject a candidate: fresh instances of the trained families on a suite that
    `coevo tasks generate` wrote; on other folders, half of the dev tasks (then this is ignored)."""
    test: int = Field(200, ge=1)
    """In-distribution test tasks of the final table: fresh instances of the trained families (other
    folders: their test split). Held-out families are scored as a block of their own."""
    test_seed: int = 0
    """Seed of the test draw, apart from the run's seed, so that runs with other seeds share one test."""
    held_out: int | None = Field(None, ge=0)
    """Held-out-family tasks each final row is also scored on (family-stratified subset; 0: none, which
    a slow model may need; unset: all of them)."""


SEARCH_TRAIN_DEFAULTS = {"tasks_per_step": 4, "group_size": 4, "save_rollouts": False, "keep_checkpoints": 1}
"""Where a search's w-phase departs from `coevo train`'s TrainSpec defaults: small steps (one step is
tasks_per_step x group_size episodes on CPU), no rollout files, one checkpoint kept per phase."""

LORA_RANK = 8
"""The adapter rank of nested trials when `train.lora.rank` is 0 (a trial's weights are always an adapter)."""


class SearchConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    """Run name: the run folder is `<runs_dir>/<name>`; the MLflow experiment and Optuna studies use it."""
    model: Path | None = None
    """HF model folder or model name (`coevo model list`) to start from; empty: build the tiny model
    (coevo init-model) in the run folder."""
    tasks: Path = Path("tasks")
    """Task folder with train/dev/test splits (manifest.json)."""
    harness: Path = Path("harnesses/terminus_json.yaml")
    """Base harness: the baseline, and what every trial overrides."""
    space: Path = Path("search_spaces/default.yaml")
    """Search space (dotted harness paths and train.* GRPO options)."""
    schedule: str = "w0 -> h -> w -> h"
    """Phases: w0 warm start (SFT on oracle episodes), h harness search on dev, w GRPO on train, n nested
    trials (each harness scored with a LoRA adapter trained under it)."""
    budget: float = Field(1.0, gt=0)
    """The one dial: trials, task subsets, GRPO steps and warm-start epochs follow from it."""
    plan: Plan = Plan()
    """Explicit values that win over what `budget` gives."""
    seed: int = 0
    """Seeds sampling, TPE, task subsets, training and bootstrap intervals."""
    runs_dir: Path = Path("runs")
    """Parent folder of run folders."""
    storage: str | None = None
    """Optuna storage (any SQLAlchemy URL); empty: sqlite:///<run folder>/optuna.db."""
    tracking_uri: str | None = None
    """MLflow tracking URI; empty: sqlite:///<run folder>/mlflow.db with artifacts in <run folder>/mlartifacts."""
    sandbox: Literal["local", "docker", "auto"] = "local"
    """Sandbox backend for every episode: local (bubblewrap over the host's userland), docker (an image per
    task, built once from environment/; COEVO_IMAGE_MAP points FROM names at local images on machines that
    cannot pull), or auto (docker for a task whose Dockerfile needs a build or that names docker_image,
    local otherwise; an error naming how to start a daemon when one is needed and none answers)."""
    policy: dict[str, Any] | None = None
    """Empty: the current checkpoint as a local HF policy. Else a coevo.policy spec, e.g. {backend: oracle}
    (the model is then not what is measured; useful for tests and benchmarks)."""
    train: dict[str, Any] = Field(default_factory=lambda: dict(SEARCH_TRAIN_DEFAULTS))
    """TrainSpec options for every w-phase (train.* keys of the space override them per trial). The
    options given here are laid over SEARCH_TRAIN_DEFAULTS; TrainSpec's own defaults fill in the rest."""
    overrides: dict[str, Any] = {}
    """Fixed dotted-path overrides applied to the base harness before anything runs."""
    splits: Splits = Splits()
    """Promotion and test sizes (the evolve set is the dev subset of `plan.dev_tasks`)."""
    margin: float = Field(0.0, ge=0)
    """The ratchet promotes a candidate when it wins more promotion tasks than it loses and the lower
    bound of its paired 95% interval is above this margin."""
    arms: bool = True
    """Run the fair single-lever arms (harness-only: the run's h-trial budget on generation 0;
    weights-only: its GRPO steps from generation 0 under the base harness). Off: the table says so."""
    greedy: bool = True
    """Score every pair with greedy decoding (training still samples): the harness lever then cannot be
    a copy of the weights lever's sharpening. A space may search decoding.* only with greedy: false."""
    objective: Literal["pass_at_1", "mean_reward"] = "pass_at_1"
    """What trials maximise and the incumbent test compares per task: pass@1, or the verifiers' partial
    credit (mean of reward.json checks; a signal where a weak model passes nothing yet)."""
    sampler: Literal["tpe", "random"] = "tpe"
    """Optuna sampler of h-phases: multivariate TPE, or random search (for comparison)."""
    pruning: bool = True
    """Median pruning of h-phase trials on partial dev batches."""
    heartbeat_interval: int = Field(5, ge=1)
    """Seconds between Optuna trial heartbeats; a killed trial is retried once stale."""
    grace_period: int = Field(15, ge=2)
    """Seconds without a heartbeat after which a RUNNING trial counts as dead."""
    traces: int = Field(4, ge=0)
    """Episodes of each evaluation (trial, re-score, harvest, test row) recorded as MLflow traces, drawn
    with the seed, failures first; the final table's rows also record every failed episode. 0: none."""

    @field_validator("train", mode="before")
    @classmethod
    def _over_search_defaults(cls, value: Any) -> Any:
        return {**SEARCH_TRAIN_DEFAULTS, **value} if isinstance(value, dict) else value

    @model_validator(mode="after")
    def _store_urls(self) -> SearchConfig:
        # After the fields, not per field: a field's error would echo the URL, password and all.
        from coevo.search.stores import check_url

        if self.storage:
            check_url("storage", self.storage)
        if self.tracking_uri:
            check_url("tracking_uri", self.tracking_uri)
        return self

    @property
    def run_dir(self) -> Path:
        return self.runs_dir / self.name

    @property
    def source(self) -> str:
        """The file it was read from, for messages about its fields (else its name)."""
        return self._source or f"search config '{self.name}'"

    def vllm_defaults(self) -> dict[str, Any]:
        """What every vLLM policy of the search shares unless `policy` says otherwise, so that scoring and
        training run on one server: its log in the run folder, and the smallest --max-lora-rank that holds
        the run's adapters (on vLLM's CPU build LoRA's cost grows with it)."""
        from coevo.vllm.server import lora_rank_for

        rank = (self.train.get("lora") or {}).get("rank") or LORA_RANK
        return {"log_dir": str(self.run_dir), "max_lora_rank": lora_rank_for(rank)}

    _source: str = PrivateAttr("")


def load_config(path: str | Path, **overrides: Any) -> SearchConfig:
    """Read a config file; relative paths resolve against the repository-like root it sits in."""
    from coevo.errors import CoevoError

    path = Path(path)
    data = read_mapping(path, "search config", SearchConfig, SearchError)
    data.setdefault("name", path.stem)
    data.update({k: v for k, v in overrides.items() if v is not None})
    config = validate(SearchConfig, data, str(path), SearchError)
    try:
        config = resolve_paths(config, _root_of(path))
    except CoevoError as e:  # the model name: coevo.models says what is valid, this says where it was written
        raise SearchError(f"{path}: field 'model': {e}") from None
    config._source = str(path)
    return config


def _root_of(path: Path) -> Path:
    folder = path.resolve().parent
    return folder.parent if folder.name in ("search_spaces", "configs") else folder


def resolve_paths(config: SearchConfig, root: Path) -> SearchConfig:
    def fix(p: Path | None) -> Path | None:
        return None if p is None or p.is_absolute() else (root / p)

    updates = {k: fix(getattr(config, k)) for k in ("tasks", "harness", "space")}
    if config.model is not None:  # a folder (relative to the root) or a model name (coevo model list)
        from coevo.models import resolve_model

        updates["model"] = resolve_model(config.model, base=root)
    updates["runs_dir"] = config.runs_dir if config.runs_dir.is_absolute() else Path.cwd() / config.runs_dir
    return config.model_copy(update={k: v for k, v in updates.items() if v is not None})


def make_plan(config: SearchConfig, n_train: int, n_dev: int, n_test: int, n_train_params: int) -> Plan:
    """Everything the budget sets; cost grows about linearly with it. Budget 1 on the bundled suite
    (171 / 57 / 58 tasks): w0 = 48 train tasks + `default_augment` (60) generated instances per family
    x 4 epochs, 6 trials per h-phase on 16 dev tasks in 4 batches, 6 GRPO steps per w-phase, the
    incumbent and the best other harness re-scored after it, the whole test split at the end."""
    b = config.budget
    derived = Plan(
        trials=max(3, round(6 * b)),
        train_trials=max(1, round(2 * b)) if n_train_params else 1,
        grpo_steps=max(2, round(6 * b)),
        inner_grpo_steps=0,
        warmstart_epochs=max(1.0, round(4 * b, 1)),
        warmstart_augment=round(default_augment(config.tasks) * b),
        warmstart_harnesses=round(4 * b),
        dev_tasks=min(n_dev, max(8, round(16 * b))),
        test_tasks=max(n_test, config.splits.test),  # all: `coevo eval --bundle` then sees the same tasks
        train_tasks=min(n_train, max(16, round(48 * b))),
        batches=4 if config.pruning else 1,
        samples=1,
        top_k=max(1, min(4, round(2 * b) - 1)),
    )
    explicit = config.plan.model_dump(exclude_none=True)
    return derived.model_copy(update=explicit)


def dump_config(config: SearchConfig) -> str:
    return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)
