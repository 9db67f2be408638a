"""Families about tar.gz archives: build one from chosen files, and pull a value out of a given one."""

from __future__ import annotations

import random

from coevo.tasks.generate.checks import MEMBERS
from coevo.tasks.generate.families.words import name, sentence, word, words
from coevo.tasks.generate.writer import TaskSpec, targz


def _text(rng: random.Random) -> str:
    return "".join(sentence(rng, rng.randint(3, 7)) + "\n" for _ in range(rng.randint(1, 4)))


def tar_create(rng: random.Random) -> TaskSpec:
    folder, archive = word(rng), f"/app/{name(rng, '-')}.tar.gz"
    ext = rng.choice(["conf", "cfg", "ini", "txt", "json"])
    stems = words(rng, rng.randint(5, 8))
    n_hits = rng.randint(2, len(stems) - 2)
    hits = [f"{folder}/{s}.{ext}" for s in stems[:n_hits]]
    decoys = [f"{folder}/{s}.{rng.choice(['bak', 'tmp', 'log'])}" for s in stems[n_hits:]]
    files = {p: _text(rng) for p in hits + decoys}
    return TaskSpec(
        instruction=f"Create the gzip-compressed tar archive {archive} containing exactly the `.{ext}` files "
        f"of /app/{folder} and nothing else. Store them with paths relative to /app (for example "
        f"`{hits[0]}`).",
        solution=[f"cd /app && tar czf {archive} {folder}/*.{ext}"],
        helpers=MEMBERS,
        checks={
            "archive_exists": f"os.path.isfile({archive!r})",
            "members_exact": f"sorted(members({archive!r})) == E['members']",
            "contents_match": f"all(members({archive!r})[p] == E['contents'][p].encode() "
            "for p in E['members'])",
        },
        files=files,
        keep=hits + decoys,
        expected={"members": sorted(hits), "contents": {p: files[p] for p in hits}},
        tags=["archives", "tar"],
    )


def archive_extract(rng: random.Random) -> TaskSpec:
    archive, dest, out = f"{name(rng, '-')}.tar.gz", f"/app/{word(rng)}", "/app/value.txt"
    top, key = word(rng), rng.choice(["token", "api_key", "secret", "license", "build_id"])
    value = f"{word(rng)}{rng.randint(1000, 99999)}"
    config = f"{top}/{word(rng)}/{name(rng)}.ini"
    settings = [f"{k}={word(rng)}{rng.randint(10, 999)}" for k in ("owner", "label", "zone")]
    settings.append(f"{key}={value}")
    rng.shuffle(settings)
    inner = {config: "[main]\n" + "\n".join(settings) + "\n"}
    inner.update({f"{top}/{s}.txt": _text(rng) for s in words(rng, rng.randint(2, 4))})
    return TaskSpec(
        instruction=f"Extract the archive /app/{archive} into the directory {dest} (create it). The archive "
        f"contains the file `{config}`; write the value of its `{key}` setting to {out}, followed by a "
        "newline.",
        solution=[f"mkdir -p {dest} && tar xzf /app/{archive} -C {dest}",
                  f"grep '^{key}=' {dest}/{config} | cut -d= -f2 > {out}"],
        checks={
            "extracted": f"all(read({dest!r} + '/' + p) == text for p, text in E['inner'].items())",
            "answer_exists": f"read({out!r}) is not None",
            "value_correct": f"answer({out!r}) == E['value']",
        },
        files={archive: targz(inner)},
        keep=[archive],
        expected={"inner": inner, "value": value},
        tags=["archives", "tar", "grep"],
    )
