"""How a vLLM server serves a LoRA adapter, side by side on one server: the base model, the adapter
hot-loaded (`adapters: lora`, at the server's --max-lora-rank) and the adapter merged into full weights and
reloaded in place (`adapters: merge`). One table: seconds for a long prompt (prefill-bound, as the first
turn under a demonstrations harness is) at 1 and 4 concurrent requests, and each path's ratio to the base.

    .venv/bin/python benchmarks/vllm_adapters.py --adapter RUN/adapters/n1-t0/adapter [--max-lora-rank 16]
                                                 [--prompt-tokens 1400] [--batches 1 4]

`coevo vllm install` first. On vLLM's CPU build the hot-loaded adapter is the slow path: its LoRA ops copy
each token's adapter weights at the maximum rank (RESULTS.md, "Rollouts on vLLM").
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rich.console import Console
from rich.table import Table

from coevo.train.lora import adapter_base
from coevo.vllm.install import vllm_python
from coevo.vllm.policy import merged_copy
from coevo.vllm.server import ServerOptions, start_server


def timed(server, model: str, prompts: list[list[int]], new_tokens: int) -> float:
    from openai import OpenAI

    client = OpenAI(api_key="EMPTY", base_url=server.base_url, max_retries=0, timeout=3600)
    server.reset_prefix_cache()
    began = time.monotonic()
    with ThreadPoolExecutor(len(prompts)) as pool:
        list(pool.map(lambda p: client.completions.create(model=model, prompt=p, max_tokens=new_tokens,
                                                          temperature=0.0), prompts))
    return time.monotonic() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--adapter", type=Path, required=True, help="A peft LoRA adapter folder.")
    parser.add_argument("--max-lora-rank", type=int, default=16)
    parser.add_argument("--prompt-tokens", type=int, default=1400)
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 4])
    args = parser.parse_args()
    base = adapter_base(args.adapter)
    scratch = Path(tempfile.mkdtemp(prefix="coevo-vllm-adapters-"))
    merged = merged_copy(args.adapter, scratch)
    server = start_server(base, vllm_python(None), ServerOptions(max_lora_rank=args.max_lora_rank), scratch)
    rng = random.Random(0)
    try:
        server.load_adapter("adapter", args.adapter)
        rows = []
        for batch in args.batches:
            prompts = [[rng.randrange(100, 30000) for _ in range(args.prompt_tokens)] for _ in range(batch)]
            server.use_weights(base)
            seconds = {"base": timed(server, server.model, prompts, args.new_tokens),
                       "hot-loaded": timed(server, "adapter", prompts, args.new_tokens)}
            pid_before = server.process.pid
            server.use_weights(merged)  # in place: the merge leaves the tied output layer as it was
            seconds["merged"] = timed(server, server.model, prompts, args.new_tokens)
            in_place = "yes" if server.process.pid == pid_before else "no (restarted)"
            rows.append((batch, seconds, in_place))
    finally:
        server.stop()
    table = Table("prompt", "base s", "hot-loaded s", "merged s", "hot-loaded / base", "merged / base",
                  "merged reloaded in place", title=f"{base.name}, adapter {args.adapter}, --max-lora-rank "
                  f"{args.max_lora_rank}, {args.new_tokens} new tokens greedy, prefix cache reset")
    for batch, s, in_place in rows:
        table.add_row(f"{args.prompt_tokens} tokens x {batch}", f"{s['base']:.1f}", f"{s['hot-loaded']:.1f}",
                      f"{s['merged']:.1f}", f"{s['hot-loaded'] / s['base']:.1f}x", f"{s['merged'] / s['base']:.1f}x",
                      in_place)
    Console(width=160).print(table)


if __name__ == "__main__":
    main()
