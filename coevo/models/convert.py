"""A GGUF to a plain Hugging Face folder (fp32 safetensors, tokenizer with its chat template).

transformers dequantizes a GGUF into a model that `save_pretrained` refuses (its config carries the GGUF
quantization_config). So: rebuild the config without it, `from_config`, copy the state dict over (the
keys match one for one), and save that. The tokenizer is saved beside it and read back once: a folder
whose tokenizer encodes differently from the GGUF's is refused rather than kept.
"""

from __future__ import annotations

from pathlib import Path

from coevo.models.errors import ModelError
from coevo.models.gguf_file import GGUFInfo
from coevo.models.progress import Steps, counted_tensors, quiet_transformers

PROBE = "Hello, world! 123456 ls -la /tmp && echo 'héllo wörld'\n\tdone"
"""Text the saved tokenizer must encode as the GGUF's does (digits, spaces, tabs, non-ASCII)."""
HUGE = 10**18
"""Above this, tokenizer.model_max_length is transformers' 'unset' sentinel."""


def convert(info: GGUFInfo, out: Path, steps: Steps, chat_template: str | None = None,
            eos_token: str | None = None) -> dict:
    """Write the HF folder `out`; returns facts for the marker (parameters, model_type)."""
    import torch
    from transformers import AutoModelForCausalLM

    folder, name = str(info.path.parent), info.path.name
    with steps.step("read tokenizer"), quiet_transformers():
        tokenizer = _load(info, lambda: _gguf_tokenizer(folder, name))
    dequantize = steps.step(f"dequantize {info.tensors} tensors", total=info.tensors)
    with dequantize as advance, counted_tensors(advance), quiet_transformers():
        loaded = _load(info, lambda: AutoModelForCausalLM.from_pretrained(folder, gguf_file=name,
                                                                           dtype=torch.float32))
    with steps.step("save as Hugging Face folder (fp32)"), quiet_transformers():
        model = plain_copy(loaded)
        del loaded
        _fix_tokenizer(tokenizer, model.config, chat_template, eos_token)
        model.generation_config = _generation_config(model.config, tokenizer)
        model.save_pretrained(out)
        tokenizer.save_pretrained(out)
        _check_tokenizer(tokenizer, out, info)
    return {"architecture": info.architecture, "model_type": model.config.model_type,
            "parameters": sum(p.numel() for p in model.parameters())}


def _gguf_tokenizer(folder: str, name: str):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(folder, gguf_file=name)


def _load(info: GGUFInfo, load):
    try:
        return load()
    except (ValueError, KeyError, RuntimeError, TypeError, OSError) as e:
        raise ModelError(f"{info.path}: transformers could not load this {info.architecture} GGUF: "
                         f"{type(e).__name__}: {e}") from None


def plain_copy(loaded):
    """The same weights in a model built from a plain config (no quantization_config), so it saves."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    data = loaded.config.to_dict()
    for key in ("quantization_config", "architectures", "_name_or_path", "transformers_version"):
        data.pop(key, None)
    config = AutoConfig.for_model(data.pop("model_type"), **data)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict())  # strict: every key must match
    return model.eval()


def _fix_tokenizer(tokenizer, config, chat_template: str | None, eos_token: str | None) -> None:
    if chat_template is not None:
        tokenizer.chat_template = chat_template
    if eos_token is not None:
        tokenizer.eos_token = eos_token
    if tokenizer.pad_token is None:  # left padding for batched generation needs one; eos never shows
        tokenizer.pad_token = tokenizer.eos_token
    context = getattr(config, "max_position_embeddings", None)
    if context and (tokenizer.model_max_length or HUGE) >= HUGE:
        tokenizer.model_max_length = context


def _generation_config(config, tokenizer):
    """Plain: token ids only, no sampling defaults that would skew what a policy samples."""
    from transformers import GenerationConfig

    eos = [tokenizer.eos_token_id] + [i for i in _ids(config.eos_token_id) if i != tokenizer.eos_token_id]
    return GenerationConfig(bos_token_id=config.bos_token_id, eos_token_id=eos if len(eos) > 1 else eos[0],
                            pad_token_id=tokenizer.pad_token_id)


def _ids(value) -> list[int]:
    return [] if value is None else list(value) if isinstance(value, list | tuple) else [value]


def _check_tokenizer(tokenizer, out: Path, info: GGUFInfo) -> None:
    from transformers import AutoTokenizer

    saved = AutoTokenizer.from_pretrained(out)
    probe = PROBE + (saved.eos_token or "")
    if saved.encode(probe) != tokenizer.encode(probe) or saved.chat_template != tokenizer.chat_template:
        raise ModelError(f"{info.path}: the tokenizer saved to a Hugging Face folder ({type(saved).__name__}) "
                         "encodes differently from the GGUF's; not kept (please report the file)")
