"""Typed errors, one per boundary. A failure is attributed to one boundary and recorded once:
a bad rollout or trial is data (status + cause, reward 0), never a crash of the run."""


class CoevoError(Exception):
    """Base class: every message names the file and the field or line, and says what is valid."""


class ConfigError(CoevoError):
    """A config file (harness, search space, search config, training spec) or a dotted override is invalid.
    coevo.config raises it, or the subclass its caller passes (HarnessError, TrainSpecError)."""


class TaskError(CoevoError):
    """A task folder is malformed: missing file, bad task.toml, unsupported Dockerfile."""


class NeedsDockerError(TaskError):
    """The task's Dockerfile needs more than the local backend can seed (RUN, a non-Debian base)."""


class SandboxError(CoevoError):
    """The sandbox could not start or broke down (not a failing command: that is an ExecResult)."""


class SandboxUnavailableError(SandboxError):
    """This host cannot make sandboxes (no bubblewrap, user namespaces forbidden). Never run unsandboxed."""


class VerifierError(CoevoError):
    """The verifier ran but its reward is unusable: missing, empty, non-numeric, NaN or out of range."""
