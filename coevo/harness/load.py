"""Reading a harness: YAML file -> validated Harness, with errors that name the file and the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from coevo.harness.errors import HarnessError
from coevo.harness.spec import Harness
from coevo.yamlfile import read_yaml


def load_harness(path: str | Path) -> Harness:
    """Load `harnesses/NAME.yaml`. Templates resolve against its `prompts_dir` (relative to the YAML
    file), by default the `prompts/` folder next to the YAML's folder. `name` defaults to the file stem."""
    path = Path(path)
    data = read_yaml(path, "harness file", HarnessError)
    if not isinstance(data, dict):
        raise HarnessError(f"{path}: a harness file must be a YAML mapping of sections "
                           f"(valid: {', '.join(Harness.model_fields)}), got {type(data).__name__}")
    data.setdefault("name", path.stem)
    prompts = Path(data.get("prompts_dir") or path.resolve().parent.parent / "prompts")
    data["prompts_dir"] = (prompts if prompts.is_absolute() else path.resolve().parent / prompts).resolve()
    return harness_from_dict(data, source=str(path))


def harness_from_dict(data: dict[str, Any], source: str) -> Harness:
    """Validate a harness mapping; `source` (a file name or a description) starts every error message."""
    try:
        return Harness.model_validate(data)
    except ValidationError as e:
        problems = "; ".join(_describe(err) for err in e.errors())
        raise HarnessError(f"{source}: {problems}") from None
    except HarnessError as e:
        raise HarnessError(f"{source}: {e}") from None


def _describe(err: dict) -> str:
    loc = ".".join(str(part) for part in err["loc"])
    if err["type"] == "extra_forbidden":
        valid = ", ".join(_fields_at(err["loc"][:-1]))
        return f"unknown field '{loc}' (valid: {valid})"
    if not loc:
        return err["msg"].removeprefix("Value error, ")
    got = f" (got {err['input']!r})" if err["type"] != "missing" else ""
    return f"field '{loc}': {err['msg']}{got}"


def _fields_at(loc: tuple) -> list[str]:
    """The field names of the section at `loc` (e.g. ('limits',)), for 'what is valid' in messages."""
    model: type[BaseModel] = Harness
    for part in loc:
        sub = model.model_fields.get(str(part))
        if sub is None or not (isinstance(sub.annotation, type) and issubclass(sub.annotation, BaseModel)):
            break
        model = sub.annotation
    return list(model.model_fields)
