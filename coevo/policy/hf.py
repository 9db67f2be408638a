"""A local Hugging Face causal LM as a Policy: one left-padded, batched `generate` call per turn.

Logprobs: for each sampled token, `log_softmax(raw_logits / temperature)` at that step. That is the
temperature-scaled distribution WITHOUT top-p truncation, which is what a training forward computes
(TRL's GRPO divides the logits by its `temperature` too), so at top_p=1 the two agree up to numerics.
With top_p<1 the tokens are still drawn from the truncated distribution; only the logprob ignores it.

Constrained decoding (`SamplingParams.grammar`, from `action_format.constrained`): one xgrammar matcher per
row masks the logits (-inf outside the grammar) before the choice, the stop token is allowed only where
the grammar is complete, and a reply the grammar cannot finish within max_tokens comes back with
finish_reason "length" (the episode records it as a format error). The logprobs are then of the
distribution the tokens were drawn from: the temperature-scaled one renormalised over the allowed tokens,
and the completion says so (`logprob_source="constrained"`); coevo.train.mismatch replays the masks to
compare them with a training forward.

`model` may also be a LoRA adapter folder (peft's, over the base model its adapter_config.json names, as a
nested trial writes): the adapter is merged over its base once, at load, so decoding runs a plain model.

Decoding keeps each episode's KV states across its turns (coevo.policy.kv) where the model's attention
allows; `kv_cache=False` gives transformers' own `generate` instead, re-prefilling the whole history every
call (what coevo did before; benchmarks/policy.py measures the two side by side).
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Callable
from pathlib import Path

from coevo import Completion, GenerationRequest, SamplingParams

DTYPES = ("float32", "bfloat16")
STOP_TOKENS = ("<|im_end|>", "<|endoftext|>")
"""A turn ends on either; the one that ended it stays in the completion (the token buffer needs it)."""
KV_CACHE_MB = int(os.environ.get("COEVO_KV_CACHE_MB", "4096"))
"""Memory for KV states kept between calls; the least recently used go first."""


def stop_token_ids(tokenizer) -> list[int]:
    vocab = tokenizer.get_vocab()
    return [vocab[t] for t in STOP_TOKENS if t in vocab] or [tokenizer.eos_token_id]


class HFPolicy:
    def __init__(self, model: str | Path, device: str = "auto", dtype: str = "float32", kv_cache: bool = True):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

        from coevo.models import resolve_model
        from coevo.policy.kv import CachedDecoder
        from coevo.train.lora import is_adapter
        from coevo.train.routing import routers

        if dtype not in DTYPES:
            raise ValueError(f"policy dtype {dtype!r}: valid are {', '.join(DTYPES)}")
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.path, self.device = str(resolve_model(model)), torch.device(device)  # a folder, or a model's name
        if is_adapter(self.path):  # a LoRA adapter folder (a nested trial's weights): merged over its base
            from coevo.train.lora import adapter_base, load_adapted

            has_tokenizer = (Path(self.path) / "tokenizer_config.json").is_file()
            self.tokenizer = AutoTokenizer.from_pretrained(self.path if has_tokenizer else adapter_base(self.path))
            self.model = load_adapted(self.path).merge_and_unload().to(getattr(torch, dtype))
        else:
            self.tokenizer = AutoTokenizer.from_pretrained(self.path)
            self.model = AutoModelForCausalLM.from_pretrained(self.path, dtype=getattr(torch, dtype))
        self.model.to(self.device).eval()
        if routers(self.model):
            # TRL's SFT saves an MoE with output_router_logits on (its training loss); decoding has no use for the
            # load-balancing loss, and a KV-cached step's attention mask does not fit its computation.
            self.model.config.output_router_logits = False
        self.stop_ids = stop_token_ids(self.tokenizer)
        self.vocab_size = self.model.get_output_embeddings().weight.shape[0]
        """The logits' width, which a tokenizer may not fill (SmolLM2: 49152); grammar masks use it."""
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.stop_ids[0]
        # A checkpoint's own defaults (top_k, repetition_penalty, ...) would fill every parameter we leave
        # unset and sample from a distribution the logprobs do not describe: SamplingParams is the whole story.
        self.model.generation_config = GenerationConfig(eos_token_id=self.stop_ids, pad_token_id=self.pad_id)
        self.decoder = (CachedDecoder(self.model, self.stop_ids, KV_CACHE_MB << 20)
                        if kv_cache and CachedDecoder.supports(self.model) else None)
        # New weights (GRPO's sync into this rollout copy) make every kept state stale.
        self.model.register_load_state_dict_post_hook(lambda *_: self.reset_cache())

    def reset_cache(self) -> None:
        """Forget the KV states kept between calls: call after changing the weights other than by
        `load_state_dict` (which does it itself)."""
        if getattr(self, "decoder", None) is not None:
            self.decoder.cache.clear()

    def __repr__(self) -> str:
        return f"HFPolicy({self.path!r}, device={self.device.type!r})"

    def _batch(self, requests: list[GenerationRequest]):
        """Left-pad the prompts' token ids into one tensor with its attention mask."""
        import torch

        width = max(len(r.token_ids) for r in requests)
        ids = torch.full((len(requests), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(requests), width), dtype=torch.long)
        for row, r in enumerate(requests):
            ids[row, width - len(r.token_ids):] = torch.tensor(r.token_ids)
            mask[row, width - len(r.token_ids):] = 1
        return ids.to(self.device), mask.to(self.device)

    def generate(self, requests: list[GenerationRequest], params: SamplingParams,
                 on_step: Callable[[list[int], list[float]], None] | None = None) -> list[Completion]:
        """`on_step(tokens, logprobs)`, if given, sees each decoding step as it happens: one sampled token
        per row (padding after a row has stopped) and its logprob, so that a server can stream."""
        import torch

        if not requests:
            return []
        if any(not r.token_ids for r in requests):
            raise ValueError("HFPolicy needs token_ids in every GenerationRequest (got an empty prompt)")
        if self.decoder is not None:
            return self._generate_cached(requests, params, on_step)
        ids, mask = self._batch(requests)
        greedy = params.temperature <= 0
        scale = 1.0 if greedy else params.temperature
        grammar = GrammarMask(self.matchers(params, len(requests))) if params.grammar else None
        hooks = step_hooks(on_step, scale, grammar) if on_step is not None else {}
        if grammar is not None and not hooks:
            from transformers.generation import LogitsProcessorList

            hooks = {"logits_processor": LogitsProcessorList([grammar])}
        with torch.random.fork_rng(devices=[self.device] if self.device.type == "cuda" else []):
            if params.seed is not None:
                # Mixed with the prompts, so that the turns of a rollout (which share params.seed) do not
                # replay the same random draws; the same seed and batch still give the same completions.
                torch.manual_seed(params.seed * 1_000_003 + zlib.crc32(ids.cpu().numpy().tobytes()))
            with torch.inference_mode():
                out = self.model.generate(
                    input_ids=ids, attention_mask=mask, max_new_tokens=params.max_tokens,
                    do_sample=not greedy, temperature=params.temperature if not greedy else 1.0,
                    top_p=params.top_p if not greedy else 1.0, output_logits=True, return_dict_in_generate=True,
                    top_k=0,  # transformers fills an unset top_k with 50, a cut the logprobs do not describe
                    **hooks,
                )
        new = out.sequences[:, ids.shape[1]:]
        # out.logits: one (batch, vocab) tensor per step, raw (before temperature/top-p); taken a step at a
        # time so that a large vocabulary is never materialised twice.
        steps = out.logits if grammar is None else [grammar.masked(i, s) for i, s in enumerate(out.logits)]
        logprobs = torch.stack([torch.log_softmax(step.float() / scale, dim=-1).gather(-1, new[:, i, None])[:, 0]
                                for i, step in enumerate(steps)], dim=1)
        source = "model" if grammar is None else "constrained"
        return [self._completion(new[i].tolist(), logprobs[i].tolist(), source) for i in range(len(requests))]

    def matchers(self, params: SamplingParams, n_rows: int):
        """One grammar matcher per row for `params.grammar`, ending on the chat template's turn end
        (<|im_end|>) only; None when unconstrained."""
        if params.grammar is None:
            return None
        from coevo.harness.grammar import RowMatchers, compile_for

        compiled = compile_for(self.tokenizer, self.vocab_size, params.grammar)
        return RowMatchers(compiled, n_rows, self.stop_ids[0], self.vocab_size)

    def _padded(self, prompts: list[list[int]]):
        import numpy as np

        width = max(len(p) for p in prompts)
        return np.array([[self.pad_id] * (width - len(p)) + list(p) for p in prompts], dtype=np.int64)

    def _generate_cached(self, requests: list[GenerationRequest], params: SamplingParams,
                         on_step: Callable | None) -> list[Completion]:
        import torch

        prompts = [r.token_ids for r in requests]
        with torch.random.fork_rng(devices=[self.device] if self.device.type == "cuda" else []):
            if params.seed is not None:  # mixed with the prompts as in the generate path
                torch.manual_seed(params.seed * 1_000_003 + zlib.crc32(self._padded(prompts).tobytes()))
            with torch.inference_mode():
                rows = self.decoder.generate(prompts, params.max_tokens, sampler(params), on_step,
                                             self.matchers(params, len(prompts)))
        out = []
        for r in rows:
            c = self._completion(r.tokens, r.logprobs, "model" if params.grammar is None else "constrained")
            c.seconds = r.seconds
            if r.routing:  # an MoE's experts per token (coevo.train.routing), cut where the tokens were
                c.routing = torch.stack(r.routing)[: len(c.token_ids)].tolist()
            out.append(c)
        return out

    def _completion(self, tokens: list[int], logprobs: list[float], source: str = "model") -> Completion:
        return completion_at_stop(self.tokenizer, self.stop_ids, tokens, logprobs, source)


