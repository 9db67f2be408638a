"""What serving costs and what dynamic batching buys: `coevo serve` against calling `generate` directly.

    .venv/bin/python benchmarks/serve.py                    # the tiny model, built here
    .venv/bin/python benchmarks/serve.py --model DIR --sessions 16 --turns 4

Rows:
- per-call overhead: one greedy request of --tokens tokens, served (chat, and completions with token ids)
  against `HFPolicy.generate` on the same prompt, median of --repeats;
- throughput: --sessions agent sessions of --turns turns each (the chat grows by the reply and an
  observation per turn, every call through `/sessions/{id}/v1`), run one at a time and then all at once;
  the target is at least 3x from dynamic batching;
- time to first token: streamed chat, alone and while the sessions run.

Every reply runs to --tokens (an untrained model seldom stops), so that the rows compare equal work.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

from coevo import GenerationRequest, SamplingParams
from coevo.policy.hf import HFPolicy
from coevo.serve.app import create_app
from coevo.serve.server import ServerThread

ROOT = Path(__file__).resolve().parents[1]
MODEL = "bench"
SYSTEM = {"role": "system", "content": "You are a shell agent. Reply with one command."}


def client(url: str):
    from openai import OpenAI

    return OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=600)


def paired_s(runs: dict, repeats: int) -> dict[str, list[float]]:
    """Seconds per call of each run, interleaved call by call, so that a busy CPU slows them alike."""
    for run in runs.values():
        run()  # warm-up
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            started = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - started)
    return times


def overhead_rows(policy: HFPolicy, url: str, tokens: int, repeats: int) -> list[tuple[str, str, str]]:
    api = client(url + "/v1")
    messages = [SYSTEM, {"role": "user", "content": "list the files in /app"}]
    prompt = policy.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                                  return_dict=True)["input_ids"]
    greedy = SamplingParams(temperature=0, max_tokens=tokens)
    # From a worker thread, as the server's engine calls it: on an oversubscribed CPU, torch's OpenMP pool
    # behind the main thread measured 10-30x slower here, which would flatter the server.
    with ThreadPoolExecutor(max_workers=1) as worker:
        times = paired_s({
            "direct": lambda: worker.submit(policy.generate, [GenerationRequest(prompt)], greedy).result(),
            "chat": lambda: api.chat.completions.create(model=MODEL, messages=messages, temperature=0,
                                                        max_tokens=tokens),
            "ids": lambda: api.completions.create(model=MODEL, prompt=prompt, temperature=0, max_tokens=tokens,
                                                  extra_body={"return_token_ids": True}),
        }, repeats)
    ms = {name: statistics.median(t) * 1000 for name, t in times.items()}
    extra = {name: statistics.median(a - b for a, b in zip(times[name], times["direct"])) * 1000
             for name in ("chat", "ids")}
    return [(f"direct `generate`, 1 prompt, {tokens} tokens", f"{ms['direct']:.1f} ms", "—"),
            ("served chat completion, same prompt", f"{ms['chat']:.1f} ms", f"{extra['chat']:+.1f} ms (paired median)"),
            ("served completion, token ids in and out", f"{ms['ids']:.1f} ms", f"{extra['ids']:+.1f} ms (paired median)")]


def session(url: str, name: str, turns: int, tokens: int) -> int:
    """One agent episode through its session URL; returns the tokens it sampled."""
    api = client(f"{url}/sessions/{name}/v1")
    messages, sampled = [SYSTEM, {"role": "user", "content": f"task {name}: count the lines of /app/data.txt"}], 0
    for turn in range(turns):
        reply = api.chat.completions.create(model=MODEL, messages=messages, temperature=1.0, max_tokens=tokens)
        sampled += reply.usage.completion_tokens
        messages += [{"role": "assistant", "content": reply.choices[0].message.content},
                     {"role": "user", "content": f"observation {turn}: 12 lines"}]
    return sampled


def run_sessions(url: str, names: list[str], turns: int, tokens: int, concurrent: bool) -> tuple[float, int]:
    counts: dict[str, int] = {}
    started = time.perf_counter()
    if concurrent:
        threads = [threading.Thread(target=lambda n=n: counts.__setitem__(n, session(url, n, turns, tokens)))
                   for n in names]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    else:
        for n in names:
            counts[n] = session(url, n, turns, tokens)
    return time.perf_counter() - started, sum(counts.values())


def first_token_s(url: str, tokens: int) -> tuple[float, float]:
    """Seconds to the first streamed content, and to the end."""
    api = client(url + "/v1")
    started = time.perf_counter()
    first = None
    stream = api.chat.completions.create(model=MODEL, messages=[SYSTEM, {"role": "user", "content": "ls"}],
                                         temperature=0, max_tokens=tokens, stream=True)
    for chunk in stream:
        if first is None and chunk.choices and chunk.choices[0].delta.content:
            first = time.perf_counter() - started
    return first, time.perf_counter() - started


def ttft_under_load(clients, url: str, n: int, turns: int, tokens: int) -> tuple[float, float]:
    background = clients.submit(run_sessions, url, [f"load{i}" for i in range(n)], turns, tokens, True)
    time.sleep(0.5)  # let the sessions fill the batch
    measured = first_token_s(url, tokens)
    background.result()
    return measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, help="a checkpoint folder (default: build the tiny model)")
    parser.add_argument("--sessions", type=int, default=16)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: its default)")
    parser.add_argument("--window-ms", type=float, default=5.0, help="the server's batch window")
    args = parser.parse_args()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)

    with tempfile.TemporaryDirectory() as scratch:
        if args.model is None:
            from coevo.train.model import build_tiny_model

            args.model = build_tiny_model(Path(scratch) / "model", ROOT / "tasks", seed=0)
        policy = HFPolicy(args.model, device="cpu")
        # No stop token: every reply is exactly --tokens long, whatever the model.
        policy.stop_ids = [-1]
        app = create_app(policy, policy.tokenizer, MODEL, context_length=policy.model.config.max_position_embeddings,
                         window_s=args.window_ms / 1000)
        with ServerThread(app) as server:
            rows = overhead_rows(policy, server.url, args.tokens, args.repeats)
            names = [f"s{i}" for i in range(args.sessions)]
            engine = app.state.served.engine
            # The sessions' clients run in another process, as agents would: in this one they would take
            # the interpreter lock from the server's event loop and engine.
            with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as clients:
                clients.submit(time.sleep, 0).result()  # started before anything is timed
                seq_s, seq_tokens = clients.submit(run_sessions, server.url, names, args.turns, args.tokens,
                                                   False).result()
                calls_before = len(engine.calls)
                par_s, par_tokens = clients.submit(run_sessions, server.url, [n + "c" for n in names], args.turns,
                                                   args.tokens, True).result()
                batch = statistics.mean(engine.calls[calls_before:])
                alone = first_token_s(server.url, args.tokens)
                loaded = ttft_under_load(clients, server.url, args.sessions, args.turns, args.tokens)
    seq_rate, par_rate = seq_tokens / seq_s, par_tokens / par_s
    rows += [(f"{args.sessions} sessions x {args.turns} turns, one at a time", f"{seq_s:.2f} s",
              f"{seq_rate:.0f} tokens/s"),
             (f"{args.sessions} sessions x {args.turns} turns, concurrent (mean batch {batch:.1f} rows)",
              f"{par_s:.2f} s", f"{par_rate:.0f} tokens/s, **{par_rate / seq_rate:.1f}x** (target ≥ 3x)"),
             ("time to first token, streamed, alone", f"{alone[0] * 1000:.0f} ms", f"whole reply {alone[1] * 1000:.0f} ms"),
             (f"time to first token, streamed, beside {args.sessions} sessions", f"{loaded[0] * 1000:.0f} ms",
              f"whole reply {loaded[1] * 1000:.0f} ms")]
    load = os.getloadavg()[0]
    import torch

    print(f"\ncoevo serve on {args.model} ({os.cpu_count()} CPUs, torch threads {torch.get_num_threads()}, load "
          f"average {load:.1f} at the end; {args.tokens} tokens per reply; batch window {args.window_ms:g} ms)\n")
    print("| measure | time | vs direct / rate |\n|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
