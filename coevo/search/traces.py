"""Episodes as MLflow traces, built after the fact from finished `Trajectory` records (the rollout engine
knows nothing of tracing), each linked to the MLflow run that scored it (trace metadata `mlflow.sourceRun`:
the run page's Traces tab lists them).

One trace per episode:
    episode <task> #<sample>     AGENT      attributes: task, family, harness, fingerprint, checkpoint, status,
                                            reward, passed, turns, tokens; inputs: the instruction
      sandbox start              UNKNOWN    the sandbox's start-up
      turn <i>                   CHAT_MODEL inputs: the messages the model saw last (the prompt, then each
                                            observation); outputs: the reply, its parsed calls, format error
        tool <name>              TOOL       the command, its output and exit code (ERROR when it failed)
      verifier                   EVALUATOR  reward, per-check credit, verifier error
Trace tags, for the UI's filter (`tags.status = 'turn_limit'`, `tags.outcome = 'failed'`): status, outcome,
task, family, sample, phase, run, checkpoint, harness_fingerprint, and the evaluation's role.

Span times come from the trajectory's timing: sandbox start, generate, tools and verify are measured per
episode, and each tool call's duration is its own; turn boundaries are laid out in proportion to each
turn's share of generation plus its tools' time (episodes of a batch run in lockstep, so a turn's wall
time also holds its wait for the batch, which the record does not keep). The episode's end is the time
the trace is written, unless given.

Written straight to the tracking store (`TracingClient.start_trace` + `log_spans`, one span batch per
evaluation), not through MLflow's live tracer: that tracer exports to the process-wide tracking URI,
while coevo keeps every store explicit (coevo/search/tracking.py). Text is scrubbed before it is written:
URL passwords, and the value of every environment variable of this process whose name says it holds a
secret (KEY, TOKEN, SECRET, PASSWORD, ...).
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from coevo.outcomes import passed
from coevo.rollout.trajectory import task_instruction

MAX_TEXT = 20_000
"""Characters kept of one text value in a span (a chat message, a reply, a tool's output)."""
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.IGNORECASE)


@dataclass
class Tally:
    """What tracing cost a process: traces written and seconds spent building and writing them."""

    traces: int = 0
    seconds: float = 0.0
    by_run: dict[str, int] = field(default_factory=dict)


def secret_values(env: dict[str, str] | None = None) -> list[str]:
    """Values of the environment variables whose names say they hold a secret (8 characters or more)."""
    env = os.environ if env is None else env
    return sorted({v for k, v in env.items() if SECRET_NAME.search(k) and len(v) >= 8}, key=len, reverse=True)


def scrub(text: str, secrets_: Sequence[str] = ()) -> str:
    from coevo.search.stores import redact

    text = redact(text)
    for value in secrets_:
        if value in text:
            text = text.replace(value, "***")
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 40] + f"... [{len(text) - MAX_TEXT + 40} chars cut]"


def pick(trajectories: Sequence, n: int, every_failure: bool = False, seed: int = 0) -> list[list]:
    """The episodes to trace, each as its records (a served agent's episode may be several): `n` drawn
    with a seed, failures first (half of them, when there are passes too); with `every_failure`, every
    failed episode plus `n` passes."""
    from coevo.rollout.trajectory import grouped

    episodes = grouped(trajectories)
    failed = [e for e in episodes if not passed(e[0])]
    ok = [e for e in episodes if passed(e[0])]
    rng = random.Random(seed)
    if every_failure:
        return failed + rng.sample(ok, min(n, len(ok)))
    n_failed = min(len(failed), max(n - len(ok), math.ceil(n / 2)))
    chosen = rng.sample(failed, n_failed) + rng.sample(ok, min(len(ok), n - n_failed))
    return sorted(chosen, key=episodes.index)


