"""The packages `sam build` makes of template.yaml are what Lambda should get (src/Makefile): one dependency layer
holding src/requirements.txt's pins, and function packages holding src/'s code alone, every module with bytecode
Python uses as it is; the offline workers load them read-only, as Lambda's /var/task and /opt are."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from localcloud.cloud import CloudConfig, LocalCloud
from localcloud.runtime.build import ensure_built
from localcloud.runtime.lambdas import runtime_python

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "template.yaml"
UNCHECKED_HASH = 0b01  # PEP 552 flags: hash-based (bit 0), source not checked (bit 1 clear)


@pytest.fixture(scope="module")
def build() -> Path:
    return ensure_built(TEMPLATE, runtime_python()).parent


def bytecode_flags(source: Path) -> int | None:
    """The PEP 552 flags of the module's shipped bytecode (None: there is none)."""
    pyc = source.parent / "__pycache__" / f"{source.stem}.cpython-313.pyc"
    return int.from_bytes(pyc.read_bytes()[4:8], "little") if pyc.exists() else None


def test_every_function_package_holds_src_code_alone_each_module_with_unchecked_bytecode(build: Path) -> None:
    # Given every function's package as sam build made it
    packages = [d for d in build.iterdir() if d.is_dir() and d.name.endswith("Function")]
    assert len(packages) >= 18
    for package in packages:
        # Then it holds the code of src/ and nothing else (no dependency: they are the layer's)
        assert sorted(p.name for p in package.iterdir()) == ["handlers", "shared"], package.name
        # And every module has its bytecode, which Python loads without looking at the source's time
        modules = list(package.rglob("*.py"))
        assert {bytecode_flags(m) for m in modules} == {UNCHECKED_HASH}, package.name


def test_the_layer_holds_the_pinned_dependencies_with_unchecked_bytecode(build: Path) -> None:
    # Given the dependency layer as sam build made it, and the pins it is built from
    site = build / "DependenciesLayer" / "python"
    pins = dict(re.findall(r"^([\w.-]+)==(\S+)$", (ROOT / "src" / "requirements.txt").read_text(), re.MULTILINE))
    # Then it holds exactly those distributions at those versions
    dists = [d.name.removesuffix(".dist-info").rsplit("-", 1) for d in site.glob("*.dist-info")]
    installed = {re.sub(r"[-_.]+", "-", name).lower(): version for name, version in dists}
    assert installed == pins
    # And its modules have bytecode Python uses as it is (the SDK's data files are not modules)
    modules = [m for m in site.rglob("*.py") if "/bin/" not in m.as_posix()]
    assert {bytecode_flags(m) for m in modules} == {UNCHECKED_HASH}


def test_a_worker_imports_its_dependencies_from_the_layer_and_writes_nothing_into_the_packages(build: Path) -> None:
    # Given the packages' files before any worker ran
    def files() -> set[tuple[str, int]]:
        return {(str(p), p.stat().st_mtime_ns) for p in build.rglob("*") if p.is_file()}

    before = files()
    # When the callback core's functions run (their package imports pydantic and Powertools, which the runtime
    # interpreter lacks: only the layer has them)
    parameters = {"Documents": "false", "Extract": "false", "ConcurrencySamples": "false"}
    config = CloudConfig(template=TEMPLATE, stack_name="packages", aws_port=0, http_port=0, parameters=parameters)
    with LocalCloud(config) as cloud:
        response, failed = cloud.invoke_function("RegisterTokenFunction", {"service": "translate"})
    # Then the handler ran (its input refused by its pydantic model), and no worker wrote a file into the packages
    assert failed and response["errorType"] == "ValidationError"
    assert files() == before
