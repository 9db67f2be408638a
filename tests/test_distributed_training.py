"""The w-phase's multi-device path, as far as it goes on a CPU machine: `coevo train` as two DDP processes.

On GPUs that path is `accelerate launch --multi_gpu` (or `--use_fsdp`), which starts its processes with
torch.distributed.run; here `torchrun --nproc_per_node 2` starts the same two processes, and TRL's
Trainer (use_cpu) joins them over gloo. (`accelerate launch --cpu --num_processes 2` would start only one
process without MPI.) The tasks pay random partial credit, so groups carry nonzero advantages and the
gradients that DDP averages are real. Real tiny model, real sandboxes, real processes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from test_grpo import SHORT, coin_tasks, harness, tiny  # noqa: F401 - the fixtures, shared

REPO = Path(__file__).resolve().parents[1]


def test_grpo_runs_as_two_ddp_processes_on_cpu_and_moves_the_weights(tiny, coin_tasks, harness, tmp_path):  # noqa: F811
    import torch
    from safetensors.torch import load_file

    (tmp_path / "harness.yaml").write_text(harness.to_yaml())
    torchrun = Path(sys.executable).parent / "torchrun"
    result = subprocess.run(
        [str(torchrun), "--standalone", "--nproc_per_node", "2", "-m", "coevo.cli", "train", "--model",
         str(tiny), "--harness", str(tmp_path / "harness.yaml"), "--tasks", str(coin_tasks), "--split", "all",
         "--out", str(tmp_path / "run"), "--steps", "1", "--group-size", "2", "--tasks-per-step", "2",
         "--reward", "partial"],
        cwd=REPO, capture_output=True, text=True, timeout=600, check=False,
        env={**__import__("os").environ, "TRL_EXPERIMENTAL_SILENCE": "1"})
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-4000:]
    assert out.count("1 steps (resumed from 0)") == 2, out[-4000:]  # each rank finished the run
    trained = tmp_path / "run" / "checkpoints" / "checkpoint-1" / "model.safetensors"
    before, after = load_file(tiny / "model.safetensors"), load_file(trained)
    assert any(not torch.equal(before[k], after[k]) for k in before)
