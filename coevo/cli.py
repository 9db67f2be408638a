"""The `coevo` command. Each area owns its commands in its own `cli.py`; this file only mounts them.

Area cli modules import typer and nothing heavy at module level, so `coevo --help` stays fast.
"""

import typer

from coevo.tasks import cli as tasks_cli

app = typer.Typer(
    help="Harness-model co-evolution for terminal agents.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(tasks_cli.app, name="tasks", help="List, generate and check Harbor-format task folders.")

# Further areas register here, one line each: app.command("name")(area_cli.function)


if __name__ == "__main__":
    app()
