"""Harness fingerprints: a hash of what the model sees. Knobs it never reads leave it alone; anything it
reads changes it; every trajectory of a rollout carries its harness's fingerprint."""

from __future__ import annotations

from pathlib import Path

import pytest

from coevo.harness import load_harness, render_action
from coevo.harness.fingerprint import fingerprint
from coevo.policy.scripted import ScriptedPolicy
from coevo.rollout import rollout

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def base():
    return load_harness(REPO / "harnesses" / "mini_bash.yaml")


@pytest.mark.parametrize("overrides", [
    {"decoding.temperature": 0.05, "decoding.top_p": 0.5},
    {"limits.wall_time_s": 7.0, "limits.max_episode_tokens": 999},
    {"name": "renamed", "description": "same prompts, other name"},
])
def test_knobs_the_model_never_reads_share_the_fingerprint(base, overrides):
    assert fingerprint(base.with_overrides(overrides)) == fingerprint(base)


@pytest.mark.parametrize("overrides", [
    {"templates.system": "system_verbose.j2"},
    {"recovery.nonzero_exit_hint": True, "recovery.timeout_notice": False},
    {"context.output_head_chars": 10},
    {"limits.command_timeout_s": 3.0},  # the timeout notice tells the model the limit
    {"action_format.kind": "json", "templates.system": "system_json.j2"},
    {"initial_observation": "ls /app"},
])
def test_anything_the_model_reads_changes_it(base, overrides):
    changed = base.with_overrides(overrides)
    assert fingerprint(changed) != fingerprint(base), overrides


def test_every_trajectory_carries_its_harness_fingerprint(base, task):
    harnesses = [base, base.with_overrides({"recovery.nonzero_exit_hint": True})]
    for harness in harnesses:
        policy = ScriptedPolicy([render_action(harness, ["echo hi"], submit=False),
                                 render_action(harness, [], submit=True)])
        trajectories = rollout([task], harness, policy, n_per_task=2)
        assert {t.harness_fingerprint for t in trajectories} == {fingerprint(harness)}
    assert fingerprint(harnesses[0]) != fingerprint(harnesses[1])
