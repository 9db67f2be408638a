"""The paired comparisons the ratchet and the final 2x2 rely on: wins, losses and ties beside the
bootstrap interval, the promotion rule, and the 2x2's effects and interaction."""

from __future__ import annotations

from coevo.evaluate.stats import paired_gain, two_by_two

TASKS = [f"t{i}" for i in range(60)]


def scores(passing: set[int]) -> dict[str, float]:
    return {t: float(i in passing) for i, t in enumerate(TASKS)}


def test_a_broad_gain_clears_the_rule_and_a_narrow_one_does_not():
    base = scores(set(range(10)))
    broad = paired_gain(base, scores(set(range(30))))
    assert (broad.wins, broad.losses, broad.ties) == (20, 0, 40)
    assert broad.gain == 20 / 60 and broad.low > 0.1 and broad.clears(margin=0.1)
    # The same mean gain bought with losses elsewhere: more wins than losses still, but a wide interval.
    churn = paired_gain(base, scores(set(range(5, 20))))
    assert (churn.wins, churn.losses) == (10, 5) and not churn.clears(margin=0.05)
    assert not paired_gain(base, base).clears()
    assert paired_gain(base, base).ties == 60


def test_more_losses_than_wins_never_clears_even_with_a_positive_mean():
    base = {t: 0.5 for t in TASKS}
    lopsided = {t: (1.0 if i < 10 else 0.45) for i, t in enumerate(TASKS)}
    result = paired_gain(base, lopsided)
    assert result.gain > 0 and result.losses > result.wins and not result.clears()


def test_two_by_two_recovers_additive_and_interacting_levers():
    h0m0 = scores(set(range(10)))
    h1m0 = scores(set(range(20)))          # the harness adds tasks 10-19
    h0m1 = scores(set(range(10)) | set(range(40, 50)))   # the model adds tasks 40-49
    additive = two_by_two(h0m0, h0m1, h1m0, scores(set(range(20)) | set(range(40, 50))))
    assert additive["delta_h"][0] == 10 / 60 and additive["delta_m"][0] == 10 / 60
    assert additive["interaction"] == (0.0, 0.0, 0.0)
    synergy = two_by_two(h0m0, h0m1, h1m0, scores(set(range(20)) | set(range(40, 60))))
    value, low, high = synergy["interaction"]
    assert value == 10 / 60 and low > 0 and high >= value
