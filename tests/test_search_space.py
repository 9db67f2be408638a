"""Search spaces, schedules and search configs: everything is checked before any trial runs, and every
error names the file and the key and says what is valid. Real Optuna samplers, the real Harness model."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from coevo.harness import load_harness
from coevo.search.config import load_config, make_plan
from coevo.search.errors import SearchError
from coevo.search.schedule import parse_schedule
from coevo.search.space import split_overrides
from coevo.search.space_check import load_space

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ROOT / "search_spaces" / "default.yaml"


def space_errors(tmp_path, text: str) -> str:
    path = tmp_path / "space.yaml"
    path.write_text(text)
    with pytest.raises(SearchError) as e:
        load_space(path)
    return str(e.value)


def test_every_problem_is_reported_at_once_with_file_key_and_what_is_valid(tmp_path):
    msg = space_errors(tmp_path, """
decoding.temperature: {type: float, low: 1.5, high: 0.5}
decoding.top_p: {type: float, low: 0, high: 1, log: true}
templates.system: {type: categorical, choices: []}
limits.max_turnz: {type: int, low: 1, high: 3}
limits: {type: int, low: 1, high: 3}
train.lr: {type: float, low: 1.0e-5, high: 1.0e-3, log: true}
train.loss_type: {type: categorical, choices: [dapo, ppo]}
action_format.kind: {type: categorical, choices: [json, xml]}
recovery.max_format_retries: {type: int, low: 0, high: 4, when: {recovery.format_error_feedback: true}}
templates.observation: {type: categorical, choices: [observation.j2, nope.j2]}
context.k: {type: integer, low: 1, high: 3}
""")
    where = f"{tmp_path / 'space.yaml'}: "
    expected = [
        "'decoding.temperature': low (1.5) > high (0.5)",
        "'decoding.top_p': log scale needs low > 0",
        "'templates.system': categorical needs a non-empty list 'choices'",
        "'limits.max_turnz': unknown path: 'max_turnz' is not a field of limits (valid: limits.max_turns",
        "'limits': 'limits' is a section, not a value (valid: limits.max_turns",
        "'train.lr': unknown path: 'lr' is not a field of the GRPO options (valid: train.steps",
        "'train.loss_type': value 'ppo' is not valid",
        "'action_format.kind': value 'xml' is not valid here: field 'action_format.kind': Input should be 'json'",
        "'recovery.max_format_retries': when: 'recovery.format_error_feedback' is not a parameter of this space",
        "'templates.observation': value 'nope.j2' is not valid here",
        "'context.k': type must be one of float, int, categorical",
    ]
    for fragment in expected:
        assert where + fragment in msg, fragment
    assert msg.startswith(f"{len(expected)} problem(s) in search space")
    assert "observation.j2'" not in msg.replace("nope.j2", "")  # valid values are not blamed


def test_conditions_must_be_satisfiable_and_acyclic(tmp_path):
    msg = space_errors(tmp_path, """