def completion_at_stop(tokenizer, stop_ids: list[int], tokens: list[int], logprobs: list[float],
                       source: str = "model") -> Completion:
    """Cut a row after its first stop token (the rest is padding) and decode the text before it; the stop
    token stays in the ids (the token buffer needs it). No stop token: finish_reason "length"."""
    end = next((i for i, t in enumerate(tokens) if t in stop_ids), None)
    if end is None:
        text = tokenizer.decode(tokens, skip_special_tokens=False)
        return Completion(text, tokens, logprobs, finish_reason="length", logprob_source=source)
    text = tokenizer.decode(tokens[:end], skip_special_tokens=False)
    return Completion(text, tokens[: end + 1], logprobs[: end + 1], finish_reason="stop", logprob_source=source)


def sampler(params: SamplingParams) -> Callable:
    """One decoding step's choice for a batch of raw logits: greedy at temperature 0, else temperature then
    top-p (nucleus) sampling, as `generate` makes it; the logprob is of the temperature-scaled distribution
    without the top-p cut (see the module docstring).

    The draw is by inverse CDF, one uniform number per row. `torch.multinomial` (what `generate` uses)
    draws one exponential number per vocabulary entry: at SmolLM2's 49,152 entries and 57 rows that is
    0.11 s a step, more than half of a decoding step's forward. Same distribution, other random draws: a
    seeded run repeats itself, but does not replay `generate`'s tokens."""
    import torch

    greedy = params.temperature <= 0
    scale = 1.0 if greedy else params.temperature

    def pick(logits):
        scaled = logits.float() / scale
        logz = scaled.logsumexp(-1)
        if greedy:
            tokens = scaled.argmax(-1)
        else:
            kept = scaled
            if params.top_p < 1.0:  # transformers' TopPLogitsWarper: drop the tail below 1 - top_p, keep one
                ordered, order = torch.sort(scaled, descending=False)
                tail = ordered.softmax(-1).cumsum(-1) <= 1 - params.top_p
                tail[..., -1] = False
                kept = scaled.masked_fill(tail.scatter(-1, order, tail), float("-inf"))
            cdf = kept.softmax(-1).double().cumsum(-1)  # float64: a float32 sum of 49k terms drifts
            u = torch.rand(cdf.shape[0], 1, dtype=cdf.dtype, device=cdf.device) * cdf[:, -1:]
            # right=True: the first entry whose cdf exceeds u, so a zero-probability entry is never drawn
            tokens = torch.searchsorted(cdf, u, right=True)[:, 0].clamp_(max=cdf.shape[-1] - 1)
        logprobs = scaled.gather(-1, tokens[:, None])[:, 0] - logz
        return tokens, logprobs

    return pick


