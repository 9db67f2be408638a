"""The families of the bundled suite: what each one asks, and which are held out.

`FAMILIES` maps a family name to a function `(rng) -> TaskSpec` that draws one instance; the modules
here group them by theme (files, text, structured data, archives, system, code) and draw their names
and contents from `words`. This package is the suite's data: it says what a task is, never how a
folder is written or checked (that is writer.py, checks.py and suite.py one level up).

- splits are by instance, about 60/20/20 (train/dev/test) over the whole suite;
- the families in HELD_OUT appear only in test. Each reuses skills that other families train
  (grep from grep-count, tar from tar-create, fixing a Python bug from fix-python), so test measures
  whether a policy transfers a skill to a new kind of task, not whether it memorised one.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from coevo.tasks.generate.families import archives, code, files, structured, system, text
from coevo.tasks.generate.writer import TaskSpec

FAMILIES: dict[str, Callable[[random.Random], TaskSpec]] = {
    "create-file": files.create_file,
    "find-by-name": files.find_by_name,
    "find-by-size": files.find_by_size,
    "find-by-content": files.find_by_content,
    "batch-rename": files.batch_rename,
    "permissions": files.permissions,
    "edit-config": text.edit_config,
    "grep-count": text.grep_count,
    "top-k": text.top_k,
    "word-count": text.word_count,
    "dedupe-lines": text.dedupe_lines,
    "line-range": text.line_range,
    "csv-column": structured.csv_column,
    "csv-aggregate": structured.csv_aggregate,
    "json-filter": structured.json_filter,
    "tar-create": archives.tar_create,
    "archive-extract": archives.archive_extract,
    "env-path": system.env_path,
    "git-basics": system.git_basics,
    "bash-script": code.bash_script,
    "fix-python": code.fix_python,
    "fix-unittest": code.fix_unittest,
}
HELD_OUT = ["find-by-content", "archive-extract", "fix-unittest"]
DEV_FRACTION, TEST_FRACTION = 0.2, 0.2
