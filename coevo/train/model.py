"""The default model, built here because no hub can be reached: a byte-level BPE tokenizer trained on
the bundled tasks and harness prompts, and a randomly initialised small Qwen2 (hidden 128, 4 layers,
4 heads / 2 KV heads, tied embeddings, ~1 M parameters). `coevo warmstart` then teaches it.
`moe=True` builds a Mixture-of-Experts sibling instead (Qwen3-MoE: the same attention and tokenizer, each
layer's MLP 8 experts of which a router picks 2 per token, ~2 M parameters), for routing replay
(coevo.train.routing).

Two traps in the libraries shape the tokenizer:
- transformers' `Qwen2Tokenizer` rebuilds the normalizer and pre-tokenizer on load, so we train with
  exactly that pipeline (NFC, Qwen2's split regex, ByteLevel without its own regex), or a saved
  tokenizer would encode differently once loaded through `AutoTokenizer`;
- TRL recognises chat templates by exact string: TRL's own `qwen2_5.jinja`, copied verbatim, gets
  its tool-call parsing and its `{% generation %}` training variant (assistant-only SFT loss).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

# transformers' PRETOKENIZE_REGEX for Qwen2: digits split one by one, letters grouped, spaces kept.
QWEN2_REGEX = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"""
    r"""\s*[\r\n]+|\s+(?!\S)|\s+"""
)
EOS = "<|im_end|>"
"""Ends every assistant turn; the token generation stops on."""
PAD = "<|endoftext|>"
SPECIAL = [PAD, "<|im_start|>", EOS]
# Markup of the Qwen2.5 template: single tokens, but not special, so decoding keeps them.
MARKUP = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<tools>", "</tools>",
          "<think>", "</think>"]
VOCAB_SIZE = 2048
REPO_PROMPTS = Path(__file__).resolve().parents[2] / "prompts"
REPO_HARNESSES = Path(__file__).resolve().parents[2] / "harnesses"
TEXT_SUFFIXES = {"", ".md", ".sh", ".txt", ".py", ".j2", ".jinja", ".json", ".toml", ".yaml", ".yml",
                 ".csv", ".cfg", ".ini", ".conf", ".log", ".c", ".js", ".html"}
# Weight of the solutions in the BPE corpus: frequent merges make the oracle's commands short.
SOLUTION_WEIGHT = 8

SHELL_WORDS = """
ls -la cd pwd cat echo printf grep -r -n -v -i -c -E sed -i s/ / /g awk '{print $1}' find . -name -type f
-maxdepth head -n tail wc -l sort -u uniq -c cut -d -f tr mkdir -p rm -rf cp mv chmod +x touch tee
python3 -c import sys json os print open read write for in do done if then else fi while true false
test -f -d -e -z && || | > >> < 2>&1 $( ) ${ } $? $HOME /app /tmp /tests /logs export exit submit bash
sh tar -czf -xzf gzip gunzip zip unzip diff patch git status ln -s xargs basename dirname date env
curl wget jq sqlite3 make gcc apt-get install pip pytest README output input file files line lines
data result results config log error warning done ok hello world count total sum sort number name
"""
TOOL_CALL_SAMPLE = '<tool_call>\n{"name": "bash", "arguments": {"command": "ls -la /app"}}\n</tool_call>'


def qwen2_chat_template() -> str:
    """TRL's Qwen2.5 template, byte for byte (TRL matches templates by exact string)."""
    from importlib.util import find_spec

    # Read the file rather than import trl.chat_template_utils, which costs seconds of imports.
    trl_dir = Path(find_spec("trl").origin).parent
    return (trl_dir / "chat_templates" / "qwen2_5.jinja").read_text(encoding="utf-8")


def _text_files(root: Path) -> Iterator[Path]:
    for path in sorted(root.rglob("*")):
        if path.is_file() and path.suffix in TEXT_SUFFIXES and path.stat().st_size < 200_000:
            yield path


def corpus(tasks_dir: Path, prompts_dir: Path | None = None, harnesses: list | None = None) -> Iterator[str]:
    """The texts the tokenizer learns from: what the agent will read and write.

    Task files, prompt templates and shell words once each; and, for each harness, the episode texts as
    the harness renders them (system prompt, first message, each solution as replies), repeated in
    proportion to how often a model reads or writes them. Frequent merges make those sequences short:
    the submit reply of a harness is then a handful of tokens instead of dozens.
    """
    from coevo.harness import render_action
    from coevo.harness.prompts import instance_prompt, system_prompt
    from coevo.native.spec import is_native
    from coevo.policy.scripted import solution_commands

    solved = []
    for task in sorted(p.parent for p in tasks_dir.glob("*/instruction.md")):
        instruction = (task / "instruction.md").read_text(errors="replace")
        yield instruction
        if (task / "environment").is_dir():
            yield from (p.read_text(errors="replace") for p in _text_files(task / "environment"))
        if (task / "solution" / "solve.sh").is_file():
            solved.append((task.name, instruction, solution_commands(task / "solution" / "solve.sh")))
    for _, _, commands in solved:
        yield from ["\n".join(commands)] * SOLUTION_WEIGHT
    for harness in harnesses or []:
        native = is_native(harness)  # it renders its messages itself: its templates are learnt as written
        opening = harness.rendered_prompts() if native else system_prompt(harness)
        yield from [opening, render_action(harness, [], submit=True)] * max(1, len(solved))
        for name, instruction, commands in solved:
            if not native:
                yield instance_prompt(harness, instruction, name, None)
            yield from [render_action(harness, commands, submit=False)] * SOLUTION_WEIGHT
    if prompts_dir is not None and prompts_dir.is_dir():
        yield from (p.read_text(errors="replace") for p in _text_files(prompts_dir))
    yield SHELL_WORDS
    yield TOOL_CALL_SAMPLE
    yield qwen2_chat_template()


