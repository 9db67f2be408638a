"""Token-in/token-out bookkeeping (TITO).

The model's sampled ids go into the buffer exactly as sampled; they are never re-tokenized. An
observation enters as a suffix only: render the chat with the tokenizer's chat template before and after
the new messages, take the text that was added, tokenize just that, and append it with mask 0. "Drift" is
how far the buffer is from a full re-render + tokenize of the final chat: measured, never trained on.
"""

from __future__ import annotations

import difflib
import threading
from dataclasses import dataclass, field


class ChatTemplate:
    """A tokenizer's chat template and encoder, shared by the episodes of a rollout (calls are serialized:
    a Rust tokenizer may not be used from two threads at once)."""

    def __init__(self, tokenizer, tools: list[dict] | None = None):
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError(f"{type(tokenizer).__name__} has no chat template; a token-level rollout renders "
                             "observations with it (set tokenizer.chat_template, or pass tokenizer=None)")
        self.tokenizer, self.tools = tokenizer, tools
        self._lock = threading.Lock()

    def render(self, messages: list[dict], generation_prompt: bool) -> str:
        with self._lock:
            return self.tokenizer.apply_chat_template(messages, tools=self.tools, tokenize=False,
                                                      add_generation_prompt=generation_prompt)

    def encode(self, text: str) -> list[int]:
        with self._lock:
            return self.tokenizer.encode(text, add_special_tokens=False)

    def decode(self, ids: list[int]) -> str:
        with self._lock:
            return self.tokenizer.decode(ids, skip_special_tokens=False)


@dataclass
class Segment:
    """One observation's tokens in the buffer, and what replaces them when the history policy elides it."""

    start: int
    end: int
    elided: list[int] | None = None


@dataclass
class TokenBuffer:
    chat: ChatTemplate
    prompt_ids: list[int]
    text: str
    """The text the prompt + buffer stand for; a new observation's suffix is cut after it."""
    ids: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    routing: list = field(default_factory=list)
    """Per buffer token, an MoE's recorded experts ([layers][top_k]) or None (environment tokens, or none
    recorded); `coevo.train.routing.buffer_routing` makes the trajectory's column of it."""
    segments: list[Segment] = field(default_factory=list)
    reply_at: int = 0
    """Where the last sampled reply starts in `text`."""

    @classmethod
    def start(cls, chat: ChatTemplate, messages: list[dict]) -> TokenBuffer:
        text = chat.render(messages, generation_prompt=True)
        return cls(chat=chat, prompt_ids=chat.encode(text), text=text)

    def add_sampled(self, ids: list[int], logprobs: list[float], routing: list | None = None) -> None:
        self.ids += ids
        self.mask += [1] * len(ids)
        self.logprobs += logprobs
        self.routing += routing if routing is not None else [None] * len(ids)
        self.reply_at = len(self.text)
        self.text += self.chat.decode(ids)

    def add_observation(self, messages: list[dict], n_new: int, elided: list[dict] | None = None) -> None:
        """`messages` ends with the `n_new` new user/tool messages; `elided` are their stand-ins for
        when the history policy later hides them."""
        before = messages[:-n_new]
        suffix, full = self._suffix(before, messages)
        alt = self._suffix(before, before + elided)[0] if elided is not None else None
        ids = self.chat.encode(suffix)
        self.segments.append(Segment(len(self.ids), len(self.ids) + len(ids),
                                     None if alt is None else self.chat.encode(alt)))
        self.ids += ids
        self.mask += [0] * len(ids)
        self.logprobs += [0.0] * len(ids)
        self.routing += [None] * len(ids)
        self.text = full

    def _suffix(self, before: list[dict], after: list[dict]) -> tuple[str, str]:
        full = self.chat.render(after, generation_prompt=True)
        if full.startswith(self.text):
            return full[len(self.text):], full
        closed = self.chat.render(before, generation_prompt=False)
        rest = full[len(closed):] if full.startswith(closed) else full[_common_prefix(full, self.text):]
        reply, at = before[-1]["content"], self.reply_at
        if closed[:at] == self.text[:at] and closed[at:].startswith(reply):
            # The turn ended on another stop token (e.g. <|endoftext|>): close it the template's way.
            return closed[at + len(reply):] + rest, full
        # The template rendered the reply differently from what was sampled (e.g. it strips whitespace):
        # resume after the rendered turn. Drift records the mismatch either way.
        return rest, full

    def view(self, keep_last: int | None) -> list[int]:
        """The next prompt: prompt + buffer, with all but the last `keep_last` observations elided."""
        ids = self.prompt_ids + self.ids
        if keep_last is None or len(self.segments) <= keep_last:
            return ids
        out, pos = list(self.prompt_ids), 0
        for seg in self.segments[: len(self.segments) - keep_last]:
            if seg.elided is not None:
                out += self.ids[pos: seg.start] + seg.elided
                pos = seg.end
        return out + self.ids[pos:]

    def drift(self, messages: list[dict]) -> int:
        """Tokens not shared between the buffer and a fresh render + tokenize of `messages`."""
        ends_with_reply = bool(messages) and messages[-1]["role"] == "assistant"
        ref_text = self.chat.render(messages, generation_prompt=not ends_with_reply)
        if ref_text.startswith(self.text):  # the template's closing of the last turn was never sampled
            ref_text = self.text
        return token_drift(self.prompt_ids + self.ids, self.chat.encode(ref_text))


def token_drift(a: list[int], b: list[int]) -> int:
    """Tokens not shared between two id sequences (outside their longest matching blocks, in order)."""
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    return max(len(a), len(b)) - sum(block.size for block in matcher.get_matching_blocks())


def _common_prefix(a: str, b: str) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n
