"""coevo: harness-model co-evolution for terminal agents.

A reader learns the architecture from this file and the folder names:

    tasks/      Harbor task folders -> Task / TaskSet, and the bundled-suite generator
    sandbox/    Sandbox backends ("local": bubblewrap); one persistent shell per episode
    verify.py   runs a task's tests after the agent has stopped and reads its reward
    harness/    the Harness spec (YAML + Jinja), action formats, recovery and context policies
    policy/     Policy backends: local Hugging Face model, OpenAI-compatible endpoint, scripted
    rollout/    the agent loop and lockstep rollout engine, token-in/token-out trajectories
    serve/      `coevo serve`: an OpenAI-compatible endpoint over a checkpoint, sessions recorded as trajectories
    cli.py      the `coevo` command (heavy libraries are imported lazily)

The two protocols below are the seams between them. Records are plain dataclasses so that importing
`coevo` stays cheap.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

__version__ = "0.1.0"


@dataclass
class ExecResult:
    """What one command in a sandbox produced."""

    output: str
    """stdout and stderr interleaved, decoded as UTF-8 with replacement, capped head+tail."""
    exit_code: int | None
    """The command's exit status; None when it was killed (timeout) or the shell died."""
    duration_s: float
    timed_out: bool = False
    """The command outlived its timeout and was killed with its whole process group."""
    restarted: bool = False
    """The shell was restarted (after a timeout or an `exit`); cwd and exported env were restored."""
    omitted_bytes: int = 0
    """Bytes dropped from the middle of the output by the cap."""


class Sandbox(Protocol):
    """An isolated place for one episode: a private /app and one persistent shell.

    Contract (tests/sandbox_contract.py and tests/redteam.py check it for every backend):
    - `run` never executes outside the sandbox; cwd and exported variables persist between calls;
    - a command past its timeout is killed with everything it started, and the sandbox stays usable;
    - `start` begins a session: a fresh shell, an empty /tmp, no saved cwd or exports; /app stays;
    - `stop` kills every process in the sandbox and keeps its files (the verifier runs after it);
    - `upload` copies a host folder in, owned by the sandbox's user; `download` copies one out,
      never following a symlink on the host;
    - `close` leaves no process and no temporary directory behind, and may be called twice.
    """

    def start(self) -> None: ...

    def run(self, command: str, timeout: float | None = None) -> ExecResult: ...

    def read_file(self, path: str) -> bytes: ...

    def write_file(self, path: str, data: bytes | str) -> None: ...

    def upload(self, source: Path, dest: str) -> None: ...

    def download(self, source: str, dest: Path) -> None: ...

    def stop(self) -> None: ...

    def close(self) -> None: ...


@dataclass
class SamplingParams:
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 256
    seed: int | None = None
    grammar: str | None = None
    """An xgrammar EBNF grammar (root rule `root`) every reply must be a sentence of (coevo.harness.grammar);
    None: unconstrained."""


@dataclass
class GenerationRequest:
    """One episode's prompt. Token-level policies read `token_ids`; chat APIs read `messages`."""

    token_ids: list[int]
    messages: list[dict] = field(default_factory=list)
    meta: dict = field(default_factory=dict)
    """Who is asking, for policies that need it: the rollout sets "task" (the task's name), "turn"
    (0-based model turn in the episode) and "sample" (the episode's index among the task's samples). The
    oracle policy reads task and turn; the vllm policy seeds by sample; other model policies ignore it."""


@dataclass
class Completion:
    text: str
    token_ids: list[int]
    """Exactly the sampled ids (never re-tokenized). Empty for text-only chat APIs."""
    logprobs: list[float]
    """One rollout log-probability per sampled token."""
    finish_reason: str = "stop"
    """"stop" (end of turn) or "length" (hit max_tokens)."""
    logprob_source: str = "model"
    """Which distribution `logprobs` are of: "model" (the temperature-scaled model, what a training forward
    computes) or "constrained" (that distribution renormalised over the tokens the grammar allowed: the one
    the tokens were drawn from)."""
    seconds: float | None = field(default=None, compare=False)
    """This completion's own share of the generate call's compute, where the policy can tell (a batched local
    model: its prefill and its share of each decoding step it took part in); None: the rollout splits the
    call's time evenly. What `limits.wall_time_s` charges an episode for generation."""
    routing: list[list[list[int]]] | None = field(default=None, compare=False)
    """A Mixture-of-Experts policy's experts per sampled token ([layers][top_k] each; coevo.train.routing),
    where the policy records them (the local KV-cached one); None otherwise."""


class Policy(Protocol):
    """Anything that continues a batch of prompts: one call per turn for all active episodes."""

    def generate(self, requests: list[GenerationRequest], params: SamplingParams) -> list[Completion]: ...