class TraceWriter:
    """Writes episodes as traces into one experiment of one tracking store."""

    def __init__(self, uri: str, experiment_id: str):
        from mlflow.tracing.client import TracingClient

        self.client, self.experiment_id = TracingClient(uri), experiment_id
        self.secrets = secret_values()
        self.tally = Tally()

    def write(self, run_id: str, episodes: Sequence[list], tags: dict[str, Any] | None = None,
              end_ns: int | None = None) -> list[str]:
        """One trace per episode (its records), linked to `run_id`; `tags` go on every trace."""
        started = time.monotonic()
        end_ns = end_ns or time.time_ns()
        infos, spans = [], []
        for records in episodes:
            info, episode_spans = self.build(run_id, records, tags or {}, end_ns)
            infos.append(info)
            spans += episode_spans
        for info in infos:
            self.client.start_trace(info)
        if spans:
            self.client.log_spans(self.experiment_id, spans)
        self.tally.traces += len(infos)
        self.tally.by_run[run_id] = self.tally.by_run.get(run_id, 0) + len(infos)
        self.tally.seconds += time.monotonic() - started
        return [i.trace_id for i in infos]

    def build(self, run_id: str, records: list, tags: dict[str, Any], end_ns: int):
        """(TraceInfo, spans) of one episode."""
        from mlflow.entities import TraceInfo, TraceLocation, TraceState
        from mlflow.tracing.utils import generate_mlflow_trace_id_from_otel_trace_id

        first, last = records[0], records[-1]
        steps = [s for r in records for s in r.steps]
        timing = {k: sum(r.timing.get(k, 0.0) for r in records) for k in ("start", "generate", "tools", "verify")}
        total = sum(r.timing.get("total", 0.0) for r in records) or sum(timing.values())
        start_ns = end_ns - int(total * 1e9)
        otel_id = secrets.randbits(128) or 1
        trace_id = generate_mlflow_trace_id_from_otel_trace_id(otel_id)
        spans = _Spans(otel_id, trace_id, self.secrets)
        ok = passed(first)
        episode_tags = {"status": str(first.status), "outcome": "passed" if ok else "failed", "task": first.task,
                        "family": first.family, "sample": first.sample, "harness": first.harness,
                        "harness_fingerprint": first.harness_fingerprint, **tags}
        instruction = task_instruction(last)
        root = spans.add(
            f"episode {first.task} #{first.sample}", "AGENT", None, start_ns, end_ns, not ok,
            inputs={"task": first.task, "instruction": instruction},
            outputs={"status": first.status, "reward": first.reward, "passed": ok, "error": first.error},
            attributes={**episode_tags, "reward": first.reward, "passed": ok, "turns": first.turns,
                        "tokens": sum(r.tokens for r in records), "format_errors": first.format_errors,
                        "timeouts": first.timeouts, "drift": first.drift, "timing": {**timing, "total": total}})
        t = start_ns + int(timing["start"] * 1e9)
        spans.add("sandbox start", "UNKNOWN", root, start_ns, t, False)
        verify_ns = end_ns - int(timing["verify"] * 1e9)
        _turns(spans, root, steps, _turn_inputs(last.messages, steps), t, max(t, verify_ns), timing["generate"])
        spans.add("verifier", "EVALUATOR", root, max(t, verify_ns), end_ns, not ok,
                  outputs={"reward": first.reward, "checks": first.checks, "verify_error": first.verify_error,
                           "passed": ok})
        info = TraceInfo(
            trace_id=trace_id, trace_location=TraceLocation.from_experiment_id(self.experiment_id),
            request_time=start_ns // 1_000_000, execution_duration=(end_ns - start_ns) // 1_000_000,
            state=TraceState.OK if ok else TraceState.ERROR,
            request_preview=scrub(f"{first.task}: {instruction}", self.secrets)[:1000],
            response_preview=f"{first.status}, reward {first.reward:g}" + (f": {first.error}"[:300] if first.error
                                                                          else ""),
            trace_metadata={"mlflow.sourceRun": run_id, "mlflow.trace_schema.version": "3"},
            tags={"mlflow.traceName": f"{first.task} #{first.sample}",
                  **{k: scrub(str(v), self.secrets)[:250] for k, v in episode_tags.items()}})
        return info, spans.spans


