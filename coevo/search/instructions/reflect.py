"""What the reflection LM reads and how its reply becomes a template.

A record per evolve task, in GEPA's recommended shape (Inputs / Generated Outputs / Feedback), built from
the episode's trajectory: the instruction, the agent's actions with what the shell answered, the errors,
and the verifier's per-check results from reward.json where the task writes them. The reply must hold
the complete new template between <template> and </template>; a reply that does not, or a text that is
not a valid template for its slot, loses its candidate (the caller records why)."""

from __future__ import annotations

import re

from coevo.outcomes import passed
from coevo.rollout.trajectory import Trajectory

SLOT_VARIABLES = {
    "system": "tools, action_format, example, submit_example, submit_command, max_turns",
    "instance": "instruction, task, initial_observation",
    "observation": "tool, command, output, exit_code, timed_out",
    "format_error": "error, example, retries_left",
    "timeout": "command, timeout_s",
    "nonzero_exit_hint": "command, exit_code",
}
"""The variables each slot's template is rendered with (coevo/harness/prompts.py)."""

FORBIDDEN = re.compile(r"{%-?\s*(include|import|extends|from)\b")
"""Tags that load other files: an evolved text is written by a model, so it may not reach beyond itself."""

MAX_CHARS = 20_000
ACTION_CHARS, OUTPUT_CHARS = 2_500, 400

PROMPT = """You are improving one prompt template of a terminal agent: its "<slot>" template, a Jinja2 \
template that the agent's harness renders (variables available: <variables>).

The current template:
```
<curr_param>
```

Below are tasks the agent attempted with it: the task, what the agent did (its replies, the commands it \
ran and what the shell answered), and feedback: the verifier's per-check results, the errors, the score.

<side_info>

Write an improved template that makes the agent solve such tasks. Keep the Jinja expressions valid and \
use only the variables listed; do not use include, import, extends or from. Reply with the complete new \
template between a line <template> and a line </template>."""


def reflection_prompt(slot: str) -> str:
    """GEPA's reflection prompt template for a slot (<curr_param> and <side_info> are GEPA's placeholders)."""
    return PROMPT.replace("<slot>", slot).replace("<variables>", SLOT_VARIABLES.get(slot, "see the harness"))


def record(instruction: str, episodes: list[Trajectory], score: float) -> dict:
    """One evolve task as the reflection LM reads it (the first episode's actions; every episode's outcome)."""
    first = episodes[0]
    return {"Inputs": {"task": instruction.strip()},
            "Generated Outputs": actions(first),
            "Feedback": feedback(episodes, score)}


def actions(traj: Trajectory) -> str:
    lines = []
    for i, step in enumerate(traj.steps, 1):
        lines.append(f"turn {i}, the agent replied:\n{step.reply.strip()}")
        if step.format_error:
            lines.append(f"-> unparseable reply: {step.format_error}")
        for call, result in zip(step.calls, step.results):
            shown = result.output.strip()[:OUTPUT_CHARS] or "(no output)"
            lines.append(f"-> {call.name} `{result.command}` exited {result.exit_code}"
                         f"{' (timed out)' if result.timed_out else ''}:\n{shown}")
    text = "\n".join(lines) or "(the agent took no action)"
    return text if len(text) <= ACTION_CHARS else text[:ACTION_CHARS] + "\n[... cut]"


def feedback(episodes: list[Trajectory], score: float) -> str:
    traj = episodes[0]
    verdict = "passed" if passed(traj) else "failed"
    lines = [f"The task {verdict} (score {score:g}; the episode ended '{traj.status}' after {traj.turns} turn(s))."]
    if traj.checks:
        lines.append("Verifier checks (reward.json):")
        lines += [f"- {name}: {'passed' if v >= 1 else 'FAILED'} ({v:g})" for name, v in traj.checks.items()]
    else:
        lines.append(f"Verifier reward: {traj.reward:g} (the task gives no per-check results).")
    if traj.verify_error:
        lines.append(f"Verifier error: {traj.verify_error}")
    errors = [e for e in traj.errors if e]
    if errors:
        lines.append("Errors: " + "; ".join(e[:300] for e in errors[:6]))
    if len(episodes) > 1:
        lines.append(f"{sum(passed(t) for t in episodes)} of {len(episodes)} samples of this task passed.")
    return "\n".join(lines)


def parse_reply(reply: str) -> str:
    """The template in a reflection reply; ValueError saying what is wrong with the reply."""
    found = re.search(r"<template>\n?(.*?)\n?</template>", reply or "", re.DOTALL)
    if found is None:
        raise ValueError(f"malformed reply: no <template>...</template> block (got {str(reply)[:200]!r})")
    return found.group(1)


def text_problem(text: str, parent: str) -> str | None:
    """Why a proposed text cannot be a candidate, before it is ever rendered; None when it can."""
    from jinja2 import Environment, TemplateSyntaxError

    if not text.strip():
        return "empty template"
    if text.strip() == parent.strip():
        return "unchanged: the proposal equals its parent"
    if len(text) > MAX_CHARS:
        return f"too long: {len(text)} characters (at most {MAX_CHARS})"
    if FORBIDDEN.search(text):
        return "uses include/import/extends/from, which an evolved template may not"
    try:
        Environment().parse(text)
    except TemplateSyntaxError as e:
        return f"template syntax error on line {e.lineno}: {e.message}"
    return None
