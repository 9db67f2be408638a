"""The verifier: rewards are read strictly; an unusable reward is a typed verifier error scoring 0."""

from __future__ import annotations

import os

import pytest

from coevo.errors import VerifierError
from coevo.sandbox import make_sandbox
from coevo.tasks import load_task
from coevo.verify import read_reward, verify


@pytest.mark.parametrize(("files", "message"), [
    ({}, "neither /logs/verifier/reward.txt nor reward.json"),
    ({"reward.txt": ""}, r"reward.txt: expected a number in \[0, 1\], got ''"),
    ({"reward.txt": "\n"}, "reward.txt: expected a number"),
    ({"reward.txt": "passed"}, "reward.txt: expected a number in .* got 'passed'"),
    ({"reward.txt": "nan"}, "out of range"),
    ({"reward.txt": "1.5"}, "1.5 is out of range"),
    ({"reward.txt": "-1"}, "-1.0 is out of range"),
    ({"reward.json": "{oops"}, r"reward.json is not valid JSON \(line 1"),
    ({"reward.json": "[1, 0]"}, "must be a flat dict of numbers, got list"),
    ({"reward.json": '{"a": "yes"}'}, r"reward.json\['a'\]: expected a number"),
    ({"reward.json": '{"a": true}'}, r"reward.json\['a'\]: expected a number"),
    ({"reward.json": '{"a": {"b": 1}}'}, r"reward.json\['a'\]: expected a number"),
    ({"reward.json": "{}"}, "empty dict"),
])
def test_bad_reward_files(tmp_path, files, message):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(VerifierError, match=message):
        read_reward(tmp_path)


def test_reward_forms(tmp_path):
    (tmp_path / "reward.json").write_text('{"exists": 1, "content": 0}')
    assert read_reward(tmp_path) == (0.5, {"exists": 1.0, "content": 0.0})
    (tmp_path / "reward.txt").write_text("1\n")
    assert read_reward(tmp_path) == (1.0, {"exists": 1.0, "content": 0.0})


def test_symlinked_reward_file_is_refused(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("1")
    logs = tmp_path / "logs"
    logs.mkdir()
    os.symlink(secret, logs / "reward.txt")
    with pytest.raises(VerifierError, match="must be a regular file"):
        read_reward(logs)


def _episode(task, command=None):
    sandbox = make_sandbox(task)
    sandbox.start()
    if command:
        sandbox.run(command)
    return verify(task, sandbox)


def test_failed_task_and_verifier_error_are_distinct(make_task):
    task = load_task(make_task("plain"))
    assert (_episode(task, "echo 42 > /app/answer.txt").reward, _episode(task).reward) == (1.0, 0.0)
    assert _episode(task).error is None  # a failed task: reward 0, no error
    nan = load_task(make_task("nan", test_sh="echo nan > /logs/verifier/reward.txt\n"))
    result = _episode(nan)
    assert result.reward == 0.0 and result.error.startswith("VerifierError") and "out of range" in result.error


def test_verifier_timeout_is_an_error(make_task):
    toml = "[verifier]\ntimeout_sec = 1.0\n"
    task = load_task(make_task("slow", task_toml=toml, test_sh="sleep 30; echo 1 > /logs/verifier/reward.txt\n"))
    result = _episode(task)
    assert result.reward == 0.0 and "VerifierTimeout" in result.error


def test_verifier_sees_tests_and_final_app_and_agent_processes_are_gone(make_task):
    test_sh = ("pgrep -u $(id -u) -f 'sleep 1000' && exit 0\n"
               "[ -f /tests/test.sh ] && [ \"$(cat /app/answer.txt)\" = 42 ] && echo 1 > /logs/verifier/reward.txt\n")
    task = load_task(make_task("clean", test_sh=test_sh))
    assert _episode(task, "echo 42 > /app/answer.txt; sleep 1000 &").reward == 1.0


def test_partial_credit_from_reward_json(make_task):
    test_sh = "echo '{\"exists\": 1, \"exact\": 0}' > /logs/verifier/reward.json\n"
    result = _episode(load_task(make_task("partial", test_sh=test_sh)))
    assert result.checks == {"exists": 1.0, "exact": 0.0} and result.reward == 0.5 and result.partial == 0.5
