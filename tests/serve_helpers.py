"""What the `coevo serve` tests share: the tiny model built here, and a real uvicorn server on 127.0.0.1."""

from __future__ import annotations

import atexit
import functools
import json
import shutil
import tempfile
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MODEL = "tiny"


@functools.cache
def tiny_model() -> Path:
    """The tiny model, built once per test process for every serve test module (none of them changes it)."""
    from coevo.train.model import build_tiny_model

    folder = Path(tempfile.mkdtemp(prefix="coevo-serve-tests-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return build_tiny_model(folder / "model", REPO / "tasks", seed=0)


@contextmanager
def serving(policy, tokenizer, **options):
    """A server over `policy` at a free port; yields (server, app)."""
    from coevo.serve.app import create_app
    from coevo.serve.server import ServerThread

    options.setdefault("context_length", 4096)
    app = create_app(policy, tokenizer, MODEL, **options)
    with ServerThread(app) as server:
        yield server, app


def client(server, prefix: str = "/v1", api_key: str = "unused"):
    from openai import OpenAI

    return OpenAI(base_url=server.url + prefix, api_key=api_key, max_retries=0, timeout=60)


def chat_ids(tokenizer, messages: list[dict]) -> list[int]:
    """The prompt ids a client would expect: the checkpoint's chat template, tokenized once."""
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return tokenizer.encode(text, add_special_tokens=False)


def post(url: str, data: bytes, headers: dict | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


@contextmanager
def torch_threads(n: int):
    """On a busy 2-core machine torch's second OpenMP thread made generate 5-10x slower (it spins
    waiting for a core); the model tests that decode long prompts run on one."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
