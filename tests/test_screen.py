"""Screening before GRPO: real sandboxes and verifiers decide which families carry signal."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from conftest import TASK_TOML, write_task

REPO = Path(__file__).resolve().parents[1]
ALWAYS = "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n"
NEVER = "#!/bin/bash\necho 0 > /logs/verifier/reward.txt\n"
# The default verifier: pass when /app/answer.txt holds 42 (the policy below writes 42 every other time).


def family_task(root: Path, family: str, i: int, test_sh: str | None = None) -> None:
    kw = {"test_sh": test_sh} if test_sh else {}
    write_task(root, f"{family}-{i}", task_toml=TASK_TOML.replace('"demo"', f'"{family}"'), **kw)


def test_screen_keeps_only_families_whose_episodes_disagree(tmp_path):
    from coevo.harness import load_harness, render_action
    from coevo.policy.scripted import ScriptedPolicy
    from coevo.tasks import load_taskset
    from coevo.train import screen

    root = tmp_path / "tasks"
    for i in range(2):
        family_task(root, "solved", i, ALWAYS)
        family_task(root, "hopeless", i, NEVER)
        family_task(root, "learnable", i)
    tasks = load_taskset(root).tasks
    harness = load_harness(REPO / "harnesses" / "mini_bash.yaml")
    calls = Counter()

    def alternate(request, turn):  # per task: 42 (pass), 41 (fail), 42, ...
        calls[request.meta["task"]] += 1
        answer = 42 if calls[request.meta["task"]] % 2 else 41
        return render_action(harness, [f"echo {answer} > /app/answer.txt"], submit=True)

    result = screen.screen(tasks, harness, ScriptedPolicy(alternate), samples=4, reward="binary", seed=0)
    assert result.episodes == 24
    assert result.signal == ["learnable"]
    assert sorted(result.kept) == ["learnable-0", "learnable-1"]
    assert result.families == {"hopeless": 0.0, "learnable": 0.5, "solved": 1.0}

    screen.save(result, tmp_path)
    assert screen.load(tmp_path) == result
    assert "training on 2 of 6 tasks" in screen.describe(result, 6)
    assert "hopeless 0.00" in screen.describe(result, 6) and "solved 1.00" in screen.describe(result, 6)

    flat = screen.screen([t for t in tasks if t.family != "learnable"], harness, ScriptedPolicy(alternate),
                         samples=2, reward="binary", seed=0)
    assert flat.signal == [] and len(flat.kept) == 4  # nothing to choose: train on everything
    assert "0 families showed signal" in screen.describe(flat, 4)
    few = screen.screen(tasks, harness, ScriptedPolicy(alternate), samples=2, reward="binary", seed=0, at_least=3)
    assert few.signal == ["learnable"] and len(few.kept) == 6  # 2 tasks cannot fill a step of 3
