"""Search spaces: `search_spaces/*.yaml` -> a validated `SearchSpace` that turns an Optuna trial into
harness overrides and GRPO options.

A space file maps dotted paths to distributions in Optuna's short format:

    templates.system: {type: categorical, choices: [system_terse.j2, system_verbose.j2]}
    decoding.temperature: {type: float, low: 0.2, high: 1.2}
    recovery.max_format_retries: {type: int, low: 0, high: 4, when: {recovery.format_error_feedback: true}}
    train.learning_rate: {type: float, low: 1.0e-5, high: 1.0e-3, log: true}

Keys are fields of the Harness (coevo/harness/spec.py) or `train.<field>` of GRPOSpec. `when` makes a
parameter conditional: it is sampled only when every named parameter has that value (or one of a list
of values); otherwise the base harness's value stays, or `otherwise` when given. The whole file is
checked before any trial runs, and every problem is reported at once, each naming file and key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from coevo.search.errors import SearchError

TYPES = ("float", "int", "categorical")
ENTRY_KEYS = {"type", "low", "high", "log", "step", "choices", "when", "otherwise"}
TRAIN_PREFIX = "train."
_UNSET = object()


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
    otherwise: Any = _UNSET

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
            elif p.otherwise is not _UNSET:
                values[p.path] = p.otherwise
        return values

    def resolve(self, sampled: dict[str, Any]) -> dict[str, Any]:
        """A trial's sampled params plus the `otherwise` of those they leave inactive (= what `suggest` gave)."""
        values: dict[str, Any] = {}
        for p in self.params:
            if p.path in sampled and p.active(values):
                values[p.path] = sampled[p.path]
            elif not p.active(values) and p.otherwise is not _UNSET:
                values[p.path] = p.otherwise
        return values

    def distributions(self, values: dict[str, Any]) -> dict:
        """Optuna distributions of the sampled (not `otherwise`) parameters among `values`."""
        active: dict[str, Any] = {}
        out = {}
        for p in self.params:
            if p.path in values and p.active(active):
                active[p.path] = values[p.path]
                out[p.path] = p.distribution()
        return out


