"""Vocabulary for generated tasks: every instance draws its names and contents from here.

Words are lowercase ASCII letters only, so they need no shell quoting, sort the same under any
locale, and never contain regex metacharacters.
"""

from __future__ import annotations

import random

NOUNS = """
acorn anchor apple arrow badge basket beacon bell birch bison blossom boulder bramble bridge bucket
cabin cactus candle canyon castle cedar cinder cliff clover comet copper coral cotton crater crow
daisy delta desert dolphin dragon drum eagle ember falcon feather fern fig flint forest fox garnet
glacier goblet granite harbor harp hazel heron hollow island ivory jasper jungle kettle kiwi lagoon
lantern lemon lily lotus magnet maple marble meadow melon mesa meteor mint moss nectar needle nutmeg
oak oasis olive orbit otter owl panda pebble pepper pine planet plum pond poppy prism quartz quill
rabbit raven reef ridge river robin saffron sage salmon sandal shell sparrow spruce summit swan
thistle thunder tiger timber topaz tulip tundra valley velvet violet walnut willow wolf yarrow zebra
""".split()  # noqa: SIM905 - a word list reads best as running text

ADJECTIVES = """
amber bold brave bright calm clever cobalt crimson dusty eager early fancy fuzzy gentle golden
grand happy hidden humble jolly keen lively lucky mellow misty noble olive proud quiet rapid rosy
rustic silent silver sleepy smooth snowy solar steady sunny swift tidy vivid warm wild windy witty
""".split()  # noqa: SIM905 - a word list reads best as running text

VERBS = """
build check clean copy draw fetch fix load merge move open parse print push read render reset save
scan send sort start stop sync test trim update write
""".split()  # noqa: SIM905 - a word list reads best as running text


def word(rng: random.Random) -> str:
    return rng.choice(NOUNS)


def words(rng: random.Random, k: int, pool: list[str] = NOUNS) -> list[str]:
    """k distinct words, in random order."""
    return rng.sample(pool, k)


def name(rng: random.Random, sep: str = "_") -> str:
    """A two-word identifier such as 'amber_fox' (sep '-' gives 'amber-fox')."""
    return f"{rng.choice(ADJECTIVES)}{sep}{rng.choice(NOUNS)}"


def sentence(rng: random.Random, n_words: int) -> str:
    return " ".join(rng.choice(NOUNS + ADJECTIVES + VERBS) for _ in range(n_words))
