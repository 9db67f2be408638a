"""The rollout engine: N episodes in lockstep. Per turn: one batched `policy.generate` call for every
active episode, then their tool calls in parallel (a thread pool), and each finished episode is verified
in the pool while the others go on. Evaluation and GRPO training share this one code path.

A policy that batches across callers itself (`policy.continuous`: a vLLM server) gets no lockstep: each
episode runs start to end on a thread of its own, asking for one completion at a time, so that no
episode waits for the slowest reply of a turn.

Boundaries, where a failure becomes data rather than a crash: a sandbox that breaks ends its episode
as 'sandbox_error', a policy that raises ends the batch's episodes as 'policy_error'; both score 0
without a verifier run. A verifier that fails leaves reward 0 and its cause in `verify_error`. Nothing
here crashes the run.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial

from coevo import Completion, Policy, SamplingParams, Sandbox
from coevo.harness import Harness
from coevo.harness.fingerprint import fingerprint
from coevo.harness.grammar import action_grammar
from coevo.harness.tools import tool_schemas
from coevo.native.spec import is_native
from coevo.outcomes import FAILURE_STATUSES
from coevo.rollout.episode import Episode, EpisodeEnd
from coevo.rollout.tokens import ChatTemplate
from coevo.rollout.trajectory import Trajectory

_FROM_POLICY = object()


def rollout(
    tasks: Sequence,
    harness: Harness,
    policy: Policy,
    n_per_task: int = 1,
    *,
    make_sandbox: Callable[..., Sandbox] | None = None,
    backend: str = "local",
    image_map: dict[str, str] | None = None,
    verify: Callable | None = None,
    tokenizer=_FROM_POLICY,
    seed: int | None = None,
    max_workers: int = 16,
    max_active: int = 64,
    on_done: Callable[[Trajectory], None] | None = None,
) -> list[Trajectory]:
    """Run `n_per_task` episodes of each task; trajectories come back in task order, samples together.

    `make_sandbox(task) -> Sandbox` (unstarted) and `verify(task, sandbox) -> VerifyResult` default to
    coevo.sandbox / coevo.verify; the default sandboxes come from `backend` (local, docker or auto: per
    task) with `image_map` for docker builds (None: COEVO_IMAGE_MAP). `tokenizer` defaults to the policy's own (`policy.tokenizer`) if it has
    one; None gives text-only trajectories (no token buffer). `on_done` is called as each episode's
    verification finishes (from a pool thread).

    At most `max_active` episodes run at once (in lockstep); more run in waves. All sandboxes run as one
    non-root uid, whose process limit (RLIMIT_NPROC, per uid) they share: a few hundred open sandboxes
    would leave their commands unable to fork.

    A native agent's harness (kind: native) runs its own loop instead: `policy` (it needs a tokenizer) is
    served in-process for the episodes (coevo.native.run.rollout_native), and an episode may come back
    as several token records (`Trajectory.segment`); `on_done` gets each episode's first.
    """
    if make_sandbox is None:
        from coevo.sandbox import make_sandbox as _make_sandbox

        make_sandbox = partial(_make_sandbox, backend=backend, image_map=image_map)
    if verify is None:
        from coevo.verify import verify
    if is_native(harness):  # the agent runs its own loop, against this policy served to it (coevo.native)
        from coevo.native.run import rollout_native

        return rollout_native(tasks, harness, policy, n_per_task, make_sandbox=make_sandbox, verify=verify,
                              max_workers=max_workers,
                              on_done=None if on_done is None else lambda segments: on_done(segments[0]))
    if tokenizer is _FROM_POLICY:  # token-level policies carry their tokenizer; chat APIs have none
        tokenizer = getattr(policy, "tokenizer", None)
    tools = tool_schemas(harness) if harness.action_format.native_tools else None
    chat = ChatTemplate(tokenizer, tools) if tokenizer is not None else None
    episodes = [Episode(t, harness, i, chat) for t in tasks for i in range(n_per_task)]
    seen = fingerprint(harness)
    for episode in episodes:
        episode.traj.harness_fingerprint = seen
    params = SamplingParams(temperature=harness.decoding.temperature, top_p=harness.decoding.top_p,
                            max_tokens=harness.limits.max_tokens_per_turn, seed=seed,
                            grammar=action_grammar(harness) if harness.action_format.constrained else None)
    with ThreadPoolExecutor(max_workers=max_workers) as pool:
        run = _Run(pool, verify, on_done)
        try:
            for i in range(0, len(episodes), max_active):
                wave = episodes[i: i + max_active]
                if getattr(policy, "continuous", False):
                    with ThreadPoolExecutor(max_workers=len(wave)) as drivers:
                        list(drivers.map(lambda ep: run.drive(ep, make_sandbox, policy, params), wave))
                    continue
                run.each(wave, lambda ep: ep.start(make_sandbox))
                while active := [ep for ep in wave if ep.active]:
                    run.turn(active, policy, params)
                for f in run.pending:  # this wave's sandboxes are closed before the next one starts
                    f.result()
        finally:
            for ep in episodes:  # after an interrupt too: leave no sandbox behind
                _close(ep)
    return [ep.traj for ep in episodes]


class _Run:
    def __init__(self, pool: ThreadPoolExecutor, verify: Callable, on_done: Callable | None):
        self.pool, self.verify, self.on_done = pool, verify, on_done
        self.pending: list[Future] = []
        self.finishing: set[int] = set()

    def each(self, episodes: list[Episode], fn: Callable[[Episode], object]) -> list:
        """Apply `fn` to every episode in the pool; an EpisodeEnd ends that episode."""
        results = list(self.pool.map(lambda ep: _guard(ep, fn), episodes))
        self.finish_ended(episodes)
        return results

    def finish_ended(self, episodes: list[Episode]) -> None:
        """Send every episode that is over off to be verified, while the others go on."""
        for ep in episodes:
            if not ep.active and id(ep) not in self.finishing:
                self.finishing.add(id(ep))
                self.pending.append(self.pool.submit(self._finish, ep))

    def turn(self, active: list[Episode], policy: Policy, params: SamplingParams) -> None:
        requests = self.each(active, Episode.request)
        asking = [(ep, r) for ep, r in zip(active, requests) if ep.active]
        if not asking:
            return
        completions = _ask(asking, policy, params)
        if completions is None:
            return self.finish_ended(active)
        by_episode = dict(zip((id(ep) for ep, _ in asking), completions))
        self.each([ep for ep, _ in asking], lambda ep: ep.step(by_episode[id(ep)]))

    def drive(self, ep: Episode, make_sandbox: Callable, policy: Policy, params: SamplingParams) -> None:
        """One episode start to end on this thread (a continuous policy), verified at its end."""
        _guard(ep, lambda e: e.start(make_sandbox))
        while ep.active:
            request = _guard(ep, Episode.request)
            if not ep.active:
                break
            completions = _ask([(ep, request)], policy, params)
            if completions is None:
                break
            _guard(ep, partial(Episode.step, completion=completions[0]))
        self.finishing.add(id(ep))
        self._finish(ep)

    def _finish(self, ep: Episode) -> None:
        """Verify (unless the episode failed at a boundary), measure drift, and report."""
        t = time.monotonic()
        ep.finish_tokens()
        if ep.traj.status in FAILURE_STATUSES or ep.sandbox is None:
            _close(ep)
        else:
            try:
                result = self.verify(ep.task, ep.sandbox)
                ep.traj.reward, ep.traj.checks, ep.traj.verify_error = result.reward, result.checks, result.error
            except Exception as e:  # noqa: BLE001 - boundary: the verifier's failure is data
                ep.traj.reward, ep.traj.verify_error = 0.0, f"{type(e).__name__}: {e}"
            finally:
                _close(ep)
        ep.traj.timing["verify"] = time.monotonic() - t
        ep.traj.timing["total"] = time.monotonic() - ep.t0
        if self.on_done is not None:
            self.on_done(ep.traj)


def _guard(ep: Episode, fn: Callable[[Episode], object]):
    try:
        return fn(ep)
    except EpisodeEnd as e:
        ep.end(e.status, e.cause)
        return None


def _ask(asking: list[tuple[Episode, object]], policy: Policy, params: SamplingParams) -> list[Completion] | None:
    """One generate call for these (episode, request) pairs, its time charged to each; None when the policy
    failed, every asking episode then ended as 'policy_error'."""
    t = time.monotonic()
    completions = _generate(policy, [r for _, r in asking], params)
    even = (time.monotonic() - t) / len(asking)
    if isinstance(completions, str):
        for ep, _ in asking:
            ep.charge_generation(even)
            ep.end("policy_error", completions)
        return None
    for (ep, _), c in zip(asking, completions):  # its own share: waiting for the batch is not its time
        ep.charge_generation(c.seconds if c.seconds is not None else even)
        ep.traj.logprob_source = c.logprob_source
    return completions


def _generate(policy: Policy, requests: list, params: SamplingParams) -> list[Completion] | str:
    """The policy boundary: completions, or the cause of the failure as a string."""
    try:
        completions = policy.generate(requests, params)
    except Exception as e:  # noqa: BLE001 - boundary: every episode in the batch ends as 'policy_error'
        return f"{type(e).__name__}: {e}"
    if len(completions) != len(requests):
        return f"the policy returned {len(completions)} completions for {len(requests)} requests"
    return completions


def _close(ep: Episode) -> None:
    if ep.sandbox is not None:
        with contextlib.suppress(Exception):  # best effort; close() is idempotent by contract
            ep.sandbox.close()
