"""Step Functions' ValidateStateMachineDefinition, which moto does not serve (in-process it raises
NotImplementedError, on the endpoint HTTP 500), so that `make preflight` checks the definitions offline as it does on
AWS. A definition FAILs for what CreateStateMachine refuses: JSON it cannot read, a definition against the ASL schema
or with a transition to nowhere (localcloud.aslcheck), and a Task naming an integration the Region lacks
(localcloud.regions). Every other Step Functions operation goes on to moto."""

from __future__ import annotations

import json
from typing import Any, ClassVar

from localcloud.aslcheck import TOP, check_graph, check_schema
from localcloud.regions import missing_integrations, not_recognized
from localcloud.simulators import signed_region


class DefinitionValidation:
    """Answers ValidateStateMachineDefinition in the Region each call was signed for. Registered like a simulator,
    with `partial` set."""

    service: ClassVar[str] = "stepfunctions"
    partial: ClassVar[bool] = True  # the operations it does not define are moto's

    def __init__(self, region: str) -> None:
        self.region = region  # a call signed for no Region (none known) is the cloud's

    def ValidateStateMachineDefinition(self, params: dict[str, Any]) -> dict[str, Any]:
        try:
            definition = json.loads(params["definition"])
        except ValueError as exc:
            return _answer([_error("INVALID_JSON_DESCRIPTION", f"The definition is not valid JSON: {exc}")])
        if not isinstance(definition, dict):
            return _answer([_error("SCHEMA_VALIDATION_FAILED", "The definition is not a JSON object")])
        diagnostics = [
            _error("SCHEMA_VALIDATION_FAILED", message, f"/States/{state}" if state != TOP else None)
            for state, message in check_schema(definition) + check_graph(definition)
        ]
        diagnostics += [
            _error("SCHEMA_VALIDATION_FAILED", not_recognized(resource), pointer)
            for pointer, resource in missing_integrations(definition, signed_region() or self.region)
        ]
        return _answer(diagnostics)

    def handle(self, operation: Any, params: dict[str, Any]) -> dict[str, Any]:
        return self.ValidateStateMachineDefinition(params)

    def settle(self, timeout: float = 10.0) -> None:
        pass

    def stop(self) -> None:
        pass


def _error(code: str, message: str, location: str | None = None) -> dict[str, str]:
    return {"severity": "ERROR", "code": code, "message": message} | ({"location": location} if location else {})


def _answer(diagnostics: list[dict[str, str]]) -> dict[str, Any]:
    return {"result": "FAIL" if diagnostics else "OK", "diagnostics": diagnostics, "truncated": False}
