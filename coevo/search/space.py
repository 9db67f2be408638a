"""Search spaces: a validated `SearchSpace` turns an Optuna trial into harness overrides and GRPO options.
Reading and checking a `search_spaces/*.yaml` file is `load_space` in space_check.py.

A space file maps dotted paths to distributions in Optuna's short format:

    templates.system: {type: categorical, choices: [system_terse.j2, system_verbose.j2]}
    decoding.temperature: {type: float, low: 0.2, high: 1.2}
    recovery.max_format_retries: {type: int, low: 0, high: 4, when: {recovery.format_error_feedback: true}}
    train.learning_rate: {type: float, low: 1.0e-5, high: 1.0e-3, log: true}

Keys are dotted fields of the Harness (coevo/harness/spec.py) or `train.<field>` of TrainSpec. `when` makes a
parameter conditional: it is sampled only when every named parameter has that value (or one of a list
of values); otherwise the base harness's value stays, or `otherwise` when given. The whole file is
checked before any trial runs, and every problem is reported at once, each naming file and key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

TYPES = ("float", "int", "categorical")
ENTRY_KEYS = {"type", "low", "high", "log", "step", "choices", "when", "otherwise"}
TRAIN_PREFIX = "train."
UNSET = object()
"""`otherwise` when a space entry has none (None is a valid `otherwise`)."""


@dataclass
class Param:
    path: str
    type: str
    low: float | int | None = None
    high: float | int | None = None
    log: bool = False
    step: float | int | None = None
    choices: list = field(default_factory=list)
    when: dict[str, Any] = field(default_factory=dict)
    otherwise: Any = UNSET

    @property
    def is_train(self) -> bool:
        return self.path.startswith(TRAIN_PREFIX)

    def distribution(self):
        from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

        if self.type == "categorical":
            return CategoricalDistribution(self.choices)
        if self.type == "int":
            return IntDistribution(int(self.low), int(self.high), log=self.log, step=int(self.step or 1))
        return FloatDistribution(float(self.low), float(self.high), log=self.log, step=self.step)

    def active(self, values: dict[str, Any]) -> bool:
        """Whether every `when` condition holds for the values sampled so far."""
        for path, want in self.when.items():
            wanted = want if isinstance(want, list) else [want]
            if path not in values or values[path] not in wanted:
                return False
        return True

    def samples(self) -> list:
        """Values that stand for the whole range when checking a field accepts them."""
        return list(self.choices) if self.type == "categorical" else [self.low, self.high]


@dataclass
class SearchSpace:
    source: str
    params: list[Param]
    """In dependency order: a parameter comes after those its `when` names."""

    @property
    def harness_params(self) -> list[Param]:
        return [p for p in self.params if not p.is_train]

    @property
    def train_params(self) -> list[Param]:
        return [p for p in self.params if p.is_train]

    def suggest(self, trial, params: list[Param] | None = None) -> dict[str, Any]:
        """Sample `params` (default: all) from an Optuna trial; inactive ones get `otherwise` if set."""
        values: dict[str, Any] = {}
        for p in self.params if params is None else params:
            if p.active(values):
                values[p.path] = _suggest(trial, p)
            elif p.otherwise is not UNSET:
                values[p.path] = p.otherwise
        return values

    def resolve(self, sampled: dict[str, Any]) -> dict[str, Any]:
        """A trial's sampled params plus the `otherwise` of those they leave inactive (= what `suggest` gave)."""
        values: dict[str, Any] = {}
        for p in self.params:
            if p.path in sampled and p.active(values):
                values[p.path] = sampled[p.path]
            elif not p.active(values) and p.otherwise is not UNSET:
                values[p.path] = p.otherwise
        return values

    def sample(self, n: int, seed: int, params: list[Param] | None = None) -> list[dict[str, Any]]:
        """`n` distinct draws of `params` (default: the harness's), uniformly at random and with `when` obeyed:
        what the warm start renders its demonstrations under. Fewer when the space holds fewer."""
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)  # not a line per throwaway study
        study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed))
        draws: list[dict[str, Any]] = []
        for _ in range(20 * n):
            values = self.suggest(study.ask(), self.harness_params if params is None else params)
            if values not in draws:
                draws.append(values)
            if len(draws) == n:
                break
        return draws

    def distributions(self, values: dict[str, Any]) -> dict:
        """Optuna distributions of the sampled (not `otherwise`) parameters among `values`."""
        active: dict[str, Any] = {}
        out = {}
        for p in self.params:
            if p.path in values and p.active(active):
                active[p.path] = values[p.path]
                out[p.path] = p.distribution()
        return out


SHORT = 32
"""Characters of a long text value that `describe` shows."""


def describe(values: dict[str, Any]) -> str:
    """Harness overrides in a line: the last part of each path, template names without `.j2`, and a long
    text (a native agent's template) as its first line, cut at SHORT characters."""
    def short(v):
        if not isinstance(v, str):
            return v
        text = v.strip()
        if len(text) <= SHORT and "\n" not in text:
            return v.removesuffix(".j2")
        return repr(text.splitlines()[0][:SHORT] + "…")

    return ", ".join(f"{k.rsplit('.', 2)[-2] if k.endswith('.enabled') else k.rsplit('.', 1)[-1]}={short(v)}"
                     for k, v in values.items()) or "base"


def split_overrides(values: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(harness overrides, TrainSpec fields) from sampled values."""
    harness = {k: v for k, v in values.items() if not k.startswith(TRAIN_PREFIX)}
    train = {k.removeprefix(TRAIN_PREFIX): v for k, v in values.items() if k.startswith(TRAIN_PREFIX)}
    return harness, train


def _suggest(trial, p: Param):
    if p.type == "categorical":
        return trial.suggest_categorical(p.path, p.choices)
    if p.type == "int":
        return trial.suggest_int(p.path, int(p.low), int(p.high), step=int(p.step or 1), log=p.log)
    return trial.suggest_float(p.path, float(p.low), float(p.high), step=p.step, log=p.log)
