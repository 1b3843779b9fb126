"""The dependency layer's pins (src/requirements.txt) are the whole closure of the functions' runtime dependencies at
the versions requirements.lock records, which the tests ran against: two builds install the same files."""

from __future__ import annotations

import re
from importlib.metadata import distribution

from packaging.requirements import Requirement

from tests.unit.support import REPO

RUNTIME = (
    "aws-lambda-powertools",
    "pydantic",
    "boto3",
    "aws-durable-execution-sdk-python",
)  # what src/ imports beyond the standard library


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(path: str) -> dict[str, str]:
    return {canonical(n): v for n, v in re.findall(r"^([\w.-]+)==(\S+)$", (REPO / path).read_text(), re.MULTILINE)}


def closure(names: tuple[str, ...]) -> set[str]:
    """The distributions `names` need at run time, themselves included (as installed from requirements.lock)."""
    found: set[str] = set()
    todo = list(names)
    while todo:
        name = canonical(todo.pop())
        if name in found:
            continue
        found.add(name)
        for requirement in map(Requirement, distribution(name).requires or []):
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return found


def test_the_layer_pins_the_whole_runtime_closure_at_the_locked_versions() -> None:
    layer, lock = pins("src/requirements.txt"), pins("requirements.lock")
    assert set(layer) == closure(RUNTIME)
    assert {name: lock.get(name) for name in layer} == layer
