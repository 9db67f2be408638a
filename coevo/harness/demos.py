"""In-context demonstrations: verified episodes, stored harness-neutrally, chosen per task and rendered by
the harness itself, so that the same episode reads as a ```bash block under one harness and as JSON or
`<tool_call>` tags under another.

A pool is a JSONL file of `Demo`s: the task's name, family and instruction, each turn's commands with
their outputs and exit codes, and the reward. `coevo demos build` writes the oracle's (solve.sh replayed
in real sandboxes, verified) from a train split only, so no dev, promotion or test solution can reach a
prompt; `coevo demos own` writes the model's own verified successes from episode files. The bundled tasks'
pool ships in harnesses/demos/oracle.jsonl (spec.DEFAULT_DEMOS_POOL). Building pools: demos_build.py.

Demonstrations are prompt, never trained on: they enter the episode's first prompt (`prompt_ids`), and
token rows mask the prompt out (coevo.train.harvest.token_row). A demo's instance prompt shows no initial
observation (the pool does not record one).
"""

from __future__ import annotations

import hashlib
import random
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ValidationError

from coevo.harness.errors import HarnessError
from coevo.harness.formats import render_action
from coevo.harness.prompts import instance_prompt, observation_text, system_prompt
from coevo.harness.tools import ToolResult, truncate

if TYPE_CHECKING:
    from coevo.harness.spec import HarnessSpec

CHARS_PER_TOKEN = 4
"""Token estimate where no tokenizer is at hand (harness load time); `coevo check` counts with the model's."""
SAMPLE_TASK = ("sample-task", "", "Create /app/hello.txt.")
"""(name, family, instruction) the fingerprint and the load-time check render an opening for."""


class DemoTurn(BaseModel):
    commands: list[str] = []
    """Shell commands of one reply, in order."""
    results: list[ToolResult] = []
    """One per command, as it ran (each command alone, so each has its own output and exit code)."""
    submit: bool = False
    """The reply also submits (its results, if any, are then not shown: the episode ends)."""


class Demo(BaseModel):
    task: str
    """The task's name (folder name); a task is never its own demonstration."""
    family: str = ""
    """The task's family, for `pick: same_family`."""
    instruction: str
    """The task's instruction.md, stripped; a task with the same instruction never sees this demo either."""
    turns: list[DemoTurn]
    """The episode's replies in order; unparseable ones are left out."""
    reward: float = 1.0
    """The verifier's reward (a pool holds passed episodes only)."""
    source: Literal["oracle", "own"] = "oracle"
    """Who solved it: the oracle (solve.sh) or the model itself."""


# -- pools -----------------------------------------------------------------------------------------
def pool_paths(harness: HarnessSpec) -> list[tuple[str, Path]]:
    """(field, file) of each pool the harness's `demonstrations.source` draws on, own first."""
    from coevo.harness.spec import DEFAULT_DEMOS_POOL

    d = harness.demonstrations
    out = []
    if d.source in ("own", "both"):
        if d.own_pool is None:
            raise HarnessError(f"demonstrations.own_pool is unset, but demonstrations.source is '{d.source}'; "
                               "set it to a pool of the model's verified successes (`coevo demos own EPISODES "
                               "--tasks DIR --out FILE`), or use source: oracle")
        out.append(("demonstrations.own_pool", d.own_pool))
    if d.source in ("oracle", "both"):
        out.append(("demonstrations.pool", d.pool or DEFAULT_DEMOS_POOL))
    return out


def load_pool(path: Path, field: str = "demonstrations.pool") -> list[Demo]:
    """The demos of a pool file; an error names the field, the file and the line."""
    path = Path(path)
    if not path.is_file():
        raise HarnessError(f"{field}: {path} does not exist; build a pool with `coevo demos build TASKS --split "
                           "train --out FILE`, or leave demonstrations.pool unset for the bundled one")
    return list(_read_pool(str(path.resolve()), path.stat().st_mtime_ns, field))


