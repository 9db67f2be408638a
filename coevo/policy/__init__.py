"""Policy backends, chosen by a short name. Each implements `coevo.Policy.generate`.

    hf         a local Hugging Face causal-LM folder (batched, left-padded; token ids + logprobs)
    openai     an OpenAI-compatible endpoint: chat (text only; evaluation and harness search), or token ids in
               and out with `tokenizer=DIR` (coevo serve, vLLM; nothing lost for training)
    vllm       a vLLM server (started for the run, or at base_url): token ids in and out, LoRA hot-loaded
               after every training step (coevo.vllm)
    scripted   fixed replies (tests)
    oracle     plays each task's solution/solve.sh through a harness (warm-start data, task checks)
    synthetic  the oracle with harness-dependent slips: a known landscape for measuring the optimizer
"""

from __future__ import annotations

from importlib import import_module

BACKENDS = {
    "hf": "coevo.policy.hf.HFPolicy",
    "openai": "coevo.policy.openai.OpenAIPolicy",
    "vllm": "coevo.vllm.policy.VLLMPolicy",
    "scripted": "coevo.policy.scripted.ScriptedPolicy",
    "oracle": "coevo.policy.scripted.OraclePolicy",
    "synthetic": "coevo.policy.synthetic.HarnessSensitivePolicy",
}
PLAYS_TASKS = ("oracle", "synthetic")
"""Backends that replay the tasks' own solutions: they are built with the harness and the tasks."""


def make_policy(spec: dict | str, harness=None, tasks: list | None = None):
    """Build a policy from `{"backend": name, **constructor kwargs}`, or from "hf:PATH" / "vllm:PATH" / "openai:MODEL" /
    "oracle" / "synthetic". A bare string that names no backend is taken as a local HF model folder.

    `harness` and `tasks` go to the backends that play the tasks (oracle, synthetic); the others ignore them.
    """
    if isinstance(spec, str):
        name, _, rest = spec.partition(":")
        spec = ({"backend": name, "model": rest} if name in ("hf", "vllm", "openai") and rest
                else {"backend": spec} if spec in PLAYS_TASKS else {"model": spec})
    kwargs = dict(spec)
    name = kwargs.pop("backend", "hf")
    if name not in BACKENDS:
        raise ValueError(f"policy backend {name!r}: valid are {', '.join(BACKENDS)}")
    if name in PLAYS_TASKS:
        kwargs.update({k: v for k, v in (("harness", harness), ("tasks", tasks)) if v is not None})
        if "harness" not in kwargs or "tasks" not in kwargs:
            raise ValueError(f"policy backend {name!r} replays the tasks' solutions: give it the harness and the tasks")
    module, _, cls = BACKENDS[name].rpartition(".")
    return getattr(import_module(module), cls)(**kwargs)
