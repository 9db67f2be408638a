"""`coevo eval`: pass@1 with a 95% bootstrap interval and the rest, overall and per family."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Annotated

import typer

from coevo.sandbox.cli import BackendOption, ImageMapOption


def fail(message: str) -> None:
    typer.secho(f"error: {message}", fg="red", err=True)
    raise typer.Exit(2)


def eval_command(
    model: Annotated[str, typer.Option(
        help="A local Hugging Face model folder or model name (`coevo model list`), 'vllm:FOLDER' (that model "
             "on a vLLM server: `coevo vllm install`, or --base-url), 'openai:MODEL' (an OpenAI-compatible "
             "endpoint), or 'oracle'.")
    ] = "",
    harness: Annotated[Path | None, typer.Option(help="Harness YAML (harnesses/*.yaml).")] = None,
    tasks: Annotated[Path, typer.Option(help="Folder of Harbor tasks with manifest.json.")] = Path("tasks"),
    split: Annotated[str, typer.Option(help="train, dev, test or all.")] = "dev",
    samples: Annotated[int, typer.Option(min=1, help="Episodes per task.")] = 1,
    seed: Annotated[int, typer.Option(help="Sampling and bootstrap seed; same seed, same result.")] = 0,
    out: Annotated[Path | None, typer.Option(help="Trajectories JSONL (default runs/eval/...).")] = None,
    base_url: Annotated[str | None, typer.Option(help="openai, vllm: the endpoint, e.g. http://127.0.0.1:8000/v1.")
                        ] = None,
    dtype: Annotated[str, typer.Option(help="Local models: float32 or bfloat16.")] = "float32",
    bundle: Annotated[Path | None, typer.Option(help="An exported bundle: its harness and checkpoint.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON, for scripts.")] = False,
    backend: BackendOption = "local",
    image_map: ImageMapOption = None,
    tracking_uri: Annotated[str | None, typer.Option(
        help="Also log the evaluation as a run of the MLflow experiment coevo-eval in this store (e.g. "
             "sqlite:///runs/eval/mlflow.db or http://HOST:5000): metrics, artifacts, episodes as traces.")] = None,
    traces: Annotated[int, typer.Option(min=0, help="With --tracking-uri: episodes traced besides every "
                                                    "failed one.")] = 4,
) -> None:
    """Evaluate a (harness, model) pair on a split of tasks in real sandboxes."""
    from coevo.console import progress
    from coevo.errors import CoevoError
    from coevo.harness import HarnessError, load_harness
    from coevo.sandbox.cli import checked_backends, image_map_from
    from coevo.tasks import load_taskset

    try:
        if bundle is not None:
            from coevo.bundle import load_bundle

            loaded_harness, model_dir, _ = load_bundle(bundle)
            model = model or str(model_dir)
        elif harness is None:
            fail("--harness is required (or --bundle)")
        else:
            loaded_harness = load_harness(harness)
        task_list = load_taskset(tasks).split(split)
        checked_backends(task_list, backend)
        sandboxes = (backend, image_map_from(image_map))
        policy = build_policy(model, loaded_harness, task_list, base_url, dtype)
        out = out or Path("runs/eval") / f"{loaded_harness.name}-{split}-seed{seed}.jsonl"
        if as_json:
            report = run_eval(task_list, loaded_harness, policy, samples, seed, out, sandboxes)
        else:
            with progress(f"eval {loaded_harness.name} on {split}", total=len(task_list) * samples) as advance:
                report = run_eval(task_list, loaded_harness, policy, samples, seed, out, sandboxes,
                                  on_done=lambda traj: advance())
        if tracking_uri:
            from coevo.search.tracking import log_eval

            run_id = log_eval(tracking_uri, loaded_harness, report, f"{loaded_harness.name} on {split}", traces=traces,
                              seed=seed, params={"model": model or "oracle", "split": split, "samples": samples,
                                                 "seed": seed, "tasks": str(tasks)})
            logging.getLogger(__name__).info(f"MLflow run {run_id} (experiment coevo-eval) in {tracking_uri}")
    except (CoevoError, HarnessError, ValueError, OSError) as e:
        fail(str(e))
    if as_json:
        print(json.dumps({**report.as_dict(), "trajectories": str(out)}, indent=1))
        return
    print_report(report, title=f"{loaded_harness.name} x {model or 'oracle'} on {split} ({samples}/task, seed {seed})")
    print(f"trajectories: {out}  (view one: coevo show {out})")


def run_eval(tasks, harness, policy, samples: int, seed: int, out: Path,
             sandboxes: tuple[str, dict[str, str] | None], on_done=None):
    """What `coevo.evaluate.evaluate` does, on the chosen sandboxes ((backend, image_map) for the
    rollout), which evaluate() does not take yet."""
    from coevo.evaluate import report
    from coevo.rollout import rollout, save_trajectories

    backend, image_map = sandboxes
    trajectories = rollout(tasks, harness, policy, n_per_task=samples, seed=seed, on_done=on_done,
                           backend=backend, image_map=image_map)
    save_trajectories(out, trajectories)
    return report(trajectories, seed)


def build_policy(model: str, harness, tasks, base_url: str | None, dtype: str):
    """--model and its options as a policy spec; `make_policy` builds it."""
    from coevo.policy import make_policy

    if model in ("", "oracle"):
        spec = {"backend": "oracle"}
    elif model.startswith("openai:"):
        spec = {"backend": "openai", "model": model.removeprefix("openai:"), "base_url": base_url}
    elif model.startswith("vllm:"):  # the checkpoint on a vLLM server: started here, or at --base-url
        from coevo.models import resolve_model

        spec = {"backend": "vllm", "model": str(resolve_model(model.removeprefix("vllm:"))), "base_url": base_url,
                "dtype": dtype}
    else:  # a folder, or a model name: coevo.models says what is valid
        from coevo.bundle import check_weights
        from coevo.models import resolve_model

        folder = resolve_model(model)
        check_weights(folder)  # a cut checkpoint: a message naming the file, not transformers' traceback
        spec = {"backend": "hf", "model": str(folder), "dtype": dtype}
    return make_policy(spec, harness=harness, tasks=tasks)


def print_report(report, title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table("family", "tasks", "episodes", "pass@1 [95% CI]", "reward", "turns", "format err/turn",
                  "timeouts", "tokens", title=title)
    rows = [("[bold]overall[/]", report.overall), *sorted(report.families.items())]
    for name, s in rows:
        table.add_row(name, str(s.tasks), str(s.episodes),
                      f"{s.pass_at_1:.1%} [{s.ci_low:.1%}, {s.ci_high:.1%}]", f"{s.mean_reward:.3f}",
                      f"{s.mean_turns:.1f}", f"{s.format_error_rate:.2f}", str(s.timeouts), f"{s.mean_tokens:.0f}")
    Console().print(table)
    statuses = ", ".join(f"{k} {v}" for k, v in sorted(report.overall.statuses.items()))
    Console().print(f"end states: {statuses}; verifier errors: {report.overall.verify_errors}")
