"""The package's import graph: no circles, and a `coevo --help` that loads nothing heavy.

The graph is read from the source (AST), not from a running import, so that a lazy import inside a
function counts as much as one at the top: a circle that only closes at call time is still a circle
that decides which module may be imported first.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "trl", "transformers", "mlflow", "optuna", "dspy")


def module_files(root: Path = REPO / "coevo") -> dict[str, Path]:
    """Dotted module name -> file, for every .py under the package (a package is its __init__)."""
    modules = {}
    for path in root.rglob("*.py"):
        name = ".".join(path.relative_to(root.parent).with_suffix("").parts)
        modules[name.removesuffix(".__init__")] = path
    return modules


def imported_names(node: ast.AST, package: str) -> list[str]:
    """The dotted names an import statement may load; a relative import is resolved from `package`."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    module = node.module or ""
    if node.level:
        parts = package.split(".")
        module = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
    # `from a import b` loads a, and a.b too when b is a submodule rather than a name in a.
    return [module] + [f"{module}.{alias.name}" for alias in node.names]


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            graph[name] |= {t for t in imported_names(node, package) if t in modules and t != name}
    return graph


def components(graph: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components of two or more modules (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        while work:
            module, targets = work[-1]
            target = next(targets, None)
            if target is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[module])
                if low[module] == index[module]:
                    members = set(stack[stack.index(module):])
                    del stack[stack.index(module):]
                    found += [members] if len(members) > 1 else []
            elif target not in index:
                index[target] = low[target] = len(index)
                stack.append(target)
                work.append((target, iter(sorted(graph.get(target, ())))))
            elif target in stack:
                low[module] = min(low[module], index[target])
    return found


def circle(graph: dict[str, set[str]], members: set[str]) -> list[str]:
    """The shortest import path from the component's first module back to itself (breadth first)."""
    start = min(members)
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for module in frontier:
            for target in sorted(graph.get(module, set()) & members):
                if target == start:
                    path = [module]
                    while path[-1] != start:
                        path.append(parents[path[-1]])
                    return [*reversed(path), start]
                if target not in parents:
                    parents[target] = module
                    following.append(target)
        frontier = following
    raise AssertionError(f"{sorted(members)} is no cycle")


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    return [circle(graph, members) for members in components(graph)]


def test_the_walk_resolves_relative_and_lazy_imports():
    """The walk must see what the test relies on, or an empty answer would mean nothing."""
    source = "from . import b\nfrom .c import d\ndef f():\n    from coevo.x import y\n"
    names = [n for node in ast.walk(ast.parse(source)) for n in imported_names(node, "coevo.pkg")]
    assert names == ["coevo.pkg", "coevo.pkg.b", "coevo.pkg.c", "coevo.pkg.c.d", "coevo.x", "coevo.x.y"]
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c", "a"]]
    graph = import_graph(module_files())
    assert {"coevo.rollout.cli", "coevo.train.cli"} <= graph["coevo.cli"]
    assert "coevo.train.model" in graph["coevo.train.cli"]  # imported inside a function only


def test_the_package_has_no_import_circles():
    graph = import_graph(module_files())
    found = [f"{' -> '.join(circle(graph, members))}   (all of: {', '.join(sorted(members))})"
             for members in components(graph)]
    assert not found, "import circles:\n" + "\n".join(found)


def test_coevo_help_imports_nothing_heavy():
    script = ("import sys\nfrom typer.testing import CliRunner\nfrom coevo.cli import app\n"
              "result = CliRunner().invoke(app, ['--help'])\nassert 'Usage' in result.output, result.output\n"
              "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))")
    loaded = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, check=True)
    assert not set(HEAVY) & set(loaded.stdout.split()), loaded.stdout