def _turns(spans: _Spans, root, steps: list, inputs: list, start_ns: int, end_ns: int, generate: float) -> None:
    """A span per turn, and one per tool call inside it, between the sandbox's start and the verifier."""
    gen = generate / max(1, len(steps))
    weights = [gen + sum(r.duration_s for r in s.results) for s in steps]
    total = sum(weights) or 1.0
    span_ns, t = end_ns - start_ns, start_ns
    for i, step in enumerate(steps):
        share = weights[i] / total if sum(weights) else 1 / len(steps)
        turn_end = end_ns if i == len(steps) - 1 else t + int(span_ns * share)
        turn = spans.add(f"turn {i + 1}", "CHAT_MODEL", root, t, turn_end, bool(step.format_error),
                         inputs={"messages": inputs[i]},
                         outputs={"reply": step.reply, "calls": [c.model_dump() for c in step.calls],
                                  "format_error": step.format_error},
                         attributes={"tokens": step.tokens})
        tool_ns = sum(int(r.duration_s * 1e9) for r in step.results)
        tool_t = max(t, turn_end - tool_ns)
        for result in step.results:
            stop = min(turn_end, tool_t + int(result.duration_s * 1e9))
            spans.add(f"tool {result.tool}", "TOOL", turn, tool_t, stop, result.failed,
                      inputs={"command": result.command},
                      outputs={"output": result.output, "exit_code": result.exit_code, "timed_out": result.timed_out},
                      attributes={"exit_code": result.exit_code, "duration_s": result.duration_s})
            tool_t = stop
        t = turn_end


def _turn_inputs(messages: list[dict], steps: list) -> list[list[dict]]:
    """What the model read before each reply: the messages since its previous reply in the chat (the system
    and instance prompt before the first). A reply is found in the chat by its text; one that is not there
    (dropped after a format error without feedback, or elided by the context policy) read the same
    messages as the reply after it."""
    out, i = [], 0
    for step in steps:
        match = next((k for k in range(i, len(messages)) if messages[k].get("role") == "assistant"
                      and _text(messages[k]).strip() == step.reply.strip()), None)
        stop = match if match is not None else next(
            (k for k in range(i, len(messages)) if messages[k].get("role") == "assistant"), len(messages))
        out.append([{"role": m.get("role"), "content": m.get("content")} for m in messages[i:stop]])
        if match is not None:
            i = match + 1
    return out


def _text(message: dict) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else json.dumps(content, default=str)


class _Spans:
    """The spans of one trace, as MLflow `Span` entities over OpenTelemetry's ReadableSpan."""

    def __init__(self, otel_trace_id: int, trace_id: str, secrets_: Sequence[str]):
        self.otel_trace_id, self.trace_id, self.secrets = otel_trace_id, trace_id, secrets_
        self.spans: list = []

    def add(self, name: str, kind: str, parent, start_ns: int, end_ns: int, error: bool,
            inputs: Any = None, outputs: Any = None, attributes: dict[str, Any] | None = None):
        from mlflow.entities import Span
        from mlflow.tracing.utils import build_otel_context
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import ReadableSpan
        from opentelemetry.trace import Status, StatusCode

        values = {"mlflow.traceRequestId": self.trace_id, "mlflow.spanType": kind, **(attributes or {})}
        if inputs is not None:
            values["mlflow.spanInputs"] = inputs
        if outputs is not None:
            values["mlflow.spanOutputs"] = outputs
        span_id = secrets.randbits(64) or 1
        otel = ReadableSpan(
            name=name, context=build_otel_context(self.otel_trace_id, span_id),
            parent=build_otel_context(self.otel_trace_id, parent._span.context.span_id) if parent else None,
            start_time=start_ns, end_time=max(start_ns, end_ns),
            attributes={k: self._dump(v) for k, v in values.items()},
            status=Status(StatusCode.ERROR if error else StatusCode.OK), resource=Resource.get_empty())
        span = Span(otel)
        self.spans.append(span)
        return span

    def _dump(self, value: Any) -> str:
        return json.dumps(self._clean(value), ensure_ascii=False, default=str)

    def _clean(self, value: Any) -> Any:
        """Every string inside `value` scrubbed and capped (before JSON, so a cut never breaks it)."""
        if isinstance(value, str):
            return scrub(value, self.secrets)
        if isinstance(value, dict):
            return {str(k): self._clean(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self._clean(v) for v in value]
        return value
