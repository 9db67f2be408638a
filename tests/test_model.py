"""The locally built default model: the tokenizer survives a save and load through `AutoTokenizer`
unchanged, carries TRL's verbatim chat template, and the folder loads as a Hugging Face model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHELL = [
    "find /app/cedar -type f -name '*.log' > /app/found.txt",
    'cd /app/x && for f in *.txt; do mv "$f" "${f%.txt}.md"; done',
    "printf '%s\\n' 'amber fox' 'été' > /app/out.txt\n\tchmod 755 /app/run.sh  # 3 spaces   end",
    "123456 0.5e-3 $((7*6)) ünïcödé 日本",
]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    from coevo.train.model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny"), REPO / "tasks", seed=0, prompts_dir=REPO / "prompts")


@pytest.fixture(scope="module")
def tokenizer(folder):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(folder)


def test_autotokenizer_encodes_like_the_trained_tokenizer(folder, tokenizer):
    from tokenizers import Tokenizer

    raw = Tokenizer.from_file(str(folder / "tokenizer.json"))
    assert type(tokenizer).__name__ == "Qwen2Tokenizer"  # the class that rebuilds the pipeline on load
    for text in [*SHELL, "123456"]:
        ids = tokenizer.encode(text, add_special_tokens=False)
        assert ids == raw.encode(text, add_special_tokens=False).ids
        assert tokenizer.decode(ids) == text
    assert tokenizer.convert_ids_to_tokens(tokenizer.encode("123456", add_special_tokens=False)) == list("123456")


def test_special_tokens_padding_and_template(tokenizer):
    from trl.chat_template_utils import qwen2_5_chat_template

    for token in ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>",
                  "<tool_response>", "</tool_response>"]:
        assert len(tokenizer.encode(token, add_special_tokens=False)) == 1, token
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.pad_token == "<|endoftext|>"
    assert tokenizer.padding_side == "left"
    assert tokenizer.chat_template == qwen2_5_chat_template  # TRL matches templates by exact string
    call = '<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>'
    assert tokenizer.decode(tokenizer.encode(call), skip_special_tokens=True) == call  # markup is kept


def test_trl_gets_generation_markers_that_cover_the_stop_token(tokenizer):
    from trl.chat_template_utils import (
        get_training_chat_template,
        has_generation_markers,
        is_chat_template_stop_token_trained,
    )

    assert not has_generation_markers(tokenizer.chat_template)
    training = get_training_chat_template(tokenizer)  # what SFTTrainer swaps in for assistant-only loss
    assert has_generation_markers(training)
    assert is_chat_template_stop_token_trained(tokenizer, chat_template=training)
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
                {"role": "assistant", "content": "ls -la"}]
    plain = tokenizer.apply_chat_template(messages, tokenize=False)
    assert tokenizer.apply_chat_template(messages, tokenize=False, chat_template=training) == plain


def test_model_folder_loads_with_the_expected_shape(folder, tokenizer):
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder)
    config = model.config
    assert (config.hidden_size, config.num_hidden_layers, config.num_attention_heads,
            config.num_key_value_heads) == (128, 4, 4, 2)
    assert config.tie_word_embeddings and config.max_position_embeddings >= 2048
    assert config.vocab_size >= len(tokenizer)
    assert 0.8e6 < sum(p.numel() for p in model.parameters()) < 1.5e6
    stop = json.loads((folder / "generation_config.json").read_text())["eos_token_id"]
    assert tokenizer.convert_tokens_to_ids("<|im_end|>") in stop
    with torch.no_grad():
        logits = model(torch.tensor([tokenizer.encode("ls -la /app")])).logits
    assert torch.isfinite(logits).all()


def test_same_seed_same_files(folder, tmp_path):
    from coevo.train.model import build_tiny_model

    again = build_tiny_model(tmp_path / "again", REPO / "tasks", seed=0, prompts_dir=REPO / "prompts")
    for name in ["tokenizer.json", "model.safetensors", "config.json"]:
        assert (again / name).read_bytes() == (folder / name).read_bytes(), name