@lru_cache(maxsize=16)
def _read_pool(path: str, mtime_ns: int, field: str) -> tuple[Demo, ...]:
    demos = []
    for i, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            demos.append(Demo.model_validate_json(line))
        except ValidationError as e:
            raise HarnessError(f"{field}: {path} line {i} is not a demonstration ({e.errors()[0]['msg']}); "
                               "pools are written by `coevo demos build` / `coevo demos own`") from None
    return tuple(demos)


def save_pool(path: Path, demos: list[Demo]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(d.model_dump_json(exclude_defaults=False) + "\n" for d in demos))


# -- choosing --------------------------------------------------------------------------------------
def choose(harness: HarnessSpec, task: str, family: str, instruction: str) -> list[Demo]:
    """The `demonstrations.k` demos shown before `task`: never the task itself (by name or instruction)."""
    d = harness.demonstrations
    if not d.k:
        return []
    seen, pool = {task}, []
    for field, path in pool_paths(harness):
        for demo in load_pool(path, field):  # own first, so `both` keeps the model's own episode of a task
            if demo.task not in seen and demo.instruction.strip() != instruction.strip():
                seen.add(demo.task)
                pool.append(demo)
    pool.sort(key=lambda x: x.task)
    random.Random(_seed(task)).shuffle(pool)
    if d.pick == "nearest":
        grams = _grams(instruction)
        pool.sort(key=lambda x: -_overlap(grams, _grams(x.instruction)))
    elif d.pick == "same_family":  # then the other families, in the seeded order
        pool.sort(key=lambda x: (x.family != family, x.source != "own"))
    return pool[: d.k]


def _seed(task: str) -> int:
    return int.from_bytes(hashlib.sha256(task.encode()).digest()[:8], "big")


def _grams(text: str, n: int = 4) -> frozenset[str]:
    text = " ".join(text.lower().split())
    return frozenset(text[i: i + n] for i in range(max(1, len(text) - n + 1)))


def _overlap(a: frozenset[str], b: frozenset[str]) -> float:
    """Jaccard overlap of character 4-grams: cheap, and close for instructions of one template."""
    return len(a & b) / (len(a | b) or 1)


# -- rendering -------------------------------------------------------------------------------------
def demo_messages(harness: HarnessSpec, demo: Demo) -> list[dict]:
    """One demonstration as the chat the harness would have produced: its instance prompt, each reply in
    the action format, each observation as `step` would add it (tool messages under tool_call)."""
    messages = [{"role": "user", "content": instance_prompt(harness, demo.instruction, demo.task, None)}]
    role = "tool" if harness.action_format.kind == "tool_call" else "user"
    for turn in demo.turns:
        submit = turn.submit and harness.tools.submit.enabled
        if not turn.commands and not submit:
            continue
        messages.append({"role": "assistant", "content": render_action(harness, turn.commands, submit)})
        if submit:
            break
        texts = [observation_text(harness, r) for r in _shown(harness, turn)]
        messages += [{"role": role, "content": t} for t in texts] if role == "tool" else \
            [{"role": "user", "content": "\n".join(texts)}]
    return messages


def _shown(harness: HarnessSpec, turn: DemoTurn) -> list[ToolResult]:
    """The results as the harness shows them: under bash_block the reply is one script, so one result
    (the outputs in order, the last exit code); outputs capped by the context policy."""
    results = turn.results
    if harness.action_format.kind == "bash_block" and results:
        output = "\n".join(r.output.rstrip("\n") for r in results if r.output)
        results = [ToolResult(tool="bash", command="\n".join(turn.commands), output=output,
                              exit_code=results[-1].exit_code, timed_out=any(r.timed_out for r in results))]
    ctx = harness.context
    return [r.model_copy(update={"output": truncate(r.output, ctx.output_head_chars, ctx.output_tail_chars)})
            for r in results]


def as_text(messages: list[dict]) -> str:
    """Demonstrations for the system prompt (placement: system): each message under its role."""
    return "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in messages)


