"""The config kernel: how every file a user writes (harness, search space, search config, training spec,
task.toml) is read, overridden by dotted paths and validated, so that a mistake reads the same
everywhere: the file, the field, and what would be valid.

    read_yaml(path, what, error)             YAML text -> data; unreadable file or bad syntax names file and line
    read_mapping(path, what, model, error)   the same, for a file that must be a mapping of the model's fields
    walk(model, path)                        where a dotted path leads through nested pydantic sections
    apply_overrides(data, overrides, model)  {"limits.max_turns": 8} -> data["limits"]["max_turns"] = 8
    get_dotted(data, path)                   the value a dotted path names in dumped data
    validate(model, data, source, error)     pydantic validation; ValidationError -> `error` naming each field

Each caller passes its own error class (a CoevoError), so a search config fails as a SearchError and a
harness as a HarnessError, with one wording.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ValidationError

from coevo.errors import CoevoError, ConfigError

M = TypeVar("M", bound=BaseModel)
Kind = Literal["section", "free", "value", "unknown"]
"""What a path part names: a nested model, a free-form dict (the rest of the path is one key), a value,
or no field at all."""


# -- reading ---------------------------------------------------------------------------------------
def read_yaml(path: str | Path, what: str, error: type[CoevoError] = ConfigError) -> Any:
    """The parsed contents of `path` (`what` names the kind of file in messages)."""
    import yaml  # not at import time: the harness and training spec modules import this one and stay light

    path = Path(path)
    try:
        return yaml.safe_load(path.read_text())
    except OSError as e:
        raise error(f"{path}: cannot read {what} ({e.strerror or e})") from None
    except UnicodeDecodeError as e:
        raise error(f"{path}: not UTF-8 text (byte 0x{e.object[e.start]:02x} at offset {e.start}); a {what} "
                    "is a UTF-8 YAML file") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f":{mark.line + 1}" if mark else ""
        raise error(f"{path}{line}: invalid YAML in {what}: {getattr(e, 'problem', None) or e}") from None


def read_mapping(path: str | Path, what: str, model: type[BaseModel], error: type[CoevoError] = ConfigError
                 ) -> dict[str, Any]:
    """A YAML file that must hold a mapping of `model`'s fields (checked later by `validate`)."""
    data = read_yaml(path, what, error)
    if not isinstance(data, dict):
        raise error(f"{path}: a {what} must be a YAML mapping (valid keys: {', '.join(model.model_fields)}), "
                    f"got {type(data).__name__}")
    return data


# -- dotted paths ----------------------------------------------------------------------------------
def _kind(model: type[BaseModel], part: str) -> Kind:
    field = model.model_fields.get(part)
    if field is None:
        return "unknown"
    sub = field.annotation
    if isinstance(sub, type) and issubclass(sub, BaseModel):
        return "section"
    return "free" if sub is dict or typing.get_origin(sub) is dict else "value"


def walk(model: type[BaseModel], path: str) -> tuple[type[BaseModel], int, Kind]:
    """Follow `path` down nested sections: (the model holding the part where the walk stops, that part's
    index, what it names). The walk stops at the last part or at the first part that is not a section."""
    parts, i = path.split("."), 0
    while i < len(parts) - 1 and _kind(model, parts[i]) == "section":
        model, i = model.model_fields[parts[i]].annotation, i + 1
    return model, i, _kind(model, parts[i])


def sections_of(model: type[BaseModel]) -> list[str]:
    """The fields of `model` that a dotted path can go into (nested models and free-form dicts)."""
    return [f for f in model.model_fields if _kind(model, f) in ("section", "free")]


def set_dotted(data: dict, path: str, value: Any, model: type[BaseModel], error: type[CoevoError] = ConfigError
               ) -> None:
    """`data[a][b] = value` for path 'a.b'. Under a free-form dict field the rest of the path is one key
    (a parameter name such as 'model.norm.weight' has dots). Unknown names are set as given, so that
    validation reports them exactly as it reports a typo in a file."""
    held, i, kind = walk(model, path)
    parts = path.split(".")
    if kind == "value" and i < len(parts) - 1:
        where = ".".join(parts[: i + 1])
        raise error(f"'{path}': '{where}' is not a section (sections: {', '.join(sections_of(held)) or 'none'})")
    free = kind == "free" and i < len(parts) - 1
    keys = [*parts[: i + 1], ".".join(parts[i + 1:])] if free else parts
    node = data
    for key in keys[:-1]:
        node = node.setdefault(key, {})
    node[keys[-1]] = value


def apply_overrides(data: dict, overrides: dict[str, Any], model: type[BaseModel],
                    error: type[CoevoError] = ConfigError) -> dict:
    """`data` (a model_dump of `model`) with every dotted override set; validate it afterwards."""
    for path, value in overrides.items():
        set_dotted(data, path, value, model, error)
    return data


_REQUIRED = object()


def get_dotted(data: dict, path: str, default: Any = _REQUIRED) -> Any:
    """The value at a dotted path of dumped data: KeyError naming the missing part, or `default` when given
    (a native agent's setting that its config file leaves to a class default is in no dump)."""
    node: Any = data
    for part in path.split("."):
        if default is not _REQUIRED and (not isinstance(node, dict) or part not in node):
            return default
        node = node[part]
    return node


# -- validation ------------------------------------------------------------------------------------
def field_name(loc: tuple) -> str:
    """A field as YAML users write it: `field 'limits.max_turns'`."""
    return f"field '{'.'.join(str(p) for p in loc)}'"


def toml_field(loc: tuple) -> str:
    """A field as TOML users write it: `[agent] timeout_sec` (`[top]` for a top-level key)."""
    return f"[{'.'.join(str(p) for p in loc[:-1]) or 'top'}] {loc[-1]}"


def fields_at(model: type[BaseModel], loc: tuple) -> list[str]:
    """The field names of the section at `loc` (e.g. ('limits',)), for 'what is valid' in messages."""
    for part in loc:
        if _kind(model, str(part)) != "section":
            break
        model = model.model_fields[str(part)].annotation
    return list(model.model_fields)


def describe(err: dict, model: type[BaseModel], name: Callable[[tuple], str] = field_name) -> str:
    """One pydantic error as `<field>: <problem> (got <input>)`, or with the valid names for a typo."""
    loc = err["loc"]
    if err["type"] == "extra_forbidden":
        return f"unknown {name(loc)} (valid: {', '.join(fields_at(model, loc[:-1]))})"
    if not loc:  # a model validator's own message already names its fields
        return err["msg"].removeprefix("Value error, ")
    got = "" if err["type"] == "missing" else f" (got {err['input']!r})"
    return f"{name(loc)}: {err['msg']}{got}"


def validate(model: type[M], data: Any, source: str, error: type[CoevoError] = ConfigError,
             name: Callable[[tuple], str] = field_name) -> M:
    """`model.model_validate(data)`; a ValidationError becomes `error`, starting with `source` (a file
    name or a description) and listing every bad field."""
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise error(f"{source}: " + "; ".join(describe(err, model, name) for err in e.errors())) from None
