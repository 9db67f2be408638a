"""Repeatable runs and an exact final table: the same config and seed give the same table twice on one
machine (the real tiny model, trained in the run), and a run killed while scoring the final table
resumes without scoring any pair twice."""

from __future__ import annotations

import pytest
from search_helpers import final_table, tiny_coevolution_config, write_config


def test_the_same_config_and_seed_twice_give_an_identical_table(tiny_coevolution, tmp_path):
    """conftest's `tiny_coevolution` again, in a folder of its own, after whatever else this test process
    ran since (the run seeds every generator it uses)."""
    from coevo.search.config import load_config
    from coevo.search.run import Search

    first = tiny_coevolution.config
    again = load_config(tiny_coevolution_config(tmp_path, first.tasks))  # the same tasks, another folder
    tables = [final_table(tiny_coevolution.state), final_table(Search(again, log=lambda line: None).run())]
    assert again.run_dir != first.run_dir and tables[0] == tables[1]
    assert tables[0]["rows"]["baseline"]["generation"] == 0 and len(tables[0]["rows"]) == 6


def test_a_run_killed_in_the_final_table_resumes_without_scoring_a_pair_twice(suite, tmp_path):
    from mlflow import MlflowClient

    from coevo.policy import make_policy
    from coevo.search.config import load_config
    from coevo.search.run import Search

    config = load_config(write_config(tmp_path, suite, name="killed-table"))
    calls = []

    def killed_after_the_first_test_row(harness, checkpoint, tasks):
        calls.append("test" if all(t.name.startswith("test-") for t in tasks) else "other")
        if calls[-2:] == ["test", "other"]:  # the baseline's held-out block, right after its test row
            raise KeyboardInterrupt  # what a kill looks like to the run: not an Exception
        return make_policy({"backend": "synthetic", "seed": config.seed}, harness=harness, tasks=tasks)

    with pytest.raises(KeyboardInterrupt):
        Search(config, policy_factory=killed_after_the_first_test_row, log=lambda line: None).run()
    state = Search(config, resume=True, log=lambda line: None).run()
    assert state.done and len(state.test) == 6
    client = MlflowClient(f"sqlite:///{config.run_dir / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name(config.name).experiment_id], max_results=1000)
    finished = [r.info.run_name for r in runs if r.info.status == "FINISHED"]
    scored = [n for n in finished if n.startswith(("test ", "held-out "))]
    distinct = {r.key for r in state.test.values()}
    assert len(scored) == len(set(scored)) == 2 * len(distinct)  # each distinct pair once, test and held-out
    assert [r.info.run_name for r in runs if r.info.status == "KILLED"] == ["held-out baseline"]
