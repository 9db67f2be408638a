"""A synthetic policy for measuring the optimizer itself (tests, benchmarks/search.py), not a model: the
`synthetic` backend of `make_policy`, so a search config can name it (`policy: {backend: synthetic}`).

`HarnessSensitivePolicy` plays each task's reference solution like the oracle, but each reply comes out
unparseable with a probability that depends on the harness (action format, templates, decoding, context),
and on a per-task difficulty. What happens next is decided by the real machinery: the harness's recovery
policy answers the bad reply (or drops it), its retry cap and turn limit end the episode, and the task's
verifier scores what the commands did in a real sandbox. So the search sees a realistic, noisy landscape
with a known structure, at the cost of running shell commands instead of a model. Draws are seeded by
(seed, task, turn, harness), so the same pair scores the same every time.
"""

from __future__ import annotations

import hashlib
import random

from coevo import GenerationRequest
from coevo.policy.scripted import OraclePolicy

GARBAGE = "I will look at the files first, then decide what to run."
"""A reply that no action format parses."""


def error_rate(harness) -> float:
    """Probability that one reply is unparseable under this harness (the landscape the search explores)."""
    p = {"json": 0.35, "tool_call": 0.45, "bash_block": 0.25}[harness.action_format.kind]
    p += {"system_verbose.j2": -0.12, "system_tools.j2": -0.04}.get(harness.templates.system, 0.0)
    p += 0.03 if harness.templates.instance == "instance_terse.j2" else 0.0
    p += 0.35 * abs(harness.decoding.temperature - 0.3)  # too greedy repeats itself, too hot rambles
    p += 1.2 * (harness.decoding.top_p - 0.9) ** 2
    p += 0.08 if harness.context.output_head_chars + harness.context.output_tail_chars < 500 else 0.0
    p += 0.05 if harness.initial_observation is None else 0.0
    p += 0.06 if harness.limits.max_tokens_per_turn < 128 else 0.0  # replies cut short
    p -= 0.03 if harness.recovery.nonzero_exit_hint else 0.0
    return min(0.95, max(0.02, p))


class HarnessSensitivePolicy(OraclePolicy):
    def __init__(self, harness, tasks, seed: int = 0, tokenizer=None):
        super().__init__(harness, tasks, tokenizer=tokenizer)
        self.seed, self.p = seed, error_rate(harness)
        # What the harness does, not where its templates live: an exported bundle carries its own prompts/
        # folder and must draw the same episodes as the run it came from.
        behaviour = harness.model_dump_json(exclude={"name", "description", "prompts_dir"})
        self.key = hashlib.sha256(behaviour.encode()).hexdigest()

    def _oracle_reply(self, request: GenerationRequest, turn: int) -> str:
        from coevo.harness import render_action

        name = request.meta.get("task", "")
        difficulty = 0.5 + int(hashlib.sha256(name.encode()).hexdigest()[:4], 16) / 0xFFFF  # 0.5 .. 1.5
        # Two kinds of failure: a lost episode (every reply bad: no recovery helps) and a slip on one
        # turn (the harness's format feedback, retry cap and turn limit decide whether it recovers).
        lost = random.Random(f"{self.seed}:{name}:{self.key}").random() < min(0.97, self.p * difficulty)
        slip = random.Random(f"{self.seed}:{name}:{turn}:{self.key}").random() < 0.5 * self.p
        if lost or slip:
            return GARBAGE
        # Progress is what the episode kept: a dropped or rejected reply did not run anything.
        ran = any(m.get("role") == "assistant" and m.get("content") != GARBAGE for m in request.messages)
        if name not in self.solutions:
            raise ValueError(f"synthetic policy: task {name!r} is not one it was given")
        if not ran:
            return render_action(self.harness, self.solutions[name], submit=False)
        return render_action(self.harness, [], submit=True)
