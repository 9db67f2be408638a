"""Verifier of a coevo-generated task.

This file is a template, never imported: the generator copies it into each task's tests/verify.py and
appends that task's checks (lines `check(name, lambda: ...)`) and a final `finish()`. Each check
scores 0 or 1 and may raise anything, which scores 0, so a missing or garbage answer never crashes
the verifier. Uses the Python standard library only: it runs on the bare task image.
"""

import hashlib
import json
import os
import subprocess
from pathlib import Path

E = json.loads(Path(__file__).with_name("expected.json").read_text())
RESULTS: dict[str, int] = {}


def check(name, fn):
    try:
        ok = bool(fn())
    except Exception:  # noqa: BLE001 - a failed check is a score, not a crash
        ok = False
    RESULTS[name] = int(ok)


def read(path):
    """The file's text, or None when it is missing, a directory or not UTF-8."""
    try:
        return Path(path).read_text()
    except (OSError, UnicodeDecodeError):
        return None


def lines(path):
    text = read(path)
    return None if text is None else text.splitlines()


def answer(path):
    """The file's text with surrounding whitespace stripped: 'write just the number' answers."""
    text = read(path)
    return None if text is None else text.strip()


def run(args, stdin="", cwd="/app", timeout=5, env=None):
    # stdin is always given (empty by default) so that a program that reads it gets EOF, not our stdin.
    return subprocess.run(args, input=stdin, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=env, check=False)


def mode(path):
    return os.stat(path).st_mode & 0o777


def sha(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def unchanged():
    """Every seed file the task must leave alone still has its original bytes."""
    return all(sha(path) == digest for path, digest in E["keep"].items())


def files_under(root):
    return {str(p) for p in Path(root).rglob("*") if p.is_file()}


def finish():
    out = Path("/logs/verifier")
    out.mkdir(parents=True, exist_ok=True)
    (out / "reward.json").write_text(json.dumps(RESULTS, indent=1) + "\n")
    (out / "reward.txt").write_text("1\n" if RESULTS and all(RESULTS.values()) else "0\n")


# ---- task checks ----
check('extracted', lambda: all(read('/app/topaz' + '/' + p) == text for p, text in E['inner'].items()))
check('answer_exists', lambda: read('/app/value.txt') is not None)
check('value_correct', lambda: answer('/app/value.txt') == E['value'])
check('inputs_unchanged', lambda: unchanged())
finish()
