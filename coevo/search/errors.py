"""The search's own boundary error (a candidate for coevo/errors.py)."""

from coevo.errors import CoevoError


class SearchError(CoevoError):
    """A search config, search space, schedule or run folder is invalid. The message names the file and
    the key, and says what would be valid."""
