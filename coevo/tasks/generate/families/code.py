"""Families about programs: write a bash script, fix a buggy Python program, make a unittest pass.

The verifier runs the agent's program on hidden inputs drawn per instance, so a solution has to work
in general, not just on the example in the instruction.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from coevo.tasks.generate.families.words import NOUNS, VERBS, word, words
from coevo.tasks.generate.writer import TaskSpec

# (what the script does, its bash body, expected output of args and P, draw of args, choices of P):
# P is a per-instance parameter (a greeting, a separator) written where "{P}" stands.
SCRIPTS = [
    ("prints the sum of its two integer arguments", "echo $(( $1 + $2 ))",
     lambda a, _: str(int(a[0]) + int(a[1])), "numbers", [""]),
    ("prints the product of its two integer arguments", "echo $(( $1 * $2 ))",
     lambda a, _: str(int(a[0]) * int(a[1])), "numbers", [""]),
    ("prints `{P}, NAME!` where NAME is its first argument", 'echo "{P}, $1!"',
     lambda a, p: f"{p}, {a[0]}!", "word", ["Hello", "Welcome", "Hi", "Greetings", "Howdy"]),
    ("prints how many arguments it was given", "echo $#", lambda a, _: str(len(a)), "words", [""]),
    ("prints all of its arguments joined by `{P}` on one line", 'IFS="{P}"; echo "$*"',
     lambda a, p: p.join(a), "several", [",", ":", "-", "+", "/"]),
    ("prints each argument on its own line, in upper case", 'for a in "$@"; do echo "${a^^}"; done',
     lambda a, _: "\n".join(x.upper() for x in a), "words", [""]),
]
ARGS: dict[str, Callable[[random.Random], list[str]]] = {
    "numbers": lambda rng: [str(rng.randint(1, 500)) for _ in range(2)],
    "word": lambda rng: [word(rng)],
    "words": lambda rng: words(rng, rng.randint(1, 4)),
    "several": lambda rng: words(rng, rng.randint(2, 4)),
}


def bash_script(rng: random.Random) -> TaskSpec:
    path = f"/app/scripts/{rng.choice(VERBS)}_{word(rng)}.sh"
    does, body, expect, args, params = rng.choice(SCRIPTS)
    param = rng.choice(params)
    does, body = does.replace("{P}", param), body.replace("{P}", param)
    example, *cases = [ARGS[args](rng) for _ in range(4)]
    return TaskSpec(
        instruction=f"Write an executable bash script {path} that {does}. For example, "
        f"`{path} {' '.join(example)}` prints:\n\n```\n{expect(example, param)}\n```",
        solution=[(f"mkdir -p /app/scripts && printf '%s\\n' '#!/bin/bash' '{body}' > {path} "
                   f"&& chmod +x {path}")],
        checks={"script_executable": f"os.access({path!r}, os.X_OK)"} | {
            f"hidden_case_{i}": f"run([{path!r}, *E['cases'][{i}]]).stdout.strip() == E['outputs'][{i}]"
            for i in range(len(cases))
        },
        expected={"cases": cases, "outputs": [expect(c, param) for c in cases]},
        tags=["code", "bash", "script"],
    )


# kind -> (what the program does, buggy body of the function of `n`, sed fix, reference output of argv)
PROGRAMS = {
    "sum_to": ("prints 1 + 2 + ... + N for its integer argument N",
               "    total = 0\n    for i in range(1, n):\n        total += i\n    return total\n",
               "s/range(1, n)/range(1, n + 1)/", lambda a: str(sum(range(1, int(a[0]) + 1)))),
    "countdown": ("prints N, N-1, ..., 1, one number per line, for its integer argument N",
                  "    return '\\n'.join(str(i) for i in range(n, 1, -1))\n",
                  "s/range(n, 1, -1)/range(n, 0, -1)/",
                  lambda a: "\n".join(map(str, range(int(a[0]), 0, -1)))),
    "largest": ("prints the largest of its integer arguments",
                ("    best = n[0]\n    for i in range(1, len(n) - 1):\n        best = max(best, n[i])\n"
                 "    return best\n"),
                "s/range(1, len(n) - 1)/range(1, len(n))/", lambda a: str(max(map(int, a)))),
}


def _program_args(rng: random.Random, kind: str) -> list[str]:
    if kind == "largest":  # the largest comes last, where the off-by-one bug shows
        xs = [rng.randint(1, 50) for _ in range(rng.randint(2, 4))]
        return [str(x) for x in xs] + [str(rng.randint(51, 99))]
    return [str(rng.randint(2, 30))]


def fix_python(rng: random.Random) -> TaskSpec:
    kind = rng.choice(sorted(PROGRAMS))
    does, body, fix, reference = PROGRAMS[kind]
    path, fn = f"/app/{word(rng)}_{kind}.py", f"{kind}_{rng.choice(NOUNS)}"
    parse = "[int(a) for a in sys.argv[1:]]" if kind == "largest" else "int(sys.argv[1])"
    source = f"import sys\n\n\ndef {fn}(n):\n{body}\n\nprint({fn}({parse}))\n"
    example, *cases = [_program_args(rng, kind) for _ in range(4)]
    return TaskSpec(
        instruction=f"The program {path} {does}, or should: it has an off-by-one bug. Fix the bug in place. "
        f"For example, `python3 {path} {' '.join(example)}` should print:\n\n```\n{reference(example)}\n```",
        solution=[f"sed -i '{fix}' {path}"],
        checks={f"hidden_case_{i}": f"run(['python3', {path!r}, *E['cases'][{i}]]).stdout.strip() == "
                f"E['outputs'][{i}]" for i in range(len(cases))},
        files={path.removeprefix("/app/"): source},
        expected={"cases": cases, "outputs": [reference(c) for c in cases]},
        tags=["code", "python", "debugging"],
    )


# kind -> (function names, parameters, buggy return, sed fix, reference, draw of one call's arguments)
UNITS = {
    "add": (["add", "plus", "total_of"], "a, b", "a - b", "s/a - b/a + b/", lambda a, b: a + b,
            lambda rng: (rng.randint(1, 99), rng.randint(1, 99))),
    "adult": (["is_adult", "can_vote", "old_enough"], "age", "age > 18", "s/age > 18/age >= 18/",
              lambda age: age >= 18, lambda rng: (rng.choice([18, rng.randint(5, 40)]),)),
    "shout": (["shout", "yell", "exclaim"], "text", "text.lower() + '!'", "s/lower/upper/",
              lambda t: t.upper() + "!", lambda rng: (word(rng),)),
    "first_n": (["first_n", "take", "head"], "items, n", "items[:n - 1]", "s/n - 1/n/",
                lambda items, n: items[:n], lambda rng: (rng.sample(range(10, 99), 5), rng.randint(1, 5))),
}


def fix_unittest(rng: random.Random) -> TaskSpec:
    kind = rng.choice(sorted(UNITS))
    names, params, buggy, fix, reference, draw = UNITS[kind]
    module, fn = f"{word(rng)}_{rng.choice(['utils', 'lib', 'tools', 'helpers'])}", rng.choice(names)
    calls = [draw(rng) for _ in range(6)]
    if kind == "adult":  # the boundary, where `>` and `>=` differ, is always tested
        calls[0] = (18,)
    asserts = "".join(f"        self.assertEqual({fn}(*{c!r}), {reference(*c)!r})\n" for c in calls[:3])
    test = (f"import unittest\n\nfrom {module} import {fn}\n\n\nclass Test{fn.title().replace('_', '')}"
            f"(unittest.TestCase):\n    def test_examples(self):\n{asserts}\n\nif __name__ == '__main__':\n"
            "    unittest.main()\n")
    probe = f"from {module} import {fn}; print(repr([{fn}(*c) for c in {calls[3:]!r}]))"
    return TaskSpec(
        instruction=f"`python3 -m unittest test_{module}` fails when run in /app. Fix the bug in "
        f"/app/{module}.py so that the tests pass; do not modify /app/test_{module}.py.",
        solution=[f"sed -i '{fix}' /app/{module}.py"],
        checks={
            "unittest_passes": f"run(['python3', '-m', 'unittest', 'test_{module}'], timeout=20)"
            ".returncode == 0",
            "hidden_cases": "run(['python3', '-c', E['probe']]).stdout.strip() == E['probe_out']",
        },
        files={f"{module}.py": f"def {fn}({params}):\n    return {buggy}\n", f"test_{module}.py": test},
        keep=[f"test_{module}.py"],
        expected={"probe": probe, "probe_out": repr([reference(*c) for c in calls[3:]])},
        tags=["code", "python", "unittest", "debugging"],
    )
