"""In-context demonstrations: a pool of verified oracle episodes built in real sandboxes, chosen per task
(never the task itself), rendered in each harness's own format, and placed in a real episode's first
prompt, where they are counted and never trained on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import DEFAULT_TEST, TASK_TOML, write_task
from typer.testing import CliRunner

from coevo.harness import HarnessError, load_harness, parse_action
from coevo.harness.demos import (
    SAMPLE_TASK,
    choose,
    demo_messages,
    first_messages,
    load_pool,
    save_pool,
)
from coevo.harness.demos_build import build_pool
from coevo.harness.fingerprint import fingerprint
from coevo.policy.scripted import OraclePolicy
from coevo.rollout import rollout
from coevo.rollout.trajectory import task_instruction
from coevo.tasks import load_taskset
from coevo.train.harvest import token_row

REPO = Path(__file__).resolve().parents[1]
TWIN = "Write 42 to /app/answer.txt.\n"  # the conftest task's instruction, under another name


def harness(name: str = "mini_bash", **overrides):
    return load_harness(REPO / "harnesses" / f"{name}.yaml").with_overrides(overrides)


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> Path:
    """Train tasks (one whose solve.sh fails its verifier, one with the conftest task's instruction) and a
    dev task, with a manifest."""
    root = tmp_path_factory.mktemp("demo-suite")
    specs = {"alpha": ("train", "Put 42 into /app/answer.txt, then list /app.\n", "echo 42 > /app/answer.txt\nls /app"),
             "beta": ("train", "Store the number 42 in /app/answer.txt.\n", "printf '42\\n' > /app/answer.txt"),
             "twin": ("train", TWIN, "echo 42 > /app/answer.txt"),
             "broken": ("train", "Write 42 to /app/answer.txt (the oracle gets it wrong).\n", "echo 41 > /app/answer.txt"),
             "held": ("dev", "Write 42 to /app/answer.txt, a dev task.\n", "echo 42 > /app/answer.txt")}
    for name, (_, instruction, solve) in specs.items():
        write_task(root, name, instruction=instruction, solve_sh=solve + "\n", test_sh=DEFAULT_TEST)
    rows = [{"name": n, "family": "demo", "split": split} for n, (split, _, _) in specs.items()]
    (root / "manifest.json").write_text(json.dumps({"tasks": rows}))
    return root


@pytest.fixture(scope="module")
def pool(suite, tmp_path_factory) -> Path:
    demos, failed = build_pool(load_taskset(suite).split("train"), per_family=3)
    assert failed == 1
    path = tmp_path_factory.mktemp("pool") / "pool.jsonl"
    save_pool(path, demos)
    return path


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    from coevo.train.model import corpus, train_tokenizer, wrap_tokenizer

    return wrap_tokenizer(train_tokenizer(corpus(tmp_path_factory.mktemp("no-tasks"), REPO / "prompts")))


# -- the pool --------------------------------------------------------------------------------------
def test_build_keeps_only_verified_train_episodes(pool):
    demos = load_pool(pool)
    assert sorted(d.task for d in demos) == ["alpha", "beta", "twin"]  # broken failed its verifier
    alpha = next(d for d in demos if d.task == "alpha")
    assert [t.commands for t in alpha.turns] == [["echo 42 > /app/answer.txt", "ls /app"], []]
    assert alpha.turns[0].results[1].output.split() == ["answer.txt", "input.txt"] and alpha.turns[-1].submit


def test_build_refuses_a_task_outside_the_train_split(suite, tmp_path):
    with pytest.raises(HarnessError, match="task held is in split 'dev'"):
        build_pool(load_taskset(suite).tasks)
    from coevo.cli import app

    result = CliRunner().invoke(app, ["demos", "build", str(suite), "--split", "dev", "--out", str(tmp_path / "p")])
    assert result.exit_code == 2 and "task held is in split 'dev'" in result.output
    assert not (tmp_path / "p").exists()


def test_the_bundled_pool_covers_every_trained_family_from_train_tasks_only():
    demos = load_pool(REPO / "harnesses" / "demos" / "oracle.jsonl")
    tasks = {t.name: t for t in load_taskset(REPO / "tasks").tasks}
    assert all(tasks[d.task].split == "train" and d.reward == 1.0 for d in demos)
    trained = {t.family for t in tasks.values() if t.split == "train"}
    assert {d.family for d in demos} == trained and len(demos) <= 3 * len(trained)


# -- choosing and rendering ------------------------------------------------------------------------
@pytest.mark.parametrize("pick", ["same_family", "nearest", "random"])
def test_the_task_being_solved_is_never_its_own_demo(pool, pick):
    h = harness(**{"demonstrations.k": 2, "demonstrations.pool": str(pool), "demonstrations.pick": pick})
    assert {d.task for d in choose(h, "alpha", "demo", "Put 42 into /app/answer.txt, then list /app.")} \
        == {"beta", "twin"}
    # by instruction too: a task named otherwise with twin's instruction does not see twin
    assert {d.task for d in choose(h, "demo", "demo", TWIN)} == {"alpha", "beta"}
    assert choose(h, "demo", "demo", TWIN) == choose(h, "demo", "demo", TWIN)  # deterministic


def test_nearest_picks_the_closest_instruction(pool):
    h = harness(**{"demonstrations.k": 1, "demonstrations.pool": str(pool), "demonstrations.pick": "nearest"})
    assert [d.task for d in choose(h, "new", "demo", "Put 42 into /app/answer.txt, then list /app please.")] \
        == ["alpha"]


def test_one_demo_shows_the_same_commands_in_each_format(pool):
    alpha = next(d for d in load_pool(pool) if d.task == "alpha")
    commands = alpha.turns[0].commands
    shown = {}
    for name, kind in (("mini_bash", "bash_block"), ("terminus_json", "json")):
        h = harness(name)
        messages = demo_messages(h, alpha)
        assert h.action_format.kind == kind and [m["role"] for m in messages] == ["user", "assistant", "user",
                                                                                    "assistant"]
        calls = [parse_action(h, m["content"]) for m in messages if m["role"] == "assistant"]
        ran = [c.arguments["command"] for c in calls[0]]
        assert ("\n".join(ran) if kind == "bash_block" else ran) == ("\n".join(commands) if kind == "bash_block"
                                                                      else commands)
        assert [c.name for c in calls[1]] == ["submit"] and "answer.txt" in messages[2]["content"]
        shown[kind] = messages[1]["content"]
    assert shown["bash_block"].startswith("```bash") and json.loads(shown["json"])["commands"][1] == {
        "keystrokes": "ls /app\n"}


# -- in a real episode -----------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["mini_bash", "qwen_tools"])
def test_k_demos_open_a_real_episode_as_prompt_never_trained_on(task, pool, tokenizer, name):
    h = harness(name, **{"demonstrations.k": 2, "demonstrations.pool": str(pool)})
    [t] = rollout([task], h, OraclePolicy(h, [task], tokenizer=tokenizer))
    assert (t.status, t.reward) == ("submitted", 1.0)
    firsts = [m["content"] for m in t.messages if m["role"] == "user" and "/app/answer.txt" in m["content"]]
    assert len(firsts) == 3 and "list /app" in firsts[0] + firsts[1] and "42 in" in firsts[0] + firsts[1]
    assert not any(TWIN.strip() in f for f in firsts[:2]) and TWIN.strip() in firsts[2]  # twin is never shown
    demo_end = t.messages.index(next(m for m in t.messages if m["content"] == firsts[2]))
    # the record names the demonstrations, and views of the episode (coevo show, traces) find the task itself
    assert len(t.demonstrations) == 2 and task.name not in t.demonstrations and t.task_message == demo_end
    assert task_instruction(t) == firsts[2]
    roles = [m["role"] for m in t.messages[1:demo_end]]
    assert roles.count("assistant") == 4 and ("tool" in roles) == (name == "qwen_tools")
    prompt = tokenizer.decode(t.prompt_ids)
    assert "ls /app" in prompt and prompt.count("<|im_start|>assistant") == 5  # 4 demo replies + the generation prompt
    row = token_row(t)
    assert set(row["assistant_masks"][: len(t.prompt_ids)]) == {0}
    assert sum(row["assistant_masks"]) == sum(t.completion_mask) == sum(s.tokens for s in t.steps)


def test_placement_system_puts_the_demos_in_the_system_prompt(task, pool):
    h = harness("terminus_json", **{"demonstrations.k": 1, "demonstrations.pool": str(pool),
                                    "demonstrations.placement": "system"})
    [t] = rollout([task], h, OraclePolicy(h, [task]))
    assert t.reward == 1.0 and [m["role"] for m in t.messages[:2]] == ["system", "user"]
    assert "Example 1 (a solved task):" in t.messages[0]["content"] and '"task_complete": true' in t.messages[0]["content"]


# -- checks and the fingerprint --------------------------------------------------------------------
def test_demos_that_overflow_the_context_name_the_field(pool):
    h0 = harness(**{"demonstrations.pool": str(pool), "limits.max_tokens_per_turn": 64})
    base = sum(len(m["content"]) for m in first_messages(h0, *SAMPLE_TASK, None)) // 4
    fits = {"limits.max_context_tokens": base + 64 + 1}
    h0.with_overrides(fits)  # without demonstrations the prompt fits
    with pytest.raises(HarnessError, match=r"demonstrations\.k=2: .* > limits\.max_context_tokens=.*valid: k <= 0"):
        h0.with_overrides({**fits, "demonstrations.k": 2})


def test_a_missing_pool_or_own_pool_is_an_error_naming_the_field(tmp_path):
    with pytest.raises(HarnessError, match=r"demonstrations\.pool: .*nope\.jsonl does not exist"):
        harness(**{"demonstrations.k": 1, "demonstrations.pool": str(tmp_path / "nope.jsonl")})
    with pytest.raises(HarnessError, match=r"demonstrations\.own_pool is unset"):
        harness(**{"demonstrations.k": 1, "demonstrations.source": "own"})


def test_coevo_check_counts_prompt_tokens_and_needs_every_family(pool, suite, make_task):
    from coevo.search.demos_check import demos_report

    h = harness(**{"demonstrations.k": 2, "demonstrations.pool": str(pool)})
    report = demos_report(Path("harnesses/mini_bash.yaml"), h, None, suite)
    assert report.startswith("prompt tokens: ") and "(demos " in report
    other = make_task("other", task_toml=TASK_TOML.replace('"demo"', '"other"')).parent  # family "other"
    with pytest.raises(ValueError, match=r"mini_bash\.yaml \(base\): demonstrations\.pool has no episode of famil"):
        demos_report(Path("harnesses/mini_bash.yaml"), h, None, other)


def test_the_fingerprint_follows_the_demonstrations(pool, tmp_path):
    base = harness(**{"demonstrations.pool": str(pool)})
    on = base.with_overrides({"demonstrations.k": 2})
    assert fingerprint(base) == fingerprint(harness())  # off: as before demonstrations existed
    assert fingerprint(on) != fingerprint(base)
    assert fingerprint(on.with_overrides({"demonstrations.placement": "system"})) != fingerprint(on)
    smaller = tmp_path / "smaller.jsonl"
    save_pool(smaller, load_pool(pool)[:-1])
    one = on.with_overrides({"demonstrations.k": 1})
    assert fingerprint(one.with_overrides({"demonstrations.pool": str(smaller)})) != fingerprint(one)


def test_own_pool_from_the_models_successes_on_train_tasks(suite, tmp_path):
    from coevo.cli import app
    from coevo.rollout import save_trajectories

    tasks = {t.name: t for t in load_taskset(suite).tasks}
    h = harness()
    for names, file in ((["alpha", "broken"], "train.jsonl"), (["held"], "dev.jsonl")):
        chosen = [tasks[n] for n in names]
        save_trajectories(tmp_path / file, rollout(chosen, h, OraclePolicy(h, chosen)))
    own = tmp_path / "own.jsonl"
    result = CliRunner().invoke(app, ["demos", "own", str(tmp_path / "train.jsonl"), "--tasks", str(suite),
                                      "--out", str(own)])
    assert result.exit_code == 0, result.output
    assert [(d.task, d.source) for d in load_pool(own)] == [("alpha", "own")]  # broken failed: left out
    result = CliRunner().invoke(app, ["demos", "own", str(tmp_path / "dev.jsonl"), "--tasks", str(suite),
                                      "--out", str(tmp_path / "x.jsonl")])
    assert result.exit_code == 2 and "task held is in split 'dev'" in result.output
    both = harness(**{"demonstrations.k": 1, "demonstrations.source": "both", "demonstrations.own_pool": str(own)})
    assert [(d.task, d.source) for d in choose(both, "beta", "demo", "Store 42.")] == [("alpha", "own")]


def test_a_bundle_carries_its_pool_and_a_harness_file_reads_pools_beside_it(pool, tmp_path):
    """`coevo export` writes the pool into the bundle (demos/), and the bundle's harness reads it from there,
    wherever the bundle is moved: what the model sees, and so the fingerprint, is unchanged."""
    from coevo.bundle import load_bundle, write_bundle

    h = harness(**{"demonstrations.k": 2, "demonstrations.pool": str(pool)})
    model = tmp_path / "ckpt"
    model.mkdir()
    (model / "config.json").write_text("{}")
    write_bundle(tmp_path / "bundle", h, model, {}, "a bundle\n")
    (tmp_path / "bundle").rename(tmp_path / "moved")
    loaded, _, _ = load_bundle(tmp_path / "moved")
    assert loaded.demonstrations.pool == (tmp_path / "moved" / "demos" / "pool.jsonl").resolve()
    assert (tmp_path / "moved" / "demos" / "pool.jsonl").read_bytes() == pool.read_bytes()
    assert fingerprint(loaded) == fingerprint(h)
