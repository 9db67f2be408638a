"""`coevo check`'s view of in-context demonstrations (coevo/harness/demos.py): for the base harness and each
value of the space's `demonstrations.*` keys, the largest first prompt over the search's tasks with the
demonstrations' share of it, and two errors a rollout would otherwise meet late: a `same_family` pool
missing a family the tasks need, and a first prompt that leaves no room under limits.max_context_tokens."""

from __future__ import annotations

from pathlib import Path

from coevo.harness.demos import CHARS_PER_TOKEN, first_messages, load_pool, pool_paths

PREFIX = "demonstrations."


def search_tasks(tasks_dir: Path) -> list:
    """The train and dev tasks: those a search rolls out under its harnesses (a folder without a manifest:
    all of them)."""
    from coevo.tasks.task import find_task_folders, load_task

    return [load_task(folder, family, split) for folder, family, split in find_task_folders(Path(tasks_dir))
            if split in ("train", "dev", "")]


def variants(base, space) -> list[tuple[str, object]]:
    """(label, harness): the base, and each value of each `demonstrations.*` key of the space (at the space's
    largest k, so that a key other than k is seen with demonstrations on)."""
    from coevo.harness import HarnessError

    params = [p for p in (space.params if space else []) if p.path.startswith(PREFIX)]
    top_k = max((v for p in params if p.path == PREFIX + "k" for v in p.samples()), default=None)
    out = [("base", base)]
    for p in params:
        for value in p.samples():
            values = {**({PREFIX + "k": top_k} if top_k is not None else {}), p.path: value}
            try:
                out.append((", ".join(f"{k.removeprefix(PREFIX)}={v}" for k, v in values.items()),
                            base.with_overrides(values)))
            except HarnessError:
                continue  # the space check reports the value itself
    return out


def demos_report(harness_file: Path, base, space, tasks_dir: Path, tokenizer=None) -> str:
    """'prompt tokens: N (demos M)' per variant with demonstrations on; ValueError naming the harness file
    and the field when a variant cannot serve the tasks."""
    tasks, count = search_tasks(tasks_dir), _counter(tokenizer)
    parts, problems, done, without = [], [], set(), {}
    for label, h in variants(base, space):
        if not h.demonstrations.k or not tasks or h.demonstrations in done:
            continue
        done.add(h.demonstrations)
        if not without:  # the variants differ in demonstrations only: the prompt without them is the base's
            off = h.model_copy(update={"demonstrations": h.demonstrations.model_copy(update={"k": 0})})
            without = {t.name: count(first_messages(off, t.name, t.family, t.instruction, None)) for t in tasks}
        where = f"{harness_file} ({label})"
        problems += _family_gaps(h, tasks, where)
        total, name = max((count(first_messages(h, t.name, t.family, t.instruction, None)), t.name) for t in tasks)
        demos = total - without[name]  # of the largest first prompt (no initial observation)
        parts.append(f"prompt tokens: {total} (demos {demos}) at {label}")
        lim = h.limits
        if total + lim.max_tokens_per_turn > lim.max_context_tokens:
            problems.append(f"{where}: demonstrations.k={h.demonstrations.k}: the first prompt of {name} is "
                            f"{total} tokens (demos {demos}) + limits.max_tokens_per_turn={lim.max_tokens_per_turn} "
                            f"> limits.max_context_tokens={lim.max_context_tokens}; valid: a smaller k, a pool "
                            "of shorter episodes (demonstrations.pool), or a larger limits.max_context_tokens")
    if problems:
        raise ValueError("\n".join(problems))
    how = "" if tokenizer is not None else f" (estimated at {CHARS_PER_TOKEN} characters a token: no model given)"
    return "; ".join(parts) + how if parts else ""


def _family_gaps(h, tasks: list, where: str) -> list[str]:
    if h.demonstrations.pick != "same_family":
        return []
    have = {demo.family for field, path in pool_paths(h) for demo in load_pool(path, field)}
    gaps = sorted({t.family for t in tasks} - have)
    if not gaps:
        return []
    families = f"famil{'y' if len(gaps) == 1 else 'ies'} {', '.join(gaps)}"
    return [(f"{where}: demonstrations.pool has no episode of {families}, which the tasks need under "
            "demonstrations.pick same_family; valid: a pool built from these tasks (`coevo demos build TASKS "
            "--split train --out FILE`), or pick: nearest or random")]


def _counter(tokenizer):
    if tokenizer is None:
        return lambda messages: sum(len(m["content"]) for m in messages) // CHARS_PER_TOKEN
    return lambda messages: len(tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True,
                                                              return_dict=True)["input_ids"])
