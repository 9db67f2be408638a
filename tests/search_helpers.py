"""What the `coevo search` tests share: a small space over real harness fields and a config writer whose
policy is the synthetic harness-sensitive oracle (coevo/policy/synthetic.py)."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
SMALL_SPACE = """
templates.system: {type: categorical, choices: [system_terse.j2, system_verbose.j2]}
action_format.kind: {type: categorical, choices: [json, bash_block]}
recovery.format_error_feedback: {type: categorical, choices: [true, false]}
recovery.max_format_retries: {type: int, low: 0, high: 3, when: {recovery.format_error_feedback: true}}
limits.max_turns: {type: int, low: 3, high: 8}
"""


def write_config(folder: Path, suite: Path, **fields) -> Path:
    (folder / "space.yaml").write_text(SMALL_SPACE)
    config = {"tasks": str(suite), "harness": str(ROOT / "harnesses" / "terminus_json.yaml"),
              "space": str(folder / "space.yaml"), "runs_dir": str(folder / "runs"), "schedule": "h",
              "policy": {"backend": "synthetic"}, "heartbeat_interval": 1, "grace_period": 3,
              "plan": {"trials": 4, "dev_tasks": 8, "batches": 2}, "splits": {"promotion": 12, "test": 18},
              **fields}
    path = folder / f"{fields.get('name', 'search')}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path
