"""`sam build`, when the artifacts are missing or stale: the offline cloud deploys what `sam deploy` would deploy.

The built template (.aws-sam/build/template.yaml beside the source template) points every function and layer at its
own artifact directory, which holds what its build put there (this project's: src/Makefile) and nothing of the
developer's environment. A fingerprint of the template and of every file under the functions' CodeUri and the layers'
ContentUri directories decides whether to build again; a file lock keeps two processes from building the same tree at
once.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from samtranslator.yaml_helper import yaml_parse

LOG = logging.getLogger("localcloud.runtime.build")
PROJECT_ROOT = Path(__file__).resolve().parents[2]
FINGERPRINT = ".localcloud-fingerprint"


class BuildError(Exception):
    """`sam build` failed; the message holds its output."""


def build_dir(template: Path) -> Path:
    return template.resolve().parent / ".aws-sam" / "build"


def ensure_built(template: Path, python: Path) -> Path:
    """Return the built template of `template`, running `sam build` first if its artifacts are missing or stale.
    `python` is the Lambda runtime interpreter: sam build checks that the function's runtime is on PATH."""
    template = template.resolve()
    target = build_dir(template)
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / "build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        fingerprint = _fingerprint(template)
        stamp = target / FINGERPRINT
        built = target / "template.yaml"
        if built.exists() and stamp.exists() and stamp.read_text() == fingerprint:
            return built
        LOG.warning("building %s with sam build (artifacts missing or stale)", template)
        command = [_sam(), "build", "--template", str(template), "--build-dir", str(target)]
        environment = {
            **os.environ,
            "SAM_CLI_TELEMETRY": "0",
            "PATH": f"{_base_bin(python)}{os.pathsep}{os.environ.get('PATH', '')}",
        }
        done = subprocess.run(  # noqa: S603 - SAM CLI from the project's own environment
            command, cwd=template.parent, env=environment, capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            # A failed cached build can leave SAM believing its dependency folder is current; start afresh next time.
            shutil.rmtree(target.parent / "cache", ignore_errors=True)
            shutil.rmtree(target.parent / "deps", ignore_errors=True)
            (target.parent / "build.toml").unlink(missing_ok=True)
            raise BuildError(f"sam build failed for {template}:\n{done.stdout}\n{done.stderr}")
        stamp.write_text(fingerprint)
        return built


def _base_bin(python: Path) -> Path:
    """The bin directory of the interpreter a venv was made from (SAM's pip builder needs one that has pip)."""
    config = python.parent.parent / "pyvenv.cfg"
    if config.exists():
        for line in config.read_text().splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "home":
                return Path(value.strip())
    return python.parent


def _sam() -> str:
    configured = os.environ.get("LOCALCLOUD_SAM")
    if configured:
        return configured
    local = PROJECT_ROOT / ".venv-sam" / "bin" / "sam"
    found = str(local) if local.exists() else shutil.which("sam")
    if not found:
        raise BuildError("SAM CLI not found: run `make install` (it creates .venv-sam) or set LOCALCLOUD_SAM")
    return found


def _fingerprint(template: Path) -> str:
    """A hash of the template and of every file the functions' packages and the layers are built from."""
    digest = hashlib.sha256(template.read_bytes())
    document: dict[str, Any] = yaml_parse(template.read_text())
    default = document.get("Globals", {}).get("Function", {}).get("CodeUri")
    code_dirs = {
        str(resource.get("Properties", {}).get("CodeUri", default))
        for resource in document.get("Resources", {}).values()
        if resource.get("Type") == "AWS::Serverless::Function"
    } | {
        str(resource.get("Properties", {}).get("ContentUri"))
        for resource in document.get("Resources", {}).values()
        if resource.get("Type") == "AWS::Serverless::LayerVersion"
    }
    for code_dir in sorted(code_dirs):
        root = template.parent / code_dir
        for file in sorted(root.rglob("*")):
            if file.is_file() and "__pycache__" not in file.parts:
                digest.update(file.relative_to(template.parent).as_posix().encode())
                digest.update(file.read_bytes())
    return digest.hexdigest()
