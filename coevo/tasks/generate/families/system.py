"""Families about the shell environment and tools: PATH and environment variables, git."""

from __future__ import annotations

import random

from coevo.tasks.generate.checks import BARE, GIT
from coevo.tasks.generate.families.words import ADJECTIVES, NOUNS, VERBS, name, sentence, word, words
from coevo.tasks.generate.writer import TaskSpec


def env_path(rng: random.Random) -> TaskSpec:
    command = f"{word(rng)}-{rng.choice(VERBS)}"
    message = sentence(rng, rng.randint(2, 5))
    var, value = f"{rng.choice(ADJECTIVES).upper()}_{word(rng).upper()}", f"{word(rng)}{rng.randint(1, 99)}"
    given = f"{word(rng).upper()}_{rng.choice(['MODE', 'TARGET', 'CHANNEL', 'STAGE'])}"
    given_value = name(rng, "-")
    found = "/app/given.txt"
    return TaskSpec(
        instruction=f"1. Make a command `{command}` available: create the executable script "
        f"/app/bin/{command} that prints `{message}`.\n"
        f"2. Create /app/env.sh which, when sourced by bash, puts /app/bin on the PATH and exports "
        f"`{var}={value}`.\n"
        f"3. Your shell already has the environment variable `{given}` set; write its value to {found}.",
        solution=[
            (f"mkdir -p /app/bin && printf '%s\\n' '#!/bin/bash' 'echo \"{message}\"' > /app/bin/{command} "
             f"&& chmod +x /app/bin/{command}"),
            f"printf '%s\\n' 'export PATH=\"/app/bin:$PATH\"' 'export {var}={value}' > /app/env.sh",
            f'echo "${given}" > {found}',
        ],
        checks={
            "command_executable": f"os.access('/app/bin/{command}', os.X_OK)",
            "command_prints": f"run(['/app/bin/{command}']).stdout.strip() == E['message']",
            "env_sets_path": f"run(['bash', '-c', 'source /app/env.sh && command -v {command}'], cwd='/tmp', "
            f"env={BARE}).stdout.strip() == '/app/bin/{command}'",
            "env_exports_var": f"run(['bash', '-c', 'source /app/env.sh && printf %s \"${var}\"'], "
            f"cwd='/tmp', env={BARE}).stdout == E['value']",
            "given_var_written": f"answer({found!r}) == E['given']",
        },
        env={given: given_value},
        expected={"message": message, "value": value, "given": given_value},
        tags=["system", "env", "path"],
    )


def git_basics(rng: random.Random) -> TaskSpec:
    repo = f"/app/{name(rng, '-')}"
    module = word(rng)
    files = {"README.md": f"# {module}\n\n{sentence(rng, 6)}\n", f"src/{module}.py": f"print('{module}')\n"}
    files.update({f"{d}.txt": sentence(rng, 4) + "\n" for d in words(rng, rng.randint(0, 2))})
    message = f"{rng.choice(VERBS).capitalize()} the {rng.choice(ADJECTIVES)} {rng.choice(NOUNS)}"
    branch = f"{rng.choice(['feature', 'fix', 'dev'])}/{word(rng)}"
    rel = repo.removeprefix("/app/")
    return TaskSpec(
        instruction=f"Turn {repo} into a git repository: commit all of its files in a single commit with the "
        f"message `{message}`, then create a branch named `{branch}` that points at that commit.",
        solution=[(f"cd {repo} && git init -q && git add -A && git -c user.name=dev "
                   f"-c user.email=dev@example.com commit -qm '{message}' && git branch {branch}")],
        helpers=GIT,
        checks={
            "is_repository": "os.path.isdir(E['repo'] + '/.git')",
            "commit_message": "git('log', '-1', '--format=%s') == E['message']",
            "single_commit": "git('rev-list', '--count', 'HEAD') == '1'",
            "all_files_committed": "sorted(git('ls-files').splitlines()) == E['files']",
            "clean_worktree": "git('status', '--porcelain') == ''",
            "branch_at_commit": "git('rev-parse', 'refs/heads/' + E['branch']) == git('rev-parse', 'HEAD')",
        },
        files={f"{rel}/{p}": text for p, text in files.items()},
        expected={"repo": repo, "message": message, "branch": branch, "files": sorted(files)},
        tags=["system", "git"],
    )
