"""The two ways a harness can be wrong: in its own files (HarnessError) or in a model's reply (FormatError)."""

from coevo.errors import ConfigError


class HarnessError(ConfigError):
    """A harness YAML, override or template is invalid. The message names the file and field or line,
    and says what would be valid."""


class FormatError(Exception):
    """A model reply could not be parsed into tool calls. The message is written for the model: it is shown
    to it through the harness's `format_error` template.

    Not a CoevoError: it is the agent loop's control flow, caught every turn, and never reaches a user."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message
