"""Bad inputs: what each one gets told. Every row is a broken file or argument a user could write (harness
YAML, templates, search spaces, search configs, task folders and task.toml, Dockerfiles, bundles, GGUF
files, CLI arguments, `coevo serve` requests), run through the real CLI in a subprocess (serve requests:
over HTTP against a real `coevo serve`). A row is *located* when the message names the file (or the
request) and the field or line; *traceback* when a Python traceback reached the user.

    .venv/bin/python benchmarks/bad_inputs.py [--only SUBSTRING] [--in-process] [--keep]

--in-process runs the CLI through typer's test runner in this process instead (what tests/test_bad_inputs.py
does; a traceback is then an exception that escaped the command).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TASK = "create-file-00"  # small bundled tasks (000, 001, 002): the valid neighbours every broken input starts from


@dataclass
class Case:
    kind: str
    name: str
    make: Callable[[World, Path], list[str]]
    """Writes the bad input under the given folder; returns the `coevo` arguments (or, for serve, the
    request as ['POST', path, body])."""
    where: tuple[str, ...]
    """What the message must name to count as located: '{file}' stands for the bad file's name."""
    file: str = ""
    """The bad file, relative to the case folder ('' when the input is an argument or a request)."""


@dataclass
class Result:
    case: Case
    code: int | None
    message: str
    located: bool
    traceback: bool
    seconds: float = 0.0
    missing: list[str] = field(default_factory=list)


# -- the valid world every case breaks one thing of -----------------------------------------------------
class World:
    def __init__(self, root: Path):
        self.root = root
        self.tasks = self.task_folder(root / "tasks")
        self.model: Path | None = None
        self.server = None

    def task_folder(self, folder: Path, edit: Callable[[Path], None] | None = None) -> Path:
        """Three valid tasks (copies of a bundled one): t0 in dev, t1 in train, t2 in test; then `edit(t0)`."""
        rows = []
        for i, (name, split) in enumerate((("t0", "dev"), ("t1", "train"), ("t2", "test"))):
            shutil.copytree(REPO / "tasks" / f"{TASK}{i}", folder / name)
            rows.append({"name": name, "family": "create-file", "split": split})
        (folder / "manifest.json").write_text(json.dumps({"tasks": rows}))
        if edit is not None:
            edit(folder / "t0")
        return folder

    def harness(self, folder: Path, text: str | None = None, edit: Callable[[str], str] = lambda s: s,
                name: str = "h.yaml", prompts: dict[str, str] | None = None) -> Path:
        """A harness YAML (the shipped mini_bash.yaml, edited) with its own copy of prompts/."""
        shutil.copytree(REPO / "prompts", folder / "prompts", dirs_exist_ok=True)
        for template, body in (prompts or {}).items():
            (folder / "prompts" / template).write_text(body)
        (folder / "harnesses").mkdir(exist_ok=True)
        path = folder / "harnesses" / name
        path.write_text(text if text is not None else edit((REPO / "harnesses" / "mini_bash.yaml").read_text()))
        return path

    def eval_args(self, harness: Path, tasks: Path | None = None, *extra: str) -> list[str]:
        return ["eval", "--model", "oracle", "--harness", str(harness), "--tasks", str(tasks or self.tasks),
                "--split", "dev", "--json", "--out", str(harness.parent / "out.jsonl"), *extra]

    def config(self, folder: Path, fields: dict | None = None, text: str | None = None,
               space: str | None = None, name: str = "c.yaml") -> Path:
        """A search config over the valid task folder and harness, with the synthetic policy and a tiny plan."""
        import yaml

        (folder / "space.yaml").write_text(space if space is not None else
                                           "limits.max_turns: {type: int, low: 2, high: 3}\n")
        config = {"name": "bad", "tasks": str(self.tasks), "harness": str(REPO / "harnesses" / "mini_bash.yaml"),
                  "space": str(folder / "space.yaml"), "runs_dir": str(folder / "runs"), "schedule": "h",
                  "policy": {"backend": "synthetic"}, "model": str(folder), "arms": False,
                  "plan": {"trials": 1, "dev_tasks": 1, "batches": 1, "test_tasks": 1},
                  "splits": {"promotion": 1, "test": 1}, **(fields or {})}
        path = folder / name
        path.write_text(text if text is not None else yaml.safe_dump(config))
        return path

    def bundle(self, folder: Path, edit: Callable[[Path], None]) -> Path:
        """A bundle as `coevo export` writes one (harness.yaml, prompts/, model/, report.json), then `edit`."""
        from coevo.bundle import write_bundle
        from coevo.harness import load_harness

        model = self.tiny_model()
        out = write_bundle(folder / "bundle", load_harness(REPO / "harnesses" / "mini_bash.yaml"), model,
                           {"test": {}, "lineage": {}}, "a test bundle\n")
        edit(out)
        return out

    def tiny_model(self) -> Path:
        if self.model is None:
            from coevo.train.model import build_tiny_model

            self.model = build_tiny_model(self.root / "tiny", REPO / "tasks", seed=0)
        return self.model

    def server_url(self) -> str:
        """`coevo serve` over the tiny model in a subprocess, started on first use (the serve rows)."""
        if self.server is None:
            import socket
            import urllib.request

            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            log = open(self.root / "serve.log", "w")  # noqa: SIM115 - lives as long as the server
            self.server = subprocess.Popen([sys.executable, "-m", "coevo.cli", "serve", str(self.tiny_model()),
                                            "--port", str(port), "--name", "tiny", "--threads", "1"], cwd=REPO,
                                           stdout=log, stderr=subprocess.STDOUT)
            self.server_address = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline:
                try:
                    urllib.request.urlopen(self.server_address + "/v1/models", timeout=2).read()
                    break
                except OSError:
                    if self.server.poll() is not None:
                        raise RuntimeError((self.root / "serve.log").read_text()[-2000:]) from None
                    time.sleep(0.5)
        return self.server_address


