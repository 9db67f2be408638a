"""A GRPO step (TRL's GRPOTrainer, as coevo's w-phase runs it) on mini-swe-agent episodes generated through
`coevo serve` sessions: the rows TRL trains on are the sessions' records, and their loss region is exactly
the tokens the served model sampled.

This test wires the pieces (`rows_from_trajectories`, `loss_region_drift`) around `run_native` against an
external server; the w-phase itself, which serves its rollout copy in-process, runs in
tests/test_search_native.py."""

from __future__ import annotations

from pathlib import Path

from serve_helpers import MODEL, serving, tiny_model, torch_threads

from coevo.native.run import run_native
from coevo.native.spec import load_native_harness
from coevo.tasks import load_taskset

REPO = Path(__file__).resolve().parents[1]


class Recording:
    """The served policy, keeping every completion it sampled (what the loss region must be made of)."""

    def __init__(self, policy):
        self.policy, self.tokenizer, self.sampled = policy, policy.tokenizer, set()

    def generate(self, requests, params):
        out = self.policy.generate(requests, params)
        self.sampled |= {tuple(c.token_ids) for c in out}
        return out


def test_a_grpo_step_trains_on_exactly_the_tokens_the_served_model_sampled(tmp_path, monkeypatch):
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from coevo.policy.hf import HFPolicy
    from coevo.train.grpo_rollout import loss_region_drift, rows_from_trajectories

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    tasks = {t.name: t for t in load_taskset(REPO / "tasks").split("dev")[:2]}
    # Every reply is one action (the whole reply is the command), so the untrained model makes no format
    # error, mini-swe-agent keeps its history, and each episode is one segment: one TRL row per prompt.
    harness = load_native_harness(REPO / "harnesses" / "native" / "mini_swe_agent.yaml").with_overrides(
        {"agent_settings.step_limit": 2, "decoding.max_tokens": 12, "model_settings.action_regex": r"\A(.+)\Z"})
    tokenizer = AutoTokenizer.from_pretrained(tiny_model())
    served = Recording(HFPolicy(tiny_model(), device="cpu"))
    seen: list = []

    with torch_threads(1), serving(served, tokenizer) as (server, _):
        def rollout_func(prompts: list[str], trainer) -> dict:
            episodes = run_native([tasks[p] for p in prompts], harness, server.url, MODEL, max_workers=len(prompts))
            assert [t.task for t in episodes] == list(prompts), "one segment per episode"
            seen.extend(episodes)
            # The verifier scores 0 for an untrained model, which gives GRPO nothing to follow; the mean
            # logprob of the sampled tokens stands in for it, so that the advantages are not all zero.
            return {**rows_from_trajectories(episodes, tokenizer.pad_token_id),
                    "stand_in": [sum(lp for lp, m in zip(t.logprobs, t.completion_mask) if m) / len(t.model_tokens)
                                 for t in episodes]}

        model = AutoModelForCausalLM.from_pretrained(tiny_model(), dtype=torch.float32)
        before = {k: v.clone() for k, v in model.state_dict().items()}
        args = GRPOConfig(output_dir=str(tmp_path / "grpo"), max_steps=1, per_device_train_batch_size=4,
                          num_generations=2, learning_rate=1e-2, beta=0.0, use_cpu=True, bf16=False,
                          activation_checkpointing=False, max_completion_length=4096, report_to=[],
                          save_strategy="no", logging_steps=1, disable_tqdm=True, seed=0)
        trainer = GRPOTrainer(model=model, reward_funcs=[lambda prompts, completions, stand_in, **kw: stand_in],
                              args=args, train_dataset=Dataset.from_list([{"prompt": name} for name in tasks]),
                              processing_class=tokenizer, rollout_func=rollout_func)
        trainer.train()

    assert len(seen) == 4
    for t in seen:
        assert t.model_tokens and 0 in t.completion_mask
        assert loss_region_drift(t, t.completion_ids, t.completion_mask, {t.task: served.sampled}) == 0
    after = trainer.model.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before), "the step changed no weight"
