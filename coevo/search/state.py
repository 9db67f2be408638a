"""What a search has done so far, in `runs/<name>/state.json`: written atomically after every step, so
`coevo search --resume` skips finished work (Optuna's storage holds the trials themselves)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, field_validator, model_validator

from coevo.evaluate.stats import PairedGain

TRIAL_ATTRS = ("per_task", "pass_at_1", "ci_low", "ci_high", "mlflow_run", "failures", "fingerprint")
"""The Pair fields an Optuna trial keeps as user attrs (the rest come from its params and its phase)."""


class Pair(BaseModel):
    """One (harness, checkpoint) pair scored on a split."""

    overrides: dict[str, Any] = {}
    """Dotted harness overrides on top of the base harness ({} is the base harness)."""
    train: dict[str, Any] = {}
    """GRPO options the checkpoint was trained with (train.* of the space)."""
    checkpoint: str
    """HF model folder."""
    generation: int
    """How many w-phases produced the checkpoint (0: the warm start or the given model)."""
    source: str
    """Where the pair comes from: 'baseline', 'h1 #4', 'rescore w1', ..."""
    score: float = 0.0
    """The search's objective (pass@1 or mean partial credit) on the split: what trials maximise."""
    pass_at_1: float = 0.0
    ci_low: float = 0.0
    ci_high: float = 0.0
    """95% bootstrap interval of pass@1."""
    per_task: dict[str, float] = {}
    """The objective per task: what the paired bootstrap resamples."""
    mlflow_run: str | None = None
    fingerprint: str = ""
    """The scoring harness's fingerprint (coevo/harness/fingerprint.py)."""
    failures: dict[str, int] = {}
    """Failed episodes of the evaluation by cause (coevo/search/failures.py)."""
    trial: int | None = None
    study: str | None = None

    def brief(self) -> str:
        """pass@1 with its interval, and the objective when it is not pass@1 (one line of the run's log)."""
        text = f"pass@1 {self.pass_at_1:.3f} [{self.ci_low:.3f}, {self.ci_high:.3f}]"
        return text if self.score == self.pass_at_1 else f"{text}, objective {self.score:.3f}"

    @property
    def key(self) -> str:
        """What makes two pairs the same pair: the harness overrides and the checkpoint. The exact text is
        on disk (state.json's promotion cache and test rows), so it never changes."""
        return repr((sorted(self.overrides.items()), self.checkpoint))

    def to_trial_attrs(self) -> dict[str, Any]:
        """The user attrs a trial that scored this pair keeps (`from_trial` reads them back)."""
        return self.model_dump(include=set(TRIAL_ATTRS))

    @classmethod
    def from_trial(cls, trial, overrides: dict[str, Any], checkpoint: str, generation: int, source: str,
                   train: dict[str, Any] | None = None) -> Pair:
        """A finished trial as a Pair: its scores from its user attrs (a seeded trial's own `source` attr
        wins over `source`); the harness and checkpoint are the caller's, from the params and the phase."""
        attrs = trial.user_attrs
        return cls(overrides=overrides, train=train or {}, checkpoint=checkpoint, generation=generation,
                   source=attrs.get("source", source), score=trial.value, trial=trial.number,
                   **{k: attrs[k] for k in TRIAL_ATTRS if k in attrs})


class Record(BaseModel):
    """A typed entry of state.json that still reads like the dict it used to be (`h["phase"]`,
    `h.get("error")`), because plots.py and the tests were written against the dicts; new code reads the
    attributes."""

    def __getitem__(self, name: str) -> Any:
        if name not in type(self).model_fields:
            raise KeyError(name)
        return getattr(self, name)

    def __contains__(self, name: str) -> bool:
        return name in type(self).model_fields

    def get(self, name: str, default: Any = None) -> Any:
        return getattr(self, name) if name in type(self).model_fields else default


