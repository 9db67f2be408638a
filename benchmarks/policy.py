"""The rollout engines side by side in one run, same model: transformers' `generate` (re-prefills every
prompt in full, as coevo did before), coevo's KV-cached decoder (coevo.policy.kv) and a vLLM server
(coevo.vllm; `coevo vllm install` first).

    .venv/bin/python benchmarks/policy.py --model smollm2-135m [--backends generate kv vllm] [--batches 1 8 32]
                                          [--tasks 57] [--turns 4]

On a GPU machine, the same command with `--backends kv vllm --device cuda` is the check to run there.

Two tables:
1. One call at batch 1, 8 and 32 on real first-turn prompts (the harness's rendering of dev tasks):
   prefill and decode tokens/s, the time of the call, the cache hit ratio (the rows' shared prompt prefix
   is prefilled once). The `generate` path's prefill is timed as one forward over the padded batch.
2. The dev-split evaluation at `--turns` turns in real sandboxes (as `coevo eval --split dev`), once
   per path: seconds per episode, total, the tokens the model wrote, the hit ratio, and the ratio of the
   two. Same seed, but not the same draws (the cached path samples by inverse CDF, `generate` with
   `torch.multinomial`): the episodes differ, so the table shows turns and model tokens per episode.
3. Each path's rollout logprobs against a training forward (the mismatch watch's Pearson).

vLLM's prefill is timed as a one-token call with its prefix cache reset, its decode as the rest of the call;
its episodes run without lockstep (the engine drives each on its own), and it reports no cache hit ratio.

Constrained decoding (`action_format.constrained`) has its own tables in benchmarks/constrained.py, with
the same --model: its cost per decoding step at batch 1, 8 and 32 against unconstrained decoding, xgrammar
against llguidance, and the mismatch of masked rollout logprobs with and without the training-side mask.

Without --model a fresh tiny model is built (speed does not depend on skill, but the tiny model is too
small for the cache to matter much: use a real one).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from coevo import GenerationRequest, SamplingParams
from coevo.harness import load_harness
from coevo.policy.hf import HFPolicy
from coevo.rollout import rollout
from coevo.rollout.tokens import ChatTemplate, TokenBuffer
from coevo.tasks import load_taskset

ROOT = Path(__file__).resolve().parent.parent


def first_prompts(policy: HFPolicy, harness, tasks: list) -> list[list[int]]:
    from coevo.harness.prompts import instance_prompt, system_prompt

    chat = ChatTemplate(policy.tokenizer, None)
    return [TokenBuffer.start(chat, [{"role": "system", "content": system_prompt(harness)},
                                     {"role": "user", "content": instance_prompt(harness, t.instruction, t.name, None)}]
                              ).prompt_ids for t in tasks]


def one_call(paths: dict, prompts: list[list[int]], max_tokens: int) -> list[tuple]:
    """(path, prefill tok/s, decode tok/s, call s, cache hit, same tokens as the first path) per path."""
    params = SamplingParams(temperature=0.0, max_tokens=max_tokens)
    requests = [GenerationRequest(token_ids=p) for p in prompts]
    prompt_tokens = sum(len(p) for p in prompts)
    rows, first = [], None
    for name, policy in paths.items():
        prefill, total, out, hit = timed_call(name, policy, requests, params)
        generated = sum(len(c.token_ids) for c in out)
        if name == "kv":
            s = policy.decoder.stats
            pre = prompt_tokens / max(s.prefill_s, 1e-9) if s.prefill_tokens else 0.0
            dec = s.decode_tokens / max(s.decode_s, 1e-9)
        else:
            pre, dec = prompt_tokens / prefill, generated / max(total - prefill, 1e-9)
        first = first or out
        rows.append((name, pre, dec, total, hit, sum(a.token_ids == b.token_ids for a, b in zip(first, out))))
    return rows


def timed_call(name: str, policy, requests: list, params: SamplingParams) -> tuple[float, float, list, float]:
    """(prefill s, call s, completions, cache hit ratio) of one call on `policy`."""
    import torch

    if name == "generate":
        ids, mask = policy._batch(requests)
        t = time.perf_counter()
        with torch.inference_mode():
            policy.model(input_ids=ids, attention_mask=mask, logits_to_keep=1)
        prefill = time.perf_counter() - t
    elif name == "vllm":
        policy.server.reset_prefix_cache()
        t = time.perf_counter()
        policy.generate(requests, SamplingParams(temperature=0.0, max_tokens=1))
        prefill = time.perf_counter() - t
        policy.server.reset_prefix_cache()
    else:
        policy.reset_cache()
        policy.decoder.stats = type(policy.decoder.stats)()
        prefill = 0.0
    t = time.perf_counter()
    out = policy.generate(requests, params)
    total = time.perf_counter() - t
    return prefill, total, out, policy.decoder.stats.hit_ratio if name == "kv" else 0.0


def evaluation(policy, harness, tasks: list, seed: int) -> tuple[float, list]:
    if getattr(policy, "decoder", None) is not None:
        policy.reset_cache()
        policy.decoder.stats = type(policy.decoder.stats)()
    t = time.perf_counter()
    trajectories = rollout(tasks, harness, policy, seed=seed)
    return time.perf_counter() - t, trajectories


def training_mismatch(policy: HFPolicy, trajectories: list, temperature: float, n: int):
    """Rollout logprobs against a training-style forward: the whole sequence at once, no cache, as the
    GRPO loss scores it (coevo.train.mismatch.measure: Pearson, mean and max |difference|)."""
    import torch

    from coevo.train.mismatch import measure

    scale = temperature if temperature > 0 else 1.0
    trainer, rollout_lp, masks = [], [], []
    for t in [t for t in trajectories if t.completion_ids][:n]:
        ids = torch.tensor(t.prompt_ids + t.completion_ids, device=policy.device)[None]
        with torch.inference_mode():
            logits = policy.model(input_ids=ids).logits[0, len(t.prompt_ids) - 1: -1].float()
        chosen = torch.tensor(t.completion_ids, device=policy.device)[:, None]
        lp = torch.log_softmax(logits / scale, -1).gather(-1, chosen)[:, 0]
        trainer.append(lp.tolist())
        rollout_lp.append(t.logprobs)
        masks.append(t.completion_mask)
    return measure(trainer, rollout_lp, masks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="a model folder or name (coevo model list)")
    parser.add_argument("--harness", type=Path, default=ROOT / "harnesses" / "mini_bash.yaml")
    parser.add_argument("--tasks", type=int, default=57, help="dev tasks in the evaluation (0: skip it)")
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=64, help="new tokens in the one-call table")
    parser.add_argument("--temperature", type=float, default=0.3, help="the evaluation's sampling temperature")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mismatch-episodes", type=int, default=16)
    parser.add_argument("--backends", nargs="+", default=["generate", "kv"], choices=["generate", "kv", "vllm"],
                        help="the paths to compare, side by side")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (the local paths; vLLM picks its own)")
    args = parser.parse_args()
    console = Console(width=150)
    model = args.model
    if model is None:
        from coevo.train.model import build_tiny_model

        scratch = Path(tempfile.mkdtemp())
        model = build_tiny_model(scratch / "model", ROOT / "tasks")
    else:
        from coevo.models import resolve_model

        model = resolve_model(model)
    new = HFPolicy(model, device=args.device)  # the training forward of the mismatch table runs on it too
    assert new.decoder is not None, f"{model}: this model's attention has no cached path"
    paths = {}
    for name in args.backends:
        if name == "generate":
            paths[name] = HFPolicy(model, device=args.device, kv_cache=False)
        elif name == "kv":
            paths[name] = new
        else:
            from coevo.vllm.policy import VLLMPolicy

            t = time.perf_counter()
            paths[name] = VLLMPolicy(model, max_model_len=8192)
            console.print(f"vLLM server started in {time.perf_counter() - t:.0f}s ({paths[name].server.log_path})")
    # The evaluation as a user runs it, but for the turns and the temperature; wall time off, so that
    # neither path's episodes are cut short by the other's speed.
    harness = load_harness(args.harness).with_overrides({"limits.max_turns": args.turns,
                                                         "limits.wall_time_s": 100_000.0,
                                                         "decoding.temperature": args.temperature})
    dev = load_taskset(ROOT / "tasks").split("dev")
    prompts = first_prompts(new, harness, dev)
    warm = [GenerationRequest(token_ids=prompts[0][:32])]
    for p in paths.values():  # the first call of a process (or server) pays for its kernels' set-up
        p.generate(warm, SamplingParams(temperature=0.0, max_tokens=4))

    table = Table(title=f"one call, {args.max_tokens} new tokens, greedy ({Path(str(model)).name})")
    for col in ("batch", "path", "prompt tok", "prefill tok/s", "decode tok/s", "call s", "cache hit",
                "same tokens"):
        table.add_column(col, justify="right")
    for b in args.batches:
        batch = (prompts * (b // len(prompts) + 1))[:b]
        for path, pre, dec, total, hit, agree in one_call(paths, batch, args.max_tokens):
            table.add_row(str(b), path, str(sum(map(len, batch))), f"{pre:.0f}", f"{dec:.1f}", f"{total:.2f}",
                          f"{hit:.2f}", f"{agree}/{b}")
    console.print(table)

    if args.tasks:
        tasks = dev[: args.tasks]
        runs = {name: evaluation(policy, harness, tasks, args.seed) for name, policy in paths.items()}
        base_total = next(iter(runs.values()))[0]
        table = Table(title=f"dev evaluation: {len(tasks)} tasks, {args.turns} turns, {args.harness.name}, "
                            f"temperature {args.temperature:g}, seed {args.seed}")
        for col in ("path", "total s", "s / episode (median own time)", "turns / ep", "model tok / ep",
                    "cache hit", "pass@1", f"speed-up vs {args.backends[0]}"):
            table.add_column(col, justify="right")
        for path, (total, trajs) in runs.items():
            hit = paths[path].decoder.stats.hit_ratio if path == "kv" else 0.0
            own = statistics.median(sum(t.timing.get(k, 0.0) for k in ("start", "tools", "generate"))
                                    for t in trajs)
            turns = statistics.mean(t.turns for t in trajs)
            model_tokens = statistics.mean(sum(t.completion_mask) for t in trajs)
            passed = statistics.mean(t.reward >= 1 for t in trajs)
            table.add_row(path, f"{total:.1f}", f"{own:.2f}", f"{turns:.2f}", f"{model_tokens:.0f}", f"{hit:.2f}",
                          f"{passed:.3f}", f"{base_total / total:.2f}x")
        console.print(table)
        table = Table(title="rollout logprobs vs a training forward (whole sequence, no cache), model tokens")
        for col in ("path", "episodes", "tokens", "pearson", "mean |Δ|", "max |Δ|"):
            table.add_column(col, justify="right")
        for path, (_, trajs) in runs.items():
            m = training_mismatch(new, trajs, args.temperature, args.mismatch_episodes)
            table.add_row(path, str(min(args.mismatch_episodes, len(trajs))), str(m.tokens), f"{m.pearson:.5f}",
                          f"{m.mean_abs_diff:.2e}", f"{m.max_abs_diff:.2e}")
        console.print(table)


if __name__ == "__main__":
    main()
