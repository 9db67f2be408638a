"""Decoding with KV states kept across calls: an episode's next turn re-uses the states of its last one.

A rollout's token buffer only ever appends (coevo.rollout.tokens), so turn k+1's prompt is turn k's prompt,
its completion and the new observation. Recomputing the whole history every turn made prefill most of the
cost of a real model on CPU (SmolLM2: ~243 prompt tokens/s on 2 cores). Here each finished row leaves its
states in a `PrefixCache` keyed by the exact token ids they were computed from; a request re-uses the
longest cached prefix of its ids and prefills only the rest. Exact by construction: states are re-used
only for an identical token prefix at identical positions, so a `last_k` history, which rewrites old
turns, simply finds a shorter prefix. The prompt prefix a batch shares (system prompt, instructions) is
prefilled once for all of its rows.

Decoding is batched: the rows' states are laid right-aligned into one preallocated buffer (left padding
masked out), and a row leaves the batch the step it stops, taking its states to the cache.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
from transformers.cache_utils import Cache, DynamicCache, DynamicLayer

from coevo.train.routing import RoutingTaps, routers

SHARED_PREFIX_MIN = 16
"""A batch's common prompt prefix shorter than this is not worth its own prefill."""


class GrowingLayer(DynamicLayer):
    """A DynamicLayer over a preallocated buffer: appending a step writes in place instead of `torch.cat`
    copying every state of every row (which, at batch 64 and 2k tokens, copies gigabytes per step)."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, capacity: int):
        super().__init__()
        b, h, n, d = keys.shape
        self.buf_k = keys.new_zeros((b, h, capacity, d))
        self.buf_v = values.new_zeros((b, h, capacity, d))
        self.buf_k[:, :, :n], self.buf_v[:, :, :n] = keys, values
        self.n, self.device, self.is_initialized = n, keys.device, True
        self._views()

    def _views(self):
        self.keys, self.values = self.buf_k[:, :, : self.n], self.buf_v[:, :, : self.n]

    def update(self, key_states, value_states, *args, **kwargs):
        k = key_states.shape[-2]
        if self.n + k > self.buf_k.shape[-2]:  # out of room: grow by half again (rare: capacity is planned)
            grow = max(k, self.buf_k.shape[-2] // 2)
            pad = lambda t: torch.cat([t, t.new_zeros((*t.shape[:2], grow, t.shape[-1]))], dim=-2)
            self.buf_k, self.buf_v = pad(self.buf_k), pad(self.buf_v)
        self.buf_k[:, :, self.n: self.n + k], self.buf_v[:, :, self.n: self.n + k] = key_states, value_states
        self.n += k
        self._views()
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self.n

    def select(self, rows: torch.Tensor, start: int) -> None:
        """Keep only `rows`, and only columns from `start` (padding every kept row has on its left)."""
        self.buf_k, self.buf_v = self.buf_k[rows, :, start:], self.buf_v[rows, :, start:]
        self.n -= start
        self._views()


def make_cache(states: list[tuple[torch.Tensor, torch.Tensor]], capacity: int) -> Cache:
    return Cache(layers=[GrowingLayer(k, v, capacity) for k, v in states])


@dataclass
class Entry:
    ids: np.ndarray
    states: list[tuple[torch.Tensor, torch.Tensor]]
    """Per layer (keys, values), each (1, kv_heads, len(ids), head_dim)."""

    @property
    def nbytes(self) -> int:
        return sum(k.numel() * k.element_size() * 2 for k, _ in self.states)


@dataclass
class CacheStats:
    hit_tokens: int = 0
    prefill_tokens: int = 0
    decode_tokens: int = 0
    prefill_s: float = 0.0
    decode_s: float = 0.0

    @property
    def hit_ratio(self) -> float:
        total = self.hit_tokens + self.prefill_tokens
        return self.hit_tokens / total if total else 0.0


class PrefixCache:
    """Per-sequence states keyed by their token ids, least recently used dropped past `budget_bytes`."""

    def __init__(self, budget_bytes: int):
        self.budget = budget_bytes
        self.entries: OrderedDict[int, Entry] = OrderedDict()
        self.nbytes = 0

    def longest(self, ids: np.ndarray) -> tuple[Entry | None, int]:
        """The entry sharing the longest prefix with `ids`, and that prefix's length."""
        best, best_n = None, 0
        for entry in self.entries.values():
            m = min(len(entry.ids), len(ids))
            if m <= best_n:
                continue
            diff = np.flatnonzero(entry.ids[:m] != ids[:m])
            n = int(diff[0]) if diff.size else m
            if n > best_n:
                best, best_n = entry, n
        if best is not None:
            self.entries.move_to_end(id(best))
        return best, best_n

    def put(self, entry: Entry, replaces: Entry | None = None) -> None:
        """Add `entry`; `replaces`, an entry it extends (an episode's previous turn), is dropped."""
        if replaces is not None and id(replaces) in self.entries:
            self._drop(id(replaces))
        self.entries[id(entry)] = entry
        self.nbytes += entry.nbytes
        while self.nbytes > self.budget and len(self.entries) > 1:
            self._drop(next(iter(self.entries)))

    def _drop(self, key: int) -> None:
        self.nbytes -= self.entries.pop(key).nbytes

    def clear(self) -> None:
        self.entries.clear()
        self.nbytes = 0


