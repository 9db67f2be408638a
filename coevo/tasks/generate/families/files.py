"""Families about files and directories: create, find (by name, size, content), rename, chmod."""

from __future__ import annotations

import random

from coevo.tasks.generate.checks import file_lines, path_listing
from coevo.tasks.generate.families.words import NOUNS, name, sentence, word, words
from coevo.tasks.generate.writer import TaskSpec

EXTS = ["log", "txt", "csv", "md", "json", "conf", "ini"]


def _text(rng: random.Random, n_lines: int = 3) -> str:
    return "".join(sentence(rng, rng.randint(3, 8)) + "\n" for _ in range(n_lines))


def _tree(rng: random.Random, root: str, stems: list[str], exts: list[str]) -> list[str]:
    """Paths (relative to /app) of one file per stem, scattered over root and two levels below it."""
    dirs = [root, f"{root}/{word(rng)}", f"{root}/{word(rng)}/{word(rng)}"]
    return [f"{rng.choice(dirs)}/{stem}.{rng.choice(exts)}" for stem in stems]


def create_file(rng: random.Random) -> TaskSpec:
    path = f"/app/{word(rng)}/{name(rng)}.txt"
    content = [sentence(rng, rng.randint(2, 5)) for _ in range(rng.randint(2, 4))]
    quoted = " ".join(f"'{line}'" for line in content)
    return TaskSpec(
        instruction=f"Create the file {path} (and its directory) containing exactly these "
        f"{len(content)} lines:\n\n```\n" + "\n".join(content) + "\n```",
        solution=[f"mkdir -p {path.rsplit('/', 1)[0]} && printf '%s\\n' {quoted} > {path}"],
        checks=file_lines(),
        expected={"path": path, "lines": content},
        tags=["files", "printf"],
    )


def find_by_name(rng: random.Random) -> TaskSpec:
    root, ext, out = word(rng), rng.choice(EXTS), "/app/found.txt"
    others = [e for e in EXTS if e != ext] + [f"{ext}.bak"]
    stems = words(rng, rng.randint(7, 11))
    n_hits = rng.randint(2, 4)
    paths = _tree(rng, root, stems[:n_hits], [ext]) + _tree(rng, root, stems[n_hits:], others)
    hits = [f"/app/{p}" for p in paths[:n_hits]]
    return TaskSpec(
        instruction=f"Find every regular file under /app/{root} (subdirectories included) whose name ends "
        f"in `.{ext}`. Write their absolute paths to {out}, one per line, in any order.",
        solution=[f"find /app/{root} -type f -name '*.{ext}' > {out}"],
        checks=path_listing(out),
        files={p: _text(rng) for p in paths},
        keep=paths,
        expected={"paths": hits},
        tags=["files", "find"],
    )


def _sized(rng: random.Random, size: int) -> str:
    text = ""
    while len(text) < size:
        text += sentence(rng, 8) + "\n"
    return text[: size - 1] + "\n"