recovery.format_error_feedback: {type: categorical, choices: [true, false]}
recovery.max_format_retries: {type: int, low: 0, high: 4, when: {recovery.format_error_feedback: maybe}}
context.history: {type: categorical, choices: [full, last_k], when: {context.k: 2}}
context.k: {type: int, low: 1, high: 6, when: {context.history: last_k}}
limits.max_turns: {type: int, low: 2, high: 8, otherwise: 4}
""")
    assert "when: recovery.format_error_feedback = 'maybe' can never happen (its values: [True, False])" in msg
    assert "'when' clauses form a cycle through context.history, context.k" in msg
    assert "'limits.max_turns': 'otherwise' needs a 'when' clause" in msg


@pytest.mark.parametrize("harness", ["terminus_json", "mini_bash", "qwen_tools"])
def test_default_space_fits_every_shipped_harness_and_every_sample_builds(harness):
    base = load_harness(ROOT / "harnesses" / f"{harness}.yaml")
    space = load_space(DEFAULT, base)
    sections = {p.path.split(".")[0] for p in space.params}
    assert {"templates", "action_format", "tools", "recovery", "context", "limits"} <= sections
    assert "decoding" not in sections  # scoring is greedy by default: decoding is not a harness dimension
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    for _ in range(25):
        trial = study.ask()
        values = space.suggest(trial, space.harness_params)
        overrides, train = split_overrides(values)
        built = base.with_overrides(overrides)  # a guarded combination never reaches an invalid harness
        assert train == {}
        # the conditional keys appear exactly when their condition holds
        assert ("recovery.max_format_retries" in values) == values["recovery.format_error_feedback"]
        assert ("context.k" in values) == (values["context.history"] == "last_k")
        if built.action_format.kind == "bash_block":
            assert not built.tools.read_file.enabled and "tools.read_file.enabled" not in trial.params
        assert space.resolve(trial.params) == values
        study.tell(trial, 0.0)


@pytest.mark.parametrize("name", ["compact", "runtime"])
def test_smaller_shipped_spaces_fit_mini_bash_and_runtime_keeps_the_prompts(name):
    base = load_harness(ROOT / "harnesses" / "mini_bash.yaml")
    space = load_space(ROOT / "search_spaces" / f"{name}.yaml", base)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=2))
    for _ in range(10):
        trial = study.ask()
        built = base.with_overrides(split_overrides(space.suggest(trial, space.harness_params))[0])
        if name == "runtime":  # what the tiny model was trained on stays as it was
            assert (built.templates, built.action_format) == (base.templates, base.action_format)
        study.tell(trial, 0.0)


def test_the_quickstart_config_loads_with_its_space_and_grpo_options():
    from coevo.search.config import SEARCH_TRAIN_DEFAULTS
    from coevo.train.spec import spec_from_dict

    config = load_config(ROOT / "search_spaces" / "quickstart.yaml")
    load_space(config.space, load_harness(config.harness).with_overrides(config.overrides))
    spec = spec_from_dict(config.train, "quickstart train")
    assert spec.screen_samples > 0 and spec.drop_no_signal_groups
    # The config's own options lie over the search's defaults, which lie over TrainSpec's.
    assert spec.group_size == 8 and spec.tasks_per_step == SEARCH_TRAIN_DEFAULTS["tasks_per_step"]


def test_train_keys_are_grpo_options(tmp_path):
    path = tmp_path / "space.yaml"
    path.write_text("train.learning_rate: {type: float, low: 1.0e-5, high: 1.0e-3, log: true}\n"
                    "train.mismatch.action: {type: categorical, choices: [warn, skip]}\n"
                    "decoding.temperature: {type: float, low: 0.2, high: 1.0}\n")
    space = load_space(path)
    assert [p.path for p in space.train_params] == ["train.learning_rate", "train.mismatch.action"]
    trial = optuna.create_study().ask()
    harness, train = split_overrides(space.suggest(trial))
    assert set(harness) == {"decoding.temperature"} and set(train) == {"learning_rate", "mismatch.action"}


def test_schedule_names_phases_and_rejects_what_is_not_one():
    assert parse_schedule("w0 -> h -> w -> h") == ["w0", "h1", "w1", "h2"]
    assert parse_schedule("h") == ["h1"]
    with pytest.raises(SearchError, match=r"step 2 'x' is not a phase \(valid: w0 = warm start"):
        parse_schedule("h -> x")
    with pytest.raises(SearchError, match="w0 .* can only be the first step"):
        parse_schedule("h -> w0")
    with pytest.raises(SearchError, match="empty step"):
        parse_schedule("h -> -> w")


def test_config_errors_name_the_key_and_the_budget_sets_the_plan(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("budgit: 2\nplan: {trails: 3}\n")
    with pytest.raises(SearchError) as e:
        load_config(bad)
    assert "unknown field 'budgit' (valid: name, model, tasks" in str(e.value)
    assert "unknown field 'plan.trails' (valid: trials" in str(e.value)
    good = tmp_path / "good.yaml"
    good.write_text("budget: 1\nplan: {trials: 5}\n")
    config = load_config(good)
    assert config.name == "good" and config.tasks == tmp_path / "tasks"  # relative to the file
    small, big = (make_plan(config.model_copy(update={"budget": b}), 171, 57, 58, 0) for b in (0.5, 2.0))
    assert small.trials == big.trials == 5  # explicit values win
    assert small.grpo_steps < big.grpo_steps and small.dev_tasks < big.dev_tasks
    # The final table always scores the whole test: the drawn one (splits.test), or a larger test split.
    assert small.test_tasks == big.test_tasks == config.splits.test == 200


def test_a_decoding_dimension_under_greedy_scoring_is_an_error_naming_the_key(tmp_path):
    from coevo.search.errors import SearchError
    from coevo.search.inputs import check_greedy

    path = tmp_path / "space.yaml"
    path.write_text("decoding.temperature: {type: float, low: 0.2, high: 1.0}\n"
                    "limits.max_turns: {type: int, low: 2, high: 5}\n")
    config = load_config(ROOT / "search_spaces" / "quickstart.yaml").model_copy(update={"space": path})
    space = load_space(path)
    with pytest.raises(SearchError, match=r"space\.yaml: decoding\.temperature: scoring is greedy.*greedy: false"):
        check_greedy(config, space)
    check_greedy(config.model_copy(update={"greedy": False}), space)  # a config may opt back in
