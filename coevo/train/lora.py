"""LoRA adapters (peft) for GRPO and SFT: a weights lever a real model can afford on CPU.

With `lora.rank > 0` the base weights stay frozen and each targeted linear layer trains a low-rank update
W + (alpha / rank) B A. The optimizer then holds two small matrices per layer instead of Adam moments for
every weight, which is what makes a 135 M model trainable in a few GiB (benchmarks/grpo.py --lora-vs-full).

What leaves the trainer is always a plain model, W + (alpha / rank) B A merged:
- the rollout copy gets merged weights every GRPO step (`merged_state_dict`), so the policy samples from
  the model being trained, and the mismatch watch still compares like with like;
- a checkpoint folder is a plain HF model folder (eval, serve and `coevo export` read it unchanged), with
  the adapter itself in its `adapter/` subfolder (`save_merged`); a resumed GRPO run reloads that adapter
  on the run's base model and continues with the optimizer, scheduler and RNG states (`load_adapter`).

`LoraSpec` is cheap to import (pydantic only); the functions import torch and peft inside.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from coevo.errors import ConfigError

ADAPTER = "adapter"
"""Subfolder of a checkpoint that holds the LoRA adapter (peft's own format)."""
ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors", "adapter_model.bin", "README.md")
DEFAULT_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


class LoraError(ConfigError, ValueError):
    """A LoRA setting the model or the run cannot take (unknown layer, a resume with other settings)."""


class LoraSpec(BaseModel):
    """LoRA adapter settings; rank 0 (the default) trains every weight, as without this section."""

    model_config = ConfigDict(extra="forbid")

    rank: int = Field(0, ge=0)
    """Adapter rank r; 0: no adapter, the full weights train."""
    alpha: float | None = Field(None, gt=0)
    """Scale of the update, (alpha / rank) B A; None: 2 x rank."""
    dropout: float = Field(0.0, ge=0, lt=1)
    """Dropout on each adapter's input while training. Keep 0 for GRPO: with dropout the trainer's
    log-probabilities are noisy copies of the rollout's (the mismatch watch shows it); SFT takes it."""
    target_modules: list[str] = DEFAULT_TARGETS
    """Linear layers that get an adapter, by the last part of their name (Qwen2 and Llama: q_proj, k_proj,
    v_proj, o_proj, gate_proj, up_proj, down_proj). Each must name a linear layer of the model; lm_head
    cannot (TRL computes log-probabilities from the base output layer)."""

    @field_validator("target_modules")
    @classmethod
    def _targets(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("needs at least one linear layer name (e.g. q_proj, v_proj)")
        if len(set(value)) != len(value):
            raise ValueError(f"names a layer twice: {value}")
        if "lm_head" in value:
            raise ValueError("lm_head cannot carry an adapter (TRL computes log-probabilities from the base "
                             "output layer); name the attention or MLP projections")
        return value

    @property
    def enabled(self) -> bool:
        return self.rank > 0

    @property
    def scale_alpha(self) -> float:
        return self.alpha if self.alpha is not None else 2.0 * self.rank


def lora_from_items(items: list[str], source: str) -> LoraSpec:
    """A LoraSpec from FIELD=VALUE strings (YAML values), e.g. ["rank=8", "target_modules=[q_proj, v_proj]"];
    errors name `source` and the field."""
    import yaml

    from coevo.config import field_name, validate

    data = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise LoraError(f"{source}: {item!r}: expected FIELD=VALUE (fields: {', '.join(LoraSpec.model_fields)})")
        data[key.strip()] = yaml.safe_load(value)
    return validate(LoraSpec, data, source, LoraError, name=lambda loc: field_name(("lora", *loc)))


def linear_layers(model) -> list[str]:
    """The distinct last-name parts of the model's linear layers, output layer excluded."""
    import torch

    out = model.get_output_embeddings()
    return sorted({name.rsplit(".", 1)[-1] for name, module in model.named_modules()
                   if isinstance(module, torch.nn.Linear) and module is not out})


def check_targets(model, spec: LoraSpec, source: str) -> None:
    have = linear_layers(model)
    missing = [t for t in spec.target_modules if t not in have]
    if missing:
        raise LoraError(f"{source}: lora.target_modules: {missing} {'is' if len(missing) == 1 else 'are'} not "
                        f"a linear layer of this model ({type(model).__name__}); its linear layers: "
                        f"{', '.join(have)}")


def wrap(model, spec: LoraSpec, source: str, seed: int = 0):
    """`model` as a peft model with fresh adapters on `spec.target_modules` (B = 0: it starts as `model`)."""
    import torch
    from peft import LoraConfig, get_peft_model

    check_targets(model, spec, source)
    torch.manual_seed(seed)  # A's random init
    config = LoraConfig(r=spec.rank, lora_alpha=spec.scale_alpha, lora_dropout=spec.dropout,
                        target_modules=list(spec.target_modules), bias="none", task_type="CAUSAL_LM")
    return get_peft_model(model, config)


def is_peft(model) -> bool:
    from peft import PeftModel

    return isinstance(model, PeftModel)


def merged_state_dict(model, adapter: str = "default") -> dict:
    """The plain model's state dict, W + (alpha / rank) B A per adapted layer, computed without touching
    `model` (merging in place and back would drift the trained weights by rounding every step). Keys are
    the plain model's, so `load_state_dict` of a plain copy takes it strictly."""
    import torch
    from peft.tuners.lora import LoraLayer

    base = model.get_base_model()
    with torch.no_grad():
        deltas = {f"{name}.weight": module.get_delta_weight(adapter) for name, module in base.named_modules()
                  if isinstance(module, LoraLayer) and adapter in module.lora_A}
        out = {}
        for key, value in base.state_dict().items():
            if ".lora_" in key:
                continue
            plain = key.replace(".base_layer.", ".")
            out[plain] = value + deltas[plain].to(value.dtype) if plain in deltas else value
    return out


def sync_weights(policy_model, trained) -> None:
    """Copy the trainer's weights into the rollout copy (merged when `trained` carries adapters)."""
    policy_model.load_state_dict(merged_state_dict(trained) if is_peft(trained) else trained.state_dict())


def plain_model(model):
    """A plain transformers model holding the merged weights (no copy of the base beyond the merge)."""
    import torch
    from transformers import AutoModelForCausalLM

    base = model.get_base_model()
    with torch.device("meta"):
        plain = AutoModelForCausalLM.from_config(base.config, dtype=base.dtype)
    plain.load_state_dict(merged_state_dict(model), assign=True)
    plain.tie_weights()
    plain.generation_config = base.generation_config
    return plain.eval()


def save_merged(model, folder: Path) -> Path:
    """Write the merged model as a plain HF folder into `folder`, and the adapter into `folder/adapter`.
    Adapter files the Trainer already wrote at the top (a checkpoint) move into the subfolder: at the top,
    transformers would load the folder as an adapter on its base model's path, not as a model."""
    folder = Path(folder)
    target = folder / ADAPTER
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    moved = [name for name in ADAPTER_FILES if (folder / name).is_file()]
    for name in moved:
        (folder / name).rename(target / name)
    if "adapter_config.json" not in moved:
        model.save_pretrained(target)
    for extra in [p for p in folder.iterdir() if p != target and (p / "adapter_config.json").is_file()]:
        extra.rename(target / extra.name)  # other adapters (TRL's "ref" copy under beta > 0)
    plain_model(model).save_pretrained(folder)
    return folder


def load_adapter(model, checkpoint: Path) -> None:
    """Load a checkpoint's adapter weights into `model` (a peft model on the run's base)."""
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    path = Path(checkpoint) / ADAPTER / "adapter_model.safetensors"
    if not path.is_file():
        raise LoraError(f"{checkpoint}: no LoRA adapter ({ADAPTER}/adapter_model.safetensors); it was trained "
                        "with full weights: resume with lora.rank=0, or start a new run")
    result = set_peft_model_state_dict(model, load_file(path))
    if result.unexpected_keys:
        raise LoraError(f"{path}: adapter weights this model has no place for: {result.unexpected_keys[:3]}")


def check_resume(checkpoint: Path, spec: LoraSpec, base_model: Path, marker: str) -> None:
    """Refuse to resume a checkpoint with other LoRA settings or, for an adapter, another base model:
    the optimizer's state and the adapter fit only what they were trained with."""
    info = json.loads((Path(checkpoint) / marker).read_text()) if (Path(checkpoint) / marker).is_file() else {}
    saved = LoraSpec.model_validate(info.get("spec", {}).get("lora", {}))
    if saved != spec:
        raise LoraError(f"{checkpoint}: trained with lora {saved.model_dump()}, this run asks for "
                        f"{spec.model_dump()}; resume with the same lora settings, or start a new run")
    base = info.get("base_model")
    if spec.enabled and base is not None and Path(base).resolve() != Path(base_model).resolve():
        raise LoraError(f"{checkpoint}: its adapter was trained on {base}, not on {base_model}; resume with "
                        f"--model {base}")


def adapter_callback():
    """A TrainerCallback that turns each checkpoint the Trainer saved (adapter only) into a merged plain
    model folder with the adapter in `adapter/`; it must run before the checkpoint is published."""
    from transformers import TrainerCallback

    class MergedCheckpoints(TrainerCallback):
        def on_save(self, args, state, control, model=None, **kwargs):
            staged = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            if state.is_world_process_zero and staged.is_dir():
                save_merged(model, staged)

    return MergedCheckpoints()


def is_adapter(folder: str | Path) -> bool:
    """A folder holding only a LoRA adapter (peft's format, over the base model it names), not a model."""
    return (Path(folder) / "adapter_config.json").is_file() and not (Path(folder) / "config.json").is_file()


def adapter_base(folder: str | Path) -> Path:
    """The base model folder an adapter folder was trained over (its adapter_config.json says)."""
    config = Path(folder) / "adapter_config.json"
    base = json.loads(config.read_text()).get("base_model_name_or_path")
    if not base or not (Path(base) / "config.json").is_file():
        raise LoraError(f"{config}: base_model_name_or_path {base!r} is not a model folder on this machine; "
                        "the adapter can only be loaded over the model it was trained on")
    return Path(base)


def load_adapted(folder: str | Path, trainable: bool = False):
    """The adapter in `folder` on a fresh copy of its base model (a peft model, adapter not merged; its
    adapter's weights train on when `trainable`)."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(adapter_base(folder), dtype=torch.float32)
    return PeftModel.from_pretrained(base, str(folder), is_trainable=trainable)


def merge_adapter(folder: str | Path, out: Path) -> Path:
    """Write the adapter in `folder` merged into its base as a plain model folder `out` (the adapter in
    `out/adapter`, the tokenizer beside it): what every reader of a checkpoint folder expects."""
    from transformers import AutoTokenizer

    save_merged(load_adapted(folder), out)
    AutoTokenizer.from_pretrained(adapter_base(folder)).save_pretrained(out)
    return out
