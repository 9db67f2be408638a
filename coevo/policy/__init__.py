"""Policy backends, chosen by a short name. Each implements `coevo.Policy.generate`.

    hf        a local Hugging Face causal-LM folder (batched, left-padded; token ids + logprobs)
    openai    an OpenAI-compatible chat endpoint (text only; for evaluation and harness search)
    scripted  fixed replies (tests); `oracle` plays each task's solution/solve.sh through a harness
"""

from __future__ import annotations

from importlib import import_module

BACKENDS = {
    "hf": "coevo.policy.hf.HFPolicy",
    "openai": "coevo.policy.openai.OpenAIPolicy",
    "scripted": "coevo.policy.scripted.ScriptedPolicy",
    "oracle": "coevo.policy.scripted.OraclePolicy",
}


def make_policy(spec: dict | str):
    """Build a policy from `{"backend": name, **constructor kwargs}`, or from "hf:PATH" / "openai:MODEL".

    A bare string without a known "name:" prefix is taken as a local HF model folder.
    """
    if isinstance(spec, str):
        name, _, rest = spec.partition(":")
        spec = {"backend": name, "model": rest} if name in ("hf", "openai") and rest else {"model": spec}
    kwargs = dict(spec)
    name = kwargs.pop("backend", "hf")
    if name not in BACKENDS:
        raise ValueError(f"policy backend {name!r}: valid are {', '.join(BACKENDS)}")
    module, _, cls = BACKENDS[name].rpartition(".")
    return getattr(import_module(module), cls)(**kwargs)
