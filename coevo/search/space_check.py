"""Reading a search space file: `load_space` and the checks behind it. Each check returns the problems of
one parameter as messages (`parse_space` adds file and key), so that every problem in a space file is
reported at once, before any trial runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from coevo.config import read_yaml, walk
from coevo.native.spec import is_native
from coevo.search.errors import SearchError
from coevo.search.instructions.spec import evolve_param, evolve_problems, is_evolve
from coevo.search.space import ENTRY_KEYS, TRAIN_PREFIX, TYPES, UNSET, Param, SearchSpace, split_overrides


def load_space(path: str | Path, base=None) -> SearchSpace:
    """Read and validate a space file. `base` (a Harness) is what values are checked against; by default
    a Harness with every default."""
    path = Path(path)
    return parse_space(read_yaml(path, "search space", SearchError), str(path), base)


def parse_space(data: Any, source: str, base=None) -> SearchSpace:
    if not isinstance(data, dict) or not data:
        raise SearchError(f"{source}: a search space is a non-empty mapping of dotted paths to distributions, "
                          f"e.g. 'decoding.temperature: {{type: float, low: 0.2, high: 1.2}}'")
    errors: list[str] = []
    params = []
    for key, entry in data.items():
        evolved = is_evolve(entry)  # {evolve: gepa, ...}: GEPA writes the choices (coevo/search/instructions)
        problems = evolve_problems(str(key), entry) if evolved else entry_problems(str(key), entry)
        if evolved and is_native(base):
            problems = [("GEPA evolves coevo's own template files; a native agent's templates are settings of "
                         "its config (e.g. agent_settings.system_template: {type: categorical, choices: [...]})")]
        if problems:
            errors += [f"{source}: '{key}': {p}" for p in problems]
        else:
            params.append(evolve_param(str(key), entry, base) if evolved else _param(str(key), entry))
    by_path = {p.path: p for p in params}
    bad = set()
    for p in params:
        problems = path_problems(p.path, base) + when_problems(p, by_path)
        errors += [f"{source}: '{p.path}': {e}" for e in problems]
        bad |= {p.path} if problems else set()
    # Values are checked for every structurally sound parameter, so one run reports everything.
    sound = [p for p in params if p.path not in bad and not (set(p.when) & bad)]
    ordered, cycle = order(sound)
    if cycle:
        errors.append(f"{source}: 'when' clauses form a cycle through {', '.join(cycle)}")
    errors += [f"{source}: '{p.path}': {e}" for p in ordered for e in value_problems(p, ordered, base)]
    params = ordered
    if errors:
        raise SearchError(f"{len(errors)} problem(s) in search space:\n" + "\n".join(errors))
    return SearchSpace(source, params)


def _param(key: str, entry: dict) -> Param:
    return Param(path=key, type=entry["type"], low=entry.get("low"), high=entry.get("high"),
                 log=bool(entry.get("log", False)), step=entry.get("step"), choices=list(entry.get("choices") or []),
                 when=dict(entry.get("when") or {}), otherwise=entry.get("otherwise", UNSET))


def _is_number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def entry_problems(key: str, entry: Any) -> list[str]:
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


def path_problems(path: str, base=None) -> list[str]:
    """The key must name a value (not a section) of the Harness, or of TrainSpec after `train.`. For a
    native agent's harness, a key under its config sections must name a setting that config has."""
    from coevo.harness import Harness
    from coevo.train.spec import TrainSpec

    if path.startswith(TRAIN_PREFIX):
        return _model_path_problems(TrainSpec, path.removeprefix(TRAIN_PREFIX), "the GRPO options", TRAIN_PREFIX)
    if is_native(base):
        unknown = base.unknown_setting(path)
        return [f"unknown path: {unknown}"] if unknown else _model_path_problems(
            type(base), path, "the native harness", "", hidden=("kind", "name", "description", "agent", "config_file"),
            also=", or train.<GRPO option>")
    return _model_path_problems(Harness, path, "the harness", "", hidden=("name", "description", "prompts_dir"),
                                also=", or train.<GRPO option>")


def _model_path_problems(root, path: str, root_name: str, prefix: str, hidden: tuple = (), also: str = ""
                         ) -> list[str]:
    """Messages name full keys (`prefix` + path), as they are written in the space file."""
    model, i, kind = walk(root, path)
    parts = path.split(".")
    if kind == "unknown" or (i == 0 and parts[0] in hidden):
        fields = [f for f in model.model_fields if i or f not in hidden]
        where = prefix + ".".join(parts[:i]) if i else root_name
        valid = ", ".join(prefix + ".".join([*parts[:i], f]) for f in fields)
        return [f"unknown path: '{parts[i]}' is not a field of {where} (valid: {valid}{'' if i else also})"]
    if kind == "value" and i < len(parts) - 1:
        return [f"unknown path: '{prefix}{'.'.join(parts[: i + 1])}' is a value, not a section"]
    if kind == "section":
        valid = ", ".join(prefix + path + "." + f for f in model.model_fields[parts[i]].annotation.model_fields)
        return [f"'{prefix}{path}' is a section, not a value (valid: {valid})"]
    return []


def when_problems(p: Param, by_path: dict[str, Param]) -> list[str]:
    problems = []
    if p.otherwise is not UNSET and not p.when:
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


def order(params: list[Param]) -> tuple[list[Param], list[str]]:
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


def value_problems(p: Param, params: list[Param], base) -> list[str]:
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
    return p.samples() + ([p.otherwise] if p.otherwise is not UNSET else [])


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
        elif q.otherwise is not UNSET:
            values[q.path] = q.otherwise
    return values


def _train_value_problems(p: Param) -> list[str]:
    from coevo.train.spec import TrainSpec, TrainSpecError

    problems = []
    for value in _values(p):
        try:
            TrainSpec().with_overrides({p.path.removeprefix(TRAIN_PREFIX): value})
        except TrainSpecError as e:
            problems.append(f"value {value!r} is not valid: {str(e).split(': ', 1)[-1]}")
    return problems
