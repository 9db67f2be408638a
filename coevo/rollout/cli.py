"""`coevo show FILE [--index I]`: one episode from a trajectories JSONL file, turn by turn.

Only typer at module level: `coevo --help` must stay fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def show(
    file: Annotated[Path, typer.Argument(help="A trajectories .jsonl file (written by a rollout).")],
    index: Annotated[int, typer.Option("--index", "-i", help="Which episode (0-based line number).")] = 0,
    messages: Annotated[bool, typer.Option(help="Print the raw chat messages instead of the turns.")] = False,
) -> None:
    """Render one episode: its task, the model's replies, commands, outputs, status and reward."""
    from rich.console import Console

    from coevo.rollout.trajectory import load_trajectories

    try:
        trajectories = load_trajectories(file)
    except (OSError, ValueError) as e:
        typer.secho(f"error: {e}", fg="red", err=True)
        raise typer.Exit(2) from None
    if not 0 <= index < len(trajectories):
        typer.secho(f"error: {file} holds {len(trajectories)} episodes; --index must be in "
                    f"0..{len(trajectories) - 1}", fg="red", err=True)
        raise typer.Exit(2)
    console = Console()
    for renderable in render_episode(trajectories[index], raw_messages=messages):
        console.print(renderable)


def render_episode(t, raw_messages: bool = False) -> list:
    """Rich renderables for one Trajectory: a header, then each turn (or each message), then a summary."""
    from rich.panel import Panel
    from rich.text import Text

    out: list = [Panel(Text(_first_user(t)), title=f"[bold]{t.task}[/] #{t.sample}  harness {t.harness}",
                       subtitle=t.family or None)]
    if raw_messages:
        out += [Panel(Text(m["content"]), title=m["role"]) for m in t.messages]
    else:
        for n, step in enumerate(t.steps, 1):
            out.append(_turn(n, step))
    out.append(_summary(t))
    return out


def _first_user(t) -> str:
    """The task's own first message (after any demonstration turns)."""
    from coevo.rollout.trajectory import task_instruction

    return task_instruction(t) or "(no messages recorded)"


def _turn(n: int, step):
    from rich.console import Group
    from rich.panel import Panel
    from rich.text import Text

    parts: list = [Text(step.reply, style="cyan")]
    if step.format_error:
        parts.append(Text(f"format error: {step.format_error}", style="bold red"))
    for i, call in enumerate(step.calls):  # results follow the calls in order; a submit has none
        result = step.results[i] if i < len(step.results) else None
        parts.append(Text(f"$ {call.display()}" if call.name == "bash" else f"> {call.display()}",
                          style="bold"))
        if result is not None:
            parts.append(Text(result.output or "(no output)", style="dim"))
            if result.failed:
                why = "timed out" if result.timed_out else f"exit {result.exit_code}"
                parts.append(Text(f"[{why}]", style="red"))
    return Panel(Group(*parts), title=f"turn {n}", subtitle=f"{step.tokens} tokens")


def _summary(t):
    from rich.markup import escape
    from rich.table import Table

    table = Table.grid(padding=(0, 2))
    style = "green" if t.status == "submitted" else "yellow"
    rows = [("status", f"[{style}]{t.status}[/]" + (f"  ({escape(t.error)})" if t.error else "")),
            ("reward", f"{t.reward:g}" + (f"  {escape(str(t.checks))}" if t.checks else "")),
            ("turns", f"{t.turns}  format errors {t.format_errors}  timeouts {t.timeouts}"),
            ("tokens", (f"{t.tokens} sampled, buffer {len(t.completion_ids)} (model {sum(t.completion_mask)}), "
                        f"drift {t.drift if t.drift is not None else '-'}")),
            ("time", "  ".join(f"{k} {v:.2f}s" for k, v in t.timing.items()))]
    if t.verify_error:
        rows.append(("verifier", f"[red]{escape(t.verify_error)}[/]"))
    for key, value in rows:
        table.add_row(f"[bold]{key}[/]", value)
    return table
