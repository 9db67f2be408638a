"""The checks behind `load_space`: each returns the problems of one parameter as messages (file and key
are added by the caller), so that every problem in a space file is reported at once."""

from __future__ import annotations

from typing import Any

from coevo.search.space import _UNSET, ENTRY_KEYS, TRAIN_PREFIX, TYPES, Param, split_overrides


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


def path_problems(path: str) -> list[str]:
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


def when_problems(p: Param, by_path: dict[str, Param]) -> list[str]:
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