@dataclass
class Row:
    ids: np.ndarray
    base: Entry | None = None
    """The cached entry this row's prompt extended, if it extended one entirely (then it is replaced)."""
    states: list = field(default_factory=list)
    logits: torch.Tensor | None = None
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    routing: list = field(default_factory=list)
    """An MoE's experts per sampled token, (layers, top_k) each: those of the step that produced it."""
    next_routing: object = None
    """The experts of the step that produced `logits` (what the next sampled token's routing is)."""
    seconds: float = 0.0
    """This row's own compute: its prefill, and its share of each decoding step it took part in."""
    done: bool = False


class CachedDecoder:
    """Prefill from the longest cached prefix, then decode all rows together (see the module docstring)."""

    def __init__(self, model, stop_ids: list[int], budget_bytes: int):
        self.model, self.stop_ids = model, set(stop_ids)
        self.cache = PrefixCache(budget_bytes)
        self.stats = CacheStats()
        # An MoE's routing is recorded beside each sampled token (coevo.train.routing); a dense model has none.
        self.taps = RoutingTaps(model) if routers(model) else None

    @staticmethod
    def supports(model) -> bool:
        """Full attention in every layer: a sliding-window layer's states are not a plain prefix."""
        cfg = model.config.get_text_config(decoder=True)
        if getattr(cfg, "layer_types", None):
            return set(cfg.layer_types) == {"full_attention"}
        return not (getattr(cfg, "use_sliding_window", False) and getattr(cfg, "sliding_window", None))

    # -- prefill -------------------------------------------------------------------------------------
    def _forward(self, ids: np.ndarray, start: int, base: Entry | None):
        """Run `ids[start:]` on the states of `ids[:start]` (from `base`); returns last logits and states."""
        past = [(k[:, :, :start], v[:, :, :start]) for k, v in base.states] if base is not None and start else None
        cache = make_cache(past, len(ids)) if past else DynamicCache()
        new = torch.as_tensor(ids[start:], device=self.model.device)[None]
        out = self.model(input_ids=new, cache=cache, use_cache=True, logits_to_keep=1,
                         position_ids=torch.arange(start, len(ids), device=new.device)[None])
        states = [(layer.keys.clone(), layer.values.clone()) for layer in cache.layers]
        return out.logits[0, -1], states

    def _prefill(self, row: Row) -> None:
        t = time.monotonic()
        base, n = self.cache.longest(row.ids)
        n = min(n, len(row.ids) - 1)  # at least one token to run, for the next token's logits
        row.base = base if base is not None and n == len(base.ids) else None
        row.logits, row.states = self._forward(row.ids, n, base if n else None)
        if self.taps is not None:  # the last prompt position's experts produced the first token
            row.next_routing = self.taps.chosen(1, len(row.ids) - n)[0, -1]
        self.stats.hit_tokens += n
        self.stats.prefill_tokens += len(row.ids) - n
        row.seconds += time.monotonic() - t
        self.stats.prefill_s += time.monotonic() - t

    def _share_prefix(self, rows: list[Row]) -> None:
        """Prefill once the prefix all rows share, so that each row's own prefill starts after it."""
        if len(rows) < 2:
            return
        m = min(len(r.ids) for r in rows) - 1
        first = rows[0].ids[:m]
        diff = np.zeros(m, dtype=bool)
        for r in rows[1:]:
            diff |= r.ids[:m] != first
        n = int(np.flatnonzero(diff)[0]) if diff.any() else m
        if n < SHARED_PREFIX_MIN:
            return
        base, have = self.cache.longest(first[:n])
        if have >= n:
            return
        t = time.monotonic()
        _, states = self._forward(first[:n], have, base if have else None)
        self.cache.put(Entry(first[:n].copy(), states))
        self.stats.hit_tokens += have
        self.stats.prefill_tokens += n - have
        for r in rows:  # the shared prefill, split evenly: it served every row
            r.seconds += (time.monotonic() - t) / len(rows)
        self.stats.prefill_s += time.monotonic() - t

    # -- decode --------------------------------------------------------------------------------------
    def generate(self, prompts: list[list[int]], max_tokens: int, pick: Callable, on_step=None,
                 grammar=None) -> list[Row]:
        """`pick(logits (B, V)) -> (tokens (B,), logprobs (B,))` samples one step for the batch; `grammar`
        (coevo.harness.grammar.RowMatchers, one matcher per row) masks the active rows' logits before it."""
        rows = [Row(np.asarray(p, dtype=np.int64)) for p in prompts]
        self._share_prefix(rows)
        for row in rows:
            self._prefill(row)
        t = time.monotonic()
        lengths = [len(r.ids) for r in rows]
        width = max(lengths)
        capacity = width + max_tokens
        states = []
        for layer in range(len(rows[0].states)):  # right-aligned: row i's states end at column `width`
            k0 = rows[0].states[layer][0]
            k = k0.new_zeros((len(rows), k0.shape[1], width, k0.shape[3]))
            v = torch.zeros_like(k)
            for i, r in enumerate(rows):
                k[i, :, width - lengths[i]:], v[i, :, width - lengths[i]:] = r.states[layer][0][0], r.states[layer][1][0]
            states.append((k, v))
        for r in rows:
            r.states = []  # now in the batch's buffer
        cache = make_cache(states, capacity)
        device = self.model.device
        mask = torch.zeros((len(rows), capacity), dtype=torch.long, device=device)
        for i, n in enumerate(lengths):
            mask[i, width - n: width] = 1
        active = list(range(len(rows)))  # batch position -> row index
        positions = torch.tensor(lengths, device=device)
        # Every row is sampled every step, finished ones on their last logits, so that a row's random
        # draws do not depend on when the others stopped. Only the active rows run through the model.
        logits = torch.stack([r.logits for r in rows])
        self.stats.decode_s += time.monotonic() - t
        for step in range(max_tokens):
            t = time.monotonic()
            if grammar is not None:
                grammar.mask(logits, active)
            tokens, logprobs = pick(logits)
            tokens_l, logprobs_l = tokens.tolist(), logprobs.tolist()
            if on_step is not None:
                live = set(active)
                on_step([tokens_l[i] if i in live else 0 for i in range(len(rows))],
                        [logprobs_l[i] if i in live else 0.0 for i in range(len(rows))])
            keep = []
            for j, i in enumerate(active):
                r = rows[i]
                r.tokens.append(tokens_l[i])
                r.logprobs.append(logprobs_l[i])
                if self.taps is not None:
                    r.routing.append(r.next_routing)
                if grammar is not None:
                    grammar.accept(i, tokens_l[i])
                if tokens_l[i] in self.stop_ids or len(r.tokens) >= max_tokens:
                    r.done = True
                    self._store(r, cache, j, width - lengths[i])
                else:
                    keep.append(j)
            self.stats.decode_tokens += len(active)
            if not keep:
                self._charge(rows, active, time.monotonic() - t)
                break
            charged = active
            if len(keep) < len(active):
                sel = torch.tensor(keep, device=device)
                pad = min(width - lengths[active[j]] for j in keep)  # columns every kept row has as padding
                for layer in cache.layers:
                    layer.select(sel, pad)
                mask, positions = mask[sel, pad:], positions[sel]
                width -= pad
                active = [active[j] for j in keep]
            used = cache.layers[0].n
            mask[:, used] = 1
            rows_now = torch.tensor(active, device=device)
            out = self.model(input_ids=tokens[rows_now, None], attention_mask=mask[:, : used + 1],
                             position_ids=positions[:, None], cache=cache, use_cache=True)
            positions = positions + 1
            logits[rows_now] = out.logits[:, -1].to(logits.dtype)
            if self.taps is not None:
                for j, step_routing in zip(active, self.taps.chosen(len(active), 1)[:, 0]):
                    rows[j].next_routing = step_routing
            self._charge(rows, charged, time.monotonic() - t)
        return rows

    def _charge(self, rows: list[Row], active: list[int], seconds: float) -> None:
        for i in active:
            rows[i].seconds += seconds / len(active)
        self.stats.decode_s += seconds

    def _store(self, row: Row, cache: Cache, j: int, pad: int) -> None:
        """Keep a finished row's states: its prompt and every sampled token but the last (never run)."""
        n = len(row.ids) + len(row.tokens) - 1
        states = [(layer.keys[j: j + 1, :, pad: pad + n].clone(), layer.values[j: j + 1, :, pad: pad + n].clone())
                  for layer in cache.layers]
        ids = np.concatenate([row.ids, np.asarray(row.tokens[:-1], dtype=np.int64)])
        self.cache.put(Entry(ids, states), replaces=row.base)
