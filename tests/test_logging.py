"""Progress and diagnostics go through `logging` (coevo/logs.py): -v/-q set the console, `coevo search` writes
RUN/search.log whatever the console shows, and training shows one progress bar, never transformers' raw
`{'loss': ...}` dicts. Real commands in subprocesses, as a user runs them."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.search_helpers import write_config

REPO = Path(__file__).resolve().parents[1]
RAW_DICT = "{'loss'"


def coevo(*args: str) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "-m", "coevo.cli", *args], cwd=REPO, capture_output=True, text=True,
                            timeout=600, check=False)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return result


@pytest.fixture(scope="module")
def tiny(suite, tmp_path_factory):
    from coevo.train.model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny"), suite, seed=0, prompts_dir=REPO / "prompts")


def test_sft_shows_a_progress_bar_with_the_loss_and_no_raw_dicts(suite, tiny, tmp_path):
    warmstart = ["warmstart", "--model", str(tiny), "--harness", str(REPO / "harnesses" / "mini_bash.yaml"),
                 "--tasks", str(suite), "--split", "test", "--epochs", "2", "--batch-size", "2", "--augment", "0", "--threads", "1"]
    plain = coevo(*warmstart, "--out", str(tmp_path / "plain"))
    for stream in (plain.stdout, plain.stderr):
        assert RAW_DICT not in stream and "'grad_norm'" not in stream
    assert "SFT: " in plain.stdout  # the command's own report stays on stdout
    bar = [line for line in plain.stderr.splitlines() if re.match(r"SFT .* (\d+)/\1 loss \d", line)]
    assert len(bar) == 1, plain.stderr[-2000:]  # a pipe gets the bar once, finished, with the last loss
    assert "it/s]" not in plain.stderr  # nor transformers' or datasets' own tqdm bars

    verbose = coevo("-v", *warmstart, "--out", str(tmp_path / "verbose"))
    numbers = [line for line in verbose.stderr.splitlines() if " step " in line and "grad_norm" in line]
    assert numbers, verbose.stderr[-2000:]  # each logged step's numbers, as a debug line
    assert RAW_DICT not in verbose.stdout + verbose.stderr

    quiet = coevo("-q", *warmstart, "--out", str(tmp_path / "quiet"))
    assert "SFT: " in quiet.stdout and quiet.stderr.strip() == "", quiet.stderr[-2000:]


def test_search_writes_its_log_file_whatever_the_console_shows(suite, tmp_path):
    config = write_config(tmp_path, suite, name="logged", pruning=False,
                          plan={"trials": 2, "dev_tasks": 4, "batches": 1, "test_tasks": 3})
    quiet = coevo("-q", "search", str(config))
    log = (tmp_path / "runs" / "logged" / "search.log").read_text()
    assert "== phase h1 (1/1)" in log and " INFO " in log and "coevo.search" in log
    assert "== phase" not in quiet.stderr  # -q: the console only shows warnings
    assert "runs/logged/search.log" in quiet.stdout  # the closing lines name the log


def test_the_log_file_gets_debug_and_plain_text_of_markup(tmp_path):
    from coevo import logs

    log = logging.getLogger("coevo.test")
    with logs.to_file(tmp_path / "x.log") as path:
        log.debug("a debug line")
        log.info("[bold]step 3/5[/] | loss 0.1", extra=logs.MARKUP)
        log.info("kept as written: [not markup]")
    log.info("after the block: not in the file")
    text = path.read_text()
    assert "DEBUG   coevo.test" in text and "a debug line" in text
    assert "step 3/5 | loss 0.1" in text and "[bold]" not in text
    assert "kept as written: [not markup]" in text and "after the block" not in text
