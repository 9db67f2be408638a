"""Families about text files: edit a config value, count, rank, slice and dedupe lines."""

from __future__ import annotations

import random

from coevo.tasks.generate.checks import file_lines, lines_answer, number_answer
from coevo.tasks.generate.families.words import ADJECTIVES, NOUNS, name, sentence, word, words
from coevo.tasks.generate.writer import TaskSpec

CONFIG_KEYS = ["port", "host", "timeout", "workers", "log_level", "max_connections", "retries",
               "cache_size", "mode", "user", "region", "backup_dir"]


def lines_task(path: str, rows: list[str], out: str, answer: list[str], instruction: str, solution: str,
               tags: list[str]) -> TaskSpec:
    """The shape most text families share: one input file of `rows` at /app/`path`, to be left as it
    is, and an answer of exactly the lines `answer` in `out`."""
    return TaskSpec(instruction=instruction, solution=[solution], checks=lines_answer(out),
                    files={path: "\n".join(rows) + "\n"}, keep=[path], expected={"lines": answer},
                    tags=["text", *tags])


def _value(rng: random.Random, key: str) -> str:
    if key in ("port", "timeout", "workers", "max_connections", "retries", "cache_size"):
        return str(rng.randint(2, 9000))
    return rng.choice(NOUNS + ADJECTIVES)


def edit_config(rng: random.Random) -> TaskSpec:
    path = f"etc/{name(rng)}.conf"
    keys = rng.sample(CONFIG_KEYS, rng.randint(5, 8))
    target = rng.choice(keys)
    values = {k: _value(rng, k) for k in keys}
    new = _value(rng, target)
    while new == values[target]:
        new = _value(rng, target)
    original = [f"# {path.split('/')[1]} settings"] + [f"{k}={v}" for k, v in values.items()]
    updated = [f"{target}={new}" if line == f"{target}={values[target]}" else line for line in original]
    return TaskSpec(
        instruction=f"In /app/{path}, change the value of `{target}` to `{new}`. Leave every other line "
        "exactly as it is.",
        solution=[f"sed -i 's/^{target}=.*/{target}={new}/' /app/{path}"],
        checks=file_lines(),
        files={path: "\n".join(original) + "\n"},
        expected={"path": f"/app/{path}", "lines": updated},
        tags=["text", "sed"],
    )


def grep_count(rng: random.Random) -> TaskSpec:
    log, out = f"logs/{word(rng)}.log", "/app/count.txt"
    components = words(rng, 4)
    rows = []
    for i in range(rng.randint(30, 70)):
        level = rng.choice(["INFO", "INFO", "INFO", "WARN", "ERROR", "DEBUG"])
        stamp = f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d} {i // 60:02d}:{i % 60:02d}:07"
        rows.append(f"{stamp} {level} {rng.choice(components)}: {sentence(rng, rng.randint(2, 6))}")
    token = rng.choice(["ERROR", "WARN", *components])
    return TaskSpec(
        instruction=f"Count the lines of /app/{log} that contain the text `{token}` (case-sensitive). Write "
        f"just the number, followed by a newline, to {out}.",
        solution=[f"grep -c '{token}' /app/{log} > {out}"],
        checks=number_answer(out),
        files={log: "\n".join(rows) + "\n"},
        keep=[log],
        expected={"answer": str(sum(token in r for r in rows))},
        tags=["text", "grep"],
    )


def top_k(rng: random.Random) -> TaskSpec:
    path, out, k = f"{word(rng)}.txt", "/app/top.txt", rng.randint(2, 4)
    vocab = words(rng, rng.randint(k + 2, k + 6))
    counts = rng.sample(range(1, 16), len(vocab))  # all distinct, so the ranking has no ties
    items = [w for w, c in zip(vocab, counts) for _ in range(c)]
    rng.shuffle(items)
    top = [w for _, w in sorted(zip(counts, vocab), reverse=True)[:k]]
    return lines_task(
        path, items, out, top,
        f"/app/{path} has one word per line. Write the {k} most frequent words to {out}, "
        "one per line, most frequent first (just the words, no counts).",
        f"sort /app/{path} | uniq -c | sort -rn | head -{k} | awk '{{print $2}}' > {out}", ["sort", "uniq"])


WC = {"lines": "-l", "words": "-w", "bytes": "-c"}


def word_count(rng: random.Random) -> TaskSpec:
    path, out = f"docs/{name(rng)}.txt", "/app/answer.txt"
    text = "".join(sentence(rng, rng.randint(1, 12)) + "\n" for _ in range(rng.randint(5, 30)))
    unit = rng.choice(sorted(WC))
    answer = {"lines": text.count("\n"), "words": len(text.split()), "bytes": len(text.encode())}[unit]
    return TaskSpec(
        instruction=f"Write the number of {unit} in /app/{path} to {out}: just the number, followed by a "
        "newline.",
        solution=[f"wc {WC[unit]} < /app/{path} > {out}"],
        checks=number_answer(out),
        files={path: text},
        keep=[path],
        expected={"answer": str(answer)},
        tags=["text", "wc"],
    )


def dedupe_lines(rng: random.Random) -> TaskSpec:
    path, out = f"{word(rng)}.txt", "/app/unique.txt"
    kind = rng.choice(["host", "email", "word"])
    pool = [{"host": f"{w}.example.com", "email": f"{w}@{word(rng)}.org", "word": w}[kind]
            for w in words(rng, rng.randint(5, 10))]
    items = [rng.choice(pool) for _ in range(rng.randint(15, 30))]
    unique = list(dict.fromkeys(items))
    return lines_task(
        path, items, out, unique,
        f"/app/{path} contains duplicate lines. Write its lines to {out} with duplicates "
        "removed, keeping only the first occurrence of each line, in the original order.",
        f"awk '!seen[$0]++' /app/{path} > {out}", ["awk"])


def line_range(rng: random.Random) -> TaskSpec:
    path, out = f"{word(rng)}/{name(rng)}.txt", "/app/excerpt.txt"
    rows = [sentence(rng, rng.randint(3, 9)) for _ in range(rng.randint(20, 50))]
    first = rng.randint(2, len(rows) - 5)
    last = rng.randint(first + 1, min(len(rows) - 1, first + 12))
    return lines_task(
        path, rows, out, rows[first - 1 : last],
        f"Write lines {first} through {last} (inclusive; the first line is line 1) of /app/{path} to {out}.",
        f"sed -n '{first},{last}p' /app/{path} > {out}", ["sed"])
