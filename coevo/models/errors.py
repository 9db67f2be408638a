"""The one error of the models area."""

from coevo.errors import CoevoError


class ModelError(CoevoError):
    """A model cannot be pulled, imported or found; the message names the file or name and what is valid."""
