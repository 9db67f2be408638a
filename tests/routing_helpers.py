"""What the routing-replay tests share (tests/test_routing*.py): short episodes on tasks with random
partial credit, the training model as GRPO scores with it, and the experts a training forward used."""

from __future__ import annotations

from pathlib import Path

from conftest import write_task

REPO = Path(__file__).resolve().parents[1]
COIN_TEST = """#!/bin/bash
printf '{"a": 0.%05d, "b": 0.%05d}' $RANDOM $RANDOM > /logs/verifier/reward.json
"""
SHORT = {"limits.max_tokens_per_turn": 16, "limits.max_turns": 2}


def coin_tasks(root: Path) -> Path:
    """Two tasks whose verifier pays random partial credit: GRPO groups with real advantages."""
    for i in range(2):
        write_task(root, f"coin-{i}", test_sh=COIN_TEST, instruction=f"Write {40 + i} to /app/answer.txt.\n")
    return root


def short_harness():
    from coevo.harness import load_harness

    return load_harness(REPO / "harnesses" / "mini_bash.yaml").with_overrides(SHORT)


def training_model(folder):
    """The fp32 model as GRPO trains it: with TRL's fused LM head, which the mismatch watch's forward uses."""
    import torch
    from transformers import AutoModelForCausalLM
    from trl.trainer.utils import add_fused_lm_head

    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    add_fused_lm_head(model, temperature=1.0)
    return model


def used_routing(model, trajectories) -> list[tuple[list, list]]:
    """(recorded, used by a training forward) per sampled token: the experts each forward took at the
    position that predicts the token, as hooks after any replay saw them."""
    import torch

    from coevo.train.routing import RoutingTaps

    taps, pairs = RoutingTaps(model), []
    for t in trajectories:
        ids = torch.tensor([t.prompt_ids + t.completion_ids])
        with torch.no_grad():
            model(input_ids=ids)
        chosen = taps.chosen(1, ids.shape[1])[0]
        for j, m in enumerate(t.completion_mask):
            if m:
                pairs.append(([sorted(e) for e in t.routing[j]],
                              [sorted(e) for e in chosen[len(t.prompt_ids) + j - 1].tolist()]))
    taps.close()
    return pairs
