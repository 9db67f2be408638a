"""The `coevo serve` command as a user runs it: a subprocess on 127.0.0.1, a bearer key that is checked
and never written to its output, and a clear error for a folder that holds no checkpoint."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import pytest
from serve_helpers import client, post, tiny_model
from typer.testing import CliRunner

from coevo.cli import app

KEY = "sk-test-7f3a9c0e5d1b"


def wait_for_url(process: subprocess.Popen, lines: list[str], timeout_s: float = 60) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        lines.append(line)
        found = re.search(r"Uvicorn running on (http://127\.0\.0\.1:\d+)", line)
        if found:
            return found.group(1)
        if not line and process.poll() is not None:
            break
    raise AssertionError("coevo serve did not start:\n" + "".join(lines))


def test_serve_checks_the_bearer_key_and_never_logs_it():
    import openai

    model = tiny_model()
    command = [sys.executable, "-m", "coevo.cli", "serve", str(model), "--port", "0", "--name", "tiny"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "COEVO_API_KEY": KEY})
    lines: list[str] = []
    try:
        url = wait_for_url(process, lines)
        assert url.startswith("http://127.0.0.1:"), "the default bind must stay on this machine"

        class Server:
            pass

        Server.url = url
        with pytest.raises(openai.AuthenticationError) as caught:
            client(Server, api_key="wrong-key").models.list()
        assert caught.value.body["code"] == "invalid_api_key"
        assert post(url + "/v1/completions", b"{}")[0] == 401, "a request without the header got in"
        reply = client(Server, api_key=KEY).chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": "hi"}], max_tokens=3)
        assert reply.choices[0].finish_reason in ("stop", "length")
    finally:
        process.terminate()
        out, err = process.communicate(timeout=30)
    log = "".join(lines) + out + err
    assert "/v1/chat/completions" in log, "the access log was not captured, so the check below would mean nothing"
    assert KEY not in log and "wrong-key" not in log


def test_serve_refuses_a_folder_without_a_checkpoint(tmp_path):
    result = CliRunner().invoke(app, ["serve", str(tmp_path)])
    assert result.exit_code == 2
    assert "no config.json" in result.output and str(tmp_path) in result.output