class Decided(Record):
    """One entry of the run's history (the ratchet log): a decision, and the incumbent after it."""

    phase: str
    """Who decided: start, h1, w1, n1, 'arm harness-only', ..."""
    generation: int
    challenger: str
    """The candidate's source."""
    accepted: bool
    gain: float
    gain_low: float
    gain_high: float
    """The candidate's paired gain over the incumbent on the promotion tasks, with its 95% interval."""
    wins: int = 0
    losses: int = 0
    ties: int = 0
    error: str | None = None
    """Why the candidate was not compared (then it was rejected)."""
    incumbent: str
    """The incumbent's source after the decision; the scores below are its evolve scores."""
    score: float
    pass_at_1: float
    ci_low: float
    ci_high: float

    @model_validator(mode="before")
    @classmethod
    def _older(cls, data: Any) -> Any:
        # Histories written before the objective existed hold pass@1 only: it was the objective.
        if isinstance(data, dict) and "score" not in data and "pass_at_1" in data:
            data = {**data, "score": data["pass_at_1"]}
        return data


class Budget(Record):
    """What a fair arm spent of its lever, in which unit, and its wall time."""

    unit: str
    budget: int | None = None
    """None until the arm has run (its unit is written first, when it differs from the default)."""
    wall_seconds: float | None = None


class Focus(Record):
    """An h-phase's start: the incumbent's failures on the evolve set by cause, and what was enqueued."""

    failures: dict[str, int] = {}
    focus: str | None = None
    """The cause the focused trials address (None: nothing to address)."""
    trials: int = 0
    """Trials enqueued for it (they count towards the phase's trials)."""


class Summary(Record):
    """An evaluation's summary as the final table keeps it (coevo.outcomes.SUMMARY_METRICS)."""

    pass_at_1: float = 0.0
    ci_low: float = 0.0
    ci_high: float = 0.0
    mean_reward: float = 0.0
    mean_turns: float = 0.0
    format_error_rate: float = 0.0
    timeouts: int = 0
    mean_tokens: float = 0.0
    episodes: int = 0


class HeldOut(Summary):
    """A row's held-out block: the same pair on the held-out families, reported apart."""

    per_task: dict[str, float] = {}
    score: float = 0.0


class TableRow(Summary, Pair):
    """One row of the final table: the pair, its test summary, its paired gain over the baseline and its
    held-out block. Identical pairs share one evaluation (`same_as` names the row that scored it)."""

    same_as: str | None = None
    gain: float = 0.0
    gain_low: float = 0.0
    gain_high: float = 0.0
    """Paired gain over the baseline in the objective, with its 95% interval (set by `conclude`)."""
    held_out: HeldOut | None = None


class Verdict(Record):
    """What the final table concludes (coevo/search/final.py `conclude`)."""

    effects: dict[str, tuple[float, float, float]]
    """The 2x2's delta_h, delta_m and interaction: (mean, low, high)."""
    versus: dict[str, PairedGain] = {}
    """Per fair arm: co-evolved's paired gain over it (gain, low, high, wins, losses, ties)."""
    beats_both_arms: bool = False
    warnings: list[str] = []


class Step(BaseModel):
    """A finished unit of work inside a phase (so a resumed phase skips it)."""

    key: str
    data: dict[str, Any] = {}


