"""The validated `Harness`, and the two ways to make one: from a YAML file (`load_harness`) and from another
harness with dotted overrides (`Harness.with_overrides`). Both report the file and the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import model_validator

from coevo.config import apply_overrides, read_mapping, validate
from coevo.harness.demos import check_demonstrations
from coevo.harness.errors import HarnessError
from coevo.harness.prompts import check_harness
from coevo.harness.spec import HarnessSpec


class Harness(HarnessSpec):
    """A HarnessSpec that fails at load time, not mid-rollout: its action format can express its tools,
    and every template renders (syntax, variables, sandbox) with sample values."""

    @model_validator(mode="after")
    def _check(self) -> Harness:
        try:
            check_harness(self)
            if self.demonstrations.k:  # the pools parse and the demonstrations fit the context
                check_demonstrations(self)
        except HarnessError as e:
            # As a ValueError it joins pydantic's report, which `validate` prefixes with the file name.
            raise ValueError(str(e)) from None
        return self

    def with_overrides(self, overrides: dict[str, Any]) -> Harness:
        """A new validated Harness with dotted fields replaced, e.g. {"limits.max_turns": 8}."""
        data = apply_overrides(self.model_dump(), overrides, Harness, HarnessError)
        return harness_from_dict(data, source=f"harness '{self.name}' with overrides")


def load_harness(path: str | Path) -> Harness:
    """Load `harnesses/NAME.yaml`. Templates resolve against its `prompts_dir` (relative to the YAML
    file), by default the `prompts/` folder next to the YAML's folder; so do demonstration pools. `name`
    defaults to the file stem.
    A file of `kind: native` is a native agent's harness (coevo.native.spec.NativeHarness), which the
    rollout, the search, training and the bundle take in its place."""
    from coevo.native.spec import is_native_file, load_native_harness

    path = Path(path)
    if is_native_file(path):
        return load_native_harness(path)
    data = read_mapping(path, "harness file", Harness, HarnessError)
    data.setdefault("name", path.stem)
    prompts = Path(data.get("prompts_dir") or path.resolve().parent.parent / "prompts")
    data["prompts_dir"] = (prompts if prompts.is_absolute() else path.resolve().parent / prompts).resolve()
    demos = data.get("demonstrations")
    if isinstance(demos, dict):  # pools, like templates, resolve against the harness file's folder
        for key in ("pool", "own_pool"):
            if isinstance(demos.get(key), str) and not Path(demos[key]).is_absolute():
                demos[key] = str((path.resolve().parent / demos[key]).resolve())
    return harness_from_dict(data, source=str(path))


def harness_from_dict(data: dict[str, Any], source: str) -> Harness:
    """Validate a harness mapping; `source` (a file name or a description) starts every error message."""
    return validate(Harness, data, source, HarnessError)
