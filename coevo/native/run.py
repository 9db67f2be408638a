"""Episodes of a native agent against a `coevo serve` endpoint.

Each episode gets a sandbox for its task and a session URL of its own; the agent runs unmodified; the
task's verifier scores /app after the agent has stopped; the server's record of the session becomes the
episode's Trajectory, with the outcome filled in. Episodes run in threads, so that their model calls
meet in the server's batches. An episode whose client broke the token record (see coevo.serve.sessions)
comes back as one Trajectory per segment, in order, each with the episode's outcome and sample index.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from importlib import import_module

from coevo.errors import SandboxError
from coevo.native import AGENTS
from coevo.native.spec import NativeHarness
from coevo.outcomes import FAILURE_STATUSES
from coevo.rollout.trajectory import Trajectory


def run_native(tasks: Sequence, harness: NativeHarness, server: str, model: str, n_per_task: int = 1, *,
               backend: str = "local", api_key: str | None = None, max_workers: int = 16,
               on_done: Callable[[list[Trajectory]], None] | None = None) -> list[Trajectory]:
    """`server`: the endpoint's root (http://127.0.0.1:PORT), serving `model`. Trajectories come back in
    task order, samples together."""
    # mini-swe-agent greets on import and litellm fetches a price list: neither has a use here (no network).
    os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    module, _, name = AGENTS[harness.agent].rpartition(".")
    agent = getattr(import_module(module), name)
    jobs = [(task, sample) for task in tasks for sample in range(n_per_task)]

    def one(job) -> list[Trajectory]:
        segments = episode(agent, harness, *job, server=server, model=model, backend=backend, api_key=api_key)
        if on_done is not None:
            on_done(segments)
        return segments

    with ThreadPoolExecutor(max_workers=max(1, min(max_workers, len(jobs)))) as pool:
        return [t for segments in pool.map(one, jobs) for t in segments]


def episode(agent, harness: NativeHarness, task, sample: int, *, server: str, model: str, backend: str,
            api_key: str | None) -> list[Trajectory]:
    from coevo.native.mini import AgentResult
    from coevo.sandbox import make_sandbox
    from coevo.verify import verify

    session = f"{task.name}.{sample}.{uuid.uuid4().hex[:8]}"
    started = time.monotonic()
    sandbox = None
    try:
        sandbox = make_sandbox(task, backend=backend)
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


def fingerprint(harness: NativeHarness) -> str:
    """What the model sees of a native harness: the agent's effective config and the decoding."""
    seen = {"agent": harness.agent, **harness.agent_file(), "decoding": harness.decoding.model_dump()}
    return hashlib.sha256(json.dumps(seen, sort_keys=True, default=str).encode()).hexdigest()[:16]


def episodes_of(segments: list[Trajectory]) -> list[Trajectory]:
    """One record per episode, for summaries (pass@1 counts episodes, not segments): the episode's first
    segment with the turns, tokens and drift of all its segments. Train on the segments themselves."""
    episodes: dict[tuple[str, int], Trajectory] = {}
    for t in segments:
        key = (t.task, t.sample)
        if key not in episodes:
            episodes[key] = t.model_copy(deep=True)
            continue
        first = episodes[key]
        first.turns, first.tokens = first.turns + t.turns, first.tokens + t.tokens
        first.drift, first.messages = (first.drift or 0) + (t.drift or 0), t.messages
    return list(episodes.values())


def rollout_native(tasks: Sequence, harness: NativeHarness, policy, n_per_task: int = 1, *,
                   backend: str = "local", on_done=None) -> list[Trajectory]:
    """What `coevo.rollout.rollout` is for coevo's own harnesses, for a native one: `policy` (a local HF
    model, e.g. GRPO's rollout copy) served in this process for the time of the episodes. Returns the
    segments (see run_native); `episodes_of` gives one record per episode."""
    from coevo.serve.app import create_app
    from coevo.serve.server import ServerThread

    app = create_app(policy, policy.tokenizer, "coevo", harness=harness.name,
                     context_length=policy.model.config.max_position_embeddings)
    with ServerThread(app) as server:
        return run_native(tasks, harness, server.url, "coevo", n_per_task, backend=backend, on_done=on_done)


def evaluate_native(tasks: Sequence, harness: NativeHarness, model_dir, samples: int = 1, seed: int = 0,
                    out=None, backend: str = "local", dtype: str = "float32", on_done=None):
    """`coevo eval` for a native harness: the checkpoint served in this process, the agent's episodes
    through it, the segments saved to `out` (JSONL) and summarised per episode."""
    from coevo.evaluate import report
    from coevo.policy.hf import HFPolicy
    from coevo.rollout import save_trajectories

    segments = rollout_native(tasks, harness, HFPolicy(model_dir, dtype=dtype), samples, backend=backend,
                              on_done=on_done)
    if out is not None:
        save_trajectories(out, segments)
    return report(episodes_of(segments), seed)
