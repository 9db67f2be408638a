"""Reading the YAML files users write (harnesses, search spaces, search configs, GRPO specs): one place
that turns an unreadable file or a YAML syntax error into the caller's typed error, naming the file and
line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from coevo.errors import CoevoError


def read_yaml(path: str | Path, what: str, error: type[CoevoError]) -> Any:
    """The parsed contents of `path` (`what` names the kind of file in messages)."""
    import yaml

    path = Path(path)
    try:
        return yaml.safe_load(path.read_text())
    except OSError as e:
        raise error(f"{path}: cannot read {what} ({e.strerror or e})") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f":{mark.line + 1}" if mark else ""
        raise error(f"{path}{line}: invalid YAML in {what}: {getattr(e, 'problem', None) or e}") from None
