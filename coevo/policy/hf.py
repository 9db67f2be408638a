"""A local Hugging Face causal LM as a Policy: one left-padded, batched `generate` call per turn.

Logprobs: for each sampled token, `log_softmax(raw_logits / temperature)` at that step. That is the
temperature-scaled distribution WITHOUT top-p truncation, which is what a training forward computes
(TRL's GRPO divides the logits by its `temperature` too), so at top_p=1 the two agree up to numerics.
With top_p<1 the tokens are still drawn from the truncated distribution; only the logprob ignores it.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from pathlib import Path

from coevo import Completion, GenerationRequest, SamplingParams

DTYPES = ("float32", "bfloat16")
STOP_TOKENS = ("<|im_end|>", "<|endoftext|>")
"""A turn ends on either; the one that ended it stays in the completion (the token buffer needs it)."""


def stop_token_ids(tokenizer) -> list[int]:
    vocab = tokenizer.get_vocab()
    return [vocab[t] for t in STOP_TOKENS if t in vocab] or [tokenizer.eos_token_id]


class HFPolicy:
    def __init__(self, model: str | Path, device: str = "auto", dtype: str = "float32"):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

        if dtype not in DTYPES:
            raise ValueError(f"policy dtype {dtype!r}: valid are {', '.join(DTYPES)}")
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.path, self.device = str(model), torch.device(device)
        self.tokenizer = AutoTokenizer.from_pretrained(self.path)
        self.model = AutoModelForCausalLM.from_pretrained(self.path, dtype=getattr(torch, dtype))
        self.model.to(self.device).eval()
        self.stop_ids = stop_token_ids(self.tokenizer)
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.stop_ids[0]
        # A checkpoint's own defaults (top_k, repetition_penalty, ...) would fill every parameter we leave
        # unset and sample from a distribution the logprobs do not describe: SamplingParams is the whole story.
        self.model.generation_config = GenerationConfig(eos_token_id=self.stop_ids, pad_token_id=self.pad_id)

    def __repr__(self) -> str:
        return f"HFPolicy({self.path!r}, device={self.device.type!r})"

    def _batch(self, requests: list[GenerationRequest]):
        """Left-pad the prompts' token ids into one tensor with its attention mask."""
        import torch

        width = max(len(r.token_ids) for r in requests)
        ids = torch.full((len(requests), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(requests), width), dtype=torch.long)
        for row, r in enumerate(requests):
            if not r.token_ids:
                raise ValueError("HFPolicy needs token_ids in every GenerationRequest (got an empty prompt)")
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
        ids, mask = self._batch(requests)
        greedy = params.temperature <= 0
        scale = 1.0 if greedy else params.temperature
        hooks = step_hooks(on_step, scale) if on_step is not None else {}
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
                    **hooks,
                )
        new = out.sequences[:, ids.shape[1]:]
        # out.logits: one (batch, vocab) tensor per step, raw (before temperature/top-p); taken a step at a
        # time so that a large vocabulary is never materialised twice.
        logprobs = torch.stack([torch.log_softmax(step.float() / scale, dim=-1).gather(-1, new[:, i, None])[:, 0]
                                for i, step in enumerate(out.logits)], dim=1)
        return [self._completion(new[i].tolist(), logprobs[i].tolist()) for i in range(len(requests))]

    def _completion(self, tokens: list[int], logprobs: list[float]) -> Completion:
        """Cut a row after its first stop token (the rest is padding) and decode the text before it."""
        end = next((i for i, t in enumerate(tokens) if t in self.stop_ids), None)
        if end is None:
            text = self.tokenizer.decode(tokens, skip_special_tokens=False)
            return Completion(text, tokens, logprobs, finish_reason="length")
        text = self.tokenizer.decode(tokens[:end], skip_special_tokens=False)
        return Completion(text, tokens[: end + 1], logprobs[: end + 1], finish_reason="stop")


def step_hooks(on_step: Callable[[list[int], list[float]], None], scale: float) -> dict:
    """`generate` keyword arguments that call `on_step` once per decoding step.

    A logits processor placed before the sampling warpers keeps the step's raw logits; the streamer, which
    `generate` hands the sampled tokens right after, scores them with the same formula as the returned
    logprobs, so that a streamed logprob equals the final one.
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
    return {"logits_processor": LogitsProcessorList([keep]), "streamer": StepStreamer()}
