"""Sandbox speed, both backends measured side by side in one run: per-command latency against a plain
subprocess.run (local) and a raw `docker exec` of `true` (docker), start+close time, 8 and 16
episodes in parallel, and a cached image build against a cold one.

    .venv/bin/python benchmarks/sandbox.py [--commands 1000] [--starts 50] [--parallel 8 16]
        [--docker-commands 300] [--docker-starts 10] [--image-map debian:bookworm-slim=coevo-base:bookworm]

The docker rows need an engine and the base image (`.ci/setup` starts one and builds it).
"""

from __future__ import annotations

import argparse
import secrets
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


def percentiles(samples: list[float]) -> tuple[float, float, float]:
    ordered = sorted(samples)
    at = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]
    return statistics.median(ordered), at(0.95), at(0.99)


def timed(fn, n: int) -> list[float]:
    out = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
    return out


def latency_rows(backend: str, task, n: int, options: dict) -> tuple[list, list[float]]:
    """Round trips of `true` and `echo hello` through one started sandbox; also a raw exec of `true`
    for docker (the engine's own per-command cost, which the persistent shell avoids)."""
    sandbox = make_sandbox(task, backend=backend, **options)
    sandbox.start()
    sandbox.run("true")  # warm
    shell = timed(lambda: sandbox.run("true"), n)
    echo = timed(lambda: sandbox.run("echo hello"), n)
    if backend == "docker":
        raw = timed(lambda: sandbox.container.exec_run(["true"], user=sandbox.user), n)
        raw_name = "raw docker exec of `true` (SDK exec_run, same container)"
    else:
        raw = timed(lambda: subprocess.run(["/bin/true"], check=True), n)
        raw_name = "plain subprocess.run(['/bin/true']) on the host"
    sandbox.close()
    rows = [(f"{backend}: run('true') round trip", *percentiles(shell)),
            (f"{backend}: run('echo hello') round trip", *percentiles(echo)),
            (f"{backend}: {raw_name}", *percentiles(raw))]
    return rows, [percentiles(shell)[0], percentiles(raw)[0]]


def lifecycle_row(backend: str, task, n: int, options: dict) -> tuple:
    def start_close():
        box = make_sandbox(task, backend=backend, **options)
        box.start()
        box.close()

    return (f"{backend}: start + close", *percentiles(timed(start_close, n)))


def parallel_row(backend: str, task, workers: int, commands: int, options: dict) -> str:
    """`workers` whole episodes at once: start, `commands` commands, close."""
    def episode(_):
        box = make_sandbox(task, backend=backend, **options)
        box.start()
        for _ in range(commands):
            box.run("echo hello")
        box.close()

    started = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(episode, range(workers)))
    wall = time.perf_counter() - started
    return (f"| {backend} | {workers} | {wall:.2f} | {workers / wall:.2f} | "
            f"{workers * commands / wall:,.0f} |")


def build_rows(image_map: dict[str, str]) -> list[tuple[str, float]]:
    """A cold build of a fresh context (one RUN line) against the same task again (cache hit)."""
    from coevo.sandbox.docker_io import docker_client
    from coevo.sandbox.images import ensure_image

    dockerfile = "FROM debian:bookworm-slim\nRUN echo built > /built\nWORKDIR /app\nCOPY app/ /app/\n"
    folder = write_task(Path(tempfile.mkdtemp()), "bench-build", dockerfile=dockerfile,
                        files={"environment/app/nonce.txt": secrets.token_hex(8)})
    times = []
    for _ in range(2):
        start = time.perf_counter()
        image = ensure_image(docker_client(), load_task(folder), image_map)
        times.append((time.perf_counter() - start, image.built))
    docker_client().images.remove(image.tag, force=True)
    assert times[0][1] and not times[1][1], times
    return [("cold build (debian base, one RUN, COPY)", times[0][0]), ("cached build (same context)", times[1][0])]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commands", type=int, default=1000)
    parser.add_argument("--starts", type=int, default=50)
    parser.add_argument("--parallel", type=int, nargs="+", default=[8, 16])
    parser.add_argument("--docker-commands", type=int, default=300)
    parser.add_argument("--docker-starts", type=int, default=10)
    parser.add_argument("--image-map", default="debian:bookworm-slim=coevo-base:bookworm")
    args = parser.parse_args()
    from coevo.sandbox.images import parse_image_map

    task = load_task(write_task(Path(tempfile.mkdtemp()), "bench"))
    docker = {"image_map": parse_image_map(args.image_map)}
    local_rows, (local_shell, plain) = latency_rows("local", task, args.commands, {})
    docker_rows, (docker_shell, raw_exec) = latency_rows("docker", task, args.docker_commands, docker)
    rows = [*local_rows, *docker_rows, lifecycle_row("local", task, args.starts, {}),
            lifecycle_row("docker", task, args.docker_starts, docker)]
    print(f"| measurement (local n={args.commands}, docker n={args.docker_commands}; starts "
          f"{args.starts}/{args.docker_starts}) | p50 ms | p95 ms | p99 ms |")
    print("|---|---:|---:|---:|")
    for name, p50, p95, p99 in rows:
        print(f"| {name} | {p50:.3f} | {p95:.3f} | {p99:.3f} |")
    print(f"\nlocal: sandbox command p50 / plain subprocess.run p50 = {local_shell / plain:.2f}")
    print(f"docker: persistent-shell command p50 / raw docker exec p50 = {docker_shell / raw_exec:.3f} "
          "(target: at most 1.2)")
    print(f"docker / local command p50 = {docker_shell / local_shell:.1f}x")

    print("\n| backend | parallel episodes | wall s | episodes/s | commands/s |\n|---|---:|---:|---:|---:|")
    for workers in args.parallel:
        for backend, options in (("local", {}), ("docker", docker)):
            print(parallel_row(backend, task, workers, 50, options))

    print("\n| docker image | seconds |\n|---|---:|")
    for name, seconds in build_rows(docker["image_map"]):
        print(f"| {name} | {seconds:.3f} |")


if __name__ == "__main__":
    main()