def load_harnesses(folder: Path | None) -> list:
    from coevo.harness import load_harness

    return [load_harness(p) for p in sorted(folder.glob("*.yaml"))] if folder and folder.is_dir() else []


def train_tokenizer(texts: Iterator[str], vocab_size: int = VOCAB_SIZE):
    """A byte-level BPE `tokenizers.Tokenizer` with Qwen2's pipeline and added tokens."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
    from tokenizers.trainers import BpeTrainer

    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[AddedToken(t, special=True, normalized=False) for t in SPECIAL],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


def wrap_tokenizer(raw):
    """The transformers tokenizer around a trained `tokenizers.Tokenizer`: pads left, Qwen2.5 template."""
    from tokenizers import AddedToken
    from transformers import Qwen2Tokenizer

    vocab = raw.get_vocab()
    merges = [tuple(m) for m in json.loads(raw.to_str())["model"]["merges"]]
    tok = Qwen2Tokenizer(vocab=vocab, merges=merges, eos_token=EOS, pad_token=PAD, unk_token=None,
                         padding_side="left", model_max_length=4096)
    # Registered explicitly: the constructor only knows eos/pad, and an unregistered "<|im_start|>"
    # would be split into pieces on encode even though it is in the vocabulary.
    tok.add_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL], special_tokens=True)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in MARKUP])
    tok.chat_template = qwen2_chat_template()
    return tok


def model_config(tokenizer, hidden: int = 128, layers: int = 4, moe: bool = False):
    """Qwen2 (dense), or with `moe` Qwen3-MoE: 8 experts of the hidden size, top-2, weights renormalised
    over the two (as Qwen3-MoE ships), so a token's active MLP is about the dense one's size."""
    from transformers import Qwen2Config, Qwen3MoeConfig

    vocab = -(-len(tokenizer) // 64) * 64  # round up: a tidy embedding, room for a few added tokens
    shared = {
        "vocab_size": vocab, "hidden_size": hidden, "intermediate_size": hidden * 3, "num_hidden_layers": layers,
        "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 4096,
        "tie_word_embeddings": True, "use_cache": True, "bos_token_id": None,
        "eos_token_id": tokenizer.convert_tokens_to_ids(EOS), "pad_token_id": tokenizer.convert_tokens_to_ids(PAD),
    }
    if moe:
        return Qwen3MoeConfig(**shared, head_dim=hidden // 4, num_experts=8, num_experts_per_tok=2,
                              moe_intermediate_size=hidden, norm_topk_prob=True,
                              rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    return Qwen2Config(**shared, rope_theta=10000.0)


def build_tiny_model(out: Path, tasks_dir: Path, seed: int = 0, prompts_dir: Path | None = REPO_PROMPTS,
                     harnesses_dir: Path | None = REPO_HARNESSES, extra_harnesses: tuple = (),
                     moe: bool = False) -> Path:
    """Train the tokenizer, initialise the model from `seed` (`moe`: the Mixture-of-Experts sibling), save
    both to `out` (a HF folder).

    The vocabulary comes from `tasks_dir`, the templates in `prompts_dir`, the harnesses in
    `harnesses_dir` (by default the repository's; None leaves them out) and `extra_harnesses` (a search's
    base harness from elsewhere, e.g. a native agent's)."""
    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig

    texts = corpus(Path(tasks_dir), prompts_dir, [*load_harnesses(harnesses_dir), *extra_harnesses])
    tokenizer = wrap_tokenizer(train_tokenizer(texts))
    torch.manual_seed(seed)
    config = model_config(tokenizer, moe=moe)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    stop = [tokenizer.convert_tokens_to_ids(t) for t in (EOS, PAD)]
    model.generation_config = GenerationConfig(eos_token_id=stop, pad_token_id=config.pad_token_id,
                                               do_sample=True, temperature=1.0, top_p=1.0)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def describe(folder: Path) -> str:
    """'1.06M-parameter qwen2 (hidden 128, 4 layers, vocab 2112)', read from the files without torch."""
    import struct

    config = json.loads((Path(folder) / "config.json").read_text())
    params = 0
    for shard in sorted(Path(folder).glob("*.safetensors")):
        with shard.open("rb") as f:
            header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
        for key, info in header.items():
            if key != "__metadata__":
                n = 1
                for dim in info["shape"]:
                    n *= dim
                params += n
    n_experts = config.get("num_local_experts") or config.get("num_experts")  # transformers saves the former
    experts = f", {n_experts} experts, top-{config['num_experts_per_tok']}" if n_experts else ""
    return (f"{params / 1e6:.2f}M-parameter {config['model_type']} (hidden {config['hidden_size']}, "
            f"{config['num_hidden_layers']} layers{experts}, vocab {config['vocab_size']})")