def find_by_size(rng: random.Random) -> TaskSpec:
    root, limit, out = word(rng), rng.choice([1000, 2000, 3000, 5000]), "/app/large.txt"
    stems = words(rng, rng.randint(6, 10))
    n_big = rng.randint(2, 4)
    # Sizes stay far from the limit, so `-size +Nk` rounding gives the same answer as `-size +Nc`.
    sizes = [rng.randint(2 * limit, 3 * limit) for _ in range(n_big)]
    sizes += [rng.randint(20, limit // 3) for _ in stems[n_big:]]
    paths = _tree(rng, root, stems, ["dat", "txt", "log", "bin"])
    return TaskSpec(
        instruction=f"Find every regular file under /app/{root} (subdirectories included) that is larger "
        f"than {limit} bytes. Write their absolute paths to {out}, one per line, in any order.",
        solution=[f"find /app/{root} -type f -size +{limit}c > {out}"],
        checks=path_listing(out),
        files={p: _sized(rng, s) for p, s in zip(paths, sizes)},
        keep=paths,
        expected={"paths": [f"/app/{p}" for p in paths[:n_big]]},
        tags=["files", "find"],
    )


def find_by_content(rng: random.Random) -> TaskSpec:
    root, out = word(rng), "/app/matches.txt"
    number = rng.randint(1000, 8999)
    token = f"{word(rng)}-{number}"
    decoys = [f"{token[:-4]}{number + 1}", f"{word(rng)}-{number}"]
    stems = words(rng, rng.randint(6, 10))
    n_hits = rng.randint(2, 4)
    paths = _tree(rng, root, stems, ["txt", "md", "log"])
    files = {}
    for i, path in enumerate(paths):
        body = _text(rng, rng.randint(2, 5)).splitlines()
        mark = token if i < n_hits else rng.choice(decoys)
        body.insert(rng.randint(0, len(body)), f"ref {mark} {word(rng)}")
        files[path] = "\n".join(body) + "\n"
    return TaskSpec(
        instruction=f"Find every file under /app/{root} (subdirectories included) whose contents contain the "
        f"exact string `{token}`. Write their absolute paths to {out}, one per line, in any "
        "order.",
        solution=[f"grep -rl '{token}' /app/{root} > {out}"],
        checks=path_listing(out),
        files=files,
        keep=paths,
        expected={"paths": [f"/app/{p}" for p, text in files.items() if token in text]},
        tags=["files", "grep"],
    )


RENAMES = [("txt", "md"), ("htm", "html"), ("jpeg", "jpg"), ("yml", "yaml"), ("text", "txt"), ("tsv", "csv")]


def batch_rename(rng: random.Random) -> TaskSpec:
    folder = word(rng)
    old, new = rng.choice(RENAMES)
    stems = words(rng, rng.randint(5, 8))
    n_hits = rng.randint(3, len(stems) - 2)
    targets = [f"{folder}/{s}.{old}" for s in stems[:n_hits]]
    decoys = [f"{folder}/{s}.{rng.choice(['log', 'csv', 'ini'])}" for s in stems[n_hits:]]
    files = {p: _text(rng, 2) for p in targets + decoys}
    renamed = {f"/app/{p[: -len(old)]}{new}": files[p] for p in targets}
    return TaskSpec(
        instruction=f"In /app/{folder}, rename every file whose name ends in `.{old}` so that it ends in "
        f"`.{new}` instead (for example `{stems[0]}.{old}` becomes `{stems[0]}.{new}`). Keep the file "
        "contents, and leave the other files alone.",
        solution=[f'cd /app/{folder} && for f in *.{old}; do mv "$f" "${{f%.{old}}}.{new}"; done'],
        checks={
            "old_names_gone": "not any(os.path.exists(p) for p in E['old'])",
            "renamed_with_contents": "all(read(p) == text for p, text in E['renamed'].items())",
        },
        files=files,
        keep=decoys,
        expected={"old": [f"/app/{p}" for p in targets], "renamed": renamed},
        tags=["files", "mv", "loop"],
    )


MODES = {"sh": ["755", "700", "750"], "key": ["600", "400"], "txt": ["640", "444", "664"]}


def permissions(rng: random.Random) -> TaskSpec:
    folder = rng.choice(NOUNS)
    exts = rng.sample(sorted(MODES), rng.randint(2, 3))
    paths = [f"{folder}/{name(rng)}.{ext}" for ext in exts]
    targets = {f"/app/{p}": rng.choice(MODES[ext]) for p, ext in zip(paths, exts)}
    listing = "\n".join(f"- {p}: {m}" for p, m in targets.items())
    return TaskSpec(
        instruction=f"Set these exact permission modes (octal) on these files; do not change their contents:"
        f"\n\n{listing}",
        solution=[f"chmod {m} {p}" for p, m in targets.items()],
        checks={f"mode_{p.rsplit('/', 1)[1]}": f"mode({p!r}) == 0o{m}" for p, m in targets.items()},
        files={p: ("#!/bin/bash\necho ok\n" if p.endswith(".sh") else _text(rng, 2)) for p in paths},
        keep=paths,
        tags=["files", "chmod"],
    )
