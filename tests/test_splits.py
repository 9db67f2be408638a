"""The search's task roles: evolve, a frozen promotion split and a large in-distribution test, disjoint,
drawn once and read back, with the held-out families apart; overlaps are errors naming the tasks."""

from __future__ import annotations

import json
import shutil

import pytest

from coevo.search.errors import SearchError
from coevo.search.splits import Splits, check_disjoint, resolve_splits, save_splits
from coevo.tasks import load_taskset
from coevo.tasks.generate import generated_manifest


def test_generated_suite_gets_fresh_disjoint_promotion_and_test_draws(suite, tmp_path):
    tasks = load_taskset(suite)
    held = set(generated_manifest(suite)["held_out_families"])
    splits = resolve_splits(suite, tmp_path, tasks.split("dev"), test_size=50, promotion_size=20)
    assert splits.sizes() == {"evolve": len(tasks.split("dev")), "promotion": 20, "test": 50,
                              "held_out": sum(t.family in held for t in tasks.split("test"))}
    check_disjoint(splits, "config.yaml")
    seen = {t.instruction for t in tasks.tasks}
    assert not seen & {t.instruction for t in splits.test + splits.promotion}
    assert {t.family for t in splits.test} == {t.family for t in tasks.tasks} - held
    assert {t.family for t in splits.held_out} == held
    record = json.loads(save_splits(splits, tmp_path).read_text())
    assert record["sizes"]["test"] == 50 and "seed" in record["origin"]["test"]


def test_a_resumed_run_reads_the_same_draw_back(suite, tmp_path):
    first = resolve_splits(suite, tmp_path, [], test_size=30, promotion_size=10)
    again = resolve_splits(suite, tmp_path, [], test_size=30, promotion_size=10)
    assert [t.path for t in again.test] == [t.path for t in first.test]
    other_seed = resolve_splits(suite, tmp_path / "other", [], test_size=30, promotion_size=10, test_seed=1)
    assert {t.instruction for t in other_seed.test} != {t.instruction for t in first.test}


def test_a_plain_folder_splits_dev_into_evolve_and_promotion(suite, tmp_path):
    plain = tmp_path / "plain"
    shutil.copytree(suite, plain)
    manifest = json.loads((plain / "manifest.json").read_text())
    manifest.pop("generator")
    (plain / "manifest.json").write_text(json.dumps(manifest))
    dev = load_taskset(plain).split("dev")
    splits = resolve_splits(plain, tmp_path / "run", dev, test_size=200, promotion_size=60)
    check_disjoint(splits, "config.yaml")
    assert sorted(t.name for t in splits.evolve + splits.promotion) == sorted(t.name for t in dev)
    assert len(splits.promotion) == len(dev) // 2 and splits.test == load_taskset(plain).split("test")


def test_overlapping_roles_are_an_error_naming_config_and_tasks(suite):
    dev = load_taskset(suite).split("dev")
    with pytest.raises(SearchError, match=r"my\.yaml: the evolve and promotion tasks overlap in 1 task") as e:
        check_disjoint(Splits(evolve=dev, promotion=dev[:1], test=[]), "my.yaml")
    assert dev[0].name in str(e.value)


def test_the_held_out_block_can_be_cut_or_dropped(suite):
    from coevo.search.inputs import held_out

    block = [t for t in load_taskset(suite).split("test")
             if t.family in set(generated_manifest(suite)["held_out_families"])]
    assert held_out(block, None, 0) == block
    assert held_out(block, 0, 0) == []
    cut = held_out(block, 2, 0)
    names = {t.name for t in block}
    assert len(cut) == 2 and {t.name for t in cut} <= names
    assert len({t.family for t in cut}) == min(2, len({t.family for t in block}))  # stratified