def split_overrides(values: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(harness overrides, GRPOSpec fields) from sampled values."""
    harness = {k: v for k, v in values.items() if not k.startswith(TRAIN_PREFIX)}
    train = {k.removeprefix(TRAIN_PREFIX): v for k, v in values.items() if k.startswith(TRAIN_PREFIX)}
    return harness, train


def _suggest(trial, p: Param):
    if p.type == "categorical":
        return trial.suggest_categorical(p.path, p.choices)
    if p.type == "int":
        return trial.suggest_int(p.path, int(p.low), int(p.high), step=int(p.step or 1), log=p.log)
    return trial.suggest_float(p.path, float(p.low), float(p.high), step=p.step, log=p.log)


# -- loading and validation --------------------------------------------------------------------------
def load_space(path: str | Path, base=None) -> SearchSpace:
    """Read and validate a space file. `base` (a Harness) is what values are checked against; by default
    a Harness with every default."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as e:
        raise SearchError(f"{path}: cannot read search space ({e.strerror})") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise SearchError(f"{path}{f':{mark.line + 1}' if mark else ''}: invalid YAML: "
                          f"{getattr(e, 'problem', None) or e}") from None
    return parse_space(data, str(path), base)


def parse_space(data: Any, source: str, base=None) -> SearchSpace:
    if not isinstance(data, dict) or not data:
        raise SearchError(f"{source}: a search space is a non-empty mapping of dotted paths to distributions, "
                          f"e.g. 'decoding.temperature: {{type: float, low: 0.2, high: 1.2}}'")
    errors: list[str] = []
    params = []
    for key, entry in data.items():
        problems = _entry_problems(str(key), entry)
        if problems:
            errors += [f"{source}: '{key}': {p}" for p in problems]
        else:
            params.append(_param(str(key), entry))
    by_path = {p.path: p for p in params}
    bad = set()
    for p in params:
        problems = _path_problems(p.path) + _when_problems(p, by_path)
        errors += [f"{source}: '{p.path}': {e}" for e in problems]
        bad |= {p.path} if problems else set()
    # Values are checked for every structurally sound parameter, so one run reports everything.
    sound = [p for p in params if p.path not in bad and not (set(p.when) & bad)]
    ordered, cycle = _order(sound)
    if cycle:
        errors.append(f"{source}: 'when' clauses form a cycle through {', '.join(cycle)}")
    errors += [f"{source}: '{p.path}': {e}" for p in ordered for e in _value_problems(p, ordered, base)]
    params = ordered
    if errors:
        raise SearchError(f"{len(errors)} problem(s) in search space:\n" + "\n".join(errors))
    return SearchSpace(source, params)


def _param(key: str, entry: dict) -> Param:
    return Param(path=key, type=entry["type"], low=entry.get("low"), high=entry.get("high"),
                 log=bool(entry.get("log", False)), step=entry.get("step"), choices=list(entry.get("choices") or []),
                 when=dict(entry.get("when") or {}), otherwise=entry.get("otherwise", _UNSET))


def _is_number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _entry_problems(key: str, entry: Any) -> list[str]:
    """The distribution itself: type, bounds, log scale, choices (no knowledge of the harness needed)."""
    if not isinstance(entry, dict):
        return [f"expected a distribution like {{type: float, low: 0.1, high: 1.0}}, got {entry!r}"]
    problems = []
    unknown = sorted(set(entry) - ENTRY_KEYS)
    if unknown:
        problems.append(f"unknown key(s) {', '.join(unknown)} (valid: {', '.join(sorted(ENTRY_KEYS))})")
    kind = entry.get("type")
    if kind not in TYPES:
        return problems + [f"type must be one of {', '.join(TYPES)}, got {kind!r}"]
    if kind == "categorical":
        choices = entry.get("choices")
        if not isinstance(choices, list) or not choices:
            problems.append("categorical needs a non-empty list 'choices', e.g. choices: [full, last_k]")
        elif any(c is not None and not isinstance(c, bool | int | float | str) for c in choices):
            problems.append("choices must be null, booleans, numbers or strings")
        extra = sorted({"low", "high", "log", "step"} & set(entry))
        if extra:
            problems.append(f"{', '.join(extra)} do not apply to a categorical (it takes 'choices')")
        return problems
    low, high, step = entry.get("low"), entry.get("high"), entry.get("step")
    if not _is_number(low) or not _is_number(high):
        return problems + [f"{kind} needs numeric 'low' and 'high', got low={low!r}, high={high!r}"]
    if kind == "int" and (low != int(low) or high != int(high)):
        problems.append(f"int bounds must be whole numbers, got low={low!r}, high={high!r} (use type: float)")
    if low > high:
        problems.append(f"low ({low}) > high ({high}); swap them so that low <= high")
    if entry.get("log") and low <= 0:
        problems.append(f"log scale needs low > 0, got low={low} (use log: false, or a positive low)")
    if step is not None and (not _is_number(step) or step <= 0):
        problems.append(f"step must be a positive number, got {step!r}")
    elif step is not None and entry.get("log"):
        problems.append("step and log: true cannot be combined (Optuna samples either on a grid or log scale)")
    if "choices" in entry:
        problems.append(f"'choices' applies only to type: categorical (this is {kind})")
    return problems


def _path_problems(path: str) -> list[str]:
    if path.startswith(TRAIN_PREFIX):
        try:
            from coevo.train.grpo_spec import GRPOSpec
        except ImportError:
            return ["train.* keys need coevo.train.grpo_spec.GRPOSpec, which cannot be imported"]
        return _model_path_problems(GRPOSpec, path.removeprefix(TRAIN_PREFIX), "the GRPO options", "train.")
    from coevo.harness import Harness

    return _model_path_problems(Harness, path, "the harness", "", hidden=("name", "description", "prompts_dir"),
                                also=", or train.<GRPO option>")


def _model_path_problems(root, path: str, root_name: str, prefix: str, hidden: tuple = (), also: str = ""
                         ) -> list[str]:
    """Walk a pydantic model along a dotted path; the path must end on a value, not a section."""
    from pydantic import BaseModel

    model, parts = root, path.split(".")
    for i, part in enumerate(parts):
        fields = [f for f in model.model_fields if i or f not in hidden]
        where = prefix + ".".join(parts[:i]) if i else root_name
        if part not in fields:
            valid = ", ".join(prefix + ".".join([*parts[:i], f]) for f in fields)
            return [f"unknown path: '{part}' is not a field of {where} (valid: {valid}{'' if i else also})"]
        sub = model.model_fields[part].annotation
        is_section = isinstance(sub, type) and issubclass(sub, BaseModel)
        if i == len(parts) - 1:
            if is_section:
                valid = ", ".join(prefix + path + "." + f for f in sub.model_fields)
                return [f"'{prefix}{path}' is a section, not a value (valid: {valid})"]
            return []
        if not is_section:
            return [f"unknown path: '{prefix}{'.'.join(parts[: i + 1])}' is a value, not a section"]
        model = sub
    return []


def _when_problems(p: Param, by_path: dict[str, Param]) -> list[str]:
    problems = []
    if p.otherwise is not _UNSET and not p.when:
        problems.append("'otherwise' needs a 'when' clause")
    for path, want in p.when.items():
        if path not in by_path:
            problems.append(f"when: '{path}' is not a parameter of this space (valid: "
                            f"{', '.join(q for q in by_path if q != p.path) or 'none'})")
            continue
        cond = by_path[path]
        for value in want if isinstance(want, list) else [want]:
            ok = value in cond.choices if cond.type == "categorical" else (
                _is_number(value) and cond.low <= value <= cond.high)
            if not ok:
                valid = cond.choices if cond.type == "categorical" else f"[{cond.low}, {cond.high}]"
                problems.append(f"when: {path} = {value!r} can never happen (its values: {valid})")
    return problems


def _order(params: list[Param]) -> tuple[list[Param], list[str]]:
    """Topological order by `when`, keeping file order otherwise; a cycle is returned as its members."""
    done: dict[str, Param] = {}
    pending = list(params)
    while pending:
        ready = [p for p in pending if all(w in done for w in p.when)]
        if not ready:
            return [], [p.path for p in pending]
        for p in ready:
            done[p.path] = p
        pending = [p for p in pending if p.path not in done]
    return list(done.values()), []


def _value_problems(p: Param, params: list[Param], base) -> list[str]:
    """Each value (choices, or low and high) must be accepted by the field: alone with its `when`
    conditions met, or else in a full assignment where every other parameter takes a value that is
    valid alone, or its `otherwise` when inactive (so a guarded combination is not an error)."""
    if p.is_train:
        return _train_value_problems(p)
    from coevo.harness import Harness

    base = base or Harness(name="space-check")
    problems = []
    for value in _values(p):
        error = _try(base, {**_conditions(p), p.path: value})
        if error and _try(base, _assignment(p, value, params, base)):
            problems.append(f"value {value!r} is not valid here: {error}")
    return problems


def _values(p: Param) -> list:
    return p.samples() + ([p.otherwise] if p.otherwise is not _UNSET else [])


def _conditions(p: Param) -> dict[str, Any]:
    return {path: (want[0] if isinstance(want, list) else want) for path, want in p.when.items()}


def _try(base, values: dict[str, Any]) -> str | None:
    """None if the base harness accepts these overrides, else why not."""
    from coevo.harness import HarnessError

    try:
        base.with_overrides(split_overrides(values)[0])
    except HarnessError as e:
        return str(e).split(": ", 1)[-1]
    return None


def _assignment(p: Param, value: Any, params: list[Param], base) -> dict[str, Any]:
    fixed = {**_conditions(p), p.path: value}
    values: dict[str, Any] = {}
    for q in params:
        if q.path in fixed:
            values[q.path] = fixed[q.path]
        elif q.active(values):
            good = [v for v in q.samples() if q.is_train or _try(base, {**_conditions(q), q.path: v}) is None]
            values[q.path] = (good or q.samples())[0]
        elif q.otherwise is not _UNSET:
            values[q.path] = q.otherwise
    return values


def _train_value_problems(p: Param) -> list[str]:
    from coevo.train.grpo_spec import GRPOSpec

    problems = []
    for value in _values(p):
        try:
            GRPOSpec().with_overrides({p.path.removeprefix(TRAIN_PREFIX): value})
        except ValueError as e:
            problems.append(f"value {value!r} is not valid: {str(e).split(': ', 1)[-1]}")
    return problems
