"""The incumbent, the candidates that challenge it, and the rule that decides.

The incumbent is the accepted (harness, checkpoint) pair of a run. A phase proposes a `Candidate` (the best
trial of an h-phase, the best re-scored harness on a new checkpoint); `accept` compares the two on the
tasks both were scored on; only `Incumbent.challenge` replaces the incumbent, and it logs every decision,
accepted or not, in the run's history. A new phase, split or rule changes one of these three, not the
phases that call them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from coevo.search.state import Ledger, Pair


@dataclass(frozen=True)
class Candidate:
    """A pair a phase proposes in place of the incumbent, with the scores it was chosen on."""

    pair: Pair
    phase: str
    """The phase that proposes it (h1, w1, ...)."""


@dataclass(frozen=True)
class Decision:
    """The candidate's paired gain over the incumbent, its 95% interval, and the verdict."""

    gain: float
    low: float
    high: float
    accepted: bool


def accept(incumbent: Pair, candidate: Pair, seed: int) -> Decision:
    """The acceptance rule: a paired bootstrap over the tasks both were scored on, accepting only a gain
    whose 95% interval lies above zero (a lucky draw within the noise band keeps the incumbent)."""
    from coevo.evaluate import paired_bootstrap

    gain, low, high = paired_bootstrap(incumbent.per_task, candidate.per_task, seed=seed)
    return Decision(gain, low, high, accepted=low > 0)


class Incumbent:
    """The accepted pair of a run, kept in its ledger (state.json), and the history of challenges to it."""

    def __init__(self, ledger: Ledger, seed: int, log: Callable[[str], None]):
        self.ledger, self.seed, self.log = ledger, seed, log

    @property
    def pair(self) -> Pair:
        return self.ledger.state.incumbent

    def start(self, baseline: Pair) -> None:
        """The baseline is the first incumbent: every later pair has to beat it."""
        state = self.ledger.state
        state.baseline = state.incumbent = baseline
        state.history.append(self._point("start", "baseline", Decision(0.0, 0.0, 0.0, True)))

    def challenge(self, candidate: Candidate) -> Decision:
        """Decide, replace the incumbent when the candidate is accepted, and log the decision either way."""
        incumbent, pair = self.pair, candidate.pair
        decision = accept(incumbent, pair, self.seed)
        verdict = "accepted" if decision.accepted else "kept the incumbent"
        self.log(f"{candidate.phase}: {pair.source} {pair.brief()} vs incumbent {incumbent.source} "
                 f"{incumbent.brief()}: gain {decision.gain:+.3f} [{decision.low:+.3f}, {decision.high:+.3f}] "
                 f"-> {verdict}")
        if decision.accepted:
            self.ledger.state.incumbent = pair
        self.ledger.state.history.append(self._point(candidate.phase, pair.source, decision))
        return decision

    def _point(self, phase: str, challenger: str, decision: Decision) -> dict:
        """One entry of the history: the decision, and the incumbent after it (what the plots draw)."""
        inc = self.pair
        return {"phase": phase, "generation": self.ledger.generation, "challenger": challenger,
                "accepted": decision.accepted, "gain": decision.gain, "gain_low": decision.low,
                "gain_high": decision.high, "incumbent": inc.source, "score": inc.score,
                "pass_at_1": inc.pass_at_1, "ci_low": inc.ci_low, "ci_high": inc.ci_high}
