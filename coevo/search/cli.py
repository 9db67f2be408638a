"""`coevo search`, `coevo ui`, `coevo compare`, `coevo export`. Heavy libraries load inside the commands."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer


def fail(message: str) -> None:
    from coevo.search.stores import redact

    typer.secho(f"error: {redact(message)}", fg="red", err=True)
    raise typer.Exit(2)


def crash_report(error: BaseException, run_dir: Path) -> str:
    """What a run that stopped on an error says: the cause, that its finished work is kept, how to continue,
    and where the traceback went (RUN/crash.log)."""
    import traceback

    from coevo.errors import CoevoError

    log = Path(run_dir) / "crash.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("".join(traceback.format_exception(error)))
    cause = str(error) if isinstance(error, CoevoError) else f"{type(error).__name__}: {error}"
    return (f"the search stopped: {cause}\n  finished phases, trials and checkpoints are kept in {run_dir}; "
            f"once the cause is fixed, continue with: coevo search --resume {run_dir}\n  traceback: {log}")


def search(
    config: Annotated[Path | None, typer.Argument(help="Search config YAML (e.g. search_spaces/quickstart.yaml).")
                      ] = None,
    resume: Annotated[Path | None, typer.Option(help="Resume the run in this folder (or runs/NAME) after a crash "
                                                     "or kill: finished trials and checkpoints are kept.")] = None,
    worker: Annotated[bool, typer.Option("--worker", help="Only evaluate trials: join each h- and n-phase of the "
                                                         "run CONFIG names, owned by another `coevo search CONFIG` "
                                                         "(waits for it; exits when no such phase is left).")] = False,
    join: Annotated[Path | None, typer.Option(help="Add this process as a worker to the h- or n-phase that the "
                                                   "run in this folder is in now (shared Optuna storage).")] = None,
    storage: Annotated[str | None, typer.Option(help="Optuna storage, a SQLAlchemy URL: postgresql://USER@HOST/DB "
                                                     "shares one study among workers on many machines (default: "
                                                     "the config's `storage`, else sqlite in the run folder).")
                       ] = None,
    tracking_uri: Annotated[str | None, typer.Option(help="MLflow tracking URI, e.g. http://HOST:5000 (default: "
                                                          "the config's `tracking_uri`, else sqlite in the run "
                                                          "folder).")] = None,
    name: Annotated[str | None, typer.Option(help="Run name (default: the config's name or file stem).")] = None,
    budget: Annotated[float | None, typer.Option(help="Override the config's budget dial.")] = None,
    seed: Annotated[int | None, typer.Option(help="Override the config's seed (sampling, TPE, task subsets, "
                                                  "training, intervals; the test draw keeps splits.test_seed).")
                    ] = None,
    runs_dir: Annotated[Path | None, typer.Option(help="Parent folder of run folders (default runs/).")] = None,
    backend: Annotated[str | None, typer.Option(help="Sandbox backend for every episode: local, docker or auto "
                                                     "(default: the config's `sandbox`).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Run the preflight checks of `coevo check` "
                                                           "and exit; nothing is trained or searched.")] = False,
) -> None:
    """Co-evolve harness and weights: Optuna over harnesses, GRPO on weights, tracked in MLflow."""
    if dry_run:
        if config is None:
            fail("--dry-run checks a CONFIG file; give one")
        check(config, name=name, budget=budget, runs_dir=runs_dir, backend=backend, storage=storage,
              tracking_uri=tracking_uri)
    from coevo import logs
    from coevo.errors import CoevoError
    from coevo.search.config import load_config
    from coevo.search.run import LOG_FILE, Search, log, run_dir_of
    from coevo.search.workers import join_current, owner_lock, run_config, run_worker

    stores = {k: v for k, v in {"storage": storage, "tracking_uri": tracking_uri}.items() if v is not None}
    try:
        folder = run_dir_of(resume or join, runs_dir or Path("runs")) if resume or join else None
        if join is not None:
            with logs.to_file(folder / LOG_FILE):
                ran = join_current(Search(run_config(folder, **stores), resume=True).ctx)
            print(f"worker done: ran {ran} trial(s) of {folder}")
            return
        if resume is not None:
            if budget is not None or seed is not None or config is not None or backend is not None or worker:
                fail("--resume continues a run with its own config, budget, seed and backend (in "
                     "RUN/config.yaml); drop CONFIG, --budget, --seed, --backend and --worker")
            cfg = run_config(folder, **stores)
        elif config is None:
            fail("give a CONFIG file, or --resume RUN")
        else:
            cfg = load_config(config, name=name, budget=budget, runs_dir=str(runs_dir) if runs_dir else None,
                              sandbox=backend, seed=seed, **stores)
        if worker:
            with logs.to_file(cfg.run_dir / LOG_FILE):
                ran = run_worker(cfg.run_dir, stores, log=log.info)
            print(f"worker done: ran {ran} trial(s) of {cfg.run_dir}")
            return
        with owner_lock(cfg.run_dir):
            search_run = Search(cfg, resume=resume is not None)
            try:
                with logs.library_bars_off():  # no tqdm bar per model load or dataset map between our lines
                    state = search_run.run()
            except Exception as e:  # noqa: BLE001 - mid-run, any cause: keep the traceback, say how to go on
                fail(crash_report(e, cfg.run_dir))
    except (CoevoError, ValueError, OSError) as e:
        fail(str(e))
    if not logs.shows():  # under -q the log lines are off, but the final table is what the command is for
        from coevo.search.final_table import markdown

        print(markdown(state, search_run.ctx.inputs))
    print(f"\nrun folder: {cfg.run_dir}\n  its log: {cfg.run_dir / LOG_FILE}\n  compare variants: coevo compare "
          f"{cfg.run_dir}\n  browse in MLflow: coevo ui {cfg.run_dir}\n  export the best pair: coevo export "
          f"{cfg.run_dir} --out bundle/")
    del state


def check(
    config: Annotated[Path, typer.Argument(help="Search config YAML to check.")],
    name: Annotated[str | None, typer.Option(help="Run name, as for `coevo search`.")] = None,
    budget: Annotated[float | None, typer.Option(help="Budget dial, as for `coevo search`.")] = None,
    runs_dir: Annotated[Path | None, typer.Option(help="Parent folder of run folders (default runs/).")] = None,
    backend: Annotated[str | None, typer.Option(help="Sandbox backend, as for `coevo search`.")] = None,
    storage: Annotated[str | None, typer.Option(help="Optuna storage URL, as for `coevo search`.")] = None,
    tracking_uri: Annotated[str | None, typer.Option(help="MLflow tracking URI, as for `coevo search`.")] = None,
) -> None:
    """Preflight: config, space (each dimension rendered), tasks, model, sandbox, stores and a time
    estimate, checked before any compute is spent. Exits 1 when any check fails."""
    from coevo.search.preflight import preflight, print_rows

    rows = preflight(config, name=name, budget=budget, runs_dir=str(runs_dir) if runs_dir else None,
                     sandbox=backend, storage=storage, tracking_uri=tracking_uri)
    bad = [r.check for r in rows if r.status != "PASS"]
    print_rows(rows, f"coevo check {config}: " + (f"{len(bad)} problem(s)" if bad else "all checks pass"))
    raise typer.Exit(1 if bad else 0)


def ui(
    run: Annotated[Path, typer.Argument(help="Run folder (or name under runs/).")],
    port: Annotated[int, typer.Option(help="MLflow UI port on 127.0.0.1.")] = 5000,
    optuna: Annotated[bool, typer.Option("--optuna", help="Also start optuna-dashboard on the run's Optuna "
                                                         "storage.")] = False,
    optuna_port: Annotated[int, typer.Option(help="optuna-dashboard port on 127.0.0.1.")] = 8080,
) -> None:
    """Start the MLflow UI (and with --optuna, optuna-dashboard) for a run on 127.0.0.1, print their URLs,
    and stop both on Ctrl-C or SIGTERM."""
    from coevo.search.errors import SearchError
    from coevo.search.run import run_dir_of
    from coevo.search.ui import serve

    try:
        code = serve(run_dir_of(run), port, optuna, optuna_port)
    except (SearchError, RuntimeError, OSError) as e:
        fail(str(e))
    raise typer.Exit(code)


def compare(
    run: Annotated[Path, typer.Argument(help="Run folder (or name under runs/).")],
    phase: Annotated[str | None, typer.Option(help="Only this phase (h1, w1, arm-harness, ...).")] = None,
    role: Annotated[str, typer.Option(help="Which task set's scores: evolve (the trials), promotion, test or "
                                           "held_out; one set per table.")] = "evolve",
    top: Annotated[int, typer.Option(help="Rows to show, best first (0: all).")] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON, for scripts.")] = False,
) -> None:
    """The harness variants of a search, best first, read back from its MLflow store."""
    from coevo.search.errors import SearchError
    from coevo.search.report import print_rows, variant_rows
    from coevo.search.run import run_dir_of

    try:
        folder = run_dir_of(run)
        rows = variant_rows(folder, phase, role)
    except SearchError as e:
        fail(str(e))
    rows = rows[:top] if top else rows
    if as_json:
        print(json.dumps(rows, indent=1))
    else:
        print_rows(rows, f"{folder.name}: pairs by {role} pass@1" + (f" ({phase})" if phase else ""))


def report(
    run: Annotated[Path, typer.Argument(help="Run folder (or name under runs/).")],
) -> None:
    """The run's final table (pairs, 2x2, held-out block, ratchet log, verdict), its trace count, and the
    path of its summary plot (each lever per phase, and the 2x2 with intervals)."""
    from coevo.search.errors import SearchError
    from coevo.search.report import run_report
    from coevo.search.run import run_dir_of

    try:
        text, plot = run_report(run_dir_of(run))
    except SearchError as e:
        fail(str(e))
    print(text)
    print(f"plot: {plot}")


def export(
    run: Annotated[Path, typer.Argument(help="Run folder (or name under runs/).")],
    out: Annotated[Path, typer.Option(help="Bundle folder to write (must not exist or be empty).")],
    row: Annotated[str, typer.Option(help=(
        "Which pair: a row of the final table (co-evolved, harness-only, weights-only, baseline), or a nested "
        "trial's label such as 'n1 #2' (its harness with its adapter merged in)."))] = "co-evolved",
    register: Annotated[str | None, typer.Option(help="Also register the bundle in the MLflow Model Registry "
                                                      "under this name.")] = None,
) -> None:
    """Write the best pair as a self-contained bundle: harness + templates + checkpoint + report."""
    from coevo.errors import CoevoError
    from coevo.search.export import export_bundle
    from coevo.search.run import run_dir_of

    try:
        folder = run_dir_of(run)
        bundle, version = export_bundle(folder, out, row=row, register=register)
    except (CoevoError, OSError) as e:  # SearchError (the run) and BundleError (the folder)
        fail(str(e))
    print(f"wrote {bundle}" + (f"; registered as {register} version {version}" if version else ""))
    print(f"re-evaluate it: coevo eval --bundle {bundle} --split test")
