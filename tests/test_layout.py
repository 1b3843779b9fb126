"""The house's layout holds: no import cycle in src/ or localcloud/ (function-level imports included), and no upward
import: src/shared never imports a handler, the functions' code never imports the offline cloud or the tests, and the
offline cloud's ground floor (its clock, its account, the Regions, its reading of moto's private state, the AWS
shapes) imports nothing above it."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def modules(package_root: Path, prefix: str = "") -> dict[str, Path]:
    """Module name -> file, for every .py under `package_root` (names relative to `package_root`'s parent)."""
    found = {}
    for path in package_root.rglob("*.py"):
        parts = list(path.relative_to(package_root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[prefix + ".".join(parts)] = path
    return found


def imports(path: Path, name: str, known: set[str]) -> set[str]:
    """The known modules `path` imports, wherever the import statement is (a function-level import counts)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in graph[node]:
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def graph_of(files: dict[str, Path]) -> dict[str, set[str]]:
    known = set(files)
    return {name: imports(path, name, known) - {name} for name, path in files.items()}


def test_no_import_cycle_in_the_functions_code() -> None:
    assert cycles(graph_of(modules(ROOT / "src" / "shared") | modules(ROOT / "src" / "handlers"))) == []


def test_no_import_cycle_in_the_offline_cloud() -> None:
    assert cycles(graph_of(modules(ROOT / "localcloud"))) == []


def test_the_shared_code_never_imports_a_handler() -> None:
    graph = graph_of(modules(ROOT / "src" / "shared") | modules(ROOT / "src" / "handlers"))
    upward = {
        (name, target)
        for name, targets in graph.items()
        if name.startswith("shared")
        for target in targets
        if target.startswith("handlers")
    }
    assert upward == set()


GROUND_FLOOR = {
    "localcloud.clock",
    "localcloud.account",
    "localcloud.regions",
    "localcloud.moto_state",
    "localcloud.simulators.shapes",
}


def test_the_functions_code_imports_neither_the_offline_cloud_nor_the_tests() -> None:
    for path in [*(ROOT / "src").rglob("*.py")]:
        tree = ast.parse(path.read_text(), str(path))
        names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        assert not [name for name in names if name.split(".")[0] in {"localcloud", "tests", "tools", "bench"}], path


def test_the_offline_clouds_ground_floor_imports_nothing_above_it() -> None:
    graph = graph_of(modules(ROOT / "localcloud"))
    upward = {(name, target) for name in GROUND_FLOOR for target in graph[name] if target not in GROUND_FLOOR}
    assert upward == set()


def test_the_offline_cloud_imports_no_app_tool_benchmark_or_test_but_at_its_command_line() -> None:
    # Its command line (localcloud/__main__.py) wires the app's demo and sample documents (tools/demo.py) into
    # `demo` and `serve`; nothing else of the emulator knows the app.
    for path in (ROOT / "localcloud").rglob("*.py"):
        if path.name == "__main__.py":
            continue
        tree = ast.parse(path.read_text(), str(path))
        names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        assert not [name for name in names if name.split(".")[0] in {"tools", "bench", "tests"}], path
