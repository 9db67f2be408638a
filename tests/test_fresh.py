"""Fresh instances for GRPO: new instances of the train families from the suite's own generator."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_fresh_instances_cover_the_slots_with_new_tasks_of_the_same_families(tmp_path):
    from coevo.tasks import load_taskset
    from coevo.train.fresh import fresh_instances
    from coevo.train.warmstart import extra_tasks

    suite = load_taskset(REPO / "tasks")
    tasks = [t for t in suite.split("train") if t.family in ("grep-count", "top-k")]
    fresh = fresh_instances(tasks, slots=9, out=tmp_path / "a", seed=0)

    assert len(fresh) == 10 and {t.family for t in fresh} == {"grep-count", "top-k"}
    evaluation = {t.instruction for t in suite.tasks if t.split in ("dev", "test")}
    assert not {t.instruction for t in fresh} & evaluation
    train = {t.instruction for t in suite.split("train")}
    assert sum(t.instruction not in train for t in fresh) >= 8  # new instances (a short one may recur)
    again = fresh_instances(tasks, slots=9, out=tmp_path / "b", seed=0)
    assert [t.instruction for t in again] == [t.instruction for t in fresh]  # a resumed run draws the same
    warm = extra_tasks(REPO / "tasks", tmp_path / "warm", per_family=5, seed=0)  # the warm start's draw
    assert not {t.instruction for t in fresh} & {t.instruction for t in warm}


def test_fresh_instances_need_a_generated_suite(make_task, tmp_path):
    from coevo.tasks import load_taskset
    from coevo.train.fresh import fresh_instances

    tasks = load_taskset(make_task().parent).tasks  # hand-written tasks, no generator manifest
    with pytest.raises(ValueError, match="fresh_instances: .*coevo tasks generate"):
        fresh_instances(tasks, slots=4, out=tmp_path / "fresh", seed=0)
