"""Sessions: a base URL per episode (`/sessions/{id}/v1`) whose calls are recorded token in, token out.

Each call's prompt ids and sampled ids with their logprobs go into a coevo `Trajectory`, the same record
coevo's own agent loop writes, so that eval, the h-phase and GRPO take them unchanged.

Chat calls are continued the way coevo's loop does it (coevo.rollout.tokens.TokenBuffer): when a call's
messages are the session's chat so far (its last reply included, as returned) plus new messages, the model
is fed the session's buffer (its own sampled ids, never re-tokenized) plus only the new messages'
suffix, tokenized alone. So an agent that sends its history back unchanged yields one segment whatever
tokens were sampled (mini-swe-agent does, except that it drops a reply it could not parse: a new segment).

Whatever the endpoint, a call whose prompt ids extend the segment so far (prompt + all sampled and added
ids) adds only the new suffix, as environment tokens (mask 0). A call that does not (an edited or trimmed
history, a client keeping its own ids that re-tokenized a reply) starts a new segment, as LEGO-RL and TRL
do. The segment it ends records in `drift` how many tokens the new prompt departed from it by (0 for a
segment that was never broken).

With a journal folder (`coevo serve --sessions-dir DIR`), every recorded call and every collected session
is appended to DIR/journal.jsonl (flushed and fsynced before the reply goes out), and a server started on
that folder replays it: a server killed or restarted keeps every session whose calls it answered.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass, replace
from pathlib import Path

from coevo import Completion
from coevo.rollout.tokens import ChatTemplate, TokenBuffer, token_drift
from coevo.rollout.trajectory import Step, Trajectory
from coevo.train.routing import extend_routing


@dataclass
class ChatState:
    buffer: TokenBuffer
    """The session's ids as coevo's loop would hold them; its `view` is what the model saw."""
    messages: list[dict]
    """The chat the buffer stands for, ending with the last reply as returned to the client."""


class SessionStore:
    """Sessions by id, each a list of Trajectory segments. Thread-safe: the server records while an
    in-process caller (a native agent's runner) reads."""

    def __init__(self, chat: ChatTemplate, harness: str = "served", journal: Path | None = None):
        self.chat, self.harness = chat, harness
        self._segments: dict[str, list[Trajectory]] = {}
        self._chats: dict[str, ChatState] = {}
        self._pending: dict[str, TokenBuffer] = {}
        """The buffer `chat_prompt` last fed to the model, kept once the call it fed is recorded."""
        self._lock = threading.Lock()
        self._journal = None
        if journal is not None:
            path = Path(journal) / "journal.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            self._replay(path)
            self._journal = open(path, "a")  # noqa: SIM115 - open for the server's life

    def _replay(self, path: Path) -> None:
        """Record again what the journal holds, calls and collections in order (a line cut by a kill is skipped)."""
        lines = path.read_text().splitlines() if path.exists() else []
        for line in lines:
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue
            if entry.get("collected"):
                self.pop(entry["session"])
                continue
            if entry["messages"]:
                self.chat_prompt(entry["session"], entry["messages"])
            completion = Completion(entry["text"], entry["token_ids"], entry["logprobs"], entry["finish_reason"],
                                    logprob_source=entry.get("logprob_source", "model"), routing=entry.get("routing"))
            self.record(entry["session"], entry["prompt_ids"], completion, entry["messages"])

    def _log(self, entry: dict) -> None:
        if self._journal is not None:
            self._journal.write(json.dumps(entry) + "\n")
            self._journal.flush()
            os.fsync(self._journal.fileno())

    def chat_prompt(self, session: str, messages: list[dict]) -> list[int] | None:
        """The ids to feed for a chat call: the session's buffer plus the new messages, when `messages`
        continue the session's chat; None when they do not (the caller renders the chat whole)."""
        with self._lock:
            state = self._chats.get(session)
            if state is None or not continues(messages, state.messages):
                return None
            trial = replace(state.buffer, ids=list(state.buffer.ids), mask=list(state.buffer.mask),
                            logprobs=list(state.buffer.logprobs), routing=list(state.buffer.routing),
                            segments=list(state.buffer.segments))
            trial.add_observation(messages, len(messages) - len(state.messages))
            self._pending[session] = trial
            return trial.view(None)

    def record(self, session: str, prompt_ids: list[int], completion: Completion, messages: list[dict]) -> None:
        """One call: `messages` is the chat it came from (empty for a completions prompt)."""
        with self._lock:
            segments = self._segments.setdefault(session, [])
            segment = self._extend(segments[-1], prompt_ids) if segments else None
            if segment is None:
                segment = Trajectory(task=session, harness=self.harness, prompt_ids=list(prompt_ids), drift=0,
                                     segment=len(segments))
                segments.append(segment)
            segment.routing = extend_routing(segment.routing, len(segment.completion_ids), completion.routing,
                                             len(completion.token_ids))
            segment.completion_ids += completion.token_ids
            segment.completion_mask += [1] * len(completion.token_ids)
            segment.logprobs += completion.logprobs
            segment.logprob_source = completion.logprob_source
            segment.turns += 1
            segment.tokens += len(completion.token_ids)
            segment.steps.append(Step(reply=completion.text, tokens=len(completion.token_ids)))
            self._continue_chat(session, prompt_ids, completion, messages)
            if messages:
                segment.messages = self._chats[session].messages
            self._log({"session": session, "prompt_ids": list(prompt_ids), "text": completion.text,
                       "token_ids": completion.token_ids, "logprobs": completion.logprobs,
                       "finish_reason": completion.finish_reason, "logprob_source": completion.logprob_source,
                       "routing": completion.routing, "messages": messages})

    def _continue_chat(self, session: str, prompt_ids: list[int], completion: Completion, messages: list[dict]):
        """Keep the chat's buffer for the next call: the one `chat_prompt` fed, or a fresh one."""
        trial = self._pending.pop(session, None)
        if not messages:  # a completions call: the client holds the ids, there is no chat to continue
            self._chats.pop(session, None)
            return
        fed = trial is not None and trial.view(None) == prompt_ids
        buffer = trial if fed else TokenBuffer.start(self.chat, messages)
        buffer.add_sampled(completion.token_ids, completion.logprobs, completion.routing)
        self._chats[session] = ChatState(buffer, [*messages, {"role": "assistant", "content": completion.text}])

    @staticmethod
    def _extend(segment: Trajectory, prompt_ids: list[int]) -> Trajectory | None:
        """Add the prompt's new suffix to the segment, or measure the drift and return None."""
        buffer = segment.prompt_ids + segment.completion_ids
        if prompt_ids[: len(buffer)] != buffer:
            segment.drift = token_drift(buffer, prompt_ids)
            return None
        suffix = prompt_ids[len(buffer):]
        segment.completion_ids += suffix
        segment.completion_mask += [0] * len(suffix)
        segment.logprobs += [0.0] * len(suffix)
        return segment

    def get(self, session: str) -> list[Trajectory] | None:
        with self._lock:
            found = self._segments.get(session)
            return None if found is None else [t.model_copy(deep=True) for t in found]

    def pop(self, session: str) -> list[Trajectory] | None:
        with self._lock:
            self._chats.pop(session, None)
            self._pending.pop(session, None)
            found = self._segments.pop(session, None)
            if found is not None:
                self._log({"session": session, "collected": True})
            return found

    def ids(self) -> list[str]:
        with self._lock:
            return list(self._segments)


def continues(messages: list[dict], so_far: list[dict]) -> bool:
    """`messages` are `so_far` (role and text alike) followed by at least one new message."""
    return len(messages) > len(so_far) and all(
        a.get("role") == b.get("role") and (a.get("content") or "") == (b.get("content") or "")
        for a, b in zip(messages, so_far))
