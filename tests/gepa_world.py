"""The scripted world of the GEPA tests and benchmarks/gepa_search.py, behind real HTTP endpoints on 127.0.0.1.

- Tasks: "Put the number N into the answer file." Each verifier writes reward.json with two checks whose
  names say what it wants: "write the answer to /app/answer.txt" and "end the answer with a newline".
- The policy (an OpenAI-compatible endpoint, scripted): writes N to /app/answer.txt only when its system
  prompt holds the first check's words, and ends it with a newline only when it holds the second's; else
  it writes to /app/result.txt without one. Under the stock templates it scores 0.
- The reflection LM (another endpoint, scripted): reads GEPA's reflection prompt, takes the first check
  the feedback reports FAILED whose words the current template lacks, and proposes the template with the
  sentence "Always <check>." added. It learns only what the per-check feedback tells it.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Self

import yaml

ROOT = Path(__file__).resolve().parent.parent
CHECKS = ("write the answer to /app/answer.txt", "end the answer with a newline")
SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
TEST_SH = """#!/bin/bash
a=0; b=0
if [ "$(cat /app/answer.txt 2>/dev/null)" = "{n}" ]; then a=1; fi
if [ -s /app/answer.txt ] && [ "$(tail -c1 /app/answer.txt | wc -l)" = "1" ]; then b=1; fi
printf '{{"{c0}": %s, "{c1}": %s}}' $a $b > /logs/verifier/reward.json
"""
TASK_TOML = """version = "1.0"
[metadata]
category = "answer"
[verifier]
timeout_sec = 20.0
[agent]
timeout_sec = 60.0
"""


class ChatEndpoint:
    """An OpenAI-compatible /v1/chat/completions server whose replies come from `reply(messages)`. It
    records each request's Authorization header and body. `reply` may raise `Status(code)` to answer
    an HTTP error, or sleep to time out its caller."""

    def __init__(self, reply: Callable[[list[dict]], str]):
        self.reply, self.seen = reply, []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                endpoint.seen.append({"auth": self.headers.get("Authorization"), "body": body})
                try:
                    text, code = endpoint.reply(body["messages"]), 200
                except Status as s:
                    text, code = None, s.code
                data = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                                   "choices": [{"index": 0, "finish_reason": "stop",
                                                "message": {"role": "assistant", "content": text}}],
                                   "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
                                  if code == 200 else {"error": {"message": "scripted failure"}}).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except OSError:  # the caller timed out and hung up
                    pass

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Status(Exception):
    def __init__(self, code: int):
        super().__init__(code)
        self.code = code


def phrase_policy(messages: list[dict]) -> str:
    system = messages[0]["content"].lower()
    n = re.search(r"number (\d+)", messages[1]["content"]).group(1)
    target = "/app/answer.txt" if CHECKS[0] in system else "/app/result.txt"
    write = f"echo {n} > {target}" if CHECKS[1] in system else f"printf {n} > {target}"
    return f"```bash\n{write}\n{SUBMIT}\n```"


def current_template(prompt: str) -> str:
    return prompt.split("The current template:\n```\n", 1)[1].split("\n```\n\nBelow are tasks", 1)[0]


def scripted_reflection(messages: list[dict]) -> str:
    prompt = messages[-1]["content"]
    template = current_template(prompt)
    failed = re.findall(r"^- (.+): FAILED", prompt, re.MULTILINE)
    missing = [c for c in dict.fromkeys(failed) if c.lower() not in template.lower()]
    if missing:
        template = f"{template}\nAlways {missing[0]}."
    return f"Here is the improved template.\n<template>\n{template}\n</template>"


class FlakyReflection:
    """The scripted reflection LM, but its first replies fail one way each: an HTTP 500, a reply slower
    than the caller's timeout, a reply without a template, a template naming an undefined variable."""

    def __init__(self, slow_s: float):
        self.calls, self.slow_s = 0, slow_s

    def __call__(self, messages: list[dict]) -> str:
        self.calls += 1
        if self.calls == 1:
            raise Status(500)
        if self.calls == 2:
            time.sleep(self.slow_s)
            return scripted_reflection(messages)
        if self.calls == 3:
            return "I would rather not say."
        if self.calls == 4:
            return "<template>\nSolve it. {{ no_such_variable }}\n</template>"
        return scripted_reflection(messages)


def write_tasks(root: Path, counts: dict[str, int]) -> Path:
    """A task folder with a manifest: counts per split, every instruction unique."""
    rows, n = [], 100
    for split, count in counts.items():
        for _ in range(count):
            n += 7
            name = f"answer-{n}"
            task = root / name
            files = {"instruction.md": f"Put the number {n} into the answer file.\n", "task.toml": TASK_TOML,
                     "environment/Dockerfile": "FROM debian:bookworm-slim\nWORKDIR /app\n",
                     "tests/test.sh": TEST_SH.format(n=n, c0=CHECKS[0], c1=CHECKS[1]),
                     "solution/solve.sh": f"echo {n} > /app/answer.txt\n"}
            for rel, text in files.items():
                (task / rel).parent.mkdir(parents=True, exist_ok=True)
                (task / rel).write_text(text)
            rows.append({"name": name, "family": "answer", "split": split})
    (root / "manifest.json").write_text(json.dumps({"tasks": rows}))
    return root


def write_config(folder: Path, tasks: Path, policy_url: str, reflection_url: str, *, budget: int = 40,
                 evolve: dict | None = None, space: dict | None = None, **fields) -> Path:
    """A search config over `tasks` with the policy endpoint, and a space whose only key evolves the
    system template with the reflection endpoint (plus `space`)."""
    entry = {"evolve": "gepa", "budget": budget, "reflection_lm": "openai/scripted-reflection",
             "api_base": reflection_url, "minibatch": 3, "keep": 2, "timeout_s": 10, **(evolve or {})}
    (folder / "space.yaml").write_text(yaml.safe_dump({"templates.system": entry, **(space or {})}))
    config = {"tasks": str(tasks), "harness": str(ROOT / "harnesses" / "mini_bash.yaml"),
              "space": str(folder / "space.yaml"), "runs_dir": str(folder / "runs"), "schedule": "h",
              "policy": {"backend": "openai", "model": "phrase-policy", "base_url": policy_url, "api_key_env": None},
              "objective": "mean_reward", "arms": False, "heartbeat_interval": 1, "grace_period": 3,
              "plan": {"trials": 2, "dev_tasks": 6, "batches": 1}, **fields}
    path = folder / f"{fields.get('name', 'gepa')}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path