class RunState(BaseModel):
    parent_run: str | None = None
    """MLflow id of the search's parent run."""
    phases_done: int = 0
    """Phases of the schedule finished (the next one to run is schedule[phases_done])."""
    phase_runs: dict[str, str] = {}
    """Phase name (w0, h1, w1, ...) -> MLflow run id."""
    checkpoints: list[str] = []
    """checkpoints[g]: the model of generation g."""
    baseline: Pair | None = None
    """The base harness on the generation-0 checkpoint, scored on dev."""
    incumbent: Pair | None = None
    """The accepted pair: it changes only when a challenger beats it beyond the noise band."""
    pool: list[Pair] = []
    """Top-k harnesses of the latest h-phase, re-scored after every w-phase."""
    steps: list[Step] = []
    """Finished steps of the current phase; cleared when the phase ends."""
    history: list[Decided] = []
    """Per phase: generation, incumbent dev pass@1 with CI, and what happened (accepted or not)."""
    promotion: dict[str, dict[str, float]] = {}
    """Per-task promotion scores of every pair the ratchet compared (key: overrides and checkpoint)."""
    arms: dict[str, Pair] = {}
    """The fair single-lever arms' results: 'harness-only' and 'weights-only'."""
    budgets: dict[str, Budget] = {}
    """Each arm's budget (how much of its lever it spent, in which unit) and its wall time."""
    timings: dict[str, float] = {}
    """Wall seconds of each finished phase (w0, h1, w1, ..., arms, test)."""
    failures: dict[str, Focus] = {}
    """Per h-phase: the incumbent's failure clusters on the evolve set, the focus cause, trials enqueued."""
    trained: dict[str, str] = {}
    """Per w-phase: what the weights trained on and what was dropped, in words."""
    importances: dict[str, dict[str, float]] = {}
    """Optuna's parameter importances per h-phase: which harness dimensions mattered."""
    curriculum: list[dict[str, Any]] = []
    """One record per refresh of the evolve set: generation, retired and added task names, the folder
    (written by curriculum.py as a dict)."""
    test: dict[str, TableRow] = {}
    """Final table: row name -> its pair, test summary and held-out block."""
    verdict: Verdict | None = None
    """The 2x2's effects, co-evolved against each fair arm, whether it beats both, and warnings."""
    done: bool = False

    @field_validator("verdict", mode="before")
    @classmethod
    def _no_verdict(cls, value: Any) -> Any:
        return value or None  # state.json files written before the verdict was typed hold {} for none

    def step(self, key: str) -> Step | None:
        return next((s for s in self.steps if s.key == key), None)


class Ledger:
    """A run's `RunState` and its file: every change is saved as it happens, so a kill loses at most the
    step in progress."""

    def __init__(self, path: Path):
        self.path = path
        self.state = load_state(path)

    def save(self) -> None:
        save_state(self.path, self.state)

    def step(self, key: str) -> Step | None:
        return self.state.step(key)

    def memo(self, key: str, compute: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """A resumable step of the current phase: the data `key` finished with, or else `compute()`'s,
        recorded (and saved) before it is returned, so a resumed phase never does the step twice."""
        done = self.step(key)
        if done is None:
            done = Step(key=key, data=compute())
            self.state.steps.append(done)
            self.save()
        return done.data

    def memo_pair(self, key: str, compute: Callable[[], Pair]) -> Pair:
        """`memo` of a step whose result is one pair (kept in state.json as the step's `pair`)."""
        return Pair.model_validate(self.memo(key, lambda: {"pair": compute().model_dump()})["pair"])

    @property
    def generation(self) -> int:
        """How many w-phases the newest checkpoint is from generation 0."""
        return max(0, len(self.state.checkpoints) - 1)

    @property
    def checkpoint(self) -> str | None:
        """The newest checkpoint (None before generation 0 exists)."""
        return self.state.checkpoints[-1] if self.state.checkpoints else None


def load_state(path: Path) -> RunState:
    from pydantic import ValidationError

    from coevo.search.errors import SearchError

    if not path.exists():
        return RunState()
    try:
        return RunState.model_validate_json(path.read_bytes())
    except ValidationError as e:
        problem = "; ".join(f"{'.'.join(map(str, err['loc'])) or 'the file'}: {err['msg']}" for err in e.errors()[:3])
        raise SearchError(f"{path}: damaged ({problem}); coevo writes it whole or not at all, so something else "
                          "changed it: restore it from a backup, or start the search again under a new name "
                          "(its Optuna studies and MLflow runs are kept)") from None


def save_state(path: Path, state: RunState) -> None:
    """Write-then-rename: a kill -9 leaves the old state or the new one, never half of one."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(state.model_dump_json(indent=1))
    os.replace(tmp, path)