def opening(harness: HarnessSpec, task: str, family: str, instruction: str) -> tuple[str, list[dict]]:
    """(text appended to the system prompt, messages between the system prompt and the task's instance
    prompt): the demonstrations for `task` under `harness.demonstrations.placement`."""
    demos = choose(harness, task, family, instruction)
    if not demos:
        return "", []
    if harness.demonstrations.placement == "turns":
        return "", [m for demo in demos for m in demo_messages(harness, demo)]
    blocks = [f"Example {i} (a solved task):\n{as_text(demo_messages(harness, demo))}"
              for i, demo in enumerate(demos, 1)]
    return "\n\n" + "\n\n".join(blocks), []


def first_messages(harness: HarnessSpec, task: str, family: str, instruction: str,
                   initial_observation: str | None) -> list[dict]:
    """The episode's opening chat: system prompt (with demonstrations under placement system), the
    demonstration turns, then the task's instance prompt."""
    extra, turns = opening(harness, task, family, instruction)
    return [{"role": "system", "content": system_prompt(harness) + extra}, *turns,
            {"role": "user", "content": instance_prompt(harness, instruction, task, initial_observation)}]


# -- cost and checks -------------------------------------------------------------------------------
def demo_chars(harness: HarnessSpec, demos: list[Demo]) -> int:
    return sum(len(m["content"]) for demo in demos for m in demo_messages(harness, demo))


def check_demonstrations(harness: HarnessSpec) -> None:
    """At harness load: the pools exist and parse, hold more than k episodes, the tools can show them, and
    the k longest with the system and a sample instance prompt fit limits.max_context_tokens (estimated
    at 4 characters a token; `coevo check` counts with the model's tokenizer)."""
    d, lim = harness.demonstrations, harness.limits
    if not d.k:
        return
    if not harness.tools.bash.enabled:
        raise HarnessError("demonstrations.k > 0 needs tools.bash enabled (demonstrations replay shell "
                           "commands); enable it, or set demonstrations.k: 0")
    pool = [demo for field, path in pool_paths(harness) for demo in load_pool(path, field)]
    if len({demo.task for demo in pool}) <= d.k:
        where = ", ".join(f"{f}={p}" for f, p in pool_paths(harness))
        raise HarnessError(f"demonstrations.k={d.k}, but {where} holds {len(pool)} episode(s) and a task is never "
                           f"its own demonstration; valid: k <= {max(0, len(pool) - 1)}, or a larger pool")
    sizes = sorted((demo_chars(harness, [demo]) for demo in pool), reverse=True)
    name, family, instruction = SAMPLE_TASK
    base = sum(len(m["content"]) for m in first_messages(harness.model_copy(
        update={"demonstrations": d.model_copy(update={"k": 0})}), name, family, instruction, None))
    tokens = [(base + sum(sizes[:k])) // CHARS_PER_TOKEN for k in range(d.k + 1)]
    if tokens[-1] + lim.max_tokens_per_turn > lim.max_context_tokens:
        fits = max([k for k, n in enumerate(tokens) if n + lim.max_tokens_per_turn <= lim.max_context_tokens],
                   default=None)
        valid = f"k <= {fits}" if fits is not None else "no k (the prompt alone does not fit)"
        raise HarnessError(f"demonstrations.k={d.k}: the first prompt with the {d.k} longest demonstrations of "
                           f"demonstrations.pool is ~{tokens[-1]} tokens (demos ~{tokens[-1] - tokens[0]}, at "
                           f"{CHARS_PER_TOKEN} characters a token) + limits.max_tokens_per_turn="
                           f"{lim.max_tokens_per_turn} > limits.max_context_tokens={lim.max_context_tokens}; "
                           f"valid: {valid}, a pool of shorter episodes, or a larger limits.max_context_tokens")


def seen(harness: HarnessSpec) -> dict | None:
    """What the fingerprint hashes of the demonstrations: the settings, each pool's content, and the
    opening of a sample task as rendered. None when off (so old fingerprints stay as they were)."""
    d = harness.demonstrations
    if not d.k:
        return None
    pools = {field: hashlib.sha256(Path(path).read_bytes()).hexdigest() for field, path in pool_paths(harness)}
    return {"settings": d.model_dump(mode="json", exclude={"pool", "own_pool"}), "pools": pools,
            "sample": opening(harness, *SAMPLE_TASK)}

