"""Warm start end to end: oracle episodes through a real harness, sandboxes and verifier, then TRL SFT
with assistant-only loss; the checkpoint must differ from the start and load back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    from coevo.tasks.generate import generate_suite

    root = tmp_path_factory.mktemp("suite")
    generate_suite(root / "tasks", seed=0, per_family=1)
    return root / "tasks"


@pytest.fixture(scope="module")
def tiny(suite, tmp_path_factory):
    from coevo.train.model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny"), suite, seed=0, prompts_dir=REPO / "prompts")


def test_warmstart_changes_weights_and_writes_a_loadable_checkpoint(suite, tiny, tmp_path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from coevo.train.sft import SFTSettings
    from coevo.train.warmstart import run_warmstart

    out = tmp_path / "ws"
    settings = SFTSettings(epochs=1, lr=1e-3, batch_size=8)
    report = run_warmstart(tiny, REPO / "harnesses" / "mini_bash.yaml", suite, "train", out, settings, augment=0)
    n = sum(t["split"] == "train" for t in json.loads((suite / "manifest.json").read_text())["tasks"])
    assert n > 0 and f"oracle: {n}/{n} train tasks passed" in report
    numbers = json.loads((out / "warmstart.json").read_text())
    assert numbers["oracle_passed"] == numbers["conversations"] == n
    assert len((out / "oracle.jsonl").read_text().splitlines()) == n
    before = AutoModelForCausalLM.from_pretrained(tiny).state_dict()
    after = AutoModelForCausalLM.from_pretrained(out).state_dict()
    assert before.keys() == after.keys()
    assert any(not torch.equal(before[k], after[k]) for k in before)
    assert AutoTokenizer.from_pretrained(out).chat_template == AutoTokenizer.from_pretrained(tiny).chat_template
    assert json.loads((out / "generation_config.json").read_text())["eos_token_id"]


def test_sft_trains_on_assistant_tokens_only(tiny):
    """TRL swaps in the template variant with {% generation %} markers; its mask covers exactly the
    assistant replies and their stop token."""
    from transformers import AutoTokenizer
    from trl.chat_template_utils import get_training_chat_template

    tokenizer = AutoTokenizer.from_pretrained(tiny)
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "do it"},
                {"role": "assistant", "content": "ls"}, {"role": "user", "content": "out"},
                {"role": "assistant", "content": "done"}]
    enc = tokenizer.apply_chat_template(messages, chat_template=get_training_chat_template(tokenizer),
                                        return_assistant_tokens_mask=True, return_dict=True, tokenize=True)
    trained = tokenizer.decode([t for t, m in zip(enc["input_ids"], enc["assistant_masks"]) if m])
    assert trained == "\nls<|im_end|>\n\ndone<|im_end|>\n"


def test_a_prompt_longer_than_max_length_is_a_clear_error(tiny, tmp_path):
    from coevo.train.sft import SFTSettings, train_sft

    conversation = [{"role": "system", "content": "word " * 400}, {"role": "user", "content": "go"},
                    {"role": "assistant", "content": "ls"}]
    with pytest.raises(ValueError, match="prompt .* alone exceeds max_length=64"):
        train_sft(tiny, [conversation], tmp_path / "x", SFTSettings(max_length=64), source="test")


def test_augmentation_never_draws_evaluation_tasks(suite, tmp_path):
    from coevo.tasks import load_taskset
    from coevo.tasks.generate import HELD_OUT
    from coevo.train.warmstart import extra_tasks

    extra = extra_tasks(suite, tmp_path / "extra", per_family=2, seed=0)
    evaluation = {t.instruction for t in load_taskset(suite).tasks if t.split in ("dev", "test")}
    assert len(extra) > 20 and not {t.family for t in extra} & set(HELD_OUT)
    assert not {t.instruction for t in extra} & evaluation
    train = {t.instruction for t in load_taskset(suite).split("train")}
    assert {t.instruction for t in extra} - train  # fresh instances, not copies


def test_augmentation_is_on_by_default_for_generated_suites_only(suite, make_task):
    from coevo.train.warmstart import AUGMENT, default_augment

    assert default_augment(suite) == AUGMENT > 0
    assert default_augment(make_task("plain").parent) == 0


def test_augmentation_needs_a_generated_suite(make_task, tmp_path):
    from coevo.train.warmstart import extra_tasks

    folder = make_task().parent  # a folder of hand-written tasks, no generator manifest
    with pytest.raises(ValueError, match="coevo tasks generate"):
        extra_tasks(folder, tmp_path / "extra", per_family=1, seed=0)
