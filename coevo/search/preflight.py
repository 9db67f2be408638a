"""`coevo check CONFIG` (= `coevo search CONFIG --dry-run`): everything a search needs, checked before any
compute is spent. Each check is a function returning problems or a detail; a failed one does not stop
the others, so every problem is reported at once. Heavy libraries load inside the checks."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Row:
    check: str
    status: str  # PASS, FAIL, or SKIP (when a check it needs failed)
    detail: str
    seconds: float = 0.0
    table: list = field(default_factory=list)
    """Lines of a table the check printed beside its row (the time estimate's Parts)."""


class Skip(Exception):
    """A check that cannot run because one it depends on failed."""


@dataclass
class Context:
    path: Path
    overrides: dict[str, Any]
    config: Any = None
    base: Any = None
    space: Any = None
    tasks: list = field(default_factory=list)
    splits: dict[str, int] = field(default_factory=dict)
    estimate: list = field(default_factory=list)
    """The time estimate's lines (Part), printed as a table of their own."""


def check_config(c: Context) -> str:
    from coevo.harness import load_harness
    from coevo.search.config import load_config
    from coevo.search.schedule import parse_schedule

    c.config = load_config(c.path, **c.overrides)
    parse_schedule(c.config.schedule, f"{c.path}: schedule")
    c.base = load_harness(c.config.harness)
    if c.config.overrides:
        c.base = c.base.with_overrides(c.config.overrides)
    if (c.config.run_dir / "state.json").exists():
        raise ValueError(f"{c.config.run_dir}: a search named '{c.config.name}' exists; resume it with "
                         f"`coevo search --resume {c.config.run_dir}`, or choose another name")
    return f"{c.config.name}: harness {c.config.harness.name}, schedule '{c.config.schedule}'"


def check_space(c: Context) -> str:
    from coevo.search.inputs import check_greedy
    from coevo.search.instructions.spec import unset_keys
    from coevo.search.space import split_overrides
    from coevo.search.space_check import load_space
    from coevo.train.spec import TrainSpec

    _need(c.base, "config")
    c.space = load_space(c.config.space, c.base)
    check_greedy(c.config, c.space)
    for p in c.space.params:  # one value of each dimension, with its `when` conditions met, rendered
        values = {k: (v[0] if isinstance(v, list) else v) for k, v in p.when.items()}
        values[p.path] = p.samples()[0]
        harness, train = split_overrides(values)
        c.base.with_overrides(harness)  # validates and renders every template
        if train:
            TrainSpec().with_overrides(train)
    missing = unset_keys(c.space)  # GEPA's reflection LM reads its key from the environment when it starts
    if missing:
        raise ValueError(f"{c.config.space}: {'; '.join(missing)}")
    demos = demos_detail(c)
    return f"{c.config.space}: {len(c.space.params)} dimension(s), each rendered at one value" + (
        f"; {demos}" if demos else "")


def demos_detail(c: Context) -> str:
    """The first prompt's size with demonstrations, per setting of them (coevo/search/demos_check.py),
    counted with the model's tokenizer when the config names a model."""
    from coevo.native.spec import is_native
    from coevo.search.demos_check import demos_report, variants

    if is_native(c.base) or not any(h.demonstrations.k for _, h in variants(c.base, c.space)):
        return ""
    tokenizer = None
    if c.config.model is not None and (Path(c.config.model) / "config.json").is_file():
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(c.config.model))
    return demos_report(c.config.harness, c.base, c.space, c.config.tasks, tokenizer)


def check_tasks(c: Context) -> str:
    from coevo.tasks.check import check_task
    from coevo.tasks.task import find_task_folders, load_task

    _need(c.config, "config")
    problems = []
    for folder, family, split in find_task_folders(Path(c.config.tasks)):
        try:
            c.tasks.append(load_task(folder, family, split))
        except Exception as e:  # noqa: BLE001 - every broken folder is one line of the report
            problems.append(str(e))
    c.splits = {s: sum(t.split == s for t in c.tasks) for s in ("train", "dev", "test")}
    empty = [s for s, n in c.splits.items() if not n]
    if empty:
        problems.append(f"{c.config.tasks}: no tasks in split(s) {', '.join(empty)} (see manifest.json)")
    sample = list({t.family: t for t in reversed(c.tasks)}.values())[:4]  # the first task of each family
    for row in (check_task(t.path, c.config.sandbox) for t in sample):
        if not row.ok:
            problems.append(f"tasks check {row.task}: {row.error or f'oracle {row.oracle}, nothing {row.nothing}'}")
    if problems:
        raise ValueError("\n".join(problems))
    return (f"{len(c.tasks)} tasks ({', '.join(f'{s} {n}' for s, n in c.splits.items())}); tasks check "
            f"passed on {', '.join(t.name for t in sample)}")


