"""Episodes of a native agent against a `coevo serve` endpoint.

Each episode gets a sandbox for its task and a session URL of its own; the agent runs unmodified; the
task's verifier scores /app after the agent has stopped; the server's record of the session becomes the
episode's Trajectory, with the outcome filled in. Episodes run in threads, so that their model calls
meet in the server's batches. An episode whose client broke the token record (see coevo.serve.sessions)
comes back as one Trajectory per segment, in order, each with the episode's outcome and sample index.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from coevo.errors import SandboxError
from coevo.harness.fingerprint import fingerprint
from coevo.native import AGENTS, imported
from coevo.native.spec import NativeHarness
from coevo.outcomes import FAILURE_STATUSES
from coevo.rollout.trajectory import Trajectory


def run_native(tasks: Sequence, harness: NativeHarness, server: str, model: str, n_per_task: int = 1, *,
               backend: str = "local", make_sandbox: Callable | None = None, verify: Callable | None = None,
               api_key: str | None = None, max_workers: int = 16,
               on_done: Callable[[list[Trajectory]], None] | None = None) -> list[Trajectory]:
    """`server`: the endpoint's root (http://127.0.0.1:PORT), serving `model`. Trajectories come back in
    task order, samples together. `make_sandbox(task)` and `verify(task, sandbox)` default to coevo's
    (sandboxes of `backend`), as in `coevo.rollout.rollout`."""
    from functools import partial

    if make_sandbox is None:
        from coevo.sandbox import make_sandbox as _make_sandbox

        make_sandbox = partial(_make_sandbox, backend=backend)
    if verify is None:
        from coevo.verify import verify
    agent = imported(AGENTS[harness.agent].run)
    jobs = [(task, sample) for task in tasks for sample in range(n_per_task)]

    def one(job) -> list[Trajectory]:
        segments = episode(agent, harness, *job, server=server, model=model, make_sandbox=make_sandbox,
                           verify=verify, api_key=api_key)
        if on_done is not None:
            on_done(segments)
        return segments

    with ThreadPoolExecutor(max_workers=max(1, min(max_workers, len(jobs)))) as pool:
        return [t for segments in pool.map(one, jobs) for t in segments]


def episode(agent, harness: NativeHarness, task, sample: int, *, server: str, model: str, make_sandbox: Callable,
            verify: Callable, api_key: str | None) -> list[Trajectory]:
    from coevo.native.mini import AgentResult

    session = f"{task.name}.{sample}.{uuid.uuid4().hex[:8]}"
    started = time.monotonic()
    sandbox = None
    try:
        sandbox = make_sandbox(task)
        sandbox.start()
        result = agent(harness, task.instruction, sandbox, f"{server}/sessions/{session}/v1", model, api_key)
    except SandboxError as e:
        result = AgentResult("sandbox_error", f"{type(e).__name__}: {e}")
    reward, checks, verify_error = 0.0, {}, None
    if sandbox is not None:
        try:
            if result.status not in FAILURE_STATUSES:
                verdict = verify(task, sandbox)
                reward, checks, verify_error = verdict.reward, verdict.checks, verdict.error
        except Exception as e:  # noqa: BLE001 - boundary: the verifier's failure is data
            verify_error = f"{type(e).__name__}: {e}"
        finally:
            sandbox.close()
    segments = collect(server, session, api_key) or [Trajectory(task=task.name, harness=harness.name)]
    for segment in segments:
        segment.task, segment.family, segment.harness, segment.sample = task.name, task.family, harness.name, sample
        segment.harness_fingerprint = fingerprint(harness)
        segment.status, segment.error, segment.format_errors = result.status, result.error, result.format_errors
        segment.reward, segment.checks, segment.verify_error = reward, checks, verify_error
        segment.errors = [result.error] if result.error else []
        segment.timing["total"] = time.monotonic() - started
    return segments


def collect(server: str, session: str, api_key: str | None) -> list[Trajectory]:
    """Take the session's record off the server (none if the agent never called the model)."""
    request = urllib.request.Request(f"{server}/sessions/{session}", method="DELETE",
                                     headers={"Authorization": f"Bearer {api_key}"} if api_key else {})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return [Trajectory.model_validate(t) for t in json.loads(response.read())["trajectories"]]
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return []
        raise


def rollout_native(tasks: Sequence, harness: NativeHarness, policy, n_per_task: int = 1, *,
                   backend: str = "local", make_sandbox: Callable | None = None, verify: Callable | None = None,
                   max_workers: int = 16, on_done=None) -> list[Trajectory]:
    """What `coevo.rollout.rollout` is for coevo's own harnesses (it comes here for a native one): `policy`
    (a local HF model, GRPO's recording copy, or a scripted policy with a tokenizer) served in this process
    for the time of the episodes. Returns the segments (see run_native): train on them;
    `coevo.rollout.trajectory.episodes` gives one record per episode."""
    from coevo.serve.app import create_app
    from coevo.serve.server import ServerThread

    if getattr(policy, "tokenizer", None) is None:
        raise ValueError(f"harness '{harness.name}' (kind: native) needs a policy with a tokenizer, to serve it "
                         f"to the agent: an hf model or a scripted policy; got {type(policy).__name__}")
    model = getattr(policy, "model", None)
    context = model.config.max_position_embeddings if model is not None else policy.tokenizer.model_max_length
    app = create_app(policy, policy.tokenizer, "coevo", harness=harness.name, context_length=context)
    with ServerThread(app) as server:
        return run_native(tasks, harness, server.url, "coevo", n_per_task, backend=backend,
                          make_sandbox=make_sandbox, verify=verify, max_workers=max_workers, on_done=on_done)
