"""The house's layout holds: no import cycle in src/ or localcloud/ (function-level imports included), and no upward
import: src/shared never imports a handler, the functions' code never imports the offline cloud or the tests, and each
of the offline cloud's rooms imports only from its own floor and those below it (FLOORS), its ground floor (its clock,
its account, the Regions, its reading of moto's private state, the AWS shapes) from nothing above it."""

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
    "localcloud",  # the package itself: its docstring
    "localcloud.clock",
    "localcloud.account",
    "localcloud.regions",
    "localcloud.moto_state",
    "localcloud.simulators.shapes",
}


# The offline cloud's floors, lowest first, named as the README's Layout tour names its rooms. A module belongs to the
# floor of the longest name here that it is or lies under (localcloud.simulators.shapes: the ground floor).
FLOORS: list[tuple[str, set[str]]] = [
    ("the ground floor", GROUND_FLOOR),
    ("what the rooms build on", {"localcloud.httpapi", "localcloud.deploy", "localcloud.aslcheck", "localcloud.usage"}),
    ("runtime/", {"localcloud.runtime"}),
    ("fixes/", {"localcloud.fixes"}),
    ("simulators/", {"localcloud.simulators"}),
    ("durable/", {"localcloud.durable"}),
    ("the edge: cloud.py", {"localcloud.cloud"}),
    ("the edge: client.py", {"localcloud.client"}),
    ("the edge: __main__.py", {"localcloud.__main__"}),
]


def floor(module: str) -> int:
    """The index in FLOORS of `module`'s floor."""
    held = {name: level for level, (_, names) in enumerate(FLOORS) for name in names}
    homes = [name for name in held if module == name or module.startswith(f"{name}.")]
    if not homes:
        raise KeyError(f"{module} is on no floor: give it one in FLOORS")
    return held[max(homes, key=len)]


def test_the_functions_code_imports_neither_the_offline_cloud_nor_the_tests() -> None:
    for path in [*(ROOT / "src").rglob("*.py")]:
        tree = ast.parse(path.read_text(), str(path))
        names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        assert not [name for name in names if name.split(".")[0] in {"localcloud", "tests", "tools", "bench"}], path


def test_the_offline_cloud_imports_only_from_its_own_floor_or_below() -> None:
    graph = graph_of(modules(ROOT / "localcloud"))
    upward = {
        f"{name} ({FLOORS[floor(name)][0]}) imports {target} ({FLOORS[floor(target)][0]})"
        for name, targets in graph.items()
        for target in targets
        if floor(target) > floor(name)
    }
    assert upward == set()


def test_the_offline_cloud_imports_no_app_tool_benchmark_or_test() -> None:
    # The app's demo and sample documents (tools/demo.py) run on the emulator, never inside it: `make local` passes
    # the documents in (`serve --seed`).
    for path in (ROOT / "localcloud").rglob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        assert not [name for name in names if name.split(".")[0] in {"tools", "bench", "tests"}], path
