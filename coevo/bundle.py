"""An exported (harness, checkpoint) pair on disk, read and written here only: `coevo export` writes one
(coevo/search/export.py supplies the report), `coevo eval --bundle` reads one.

    DIR/
      harness.yaml    the resolved harness; prompts_dir: prompts (relative, so the folder can move)
      prompts/        the Jinja templates it names
      NAME.agent.yaml a native agent's own config, instead of prompts/ (harness.yaml names it)
      model/          the Hugging Face checkpoint (weights, config, tokenizer with its chat template); a
                      LoRA adapter (a nested trial's weights) is merged over its base here, itself in model/adapter
      report.json     what the writer knows about the pair: scores with their intervals, lineage
      README.md       the same in words, and the command that reproduces the score
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import yaml

from coevo.errors import CoevoError

SKIP = {"optimizer.pt", "scheduler.pt", "training_args.bin", "trainer_state.json", "rng_state.pth"}
"""Training state in a checkpoint folder that inference does not need."""
REQUIRED = ("harness.yaml", "model/config.json", "report.json")


class BundleError(CoevoError):
    """A bundle folder cannot be written or read; the message names the folder and what is wrong."""


def check_target(out: Path) -> None:
    """A bundle goes into a new or empty folder only: it never mixes with files already there."""
    if out.exists() and any(out.iterdir()):
        raise BundleError(f"--out {out}: exists and is not empty; choose a new folder")


def write_bundle(out: str | Path, harness, checkpoint: Path, report: dict[str, Any], readme: str) -> Path:
    """Write the bundle into a staging folder, then rename it: a killed export leaves no half bundle."""
    out = Path(out)
    check_target(out)
    staging = out.with_name(out.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    _write_harness(harness, staging)
    _copy_model(Path(checkpoint), staging / "model")
    (staging / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    (staging / "README.md").write_text(readme)
    if out.exists():
        out.rmdir()
    staging.rename(out)
    return out


def _write_harness(harness, folder: Path) -> None:
    from coevo.native.spec import is_native

    if is_native(harness):  # harness.yaml and, beside it, the agent's own config file (NAME.agent.yaml)
        from coevo.native.spec import save_native_harness

        save_native_harness(harness, folder)
        return
    (folder / "prompts").mkdir()
    for slot in type(harness.templates).model_fields:
        name = getattr(harness.templates, slot)
        target = folder / "prompts" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(harness.prompts_path / name, target)
    data = harness.model_dump(mode="json")
    data["prompts_dir"] = "prompts"
    if harness.demonstrations.k:  # the pools the demonstrations come from travel with the harness
        from coevo.harness.demos import pool_paths

        (folder / "demos").mkdir()
        for field, source in pool_paths(harness):
            key = field.rpartition(".")[2]
            shutil.copy2(source, folder / "demos" / f"{key}.jsonl")
            data["demonstrations"][key] = f"demos/{key}.jsonl"
    (folder / "harness.yaml").write_text(yaml.safe_dump(data, sort_keys=False))


def _copy_model(checkpoint: Path, target: Path) -> None:
    """The checkpoint as a plain model folder: copied, or, for an adapter folder (adapter_config.json and no
    config.json), merged over the base model it names, so that every reader of a bundle loads one folder."""
    from coevo.train.lora import is_adapter, merge_adapter

    if is_adapter(checkpoint):
        merge_adapter(checkpoint, target)
        return
    if not (checkpoint / "config.json").is_file():
        raise BundleError(f"{checkpoint}: not a Hugging Face model folder (no config.json) nor a LoRA adapter "
                          "folder (no adapter_config.json)")
    shutil.copytree(checkpoint, target, ignore=lambda d, names: [n for n in names if n in SKIP
                                                                  or n.startswith("rng_state")])


def load_bundle(folder: str | Path) -> tuple[Any, Path, dict]:
    """(harness, model folder, report) of an exported bundle; errors name the file that is missing."""
    from coevo.harness import load_harness

    folder = Path(folder)
    missing = [p for p in REQUIRED if not (folder / p).is_file()]
    if missing:
        raise BundleError(f"{folder}: not a coevo bundle (missing {', '.join(missing)}; `coevo export` writes "
                          "harness.yaml, prompts/, model/ and report.json)")
    try:
        report = json.loads((folder / "report.json").read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise BundleError(f"{folder / 'report.json'}: not valid JSON ({e}); `coevo export` writes it again") from None
    check_weights(folder / "model")
    return load_harness(folder / "harness.yaml"), folder / "model", report


def check_weights(model_dir: str | Path) -> None:
    """Every `*.safetensors` of a model folder is whole: its header parses and its tensors end inside the file.
    A cut copy or a half-written checkpoint then fails here, naming the file, not deep in transformers."""
    import struct

    for weights in sorted(Path(model_dir).glob("*.safetensors")):
        size = weights.stat().st_size
        with open(weights, "rb") as f:
            head = f.read(8)
            length = struct.unpack("<Q", head)[0] if len(head) == 8 else -1
            if not 0 < length <= size - 8:
                raise BundleError(f"{weights}: truncated or not safetensors ({size} bytes, header length "
                                  f"{length}); copy or export the model again")
            try:
                header = json.loads(f.read(length))
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                raise BundleError(f"{weights}: corrupt safetensors header ({e}); copy or export the model again"
                                  ) from None
        try:
            end = max((t["data_offsets"][1] for k, t in header.items() if k != "__metadata__"), default=0)
        except (AttributeError, KeyError, TypeError, IndexError):
            raise BundleError(f"{weights}: corrupt safetensors header (no tensor offsets); copy or export the "
                              "model again") from None
        if 8 + length + end > size:
            raise BundleError(f"{weights}: truncated: its tensors need {8 + length + end} bytes, the file has "
                              f"{size}; copy or export the model again")
