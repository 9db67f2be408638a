"""The verifier side of the families: check sets shared by several, as {check name: expression} for
TaskSpec.checks, and the helper definitions (TaskSpec.helpers) that single families add to verify.py.

The expressions run in the task's verify.py, where the verifier template's helpers and E are defined.
"""

from __future__ import annotations


def number_answer(path: str) -> dict[str, str]:
    """'Write just the number': compared after stripping whitespace with E['answer']."""
    return {"answer_exists": f"read({path!r}) is not None",
            "answer_correct": f"answer({path!r}) == E['answer']"}


def lines_answer(path: str) -> dict[str, str]:
    """An ordered list of lines, compared exactly with E['lines']."""
    return {"answer_exists": f"read({path!r}) is not None", "lines_exact": f"lines({path!r}) == E['lines']"}


def file_lines(key: str = "path") -> dict[str, str]:
    """The file named by E[key] holds exactly the lines E['lines']."""
    return {"file_exists": f"read(E[{key!r}]) is not None",
            "content_exact": f"lines(E[{key!r}]) == E['lines']"}


def path_listing(path: str) -> dict[str, str]:
    """Absolute paths one per line, in any order, compared as a set with E['paths']."""
    return {
        "answer_exists": f"read({path!r}) is not None",
        "paths_match": f"set(lines({path!r})) == set(E['paths'])",
        "no_duplicates": f"len(lines({path!r})) == len(set(lines({path!r})))",
    }


# Read an agent-made archive into {member path relative to /app: bytes}, for regular files only.
MEMBERS = """
import tarfile


def members(path):
    with tarfile.open(path, "r:gz") as tar:
        return {m.name.removeprefix("./").lstrip("/"): tar.extractfile(m).read() for m in tar if m.isfile()}
"""

GIT = """
# stdout of git in the task's repository; raises when git fails, so that the check scores 0.
def git(*args):
    p = run(["git", "-c", "safe.directory=*", "-C", E["repo"], *args])
    if p.returncode != 0:
        raise RuntimeError(p.stderr)
    return p.stdout.strip()
"""

# A clean shell for the checks: without /app/bin on PATH, so only env.sh can put it there.
BARE = "{'PATH': '/usr/bin:/bin', 'HOME': '/tmp'}"
