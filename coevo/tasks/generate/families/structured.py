"""Families about structured data: CSV columns, CSV group-by sums, JSON filtering."""

from __future__ import annotations

import json
import random

from coevo.tasks.generate.checks import lines_answer
from coevo.tasks.generate.families.words import ADJECTIVES, name, word, words
from coevo.tasks.generate.writer import TaskSpec


def _cell(rng: random.Random, column: str) -> str:
    return {
        "id": str(rng.randint(100, 999)),
        "name": name(rng, "-"),
        "email": f"{word(rng)}.{word(rng)}@example.com",
        "city": word(rng).capitalize() + "ville",
        "age": str(rng.randint(18, 90)),
        "team": rng.choice(ADJECTIVES),
        "score": str(rng.randint(0, 100)),
    }[column]


def csv_column(rng: random.Random) -> TaskSpec:
    path, out = f"data/{word(rng)}.csv", "/app/column.txt"
    header = rng.sample(["id", "name", "email", "city", "age", "team", "score"], rng.randint(3, 6))
    column = rng.choice(header)
    rows = [[_cell(rng, c) for c in header] for _ in range(rng.randint(6, 15))]
    index = header.index(column)
    return TaskSpec(
        instruction=f"/app/{path} is a comma-separated file with a header row. Write the values of its "
        f"`{column}` column to {out}, one per line, in file order, without the header.",
        solution=[f"cut -d, -f{index + 1} /app/{path} | tail -n +2 > {out}"],
        checks=lines_answer(out),
        files={path: "\n".join(",".join(r) for r in [header, *rows]) + "\n"},
        keep=[path],
        expected={"lines": [r[index] for r in rows]},
        tags=["data", "csv", "cut"],
    )


GROUPS = {"region": ["north", "south", "east", "west", "central"], "team": None, "store": None}
VALUES = ["amount", "units", "hours", "points"]


def csv_aggregate(rng: random.Random) -> TaskSpec:
    path, out = f"{word(rng)}_report.csv", "/app/totals.csv"
    key, value = rng.choice(sorted(GROUPS)), rng.choice(VALUES)
    groups = rng.sample(GROUPS[key] or words(rng, 6), rng.randint(3, 5))
    header = [key, value, "date"]
    rng.shuffle(header)
    totals = dict.fromkeys(groups, 0)
    rows = []
    for _ in range(rng.randint(10, 20)):
        row = {key: rng.choice(groups), value: rng.randint(1, 500),
               "date": f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"}
        totals[row[key]] += row[value]
        rows.append(",".join(str(row[c]) for c in header))
    totals = {g: t for g, t in totals.items() if t}  # a group drawn for no row does not appear
    k, v = header.index(key) + 1, header.index(value) + 1
    return TaskSpec(
        instruction=f"/app/{path} is a CSV file with a header row. For each distinct `{key}`, add up the "
        f"`{value}` column. Write one line per {key}, formatted `<{key}>,<total>`, to {out} (no header, "
        "any order).",
        solution=[f"awk -F, 'NR>1{{s[${k}]+=${v}}} END{{for(k in s) print k\",\"s[k]}}' /app/{path} > {out}"],
        checks={
            "answer_exists": f"read({out!r}) is not None",
            "totals_correct": f"sorted(l.strip() for l in lines({out!r}) if l.strip()) == sorted(E['lines'])",
        },
        files={path: "\n".join([",".join(header), *rows]) + "\n"},
        keep=[path],
        expected={"lines": [f"{g},{t}" for g, t in totals.items()]},
        tags=["data", "csv", "awk"],
    )


STATUSES = ["active", "inactive", "pending"]


def json_filter(rng: random.Random) -> TaskSpec:
    path, out = f"{word(rng)}.json", "/app/selected.json"
    records = [{"id": rng.randint(1, 999), "name": name(rng, "-"), "status": rng.choice(STATUSES),
                "score": rng.randint(0, 100)} for _ in range(rng.randint(6, 14))]
    forced = rng.choice(records)  # at least one object matches, so the answer is never just []
    if rng.random() < 0.5:
        status = forced["status"] = rng.choice(STATUSES)
        field, condition, test = "name", f"`status` is `\"{status}\"`", f"r['status'] == '{status}'"
        picked = [r["name"] for r in records if r["status"] == status]
    else:
        limit = rng.randint(30, 70)
        forced["score"] = rng.randint(limit + 1, 100)
        field, condition, test = "id", f"`score` is greater than {limit}", f"r['score'] > {limit}"
        picked = [r["id"] for r in records if r["score"] > limit]
    return TaskSpec(
        instruction=f"/app/{path} holds a JSON array of objects. Write to {out} a JSON array of the "
        f"`{field}` values of the objects whose {condition}, in their original order.",
        solution=[(f"python3 -c \"import json; d = json.load(open('/app/{path}')); "
                   f"print(json.dumps([r['{field}'] for r in d if {test}]))\" > {out}")],
        checks={"answer_exists": f"read({out!r}) is not None",
                "selection_correct": f"json.loads(read({out!r})) == E['picked']"},
        files={path: json.dumps(records, indent=2) + "\n"},
        keep=[path],
        expected={"picked": picked},
        tags=["data", "json", "python"],
    )