def check_model(c: Context) -> str:
    _need(c.config, "config")
    from coevo.train.routing import check_replayable

    if c.config.model is None:
        check_replayable(None, c.config.train, c.path)
        return f"no model: the tiny model will be built into {c.config.run_dir / 'model'}"
    from transformers import AutoTokenizer

    if not (Path(c.config.model) / "config.json").is_file():
        raise ValueError(f"model: {c.config.model}: not a Hugging Face model folder (no config.json); give a local "
                         "checkpoint folder, or leave `model` out to build the tiny model")
    check_replayable(Path(c.config.model), c.config.train, c.path)
    tokenizer = AutoTokenizer.from_pretrained(str(c.config.model))
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError(f"{c.config.model}: the tokenizer has no chat template (tokenizer_config.json)")
    return f"{c.config.model}: tokenizer with a chat template{_engine(c.config)}"


def _engine(config) -> str:
    """The vllm backend's python (or server), found before any work: a missing install is this row's error."""
    policy = config.policy or {}
    if policy.get("backend") != "vllm":
        return ""
    if policy.get("base_url"):
        return f"; rollouts on the vLLM server at {policy['base_url']}"
    from coevo.search.inputs import check_train_and_policy
    from coevo.vllm.install import vllm_python

    check_train_and_policy(config)
    return f"; rollouts on vLLM, started with {vllm_python(policy.get('python'))} (a minute or more on CPU)"


def check_sandbox(c: Context) -> str:
    from coevo.sandbox import make_sandbox

    _need(c.config and c.tasks, "config and tasks")
    sandbox = make_sandbox(c.tasks[0], c.config.sandbox)
    try:
        sandbox.start()
        result = sandbox.run("true", timeout=30)
    finally:
        sandbox.close()
    if result.exit_code != 0:
        raise ValueError(f"sandbox '{c.config.sandbox}': `true` exited {result.exit_code}: {result.output[-300:]}")
    return f"'{c.config.sandbox}' sandbox for {c.tasks[0].name} started, ran `true`, closed"


def check_stores(c: Context) -> str:
    from coevo.search.tracking import default_uri

    _need(c.config, "config")
    optuna = c.config.storage or f"sqlite:///{(c.config.run_dir / 'optuna.db').resolve()}"
    mlflow = c.config.tracking_uri or default_uri(c.config.run_dir)
    return "; ".join(f"{what} {_probe(what, url)}" for what, url in (("optuna", optuna), ("mlflow", mlflow)))


def _probe(what: str, url: str) -> str:
    """Write and delete a scratch sqlite file in the nearest existing folder of a local store; reach a
    server (a database, an MLflow tracking server)."""
    import sqlite3

    if url.startswith("sqlite:///"):
        db = Path(url.removeprefix("sqlite:///"))
    elif url.startswith(("file:", "/")):
        db = Path(url.removeprefix("file://").removeprefix("file:")) / "probe"
    else:
        from coevo.search.stores import probe_server

        return probe_server(url)
    folder = db.parent
    while not folder.exists():
        folder = folder.parent
    scratch = folder / f".coevo-check-{what}.sqlite"
    try:
        with sqlite3.connect(scratch) as conn:
            conn.execute("create table probe (x)")
            conn.execute("insert into probe values (1)")
        conn.close()
    except sqlite3.Error as e:
        raise ValueError(f"{what} store {url}: cannot write in {folder}: {e}") from e
    finally:
        scratch.unlink(missing_ok=True)
    return f"{db}: writable"


def check_estimate(c: Context) -> str:
    from coevo.search.estimate import estimate

    _need(c.base and c.tasks and all(c.splits.values()), "the config and tasks in every split")
    c.estimate, detail = estimate(c)
    return detail


CHECKS = {"config": check_config, "space": check_space, "tasks": check_tasks, "model": check_model,
          "sandbox": check_sandbox, "stores": check_stores, "estimate": check_estimate}


def _need(ok: Any, what: str) -> None:
    if not ok:
        raise Skip(f"needs {what}, which failed")


def preflight(path: str | Path, **overrides: Any) -> list[Row]:
    context, rows = Context(Path(path), {k: v for k, v in overrides.items() if v is not None}), []
    for name, check in CHECKS.items():
        started = time.monotonic()
        try:
            status, detail = "PASS", check(context)
        except Skip as e:
            status, detail = "SKIP", str(e)
        except Exception as e:  # noqa: BLE001 - a failed check is a row, and the others still run
            status, detail = "FAIL", str(e) or type(e).__name__
        rows.append(Row(name, status, detail, time.monotonic() - started,
                        context.estimate if name == "estimate" and status == "PASS" else []))
    return rows


def print_rows(rows: list[Row], title: str) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table("check", "status", "detail", "seconds", title=title)
    colour = {"PASS": "green", "FAIL": "red", "SKIP": "yellow"}
    for r in rows:
        table.add_row(r.check, f"[{colour[r.status]}]{r.status}[/]", Text(r.detail), f"{r.seconds:.1f}")
    console = Console()
    console.print(table)
    for r in rows:
        if r.table:
            from coevo.search.estimate import estimate_table

            console.print(estimate_table(r.table))
    for r in rows:
        if r.status == "FAIL":
            console.print(f"FAIL {r.check}:\n{r.detail}", markup=False, highlight=False, soft_wrap=True)
