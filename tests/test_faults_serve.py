"""`coevo serve --sessions-dir`: a server that dies keeps its sessions. Calls recorded by one server are
replayed by the next one started on the same folder: the same segments, ids, mask and logprobs, and a
chat that goes on continues the replayed buffer. A collected session stays collected; a journal line cut
by a kill is skipped. (benchmarks/faults.py SIGKILLs a real `coevo serve` mid-stream.)"""

from __future__ import annotations

import json
import urllib.request

from serve_helpers import MODEL, client, serving, tiny_model

SYSTEM = {"role": "system", "content": "You are a shell agent."}
REPLIES = ["ls /app", "cat /app/input.txt", "echo 42 > /app/answer.txt"]


def session(server, name: str, method: str = "GET") -> list[dict] | None:
    request = urllib.request.Request(f"{server.url}/sessions/{name}", method=method)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())["trajectories"]
    except urllib.error.HTTPError as e:
        assert e.code == 404
        return None


def test_a_restarted_server_replays_its_sessions_and_goes_on(tmp_path):
    from transformers import AutoTokenizer

    from coevo.policy.scripted import ScriptedPolicy

    tokenizer = AutoTokenizer.from_pretrained(tiny_model())
    policy = ScriptedPolicy(REPLIES, tokenizer)
    chat = [SYSTEM, {"role": "user", "content": "Write 42 to /app/answer.txt."}]
    with serving(policy, tokenizer, sessions_dir=tmp_path) as (server, _):
        api = client(server, "/sessions/ep1/v1")
        reply = api.chat.completions.create(model=MODEL, messages=chat).choices[0].message.content
        chat += [{"role": "assistant", "content": reply}, {"role": "user", "content": "<output>a.txt</output>"}]
        reply = api.chat.completions.create(model=MODEL, messages=chat).choices[0].message.content
        client(server, "/sessions/gone/v1").chat.completions.create(model=MODEL, messages=chat[:2])
        assert session(server, "gone", "DELETE")
        before = session(server, "ep1")
    with open(tmp_path / "journal.jsonl", "a") as journal:
        journal.write('{"session": "ep1", "prompt_ids": [1, 2')  # what a kill mid-write leaves
    with serving(policy, tokenizer, sessions_dir=tmp_path) as (server, _):
        assert session(server, "ep1") == before and len(before) == 1 and before[0]["turns"] == 2
        assert session(server, "gone") is None
        chat += [{"role": "assistant", "content": reply}, {"role": "user", "content": "<output></output>"}]
        client(server, "/sessions/ep1/v1").chat.completions.create(model=MODEL, messages=chat)
        after = session(server, "ep1")
    assert len(after) == 1 and after[0]["turns"] == 3  # the replayed buffer was continued, not a new segment
    n = len(before[0]["completion_ids"])
    assert after[0]["completion_ids"][:n] == before[0]["completion_ids"] and after[0]["prompt_ids"] == before[0][
        "prompt_ids"]
