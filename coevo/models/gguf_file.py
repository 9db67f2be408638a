"""What a GGUF file is, checked before any conversion: the magic, a complete structure, an architecture
transformers can load and a tokenizer in its metadata. Each failure is a ModelError naming the file."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from coevo.models.errors import ModelError

MAGIC = b"GGUF"
NOT_CAUSAL_LM = {"general", "tokenizer", "t5", "umt5"}
"""Keys of transformers' GGUF table that are no architecture a causal LM can be built from."""
ALIASES = {"qwen2moe": "qwen2_moe", "qwen3moe": "qwen3_moe", "gpt-oss": "gpt_oss", "minimax-m2": "minimax_m2"}
"""llama.cpp's spelling -> transformers' (transformers renames these itself when it loads the file)."""


@dataclass
class GGUFInfo:
    path: Path
    architecture: str
    name: str | None
    tensors: int
    has_chat_template: bool
    license: str | None


def supported_architectures() -> list[str]:
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

    return sorted(set(GGUF_SUPPORTED_ARCHITECTURES) - NOT_CAUSAL_LM)


def inspect_gguf(path: Path) -> GGUFInfo:
    if not path.is_file():
        raise ModelError(f"{path}: no such file (give a .gguf file)")
    with open(path, "rb") as f:
        head = f.read(4)
    if head != MAGIC:
        raise ModelError(f"{path}: not a GGUF file (it starts with {head!r}; a GGUF starts with {MAGIC!r})")
    reader = _read(path)
    end = max((t.data_offset + t.n_bytes for t in reader.tensors), default=0)
    if end > path.stat().st_size:
        raise ModelError(f"{path}: truncated GGUF: its tensors need {end} bytes, the file has "
                         f"{path.stat().st_size}; download or export it again")
    architecture = _string(reader, "general.architecture")
    supported = supported_architectures()
    if architecture is None or ALIASES.get(architecture, architecture) not in supported:
        import transformers

        raise ModelError(f"{path}: architecture {architecture!r} is not one transformers "
                         f"{transformers.__version__} can load from GGUF as a causal LM; supported: "
                         f"{', '.join(supported)}")
    if "tokenizer.ggml.tokens" not in reader.fields:
        raise ModelError(f"{path}: no tokenizer in its metadata (tokenizer.ggml.tokens); coevo needs the "
                         "tokenizer with the weights")
    return GGUFInfo(path, architecture, _string(reader, "general.name"), len(reader.tensors),
                    "tokenizer.chat_template" in reader.fields, _string(reader, "general.license"))


def _read(path: Path):
    from gguf import GGUFReader

    try:
        return GGUFReader(path)
    except (ValueError, IndexError, KeyError, EOFError, OSError, UnicodeDecodeError) as e:
        raise ModelError(f"{path}: truncated or corrupt GGUF ({type(e).__name__}: {e}); download or export "
                         "it again") from None


def _string(reader, key: str) -> str | None:
    field = reader.fields.get(key)
    return None if field is None else str(field.contents())


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()
