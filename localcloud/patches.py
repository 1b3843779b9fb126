"""Every change the offline cloud makes to moto, in one place: what it replaces and why.

A `Patch` replaces one attribute of a moto class or module. Each one cites the gap it closes in the catalogue of
docs/offline-cloud.md ("gap N"), or says "speed" when it only makes the offline cloud faster (same answers).
`Patches` installs a set of them and uninstalls it, restoring moto exactly as it was; LocalCloud holds one set for
its lifetime, so a cloud nested in another (a test's own cloud inside a session's) restores the outer one's.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import moto.core.responses
from jsonpath_ng import parse as jsonpath_parse
from jsonpath_ng.ext import parse as jsonpath_ext_parse  # type: ignore[attr-defined]
from moto.stepfunctions.parser.asl.component.common.path import result_path
from moto.stepfunctions.parser.asl.utils import json_path

_MISSING = object()


@dataclass(frozen=True)
class Patch:
    owner: Any  # the class or module whose attribute is replaced
    name: str
    replacement: Any
    why: str  # "gap N" (docs/offline-cloud.md) or "speed"


class Patches:
    """A set of patches, installed together and uninstalled in reverse order."""

    def __init__(self, patches: Iterable[Patch]) -> None:
        self.patches = list(patches)
        self._saved: list[tuple[Any, str, Any]] = []

    def install(self) -> None:
        if self._saved:
            raise RuntimeError("these patches are installed already")
        for patch in self.patches:
            if not hasattr(patch.owner, patch.name):
                raise AttributeError(f"{patch.owner!r} has no {patch.name} to patch ({patch.why}): has moto changed?")
            self._saved.append((patch.owner, patch.name, vars(patch.owner).get(patch.name, _MISSING)))
            setattr(patch.owner, patch.name, patch.replacement)

    def uninstall(self) -> None:
        while self._saved:
            owner, name, original = self._saved.pop()
            if original is _MISSING:
                delattr(owner, name)  # it was inherited
            else:
                setattr(owner, name, original)

    def __enter__(self) -> Patches:
        self.install()
        return self

    def __exit__(self, *exc: object) -> None:
        self.uninstall()


# --- speed -------------------------------------------------------------------------------------------------------
# moto's interpreter parses a JSONPath (building a new yacc parser) every time a state reads one, and moto's response
# classes list their own methods with `inspect` on every request; both answers depend on their argument alone.
cached_jsonpath = functools.lru_cache(maxsize=4096)(jsonpath_parse)
cached_jsonpath_ext = functools.lru_cache(maxsize=4096)(jsonpath_ext_parse)
_method_names = functools.cache(moto.core.responses.method_names_from_class)

SPEED = (
    Patch(json_path, "parse", cached_jsonpath_ext, "speed"),
    Patch(result_path, "parse", cached_jsonpath, "speed"),
    Patch(moto.core.responses, "method_names_from_class", _method_names, "speed"),
)
