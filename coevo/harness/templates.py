"""Jinja rendering for harness templates: sandboxed, strict, and with errors that name file and line."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from types import TracebackType
from typing import Any

from jinja2 import (
    FileSystemLoader,
    StrictUndefined,
    TemplateNotFound,
    TemplateSyntaxError,
    UndefinedError,
)
from jinja2.sandbox import SandboxedEnvironment, SecurityError

from coevo.harness.errors import HarnessError


@lru_cache(maxsize=64)
def _environment(prompts_dir: Path) -> SandboxedEnvironment:
    # Sandboxed: a template from a search space or a user must not reach Python internals (`__class__`).
    # StrictUndefined: a typo in a variable name is an error, not an empty string in the prompt.
    return SandboxedEnvironment(
        loader=FileSystemLoader(str(prompts_dir)),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        auto_reload=True,
    )


def render_template(prompts_dir: Path, filename: str, variables: dict[str, Any]) -> str:
    """Render `prompts_dir/filename` with `variables`; any failure is a HarnessError naming file and line."""
    root = Path(prompts_dir).resolve()
    env = _environment(root)
    where = root / filename
    available = f"variables available: {', '.join(sorted(variables)) or 'none'}"
    try:
        return env.get_template(filename).render(**variables).strip()
    except TemplateNotFound as e:
        found = ", ".join(sorted(p.name for p in root.glob("*.j2"))) or "none"
        raise HarnessError(f"{where}: template not found: {e.name} (templates there: {found})") from None
    except TemplateSyntaxError as e:
        raise HarnessError(f"{e.filename or where}:{e.lineno}: template syntax error: {e.message}") from None
    except UndefinedError as e:
        raise HarnessError(f"{_location(e.__traceback__, where)}: {e.message} ({available})") from None
    except SecurityError as e:
        raise HarnessError(f"{_location(e.__traceback__, where)}: not allowed in a sandboxed template: "
                           f"{e} ({available})") from None
    except UnicodeDecodeError as e:
        raise HarnessError(f"{where}: not UTF-8 text (byte 0x{e.object[e.start]:02x} at offset {e.start}); "
                           "templates are UTF-8 Jinja files") from None
    except Exception as e:  # noqa: BLE001 - a user's template is a boundary: whatever it raises (1 // 0, a bad
        # filter argument) is an error in that file and line, not a traceback out of the harness
        raise HarnessError(f"{_location(e.__traceback__, where)}: {type(e).__name__} while rendering: {e}") from None


def _location(tb: TracebackType | None, where: Path) -> str:
    """`file:line` of the innermost template frame; Jinja rewrites tracebacks to point into templates."""
    found = str(where)
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if filename.startswith(str(where.parent)):
            found = f"{filename}:{tb.tb_lineno}"
        tb = tb.tb_next
    return found