# -- the cases ----------------------------------------------------------------------------------------
def _harness_case(name: str, edit: Callable[[str], str] | None = None, text: str | None = None,
                  where: tuple[str, ...] = ("{file}",), prompts: dict[str, str] | None = None,
                  file: str = "harnesses/h.yaml") -> Case:
    def make(world: World, folder: Path) -> list[str]:
        return world.eval_args(world.harness(folder, text=text, edit=edit or (lambda s: s), prompts=prompts))

    return Case("harness", name, make, where, file)


def _swap(old: str, new: str) -> Callable[[str], str]:
    def edit(text: str) -> str:
        assert old in text, old
        return text.replace(old, new, 1)

    return edit


HARNESS = [
    Case("harness", "harness file missing", lambda w, f: w.eval_args(f / "harnesses" / "none.yaml"),
         ("{file}", "cannot read"), "harnesses/none.yaml"),
    _harness_case("empty file", text="", where=("{file}", "mapping")),
    _harness_case("YAML syntax error (unclosed bracket)", edit=_swap("tools:\n", "tools: [\n"),
                  where=("{file}:", "invalid YAML")),
    _harness_case("tab indentation", edit=_swap("  max_turns: 10", "\tmax_turns: 10"), where=("{file}:", "YAML")),
    _harness_case("a list, not a mapping", text="- templates\n- limits\n", where=("{file}", "mapping")),
    _harness_case("unknown section", edit=_swap("limits:", "limitz:"), where=("{file}", "limitz")),
    _harness_case("unknown field", edit=_swap("max_turns: 10", "max_turn: 10"), where=("{file}", "max_turn")),
    _harness_case("wrong type", edit=_swap("max_turns: 10", "max_turns: many"), where=("{file}", "limits.max_turns")),
    _harness_case("out of range", edit=_swap("max_turns: 10", "max_turns: -1"), where=("{file}", "limits.max_turns")),
    _harness_case("unknown action format", edit=_swap("kind: bash_block", "kind: xml"),
                  where=("{file}", "action_format.kind")),
    _harness_case("template file missing", edit=_swap("system: system_bash.j2", "system: nope.j2"),
                  where=("nope.j2",)),
    _harness_case("temperature a string", edit=_swap("temperature: 1.0", "temperature: hot"),
                  where=("{file}", "decoding.temperature")),
    _harness_case("tool enabled not a bool", edit=_swap("bash: {enabled: true", "bash: {enabled: perhaps"),
                  where=("{file}", "tools.bash.enabled")),
    _harness_case("file tool the format cannot express",
                  edit=_swap("  submit: {enabled: true", "  read_file: {enabled: true}\n  submit: {enabled: true"),
                  where=("{file}", "read_file")),
    Case("harness", "not UTF-8", lambda w, f: w.eval_args(_write_bytes(w.harness(f), b"limits:\n  max_turns: 3 \xff\xfe\n")),
         ("{file}", "UTF-8"), "harnesses/h.yaml"),
]


