"""The schedule: a strategy string such as "w0 -> h -> w -> h" (DSPy BetterTogether's idea, for harness
and weights). `w0` warm-starts the model (SFT on oracle episodes; only first), `h` searches harnesses on
dev with Optuna under the current checkpoint, `w` trains the weights with GRPO on train under the
accepted harness and then re-scores the top harnesses on the new checkpoint, and `n` runs nested trials:
each trial a harness scored with a LoRA adapter trained under it (coevo/search/nested.py).

A phase is a typed `Phase(kind, name)`: code asks for its `kind`, never for its name's first letter."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from coevo.search.errors import SearchError

HARNESS_ARM, WEIGHTS_ARM = "harness-only", "weights-only"
"""The fair single-lever arms' names (coevo/search/arms.py): rows of the final table, keys of the budgets."""


class Kind(StrEnum):
    W0 = "w0"
    H = "h"
    W = "w"
    N = "n"

    @property
    def searched(self) -> bool:
        """Its trials are Optuna trials that workers may run (h- and n-phases)."""
        return self in (Kind.H, Kind.N)


KINDS = {Kind.W0: "warm start (SFT on oracle episodes)", Kind.H: "harness search (Optuna, dev split)",
         Kind.W: "weights (GRPO, train split)",
         Kind.N: "nested trials (each harness scored with a LoRA adapter trained under it)"}


@dataclass(frozen=True)
class Phase:
    """One step of the schedule: its kind and its name (the kind and its ordinal: h1, w2, n1; w0 alone)."""

    kind: Kind
    name: str


def parse_phases(text: str, source: str = "schedule") -> list[Phase]:
    """"w0 -> h -> w -> h" -> [Phase(w0, "w0"), Phase(h, "h1"), Phase(w, "w1"), Phase(h, "h2")]."""
    tokens = [t.strip() for t in str(text).split("->")]
    problems = []
    if not tokens or any(not t for t in tokens):
        problems.append("empty step (write steps separated by '->', e.g. \"w0 -> h -> w -> h\")")
    for i, t in enumerate(tokens):
        if t and t not in KINDS:
            problems.append(f"step {i + 1} '{t}' is not a phase (valid: "
                            + ", ".join(f"{k} = {v}" for k, v in KINDS.items()) + ")")
        elif t == Kind.W0 and i != 0:
            problems.append(f"step {i + 1}: w0 (the warm start) can only be the first step")
    if problems:
        raise SearchError(f"{source} {text!r}: " + "; ".join(problems))
    phases, count = [], {k: 0 for k in KINDS}
    for t in map(Kind, tokens):
        count[t] += 1
        phases.append(Phase(t, t.value if t is Kind.W0 else f"{t.value}{count[t]}"))
    return phases


def parse_schedule(text: str, source: str = "schedule") -> list[str]:
    """"w0 -> h -> w -> h" -> ["w0", "h1", "w1", "h2"]: each phase named by kind and ordinal."""
    return [p.name for p in parse_phases(text, source)]


def kind_of(name: str) -> Kind | None:
    """The kind of a phase named by `parse_phases` (h2 -> h); None for any other name (arms, test, start)."""
    if name == Kind.W0:
        return Kind.W0
    match = re.fullmatch(r"([hwn])[1-9][0-9]*", name)
    return Kind(match[1]) if match else None


def count(phases: list[Phase], kind: Kind) -> int:
    return sum(p.kind is kind for p in phases)
