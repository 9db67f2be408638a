"""Building demonstration pools (coevo/harness/demos.py reads them): the oracle's verified episodes on a
train split (`coevo demos build`), or the model's own verified successes from episode files (`coevo demos
own`). Only train-split tasks are accepted, so no dev, promotion or test solution can reach a prompt."""

from __future__ import annotations

from typing import Literal

from coevo.harness.demos import Demo, DemoTurn, demo_chars
from coevo.harness.errors import HarnessError


def check_train_only(tasks: list, what: str) -> None:
    """Only train-split tasks may be demonstrations: a dev, promotion or test solution in a prompt would
    leak into the scores it is measured by."""
    bad = next((t for t in tasks if t.split != "train"), None)
    if bad is not None:
        raise HarnessError(f"{what}: task {bad.name} is in split '{bad.split or '(none: no manifest.json)'}'; "
                           "a demonstration pool is built from the train split only (--split train)")


def from_trajectory(t, task, source: Literal["oracle", "own"]) -> Demo | None:
    """A verified, submitted episode as a Demo; None when it is not one, or used a tool other than bash and
    submit (a pool is harness-neutral: shell commands only). Unparseable turns are left out."""
    from coevo.outcomes import passed

    if not passed(t) or t.status != "submitted":
        return None
    turns = []
    for step in t.steps:
        if step.format_error:
            continue
        if any(c.name not in ("bash", "submit") for c in step.calls):
            return None
        commands = [str(c.arguments["command"]) for c in step.calls if c.name == "bash"]
        turns.append(DemoTurn(commands=commands, results=[r.model_copy(update={"duration_s": 0.0})
                                                          for r in step.results],
                              submit=any(c.name == "submit" for c in step.calls)))
    return Demo(task=task.name, family=task.family, instruction=task.instruction.strip(), turns=turns,
                reward=t.reward, source=source)


def build_pool(tasks: list, per_family: int = 3, backend: str = "local") -> tuple[list[Demo], int]:
    """The oracle (solve.sh) on train tasks in real sandboxes, under the default JSON harness (one result per
    command); the `per_family` shortest verified episodes of each family, and how many episodes failed."""
    from coevo.harness.load import Harness
    from coevo.policy.scripted import OraclePolicy
    from coevo.rollout import rollout

    check_train_only(tasks, "coevo demos build")
    harness = Harness(name="demos-build")
    trajectories = rollout(tasks, harness, OraclePolicy(harness, tasks), backend=backend, tokenizer=None)
    by_name = {t.name: t for t in tasks}
    demos = [d for d in (from_trajectory(t, by_name[t.task], "oracle") for t in trajectories) if d]
    demos.sort(key=lambda d: (d.family, demo_chars(harness, [d]), d.task))
    kept = [d for i, d in enumerate(demos) if sum(x.family == d.family for x in demos[:i]) < per_family]
    return kept, len(trajectories) - len(demos)


def own_demos(trajectories: list, tasks: list) -> list[Demo]:
    """The model's own verified successes among `trajectories`, one per task (the shortest), from train
    tasks only (each trajectory's task is looked up in `tasks`, which carry the splits)."""
    by_name = {t.name: t for t in tasks}
    missing = sorted({t.task for t in trajectories} - set(by_name))
    if missing:
        raise HarnessError(f"coevo demos own: episodes of {missing[0]}, which is not among the --tasks folders' "
                           "tasks; give the task folder the episodes were run on")
    check_train_only([by_name[n] for n in dict.fromkeys(t.task for t in trajectories if t.segment == 0)],
                     "coevo demos own")
    demos = [d for d in (from_trajectory(t, by_name[t.task], "own") for t in trajectories if t.segment == 0) if d]
    best: dict[str, Demo] = {}
    for d in sorted(demos, key=lambda d: len(d.model_dump_json())):
        best.setdefault(d.task, d)
    return sorted(best.values(), key=lambda d: (d.family, d.task))