def _write_bytes(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _template_case(name: str, body: str, where: tuple[str, ...]) -> Case:
    return _harness_case(name, edit=_swap("system: system_bash.j2", "system: bad.j2"), prompts={"bad.j2": body},
                         where=where, file="prompts/bad.j2")


TEMPLATES = [
    _template_case("Jinja syntax error", "You are an agent.\n{% if tools %}\nno endif\n", ("{file}:", "syntax")),
    _template_case("undefined variable", "Hello\n{{ nonexistent_variable }}\n", ("{file}:2", "nonexistent_variable")),
    _template_case("sandbox escape attempt", "{{ ''.__class__.__mro__ }}\n", ("{file}:1", "sandbox")),
    _template_case("error raised while rendering", "line one\n{{ 1 // 0 }}\n", ("{file}:2",)),
    _template_case("unknown filter", "{{ tools | shout }}\n", ("{file}:", "shout")),
    Case("template", "template not UTF-8", lambda w, f: w.eval_args(_bad_template_bytes(w, f)),
         ("{file}", "UTF-8"), "prompts/bad.j2"),
]


def _bad_template_bytes(world: World, folder: Path) -> Path:
    harness = world.harness(folder, edit=_swap("system: system_bash.j2", "system: bad.j2"))
    (folder / "prompts" / "bad.j2").write_bytes(b"You are \xff\xfe an agent.\n")
    return harness


def _config_case(kind: str, name: str, where: tuple[str, ...], fields: dict | None = None, text: str | None = None,
                 space: str | None = None, file: str = "c.yaml", args: tuple[str, ...] = ()) -> Case:
    def make(world: World, folder: Path) -> list[str]:
        return ["search", str(world.config(folder, fields, text, space)), *args]

    return Case(kind, name, make, where, file)


def _space_case(name: str, space: str, where: tuple[str, ...]) -> Case:
    return _config_case("space", name, ("{file}", *where), space=space, file="space.yaml")


SPACES = [
    _space_case("not a mapping", "- limits.max_turns\n", ("mapping",)),
    _space_case("YAML syntax error", "limits.max_turns: {type: int, low: 2\n", ("space.yaml:",)),
    _space_case("unknown harness path", "limits.max_turnz: {type: int, low: 2, high: 3}\n", ("limits.max_turnz",)),
    _space_case("low above high", "limits.max_turns: {type: int, low: 5, high: 2}\n", ("limits.max_turns", "low")),
    _space_case("empty choices", "templates.system: {type: categorical, choices: []}\n", ("templates.system",)),
    _space_case("unknown type", "limits.max_turns: {type: gaussian, low: 2, high: 3}\n", ("limits.max_turns",
                                                                                          "gaussian")),
    _space_case("missing type", "limits.max_turns: {low: 2, high: 3}\n", ("limits.max_turns", "type")),
    _space_case("when names an unknown key", "limits.max_turns: {type: int, low: 2, high: 3, when: {nothing.here: 1}}\n",
                ("limits.max_turns", "nothing.here")),
    _space_case("a choice the field refuses", "action_format.kind: {type: categorical, choices: [json, xml]}\n",
                ("action_format.kind", "xml")),
    _space_case("log scale from zero", "decoding.top_p: {type: float, low: 0.0, high: 1.0, log: true}\n",
                ("decoding.top_p", "log")),
    _space_case("unknown entry key", "limits.max_turns: {type: int, low: 2, high: 3, stepp: 1}\n",
                ("limits.max_turns", "stepp")),
    _space_case("a template that does not exist", "templates.system: {type: categorical, choices: [nope.j2]}\n",
                ("templates.system", "nope.j2")),
    _space_case("unknown GRPO option", "train.learning_rat: {type: float, low: 1.0e-5, high: 1.0e-3}\n",
                ("train.learning_rat",)),
]

CONFIGS = [
    Case("config", "config file missing", lambda w, f: ["search", str(f / "c.yaml")], ("{file}",), "c.yaml"),
    _config_case("config", "YAML syntax error", ("{file}:", "YAML"), text="name: bad\nschedule: [h\n"),
    _config_case("config", "unknown field", ("{file}", "schedul"), fields={"schedul": "h"}),
    _config_case("config", "bad schedule", ("{file}", "schedule"), fields={"schedule": "w0 -> x -> h"}),
    _config_case("config", "negative budget", ("{file}", "budget"), fields={"budget": -1}),
    _config_case("config", "tasks folder missing", ("{file}", "tasks"), fields={"tasks": "/nonexistent/tasks"}),
    _config_case("config", "harness file missing", ("no-such-harness.yaml",), fields={"harness": "/x/no-such-harness.yaml"}),
    _config_case("config", "plan.trials not a number", ("{file}", "plan.trials"), fields={"plan": {"trials": "ten"}}),
    _config_case("config", "unknown plan field", ("{file}", "plan.trails"), fields={"plan": {"trails": 3}}),
    _config_case("config", "unknown objective", ("{file}", "objective"), fields={"objective": "accuracy"}),
    _config_case("config", "unknown sandbox backend", ("{file}", "sandbox"), fields={"sandbox": "podman"}),
    _config_case("config", "unknown GRPO option", ("{file}", "train", "learning_rat"),
                 fields={"train": {"learning_rat": 0.1}}),
    _config_case("config", "model folder missing", ("{file}", "model"), fields={"model": "/nonexistent/model-x"}),
    _config_case("config", "unknown policy backend", ("{file}", "policy"), fields={"policy": {"backend": "magic"}}),
    _config_case("config", "bad storage URL", ("storage", "mysql+nothing"), fields={"storage": "mysql+nothing://x/y"}),
    _config_case("config", "override of an unknown field", ("{file}", "limits.max_turnz"),
                 fields={"overrides": {"limits.max_turnz": 3}}),
    _config_case("config", "promotion split of zero", ("{file}", "splits.promotion"), fields={"splits": {"promotion": 0}}),
]


def _task_case(name: str, edit: Callable[[Path], None], where: tuple[str, ...], file: str,
               command: str = "check", kind: str = "task") -> Case:
    def make(world: World, folder: Path) -> list[str]:
        tasks = world.task_folder(folder / "tasks", edit)
        return ["tasks", command, str(tasks)] if command == "list" else ["tasks", "check", str(tasks / "t0")]

    return Case(kind, name, make, where, f"tasks/t0/{file}" if file else "")


def _write(rel: str, text: str) -> Callable[[Path], None]:
    return lambda task: (task / rel).write_text(text)


def _edit_toml(old: str, new: str) -> Callable[[Path], None]:
    def edit(task: Path) -> None:
        text = (task / "task.toml").read_text()
        assert old in text, old
        (task / "task.toml").write_text(text.replace(old, new, 1))

    return edit


def _remove(rel: str) -> Callable[[Path], None]:
    return lambda task: shutil.rmtree(task / rel) if (task / rel).is_dir() else (task / rel).unlink()


def _manifest_case(name: str, manifest: str, where: tuple[str, ...]) -> Case:
    def make(world: World, folder: Path) -> list[str]:
        tasks = world.task_folder(folder / "tasks")
        (tasks / "manifest.json").write_text(manifest)
        return ["tasks", "list", str(tasks)]

    return Case("task", name, make, where, "tasks/manifest.json")


TASKS = [
    _task_case("task.toml syntax error", _edit_toml("[verifier]", "[verifier"), ("{file}", "line"), "task.toml"),
    _task_case("timeout a string", _edit_toml("timeout_sec = 30.0", 'timeout_sec = "soon"'),
               ("{file}", "[verifier] timeout_sec"), "task.toml"),
    _task_case("memory unparseable", _edit_toml('memory = "1G"', 'memory = "lots"'), ("{file}", "memory"), "task.toml"),
    _task_case("negative cpus", _edit_toml("cpus = 1", "cpus = -2"), ("{file}", "cpus"), "task.toml"),
    _task_case("task.toml missing", _remove("task.toml"), ("{file}",), "task.toml"),
    _task_case("instruction.md missing", _remove("instruction.md"), ("{file}",), "instruction.md"),
    _task_case("tests/test.sh missing", _remove("tests/test.sh"), ("test.sh",), "tests/test.sh"),
    _task_case("task.toml not UTF-8", lambda t: (t / "task.toml").write_bytes(b'version = "1\xff"\n'),
               ("{file}",), "task.toml"),
    _manifest_case("manifest not JSON", "{tasks: [", ("{file}",)),
    _manifest_case("manifest entry without a name", '{"tasks": [{"family": "x", "split": "dev"}]}', ("{file}", "name")),
    _manifest_case("manifest names a missing task", '{"tasks": [{"name": "gone", "family": "x", "split": "dev"}]}',
                   ("{file}", "gone")),
    _manifest_case("manifest with an unknown split", '{"tasks": [{"name": "t0", "family": "x", "split": "validation"}]}',
                   ("{file}", "validation")),
]


def _dockerfile_case(name: str, dockerfile: str | None, where: tuple[str, ...], backend: str = "local",
                     extra_files: dict[str, str] | None = None) -> Case:
    def make(world: World, folder: Path) -> list[str]:
        def edit(task: Path) -> None:
            if dockerfile is None:
                (task / "environment" / "Dockerfile").unlink()
            else:
                (task / "environment" / "Dockerfile").write_text(dockerfile)
            for rel, text in (extra_files or {}).items():
                (task / rel).write_text(text)

        tasks = world.task_folder(folder / "tasks", edit)
        args = ["tasks", "check", str(tasks / "t0"), "--backend", backend]
        return args + (["--image-map", "debian:bookworm-slim=coevo-base:bookworm"] if backend == "docker" else [])

    return Case("dockerfile", name, make, where, "tasks/t0/environment/Dockerfile")


DOCKERFILES = [
    _dockerfile_case("Dockerfile missing", None, ("{file}",)),
    _dockerfile_case("RUN on the local backend", "FROM debian:bookworm-slim\nWORKDIR /app\nRUN apt-get install -y jq\n",
                     ("{file}", "line 3", "docker")),
    _dockerfile_case("COPY of a file not in the context", "FROM debian:bookworm-slim\nWORKDIR /app\nCOPY nothere.txt /app/\n",
                     ("{file}", "line 3", "nothere.txt")),
    _dockerfile_case("unknown instruction", "FROM debian:bookworm-slim\nFRM debian\n", ("{file}", "line 2", "FRM")),
    _dockerfile_case("no FROM line", "WORKDIR /app\n", ("{file}", "FROM")),
    _dockerfile_case("RUN that fails to build (docker)", "FROM debian:bookworm-slim\nWORKDIR /app\nRUN exit 3\n",
                     ("{file}", "line 3"), backend="docker"),
    _dockerfile_case("FROM an image not on the engine (docker)", "FROM coevo-no-such-image:1\nRUN true\n",
                     ("{file}", "line 1"), backend="docker"),
]


def _bundle_case(name: str, edit: Callable[[Path], None], where: tuple[str, ...], file: str) -> Case:
    def make(world: World, folder: Path) -> list[str]:
        bundle = world.bundle(folder, edit)
        return ["eval", "--bundle", str(bundle), "--tasks", str(world.tasks), "--split", "dev", "--json",
                "--out", str(folder / "out.jsonl")]

    return Case("bundle", name, make, where, f"bundle/{file}" if file else "bundle")


def _truncate(rel: str, keep: int) -> Callable[[Path], None]:
    def edit(bundle: Path) -> None:
        data = (bundle / rel).read_bytes()
        (bundle / rel).write_bytes(data[:keep])

    return edit


BUNDLES = [
    Case("bundle", "bundle folder missing", lambda w, f: ["eval", "--bundle", str(f / "bundle")], ("{file}",), "bundle"),
    _bundle_case("report.json not JSON", _write("report.json", "{oops"), ("{file}",), "report.json"),
    _bundle_case("harness.yaml missing", _remove("harness.yaml"), ("{file}",), "harness.yaml"),
    _bundle_case("model/ missing", _remove("model"), ("model",), "model"),
    _bundle_case("model config.json corrupted", _write("model/config.json", "{not json"), ("{file}",),
                 "model/config.json"),
    _bundle_case("weights truncated", _truncate("model/model.safetensors", 1000), ("{file}",),
                 "model/model.safetensors"),
    _bundle_case("harness.yaml invalid", _write("harness.yaml", "limits: {max_turns: -3}\n"),
                 ("{file}", "max_turns"), "harness.yaml"),
]


def _gguf_case(name: str, data: bytes | None, where: tuple[str, ...], filename: str = "m.gguf") -> Case:
    def make(world: World, folder: Path) -> list[str]:
        if data is not None:
            (folder / filename).write_bytes(data)
        return ["model", "import", str(folder / filename), "--cache-dir", str(folder / "cache")]

    return Case("gguf", name, make, where, filename)


GGUF = [
    _gguf_case("GGUF file missing", None, ("{file}",)),
    _gguf_case("empty file", b"", ("{file}",)),
    _gguf_case("not a GGUF (wrong magic)", b"PK\x03\x04" + b"\0" * 60, ("{file}", "GGUF")),
    _gguf_case("truncated header", b"GGUF\x03\x00\x00\x00" + b"\x05\x00", ("{file}",)),
    _gguf_case("a text file named .gguf", b"hello, I am not a model\n", ("{file}",), filename="notes.gguf"),
]


def _cli(name: str, args: Callable[[World, Path], list[str]], where: tuple[str, ...], file: str = "") -> Case:
    return Case("cli", name, args, where, file)


CLI = [
    _cli("eval --split unknown", lambda w, f: ["eval", "--model", "oracle", "--harness",
                                               str(REPO / "harnesses/mini_bash.yaml"), "--tasks", str(w.tasks),
                                               "--split", "validation"], ("--split", "validation")),
    _cli("eval --samples 0", lambda w, f: ["eval", "--model", "oracle", "--harness", "x.yaml", "--samples", "0"],
         ("--samples",)),
    _cli("eval --backend unknown", lambda w, f: w.eval_args(REPO / "harnesses/mini_bash.yaml", None, "--backend",
                                                            "podman"), ("backend", "podman")),
    _cli("eval --image-map without =", lambda w, f: w.eval_args(REPO / "harnesses/mini_bash.yaml", None,
                                                                "--image-map", "python"), ("image map", "python")),
    _cli("eval --model folder missing", lambda w, f: w.eval_args(REPO / "harnesses/mini_bash.yaml")[:0] + [
        "eval", "--model", str(f / "nomodel"), "--harness", str(REPO / "harnesses/mini_bash.yaml"), "--tasks",
        str(w.tasks), "--split", "dev"], ("nomodel",)),
    _cli("eval --model openai: with no API key set", lambda w, f: [
        "eval", "--model", "openai:gpt", "--harness", str(REPO / "harnesses/mini_bash.yaml"), "--tasks",
        str(w.tasks), "--split", "dev"], ("OPENAI_API_KEY",)),
    _cli("eval --tasks not a folder", lambda w, f: ["eval", "--model", "oracle", "--harness",
                                                    str(REPO / "harnesses/mini_bash.yaml"), "--tasks",
                                                    str(f / "notasks")], ("notasks",)),
    _cli("train --set unknown field", lambda w, f: [
        "train", "--model", str(f), "--harness", str(REPO / "harnesses/mini_bash.yaml"), "--tasks", str(w.tasks),
        "--split", "dev", "--out", str(f / "run"), "--set", "lerning_rate=0.1"], ("--set", "lerning_rate")),
    _cli("train --set without =", lambda w, f: [
        "train", "--model", str(f), "--harness", str(REPO / "harnesses/mini_bash.yaml"), "--tasks", str(w.tasks),
        "--split", "dev", "--out", str(f / "run"), "--set", "steps"], ("--set", "steps")),
    _cli("train --config of an unknown option", lambda w, f: [
        "train", "--model", str(f), "--harness", str(REPO / "harnesses/mini_bash.yaml"), "--tasks", str(w.tasks),
        "--split", "dev", "--out", str(f / "run"), "--config", str(_text(f / "grpo.yaml", "stepz: 3\n"))],
         ("grpo.yaml", "stepz")),
    _cli("search --resume of no run", lambda w, f: ["search", "--resume", str(f / "norun")], ("norun",)),
    _cli("search with neither CONFIG nor --resume", lambda w, f: ["search"], ("CONFIG",)),
    _cli("show of a missing file", lambda w, f: ["show", str(f / "none.jsonl")], ("none.jsonl",)),
    _cli("show of a file that is not JSONL", lambda w, f: ["show", str(_text(f / "t.jsonl", "not json\n"))],
         ("t.jsonl:1",)),
    _cli("show -i past the end", lambda w, f: ["show", str(_text(f / "t.jsonl", "")), "-i", "5"], ("t.jsonl", "-i")),
    _cli("serve of a missing folder", lambda w, f: ["serve", str(f / "nomodel")], ("nomodel",)),
    _cli("compare of no run", lambda w, f: ["compare", str(f / "norun")], ("norun",)),
    _cli("export of no run", lambda w, f: ["export", str(f / "norun"), "--out", str(f / "b")], ("norun",)),
    _cli("tasks generate --per-family 0", lambda w, f: ["tasks", "generate", "--out", str(f / "gen"),
                                                        "--per-family", "0"], ("--per-family",)),
    _cli("search --storage with an unknown scheme", lambda w, f: ["search", str(w.config(f)), "--storage",
                                                                  "postgres://db/x"], ("--storage", "postgres")),
    _cli("check of a missing config", lambda w, f: ["check", str(f / "none.yaml")], ("none.yaml",)),
]


def _text(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _serve(name: str, body: dict | bytes, where: tuple[str, ...], path: str = "/v1/chat/completions") -> Case:
    return Case("serve", name, lambda w, f: ["POST", path, body], where)


HI = [{"role": "user", "content": "hi"}]
SERVE = [
    _serve("body not JSON", b"{not json", ("JSON",)),
    _serve("messages missing", {"model": "tiny"}, ("messages",)),
    _serve("role unknown", {"model": "tiny", "messages": [{"role": "robot", "content": "x"}]}, ("messages.0.role",)),
    _serve("content a number", {"model": "tiny", "messages": [{"role": "user", "content": 5}]},
           ("messages.0.content",)),
    _serve("max_tokens negative", {"model": "tiny", "messages": HI, "max_tokens": -5}, ("max_tokens",)),
    _serve("temperature a string", {"model": "tiny", "messages": HI, "temperature": "hot"}, ("temperature",)),
    _serve("n of zero", {"model": "tiny", "messages": HI, "n": 0}, ("n",)),
    _serve("top_p above 1", {"model": "tiny", "messages": HI, "top_p": 2}, ("top_p",)),
    _serve("unknown model", {"model": "gpt-9", "messages": HI}, ("model", "gpt-9")),
    _serve("stop a number", {"model": "tiny", "messages": HI, "stop": 5}, ("stop",)),
    _serve("token id out of range", {"model": "tiny", "prompt": [10**7]}, ("prompt",), "/v1/completions"),
    _serve("prompt missing", {"model": "tiny"}, ("prompt",), "/v1/completions"),
]

CASES = HARNESS + TEMPLATES + SPACES + CONFIGS + TASKS + DOCKERFILES + BUNDLES + GGUF + CLI + SERVE


# -- running ------------------------------------------------------------------------------------------
def located(case: Case, message: str) -> list[str]:
    """What the message fails to name (empty: located)."""
    flat = " ".join(message.split())
    wanted = [w.replace("{file}", Path(case.file).name) for w in case.where]
    return [w for w in wanted if w not in flat]


def run_cli(args: list[str], in_process: bool, timeout: float = 120) -> tuple[int | None, str, bool]:
    """(exit code, output, whether a traceback reached the user)."""
    if in_process:
        from typer.testing import CliRunner

        from coevo.cli import app

        # Wide, so that a table's cell holds the message on one line; no API key, as for the subprocesses.
        result = CliRunner().invoke(app, args, catch_exceptions=True, env={"COLUMNS": "400", "OPENAI_API_KEY": None})
        escaped = result.exception is not None and not isinstance(result.exception, SystemExit)
        text = result.output + (f"\n{type(result.exception).__name__}: {result.exception}" if escaped else "")
        return result.exit_code, text, escaped
    env = {**os.environ, "TRL_EXPERIMENTAL_SILENCE": "1", "NO_COLOR": "1", "COLUMNS": "400"}
    env.pop("OPENAI_API_KEY", None)  # the row 'no API key set' needs none; no row needs one
    try:
        done = subprocess.run([sys.executable, "-m", "coevo.cli", *args], cwd=REPO, capture_output=True, text=True,
                              timeout=timeout, env=env, check=False)
    except subprocess.TimeoutExpired:
        return None, f"(no answer within {timeout:.0f} s)", False
    text = done.stdout + done.stderr
    return done.returncode, text, "Traceback (most recent call last)" in text


def run_serve(world: World, request: list) -> tuple[int | None, str, bool]:
    import urllib.error
    import urllib.request

    _, path, body = request
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(world.server_url() + path, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as response:
            return response.status, response.read().decode(errors="replace"), False
    except urllib.error.HTTPError as e:
        text = e.read().decode(errors="replace")
        return e.code, text, "Traceback" in text


def run_case(world: World, case: Case, in_process: bool) -> Result:
    folder = world.root / "cases" / f"{CASES.index(case):03d}"
    folder.mkdir(parents=True)
    started = time.perf_counter()
    try:
        args = case.make(world, folder)
    except Exception as e:  # noqa: BLE001 - a broken case is a row, not the end of the table
        return Result(case, None, f"(the case could not be set up: {type(e).__name__}: {e})", False, False)
    if case.kind == "serve":
        code, text, traceback = run_serve(world, args)
    else:
        code, text, traceback = run_cli([str(a) for a in args], in_process)
    missing = located(case, text) if code not in (0, 200) else ["(accepted: no error at all)"]
    return Result(case, code, text.strip(), not missing and not traceback, traceback,
                  time.perf_counter() - started, missing)




def table(results: list[Result]) -> str:
    rows = ["| kind | input | message (first line, cut) | located | traceback |", "|---|---|---|---|---|"]
    for r in results:
        first = next((line for line in r.message.splitlines() if line.strip()), "")
        first = first.replace("|", "\\|")
        first = first if len(first) <= 150 else first[:147] + "..."
        note = "" if r.located or not r.missing else f" (missing: {', '.join(r.missing)})"
        rows.append(f"| {r.case.kind} | {r.case.name} | {first}{note} | {'yes' if r.located else 'no'} | "
                    f"{'yes' if r.traceback else 'no'} |")
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="Only cases whose kind or name contains this.")
    parser.add_argument("--in-process", action="store_true", help="Through typer's runner, not subprocesses.")
    parser.add_argument("--keep", action="store_true", help="Keep the temporary folder.")
    parser.add_argument("--verbose", action="store_true", help="Print the whole message of each row not located.")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="coevo-bad-inputs-"))
    world = World(root)
    cases = [c for c in CASES if args.only in c.kind or args.only in c.name]
    started = time.perf_counter()
    results = []
    try:
        for case in cases:
            results.append(run_case(world, case, args.in_process))
            r = results[-1]
            print(f"  {r.case.kind}: {r.case.name}: {'located' if r.located else 'NOT located'}"
                  f"{', TRACEBACK' if r.traceback else ''} ({r.seconds:.1f}s)", file=sys.stderr, flush=True)
            if args.verbose and not r.located:
                print("    " + r.message[-3000:].replace("\n", "\n    "), file=sys.stderr)
    finally:
        if world.server is not None:
            world.server.terminate()
            world.server.wait(30)
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    print(table(results))
    n_located = sum(r.located for r in results)
    n_tb = sum(r.traceback for r in results)
    print(f"\nlocated {n_located}/{len(results)}; tracebacks {n_tb}/{len(results)}; "
          f"{time.perf_counter() - started:.0f} s")
    return 0 if n_located == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
