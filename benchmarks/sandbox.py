"""Sandbox speed, measured side by side in one run: per-command latency against a plain
subprocess.run, start+close time, and throughput with 8 sandboxes in parallel.

    .venv/bin/python benchmarks/sandbox.py [--commands 1000] [--starts 50] [--parallel 8]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from coevo.sandbox import make_sandbox
from coevo.tasks import load_task

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from conftest import write_task


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def timed(fn, n: int) -> list[float]:
    out = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commands", type=int, default=1000)
    parser.add_argument("--starts", type=int, default=50)
    parser.add_argument("--parallel", type=int, default=8)
    args = parser.parse_args()
    task = load_task(write_task(Path(tempfile.mkdtemp()), "bench"))

    sandbox = make_sandbox(task)
    sandbox.start()
    sandbox.run("true")  # warm
    in_sandbox = timed(lambda: sandbox.run("true"), args.commands)
    echo = timed(lambda: sandbox.run("echo hello"), args.commands)
    sandbox.close()
    plain = timed(lambda: subprocess.run(["/bin/true"], check=True), args.commands)

    def start_close():
        box = make_sandbox(task)
        box.start()
        box.close()

    lifecycle = timed(start_close, args.starts)

    def worker(_):
        box = make_sandbox(task)
        box.start()
        for _ in range(args.commands // 4):
            box.run("echo hello")
        box.close()
        return args.commands // 4

    started = time.perf_counter()
    with ThreadPoolExecutor(args.parallel) as pool:
        total = sum(pool.map(worker, range(args.parallel)))
    throughput = total / (time.perf_counter() - started)

    rows = [
        ("sandbox run('true') round trip", *percentiles(in_sandbox)),
        ("sandbox run('echo hello') round trip", *percentiles(echo)),
        ("plain subprocess.run(['/bin/true'])", *percentiles(plain)),
        ("sandbox start + close", *percentiles(lifecycle)),
    ]
    print(f"| measurement (n={args.commands} commands, {args.starts} starts) | p50 ms | p99 ms |")
    print("|---|---:|---:|")
    for name, p50, p99 in rows:
        print(f"| {name} | {p50:.3f} | {p99:.3f} |")
    ratio = percentiles(in_sandbox)[0] / percentiles(plain)[0]
    print(f"\nsandbox command p50 / plain subprocess.run p50 = {ratio:.2f} (below 1: the persistent shell wins)")
    print(f"{args.parallel} sandboxes in parallel: {throughput:,.0f} commands/s "
          f"({total} commands, 'echo hello')")


if __name__ == "__main__":
    main()
