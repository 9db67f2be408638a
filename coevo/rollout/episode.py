"""One episode of one task under one harness: prompt -> reply -> tool calls -> observation, until an end.

The episode does not call the policy: the rollout engine batches all episodes' requests into one
`generate` call per turn and hands each episode its completion. Control flow uses `EpisodeEnd`, raised
wherever the episode is over (submit, a limit, too many errors, a broken sandbox) and caught at the
engine's boundary, so every episode ends with exactly one status and its cause.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from coevo import Completion, GenerationRequest, Sandbox
from coevo.harness import FormatError, Harness, ToolCall, ToolResult, parse_action
from coevo.harness.demos import choose, first_messages
from coevo.harness.prompts import format_error_text, observation_text
from coevo.harness.tools import execute, truncate
from coevo.outcomes import Status
from coevo.rollout.processors import Processors
from coevo.rollout.tokens import ChatTemplate, TokenBuffer
from coevo.rollout.trajectory import Step, Trajectory
from coevo.train.routing import buffer_routing

CHARS_PER_TOKEN = 4
"""Token estimate for text-only policies, which return no token ids."""


class EpisodeEnd(Exception):
    def __init__(self, status: Status, cause: str | None = None):
        super().__init__(status, cause)
        self.status, self.cause = status, cause


class Episode:
    def __init__(self, task, harness: Harness, sample: int = 0, chat: ChatTemplate | None = None):
        self.task, self.harness, self.chat = task, harness, chat
        self.traj = Trajectory(task=task.name, family=task.family, harness=harness.name, sample=sample)
        self.sandbox: Sandbox | None = None
        self.buffer: TokenBuffer | None = None
        self.messages: list[dict] = []
        self.observation_turns: list[list[int]] = []
        """Message indices of each observation turn, for the `last_k` history policy."""
        self.format_streak = self.error_streak = 0
        self.proc = Processors(harness, self.traj)
        self.t0 = time.monotonic()

    def own_seconds(self) -> float:
        """What `limits.wall_time_s` counts: this episode's own time, never its wait for the batch's others."""
        return sum(self.traj.timing.get(k, 0.0) for k in ("start", "tools", "generate"))

    def charge_generation(self, seconds: float) -> None:
        self.traj.timing["generate"] = self.traj.timing.get("generate", 0.0) + seconds

    @property
    def active(self) -> bool:
        return self.traj.status is None

    def end(self, status: Status, cause: str | None = None) -> None:
        if self.active:
            self.traj.status, self.traj.error = status, cause
            if cause and status != "submitted":
                self.traj.errors.append(cause)

    # -- start -------------------------------------------------------------------------------------
    def start(self, make_sandbox: Callable[..., Sandbox]) -> None:
        """Make and start the sandbox, run the initial observation, and render the first prompt."""
        h = self.harness
        self.sandbox = self._sandbox_call(make_sandbox, self.task)
        self._sandbox_call(self.sandbox.start)
        initial = None
        if h.initial_observation:
            r = self._sandbox_call(self.sandbox.run, h.initial_observation, h.limits.command_timeout_s)
            initial = truncate(r.output, h.context.output_head_chars, h.context.output_tail_chars)
        self.messages = self._first_messages(initial)
        if self.chat is not None:
            self.buffer = TokenBuffer.start(self.chat, self.messages)
            self.traj.prompt_ids = self.buffer.prompt_ids
        self.traj.timing["start"] = time.monotonic() - self.t0

    def _first_messages(self, initial: str | None) -> list[dict]:
        """System prompt, the harness's demonstrations (coevo.harness.demos: in the system prompt, or as
        earlier turns), then the task. All of it is the first prompt: counted against the context limit,
        never trained on."""
        t = self.task
        messages = first_messages(self.harness, t.name, t.family, t.instruction, initial)
        if self.harness.demonstrations.k:  # recorded, so that views of the episode find the task's message
            self.traj.demonstrations = [d.task for d in choose(self.harness, t.name, t.family, t.instruction)]
            self.traj.task_message = len(messages) - 1
        return messages

    def _sandbox_call(self, fn, *args):
        """The sandbox boundary: whatever breaks in there ends the episode as 'sandbox_error'."""
        try:
            return fn(*args)
        except Exception as e:  # the boundary: recorded with its cause, never a crash
            raise EpisodeEnd("sandbox_error", f"{type(e).__name__}: {e}") from e

    # -- request -----------------------------------------------------------------------------------
    def request(self) -> GenerationRequest:
        """The next prompt; raises EpisodeEnd when a limit says the episode is over."""
        lim, n = self.harness.limits, self.traj.turns
        if self.own_seconds() > lim.wall_time_s:
            raise EpisodeEnd("timeout", f"the episode's own time ({self.own_seconds():.1f} s: sandbox, commands and "
                                        f"its share of generation) ran past limits.wall_time_s={lim.wall_time_s:g}")
        if n >= lim.max_turns:
            raise EpisodeEnd("turn_limit", f"{n} turns (limits.max_turns)")
        used = len(self.buffer.ids) if self.buffer else self.traj.tokens
        if used >= lim.max_episode_tokens:
            raise EpisodeEnd("token_limit", f"{used} tokens >= limits.max_episode_tokens={lim.max_episode_tokens}")
        keep = self.proc.keep_last(self.harness.context.k if self.harness.context.history == "last_k" else None)
        messages = self._visible_messages(keep)
        ids = self.buffer.view(keep) if self.buffer else []
        size = len(ids) if self.buffer else sum(len(m["content"]) for m in messages) // CHARS_PER_TOKEN
        if size + lim.max_tokens_per_turn > lim.max_context_tokens:
            raise EpisodeEnd("context_exceeded", f"prompt of {size} tokens + limits.max_tokens_per_turn "
                                                 f"> limits.max_context_tokens={lim.max_context_tokens}")
        meta = {"task": self.task.name, "turn": n, "sample": self.traj.sample}
        return GenerationRequest(token_ids=ids, messages=messages, meta=meta)

    def _visible_messages(self, keep: int | None) -> list[dict]:
        if keep is None or len(self.observation_turns) <= keep:
            return list(self.messages)
        hidden = {i for turn in self.observation_turns[:-keep] for i in turn}
        elided = self.harness.context.elided_text
        return [{**m, "content": elided} if i in hidden else m for i, m in enumerate(self.messages)]

    # -- step --------------------------------------------------------------------------------------
    def step(self, completion: Completion) -> None:
        """Take one reply: parse it, run its calls, append what the model will see next."""
        self.traj.turns += 1
        self._check_completion(completion)
        n_tokens = len(completion.token_ids) or len(completion.text) // CHARS_PER_TOKEN
        self.traj.tokens += n_tokens
        if self.proc.drop_empty(completion.text):  # recovery.empty_reply_retry: kept out of the chat
            self.traj.steps.append(Step(reply=completion.text, tokens=n_tokens))
            return
        try:
            calls = parse_action(self.harness, completion.text)
        except FormatError as e:
            return self._format_error(completion, e.message, n_tokens)
        self.format_streak = 0
        self._add_reply(completion)
        step = Step(reply=completion.text, calls=calls, tokens=n_tokens)
        self.traj.steps.append(step)
        texts = self._act(step)
        self._count_error(any(r.failed for r in step.results))
        self._add_observation(self.proc.with_budget(texts))

    def _act(self, step: Step) -> list[str]:
        """Run the step's calls; their observation texts. Raises EpisodeEnd at an accepted submit, or at a
        call asked for past recovery.repeat_limit (not run)."""
        t, texts = time.monotonic(), []
        try:
            for call in step.calls:
                if call.name == "submit":  # blind: no output seen since the last command, or no command yet
                    blind = bool(step.results) or not any(s.results for s in self.traj.steps)
                    if (nudge := self.proc.hold_submit(blind)) is None:
                        raise EpisodeEnd("submitted")
                    texts.append(nudge)
                    break
                if cause := self.proc.repeat_over(call):
                    raise EpisodeEnd("repeat_limit", cause)
                step.results.append(self._run(call))
                texts.append(self.proc.repeat_hint(call, observation_text(self.harness, step.results[-1])))
        finally:
            self.traj.timing["tools"] = self.traj.timing.get("tools", 0.0) + time.monotonic() - t
        return texts

    def _check_completion(self, c: Completion) -> None:
        if self.buffer is not None and not c.token_ids:
            raise EpisodeEnd("policy_error", "the policy returned no token ids, but the rollout has a tokenizer")
        if len(c.logprobs) != len(c.token_ids) and c.token_ids:
            raise EpisodeEnd("policy_error", f"{len(c.token_ids)} token ids but {len(c.logprobs)} logprobs")
        if c.routing is not None and len(c.routing) != len(c.token_ids):
            raise EpisodeEnd("policy_error", f"{len(c.token_ids)} token ids but {len(c.routing)} routing records")

    def _run(self, call: ToolCall) -> ToolResult:
        result = self._sandbox_call(execute, self.harness, self.sandbox, call)
        if result.timed_out:
            self.traj.timeouts += 1
        if result.failed:
            self.traj.errors.append(f"turn {self.traj.turns}: `{result.command[:80]}` "
                                    f"{'timed out' if result.timed_out else f'exited {result.exit_code}'}")
        return result

    def _format_error(self, completion: Completion, message: str, n_tokens: int) -> None:
        rec = self.harness.recovery
        self.traj.format_errors += 1
        self.format_streak += 1
        self.traj.errors.append(f"turn {self.traj.turns}: format error: {message}")
        self.traj.steps.append(Step(reply=completion.text, format_error=message, tokens=n_tokens))
        if rec.format_error_feedback:  # without feedback the reply is dropped and the model samples again
            self._add_reply(completion)
        if self.format_streak > rec.max_format_retries:
            raise EpisodeEnd("format_errors", f"{self.format_streak} unparseable replies in a row "
                                              f"(recovery.max_format_retries={rec.max_format_retries})")
        self._count_error(True)
        if rec.format_error_feedback:
            left = rec.max_format_retries - self.format_streak
            text = format_error_text(self.harness, message, left)
            self._add_observation(self.proc.with_budget([text]), role="user")

    def _count_error(self, failed: bool) -> None:
        self.error_streak = self.error_streak + 1 if failed else 0
        cap = self.harness.recovery.max_consecutive_errors
        if cap is not None and self.error_streak >= cap:
            raise EpisodeEnd("error_limit", f"{cap} turns in a row with errors (recovery.max_consecutive_errors)")

    # -- the chat and its tokens -------------------------------------------------------------------
    def _add_reply(self, completion: Completion) -> None:
        self.messages.append({"role": "assistant", "content": completion.text})
        if self.buffer is not None:
            self.buffer.add_sampled(completion.token_ids, completion.logprobs, completion.routing)

    def _add_observation(self, texts: list[str], role: str | None = None) -> None:
        role = role or ("tool" if self.harness.action_format.kind == "tool_call" else "user")
        if role == "user":
            texts = ["\n".join(texts)]
        new = [{"role": role, "content": t} for t in texts]
        self.observation_turns.append(list(range(len(self.messages), len(self.messages) + len(new))))
        self.messages += new
        if self.buffer is not None:
            elided = None
            # Stand-ins for the history policy, and for an empty reply's retry, whose prompt elides them too.
            if self.harness.context.history == "last_k" or self.harness.recovery.empty_reply_retry:
                elided = [{**m, "content": self.harness.context.elided_text} for m in new]
            self.buffer.add_observation(self.messages, len(new), elided)

    def finish_tokens(self) -> None:
        """Copy the buffer into the trajectory and measure drift (call once, when the episode is over)."""
        self.traj.messages = self.messages
        if self.buffer is not None:
            b = self.buffer
            self.traj.completion_ids, self.traj.completion_mask, self.traj.logprobs = b.ids, b.mask, b.logprobs
            self.traj.routing = buffer_routing(b.routing)
            self.traj.drift = b.drift(self.messages) if self.messages else 0