class GrammarMask:
    """`generate`'s logits processor for a grammar: before each step, advance every row's matcher by the
    token it sampled last, then mask the scores; keeps each step's bitmask so that the returned logprobs
    (computed from `generate`'s raw logits) are of the masked distribution too."""

    def __init__(self, matchers):
        self.matchers, self.steps = matchers, []

    def __call__(self, input_ids, scores):
        if self.steps:
            for i, t in enumerate(input_ids[:, -1].tolist()):
                self.matchers.accept(i, t)  # a stopped row (padding after its stop) is left alone
        self.matchers.mask(scores, list(range(scores.shape[0])))
        self.steps.append(self.matchers.bitmask.clone())
        return scores

    def masked(self, step: int, logits):
        import xgrammar as xgr

        out = logits.float().clone()
        xgr.apply_token_bitmask_inplace(out, self.steps[step].to(out.device), vocab_size=self.matchers.vocab_size)
        return out


def step_hooks(on_step: Callable[[list[int], list[float]], None], scale: float, grammar=None) -> dict:
    """`generate` keyword arguments that call `on_step` once per decoding step.

    A logits processor placed before the sampling warpers keeps the step's raw logits (masked, after
    `grammar` when there is one); the streamer, which `generate` hands the sampled tokens right after,
    scores them with the same formula as the returned logprobs, so that a streamed logprob equals the
    final one.
    """
    import torch
    from transformers.generation import BaseStreamer, LogitsProcessor, LogitsProcessorList

    class KeepRawLogits(LogitsProcessor):
        last = None

        def __call__(self, input_ids, scores):
            self.last = scores.clone()
            return scores

    class StepStreamer(BaseStreamer):
        prompt_seen = False

        def put(self, value):
            if not self.prompt_seen:  # generate first puts the prompt itself
                self.prompt_seen = True
                return
            logprobs = torch.log_softmax(keep.last.float() / scale, dim=-1).gather(-1, value[:, None].to(keep.last.device))
            on_step(value.tolist(), logprobs[:, 0].tolist())

        def end(self):
            pass

    keep = KeepRawLogits()
    return {"logits_processor": LogitsProcessorList([p for p in (grammar, keep) if p is not None]),
            "streamer": StepStreamer()}
