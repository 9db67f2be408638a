"""One vLLM OpenAI server on 127.0.0.1, started for the run, or one already running (`base_url`).

Started servers are shared within the process, one per (python, architecture, options): a search's
scoring, its GRPO phases and its nested trials all use one server. A checkpoint of the same architecture
is swapped in by reloading the weights in place (`/collective_rpc reload_weights`, seconds, against a
minute or more to start a server), and LoRA adapters (each GRPO step's, each nested trial's) are hot-loaded
by name over it. Another architecture replaces the server (one at a time: on CPU each holds its own
KV-cache space). All are stopped when the process exits.

What the server is started with, and why:
- `--logprobs-mode processed_logprobs`: the returned logprobs are of the distribution the tokens were drawn
  from, temperature applied, as the trainer's forward computes them (vLLM's default is the raw model's);
- `--enable-lora`, VLLM_ALLOW_RUNTIME_LORA_UPDATING: adapters load at run time (`/v1/load_lora_adapter`);
- VLLM_SERVER_DEV_MODE: `/reset_prefix_cache`, called on every weight update, so that no cached prefix
  computed with older weights is reused, and `/collective_rpc`, which reloads weights;
- `--no-enable-chunked-prefill`: a prefill cut in chunks discards its sampled token, and on CPU that
  crashes the engine for a request with its own seed ("CPU Generator does not use offset", vLLM 0.32: the
  whole server dies); coevo seeds every request, so prompts are prefilled whole;
- `--seed`, `--max-model-len`, `--dtype` from the policy spec; its log goes to a file, which an error quotes.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from coevo.errors import CoevoError

logger = logging.getLogger(__name__)


class VLLMError(CoevoError):
    """The vLLM server did not start, died, or refused a request: the message says which and quotes its log."""


MAX_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
"""The values vLLM 0.32 takes for --max-lora-rank."""


def lora_rank_for(rank: int) -> int:
    """The smallest --max-lora-rank that holds adapters of `rank`. On CPU vLLM's LoRA ops copy every token's
    adapter weights at the maximum rank (vllm/lora/ops/torch_ops), so a larger one costs time in proportion."""
    return next((r for r in MAX_LORA_RANKS if r >= rank), MAX_LORA_RANKS[-1])


@dataclass(frozen=True)
class ServerOptions:
    dtype: str = "float32"
    max_model_len: int = 4096
    max_lora_rank: int = 64
    max_loras: int = 2
    seed: int = 0
    kv_cache_gb: int = 2
    """VLLM_CPU_KVCACHE_SPACE on CPU (GiB); a GPU server uses --gpu-memory-utilization instead."""
    extra_args: tuple[str, ...] = ()
    """Further `vllm serve` flags, passed as given (e.g. --gpu-memory-utilization 0.5)."""


@dataclass
class VLLMServer:
    base_url: str
    model: str
    """The served base model's name in the API (its folder)."""
    process: subprocess.Popen | None = None
    log_path: Path | None = None
    weights: str = ""
    """The checkpoint folder whose weights the server holds now."""
    adapters: dict[str, str] = field(default_factory=dict)
    """Loaded adapter name -> folder."""
    lock: threading.RLock = field(default_factory=threading.RLock)
    launch: tuple | None = None
    """(python, options, log_dir, start_timeout_s) of a server we started: what a restart needs."""
    restarts: int = 0
    """How many times it was started again after it died (`revive`)."""

    # -- requests ------------------------------------------------------------------------------------
    def post(self, path: str, body: dict | None = None, timeout_s: float = 300.0) -> str:
        root = self.base_url.removesuffix("/v1")
        request = urllib.request.Request(root + path, data=json.dumps(body or {}).encode(), method="POST",
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as response:
                return response.read().decode()
        except urllib.error.HTTPError as e:
            raise VLLMError(f"vLLM at {self.base_url}: POST {path} answered {e.code}: "
                            f"{e.read().decode(errors='replace')[:500]}{self.log_tail()}") from None
        except (urllib.error.URLError, OSError) as e:
            raise VLLMError(f"vLLM at {self.base_url}: POST {path} failed: {e}{self.log_tail()}") from None

    def load_adapter(self, name: str, folder: Path) -> None:
        """Hot-load a peft adapter folder under `name` (a new name per update: vLLM caches by name), drop the
        older ones, and reset the prefix cache."""
        self.post("/v1/load_lora_adapter", {"lora_name": name, "lora_path": str(Path(folder).resolve())})
        for old in [n for n in self.adapters if n != name]:
            self.post("/v1/unload_lora_adapter", {"lora_name": old})
            del self.adapters[old]
        self.adapters[name] = str(folder)
        self.reset_prefix_cache()

    def use_weights(self, folder: Path) -> None:
        """Hold `folder`'s weights (same architecture), unless they are there already: reloaded in place, or,
        for a model whose output layer is tied to its embeddings and changed, by a restart (vLLM 0.32's
        in-place reload leaves the tied output layer at its old weights: "ParallelLMHead: Failed to load
        weights"). A merged LoRA adapter leaves the embeddings as they were, so it reloads in place."""
        folder = str(Path(folder).resolve())
        with self.lock:
            if folder == self.weights:
                return
            if self.process is None:
                raise VLLMError(f"vLLM at {self.base_url} serves {self.weights or 'a model of its own'}; coevo swaps "
                                f"weights only in a server it started, and {folder} was asked for")
            if _tied(Path(folder)) and not _same_output_layer(Path(self.weights), Path(folder)):
                self.stop()
                self.base_url, self.process, self.log_path = _spawn(Path(folder), *self.launch)
                self.adapters.clear()
            else:
                self.post("/collective_rpc", {"method": "reload_weights", "kwargs": {"weights_path": folder}})
                self.reset_prefix_cache()
            self.weights = folder

    def revive(self, limit: int) -> None:
        """Start a server of ours that died (the OOM killer, an engine crash) again, on the weights it held;
        adapters are loaded again as policies ask for them. The requests in flight when it died have failed
        (their episodes are recorded as policy errors); later ones go on. After `limit` restarts it stays
        dead, and every request fails with its log's tail."""
        with self.lock:
            if self.alive():
                return
            died = f"vLLM at {self.base_url} exited with {self.process.returncode}"
            if self.restarts >= limit:
                raise VLLMError(f"{died}; it was restarted {self.restarts} times already (policy max_restarts "
                                f"{limit}){self.log_tail(5)}")
            self.restarts += 1
            logger.warning("%s; restarting it (%d of at most %d)%s", died, self.restarts, limit, self.log_tail(5))
            self.base_url, self.process, self.log_path = _spawn(Path(self.weights), *self.launch)
            self.adapters.clear()

    def reset_prefix_cache(self) -> None:
        if self.process is not None:  # a server we started has dev mode on; one given by URL may not
            self.post("/reset_prefix_cache")

    def alive(self) -> bool:
        return self.process is None or self.process.poll() is None

    def log_tail(self, lines: int = 15) -> str:
        if self.log_path is None or not self.log_path.is_file():
            return ""
        tail = self.log_path.read_text(errors="replace").strip().splitlines()[-lines:]
        return f"\n  its log ({self.log_path}), last lines:\n    " + "\n    ".join(tail)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


_SERVERS: dict[tuple, VLLMServer] = {}
_LOCK = threading.Lock()


def shared_server(model: Path, python: Path, options: ServerOptions, log_dir: Path | None = None,
                  start_timeout_s: float = 900.0) -> VLLMServer:
    """The process's server for `model`'s architecture with these options, started if none is (another's
    is stopped first); the caller swaps its weights in with `use_weights`."""
    key = (str(python), _architecture(model), options)
    with _LOCK:
        server = _SERVERS.get(key)
        if server is not None and server.alive():
            return server
        for other in list(_SERVERS):
            _SERVERS.pop(other).stop()
        server = start_server(Path(model), python, options, log_dir, start_timeout_s)
        _SERVERS[key] = server
        return server


def stop_all() -> None:
    with _LOCK:
        for key in list(_SERVERS):
            _SERVERS.pop(key).stop()


atexit.register(stop_all)


def start_server(model: Path, python: Path, options: ServerOptions, log_dir: Path | None = None,
                 start_timeout_s: float = 900.0) -> VLLMServer:
    """Start `python -m vllm.entrypoints.openai.api_server` on a free port and wait until it answers."""
    launch = (python, options, Path(log_dir) if log_dir else Path(os.environ.get("TMPDIR", "/tmp")), start_timeout_s)
    url, process, log_path = _spawn(model, *launch)
    return VLLMServer(url, "base", process, log_path, weights=str(model.resolve()), launch=launch)


def _spawn(model: Path, python: Path, options: ServerOptions, log_dir: Path,
           start_timeout_s: float) -> tuple[str, subprocess.Popen, Path]:
    port = _free_port()
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"vllm-{port}.log"
    command = [str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
               "--served-model-name", "base", "--host", "127.0.0.1", "--port", str(port),
               "--dtype", options.dtype, "--max-model-len", str(options.max_model_len), "--seed", str(options.seed),
               "--logprobs-mode", "processed_logprobs", "--enable-lora", "--max-lora-rank", str(options.max_lora_rank),
               "--max-loras", str(options.max_loras), "--no-enable-chunked-prefill",
               "--max-num-batched-tokens", str(options.max_model_len), *options.extra_args]
    env = {**os.environ, "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True", "VLLM_SERVER_DEV_MODE": "1",
           "VLLM_CPU_KVCACHE_SPACE": str(options.kv_cache_gb), "VLLM_NO_USAGE_STATS": "1",
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "DO_NOT_TRACK": "1"}
    env.pop("PYTHONPATH", None)  # coevo's own paths must not shadow vLLM's venv
    with open(log_path, "w") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}/v1"
    starting = VLLMServer(url, "base", process, log_path)
    deadline = time.monotonic() + start_timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise VLLMError(f"vLLM server for {model} exited with {process.returncode} while starting"
                            f"{starting.log_tail()}")
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=5):
                return url, process, log_path
        except (urllib.error.URLError, OSError):
            time.sleep(1.0)
    starting.stop()
    raise VLLMError(f"vLLM server for {model} did not answer within {start_timeout_s:.0f}s{starting.log_tail()}")


def _tied(model: Path) -> bool:
    return bool(json.loads((model / "config.json").read_text()).get("tie_word_embeddings", False))


def _output_layer(model: Path) -> dict:
    from safetensors import safe_open

    found = {}
    for weights in sorted(model.glob("*.safetensors")):
        with safe_open(weights, "pt") as f:
            names = [k for k in f.keys() if k.endswith(("embed_tokens.weight", "lm_head.weight"))]  # noqa: SIM118 - not iterable
            found |= {k: f.get_tensor(k) for k in names}
    return found


def _same_output_layer(held: Path, folder: Path) -> bool:
    """Whether a tied model's embeddings (its output layer) are the same in both folders, bit for bit."""
    import torch

    if not held.is_dir():
        return False
    a, b = _output_layer(held), _output_layer(folder)
    return bool(a) and a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _architecture(model: Path) -> str:
    """What must match for weights to be swapped in place: the config, less what names or dates it."""
    config = json.loads((Path(model) / "config.json").read_text())
    for key in ("_name_or_path", "transformers_version", "torch_dtype", "dtype", "output_router_logits",
                "use_cache"):
        config.pop(key, None)
    return json.dumps(config, sort_keys=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
