"""The schedule: a strategy string such as "w0 -> h -> w -> h" (DSPy BetterTogether's idea, for harness
and weights). `w0` warm-starts the model (SFT on oracle episodes; only first), `h` searches harnesses on
dev with Optuna under the current checkpoint, `w` trains the weights with GRPO on train under the
accepted harness and then re-scores the top harnesses on the new checkpoint."""

from __future__ import annotations

from coevo.search.errors import SearchError

KINDS = {"w0": "warm start (SFT on oracle episodes)", "h": "harness search (Optuna, dev split)",
         "w": "weights (GRPO, train split)"}


def parse_schedule(text: str, source: str = "schedule") -> list[str]:
    """"w0 -> h -> w -> h" -> ["w0", "h1", "w1", "h2"]: each phase named by kind and ordinal."""
    tokens = [t.strip() for t in str(text).split("->")]
    problems = []
    if not tokens or any(not t for t in tokens):
        problems.append("empty step (write steps separated by '->', e.g. \"w0 -> h -> w -> h\")")
    for i, t in enumerate(tokens):
        if t and t not in KINDS:
            problems.append(f"step {i + 1} '{t}' is not a phase (valid: "
                            + ", ".join(f"{k} = {v}" for k, v in KINDS.items()) + ")")
        elif t == "w0" and i != 0:
            problems.append(f"step {i + 1}: w0 (the warm start) can only be the first step")
    if problems:
        raise SearchError(f"{source} {text!r}: " + "; ".join(problems))
    names, count = [], {"h": 0, "w": 0}
    for t in tokens:
        if t == "w0":
            names.append("w0")
        else:
            count[t] += 1
            names.append(f"{t}{count[t]}")
    return names
