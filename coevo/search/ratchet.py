"""The incumbent, the candidates that challenge it, and the rule that decides: a ratchet that promotes one
component at a time, on tasks that never chose the candidate.

A phase proposes a `Candidate`: the best trial of an h-phase (a new harness), the trained checkpoint of
a w-phase under the incumbent's harness (new weights), or the best re-scored harness on an accepted
checkpoint. The candidate was chosen by its evolve (dev) score, so that score is biased upwards (the best
of N noisy trials looks better than it is). `Incumbent.challenge` therefore scores both pairs again on
the frozen promotion tasks and promotes the candidate only when it wins more of them than it loses and the
lower bound of its paired 95% interval clears the margin. Every decision, accepted or not, goes into the
run's history with its wins, losses, ties, gain and interval.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

from coevo.evaluate.stats import PairedGain, paired_gain
from coevo.search.state import Decided, Ledger, Pair


@dataclass(frozen=True)
class Candidate:
    """A pair a phase proposes in place of the incumbent, with the evolve scores it was chosen on."""

    pair: Pair
    phase: str
    """The phase that proposes it (h1, w1, ...)."""


@dataclass(frozen=True)
class Decision:
    """The candidate against the incumbent on the promotion tasks, and the verdict."""

    paired: PairedGain
    """Gain, interval, wins, losses and ties over the promotion tasks."""
    accepted: bool
    error: str | None = None
    """Why the candidate was not compared (then it is rejected)."""

    @classmethod
    def without_comparison(cls, error: str, ties: int = 0) -> Decision:
        return cls(PairedGain(0.0, 0.0, 0.0, 0, 0, ties), False, error)

    def record(self) -> dict:
        """Flat, for the ratchet log and the phase's ledger."""
        return {**asdict(self.paired), "accepted": self.accepted, "error": self.error}

    @classmethod
    def from_record(cls, data: dict) -> Decision:
        fields = {k: data[k] for k in ("gain", "low", "high", "wins", "losses", "ties")}
        return cls(PairedGain(**fields), data["accepted"], data.get("error"))


def accept(incumbent: dict[str, float], candidate: dict[str, float], seed: int, margin: float) -> Decision:
    """The promotion rule, on per-task scores of the promotion tasks."""
    paired = paired_gain(incumbent, candidate, seed=seed)
    return Decision(paired, accepted=paired.clears(margin))


class Incumbent:
    """The accepted pair of a run, kept in its ledger (state.json); promotion scores are cached there too,
    so a resumed run never scores a pair on the promotion tasks twice."""

    def __init__(self, ledger: Ledger, evaluator, promotion: list, seed: int, margin: float,
                 log: Callable[[str], None]):
        self.ledger, self.evaluator, self.promotion = ledger, evaluator, promotion
        self.seed, self.margin, self.log = seed, margin, log

    @property
    def pair(self) -> Pair:
        return self.ledger.state.incumbent

    def start(self, baseline: Pair) -> None:
        """The baseline is the first incumbent: every later pair has to beat it."""
        state = self.ledger.state
        state.baseline = state.incumbent = baseline
        state.history.append(self._point("start", "baseline", Decision(PairedGain(0.0, 0.0, 0.0, 0, 0, 0), True)))

    def challenge(self, candidate: Candidate, run_id: str, step: str) -> Decision:
        """Decide on the promotion tasks; replace the incumbent when accepted; log the decision either way.
        `step` names the decision in the phase's ledger, so a resumed phase does not decide twice."""
        done = self.ledger.memo(step, lambda: {"decision": self._settle(candidate, run_id).record()})
        return Decision.from_record(done["decision"])

    def _settle(self, candidate: Candidate, run_id: str) -> Decision:
        incumbent = self.pair
        decision = self.decide(incumbent, candidate.pair, run_id)
        if decision.accepted:
            self.ledger.state.incumbent = candidate.pair
        self.record(candidate.phase, candidate.pair, incumbent, decision)
        return decision

    def decide(self, incumbent: Pair, candidate: Pair, run_id: str) -> Decision:
        """`candidate` against `incumbent` on the promotion tasks (each scored once per run)."""
        if candidate.key == incumbent.key:
            return Decision.without_comparison("the candidate is the incumbent", ties=len(self.promotion))
        try:
            before, after = self.promotion_scores(incumbent, run_id), self.promotion_scores(candidate, run_id)
        except Exception as e:  # noqa: BLE001 - boundary: a candidate that cannot be scored is rejected
            return Decision.without_comparison(f"{type(e).__name__}: {e}"[:2000])
        return accept(before, after, self.seed, self.margin)

    def promotion_scores(self, pair: Pair, run_id: str) -> dict[str, float]:
        cache = self.ledger.state.promotion
        key = pair.key
        if key not in cache:
            scored, _ = self.evaluator.evaluate(f"promote {pair.source}", run_id, pair.overrides, pair.checkpoint,
                                                pair.generation, pair.source, task_batches=[self.promotion],
                                                tags={"role": "promotion"})
            cache[key] = scored.per_task
            self.ledger.save()
        return cache[key]

    def record(self, phase: str, candidate: Pair, against: Pair, decision: Decision) -> None:
        """Log a decision and append it to the run's history (the ratchet log)."""
        g = decision.paired
        verdict = "accepted" if decision.accepted else "rejected"
        self.log(f"{phase}: {candidate.source} (evolve {candidate.brief()}) vs {against.source} on "
                 f"{len(self.promotion)} promotion tasks: {g.wins} wins, {g.losses} losses, {g.ties} ties, gain "
                 f"{g.gain:+.3f} [{g.low:+.3f}, {g.high:+.3f}] (margin {self.margin:g}) -> {verdict}"
                 + (f" ({decision.error})" if decision.error else ""))
        self.ledger.state.history.append(self._point(phase, candidate.source, decision))
        self.ledger.save()

    def _point(self, phase: str, challenger: str, decision: Decision) -> Decided:
        """One entry of the history: the decision, and the incumbent after it (what the plots draw)."""
        inc, g = self.pair, decision.paired
        return Decided(phase=phase, generation=self.ledger.generation, challenger=challenger,
                       accepted=decision.accepted, gain=g.gain, gain_low=g.low, gain_high=g.high, wins=g.wins,
                       losses=g.losses, ties=g.ties, error=decision.error, incumbent=inc.source, score=inc.score,
                       pass_at_1=inc.pass_at_1, ci_low=inc.ci_low, ci_high=inc.ci_high)
