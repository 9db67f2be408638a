"""The train/rollout mismatch watch: how far the trainer's log-probabilities of the sampled tokens are from
the ones the rollout policy reported when it sampled them.

The two differ by numerics (kernels, batch shapes, a bf16 rollout copy against fp32 training) and by
anything that makes the trainer see a different sequence than the sampler did (a history policy that
elides old observations). GRPO's importance ratio assumes they agree; TRL only corrects for it with vLLM,
so we measure it ourselves on every step, over model tokens only (mask 1), and let thresholds decide.

Constrained decoding (`action_format.constrained`). The rollout draws each token from the model's
distribution renormalised over the tokens the grammar allows, p_M(a) = p(a) / Z_M, and records THAT
logprob (`Trajectory.logprob_source == "constrained"`): a logprob describes the distribution its token was
drawn from, so that an importance ratio built on it is right. A plain training forward computes log p(a),
which is log p_M(a) + log Z_M: lower wherever the model put mass outside the grammar. So the watch
replays the masks (`grammar_logprobs`: the matcher is deterministic given the sampled tokens, and is
restarted at each model turn) and compares both ways:
- masked trainer vs rollout (`mismatch/*`, the thresholds' input): numerics only, as without a grammar;
- unmasked trainer vs rollout (`mismatch/unmasked/*`): the grammar gap, mean -log Z_M per token.
What TRL's loss differentiates is the unmasked log p(a) of the sampled (grammar-valid) tokens, i.e.
log p_M(a) + log Z_M: beside the masked policy's gradient it carries A * grad log Z_M, which for a
positive advantage moves mass onto the grammar's tokens (the model learns the format it was held to) and
for a negative one away from them (removed again by the mask at sampling). TRL reads rollout logprobs only
for vLLM importance sampling and `off_policy_mask_threshold`; neither is on here. Unconstrained
trajectories (`logprob_source == "model"`) are compared exactly as before.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from coevo.train.spec import MismatchSpec


@dataclass
class Mismatch:
    pearson: float
    """Correlation of trainer and rollout logprobs over model tokens (nan with fewer than 2 tokens)."""
    mean_abs_diff: float
    max_abs_diff: float
    kl: float
    """Approximate KL(rollout || trainer) per model token: mean of exp(d) - 1 - d, d = trainer - rollout."""
    tokens: int

    def as_metrics(self, prefix: str = "mismatch") -> dict[str, float]:
        return {f"{prefix}/{k}": float(v) for k, v in asdict(self).items()}


def trainer_logprobs(model, prompts: list[list[int]], completions: list[list[int]], pad_id: int,
                     batch_size: int) -> list[list[float]]:
    """Each completion token's log-probability under `model`, computed like TRL's loss computes it.

    `model` must carry TRL's fused LM head (GRPOTrainer adds it, with its temperature): the batch is laid
    out as TRL lays it out (prompts padded left, completions right) and scored by the same forward,
    without gradients.
    """
    import torch

    device = next(model.parameters()).device
    out: list[list[float]] = []
    for start in range(0, len(prompts), batch_size):
        p, c = prompts[start: start + batch_size], completions[start: start + batch_size]
        wp, wc = max(map(len, p)), max(map(len, c))
        ids = torch.full((len(p), wp + wc), pad_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i, (pi, ci) in enumerate(zip(p, c)):
            ids[i, wp - len(pi): wp] = torch.tensor(pi)
            ids[i, wp: wp + len(ci)] = torch.tensor(ci)
            mask[i, wp - len(pi): wp + len(ci)] = 1
        ids, mask = ids.to(device), mask.to(device)
        labels = ids.masked_fill(mask == 0, -100)
        labels[:, :wp] = -100
        with torch.no_grad():
            logps = model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True).log_probs
        logps = logps[:, -wc:].float().cpu()
        out += [logps[i, : len(ci)].tolist() for i, ci in enumerate(c)]
    return out


def grammar_logprobs(model, prompts: list[list[int]], completions: list[list[int]], masks: list[list[int]],
                     grammar: str, tokenizer, temperature: float, stop_id: int) -> tuple[list[list[float]], list[list[float]]]:
    """Each completion token's log-probability under `model` at `temperature`, (masked, unmasked): masked
    by the grammar's bitmask replayed over each model turn (each maximal run of mask-1 tokens, a matcher of
    its own, ending on `stop_id`), as the rollout sampled it; 0.0 at environment tokens. One row per
    forward, with logits kept only where a model token is predicted."""
    import torch
    import xgrammar as xgr

    from coevo.harness.grammar import compile_for, replay_bitmask

    device = next(model.parameters()).device
    masked_out, plain_out = [], []
    for p, c, m in zip(prompts, completions, masks):
        at = [j for j, mj in enumerate(m) if mj]
        masked, plain = [0.0] * len(c), [0.0] * len(c)
        if at:
            ids = torch.tensor([list(p) + list(c)], device=device)
            keep = torch.tensor([len(p) + j - 1 for j in at], device=device)
            with torch.no_grad():
                logits = model(input_ids=ids, logits_to_keep=keep).logits[0].float().cpu() / temperature
            tokens = torch.tensor([c[j] for j in at])
            lp = torch.log_softmax(logits, -1).gather(-1, tokens[:, None])[:, 0]
            compiled = compile_for(tokenizer, logits.shape[-1], grammar)
            bitmask = torch.cat([replay_bitmask(compiled, run, stop_id, logits.shape[-1]) for run in model_runs(c, m)])
            xgr.apply_token_bitmask_inplace(logits, bitmask, vocab_size=logits.shape[-1])
            mlp = torch.log_softmax(logits, -1).gather(-1, tokens[:, None])[:, 0]
            for k, j in enumerate(at):
                masked[j], plain[j] = float(mlp[k]), float(lp[k])
        masked_out.append(masked)
        plain_out.append(plain)
    return masked_out, plain_out


def model_runs(tokens: list[int], mask: list[int]) -> list[list[int]]:
    """The maximal runs of mask-1 tokens: one sampled reply each."""
    runs, current = [], []
    for t, mi in zip(tokens, mask):
        if mi:
            current.append(t)
        elif current:
            runs.append(current)
            current = []
    return runs + [current] if current else runs


def constrained_metrics(masked_lp: list[list[float]], plain_lp: list[list[float]], rollout_lp: list[list[float]],
                        masks: list[list[int]]) -> tuple[Mismatch, dict[str, float]]:
    """Both comparisons of constrained rollouts (see the module docstring): the masked one, which the
    thresholds judge, and every metric of both (`mismatch/*`, `mismatch/unmasked/*`)."""
    masked, plain = measure(masked_lp, rollout_lp, masks), measure(plain_lp, rollout_lp, masks)
    return masked, {**masked.as_metrics(), **plain.as_metrics("mismatch/unmasked")}


def measure(trainer_lp: list[list[float]], rollout_lp: list[list[float]], masks: list[list[int]]) -> Mismatch:
    """Compare the two over positions whose mask is 1."""
    a, b = [], []
    for t, r, m in zip(trainer_lp, rollout_lp, masks):
        for ti, ri, mi in zip(t, r, m):
            if mi:
                a.append(ti)
                b.append(ri)
    n = len(a)
    if n == 0:
        return Mismatch(math.nan, 0.0, 0.0, 0.0, 0)
    diffs = [x - y for x, y in zip(a, b)]
    kl = sum(math.exp(min(d, 50.0)) - 1.0 - d for d in diffs) / n
    return Mismatch(pearson(a, b), sum(map(abs, diffs)) / n, max(map(abs, diffs)), kl, n)


def pearson(a: list[float], b: list[float]) -> float:
    n = len(a)
    if n < 2:
        return math.nan
    ma, mb = sum(a) / n, sum(b) / n
    cov = sum((x - ma) * (y - mb) for x, y in zip(a, b))
    va, vb = sum((x - ma) ** 2 for x in a), sum((y - mb) ** 2 for y in b)
    if va == 0 or vb == 0:  # constant logprobs: identical is perfect agreement, anything else is none
        return 1.0 if all(x == y for x, y in zip(a, b)) else 0.0
    return cov / math.sqrt(va * vb)


def breaches(m: Mismatch, spec: MismatchSpec) -> list[str]:
    """Which thresholds `m` passes, in words (empty: all is well)."""
    out = []
    if not math.isnan(m.pearson) and m.pearson < spec.min_pearson:
        out.append(f"pearson {m.pearson:.4f} < mismatch.min_pearson={spec.min_pearson:g}")
    if m.mean_abs_diff > spec.max_mean_abs_diff:
        out.append(f"mean |delta| {m.mean_abs_diff:.4g} > "
                   f"mismatch.max_mean_abs_diff={spec.max_mean_abs_diff:g}")
    if m.kl > spec.max_kl:
        out.append(f"KL {m.kl:.4g} > mismatch.max_kl={spec.max_kl:g}")
    return out
