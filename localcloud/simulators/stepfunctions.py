"""The Step Functions operations moto does not serve (in-process it raises NotImplementedError, on the endpoint HTTP
500); every other Step Functions operation goes on to moto.

- ValidateStateMachineDefinition, so that `make preflight` checks the definitions offline as it does on AWS. A
  definition FAILs for what CreateStateMachine refuses: JSON it cannot read, a definition against the ASL schema or
  with a transition to nowhere (localcloud.aslcheck), and a Task naming an integration the Region lacks
  (localcloud.regions).
- TestState, AWS's way to unit-test one state (localcloud.simulators.teststate), after the same checks of its
  definition: what ValidateStateMachineDefinition would FAIL, TestState refuses as InvalidDefinition.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from botocore.model import OperationModel

from localcloud.aslcheck import TOP, check_graph, check_schema
from localcloud.clock import Clock
from localcloud.regions import missing_integrations, not_recognized
from localcloud.simulators import ServiceError, signed_region, teststate


class StepFunctions:
    """Answers ValidateStateMachineDefinition and TestState in the Region each call was signed for. Registered like
    a simulator, with `partial` set."""

    service: ClassVar[str] = "stepfunctions"
    partial: ClassVar[bool] = True  # the operations it does not define are moto's

    def __init__(self, region: str, clock: Clock | None = None) -> None:
        self.region = region  # a call signed for no Region (none known) is the cloud's
        self.clock = clock or Clock()  # the offline cloud's (a TestState's execution start time), or real time

    def ValidateStateMachineDefinition(self, params: dict[str, Any]) -> dict[str, Any]:
        try:
            definition = json.loads(params["definition"])
        except ValueError as exc:
            return _answer([_error("INVALID_JSON_DESCRIPTION", f"The definition is not valid JSON: {exc}")])
        return _answer(diagnostics(definition, signed_region() or self.region))

    def TestState(self, params: dict[str, Any]) -> dict[str, Any]:
        """One state of the definition run once (localcloud.simulators.teststate). With `stateName` the definition is
        a whole state machine, checked as CreateStateMachine checks it; without, it is the state itself, checked as
        the one state of a state machine (its Next may name a state the definition does not hold)."""
        region = signed_region() or self.region
        try:
            definition = json.loads(params["definition"])
        except ValueError as exc:
            raise ServiceError("InvalidDefinition", _invalid(_error("INVALID_JSON_DESCRIPTION", str(exc)))) from exc
        name = params.get("stateName")
        machine = definition if name is not None else teststate.single_state_machine(definition)
        problems = diagnostics(machine, region, graph=name is not None)
        if problems:
            raise ServiceError("InvalidDefinition", _invalid(problems[0]))
        return teststate.run(machine, name or teststate.SINGLE_STATE, params, region, self.clock.now())

    def handle(self, operation: OperationModel, params: dict[str, Any]) -> dict[str, Any]:
        return getattr(self, operation.name)(params)  # type: ignore[no-any-return]

    def settle(self, timeout: float = 10.0) -> None:
        pass

    def stop(self) -> None:
        pass


def diagnostics(definition: Any, region: str, graph: bool = True) -> list[dict[str, str]]:
    """What Step Functions refuses in a definition, as ValidateStateMachineDefinition's diagnostics (none: valid)."""
    if not isinstance(definition, dict):
        return [_error("SCHEMA_VALIDATION_FAILED", "The definition is not a JSON object")]
    problems = check_schema(definition) + (check_graph(definition) if graph else [])
    found = [
        _error("SCHEMA_VALIDATION_FAILED", message, f"/States/{state}" if state != TOP else None)
        for state, message in problems
    ]
    return found + [
        _error("SCHEMA_VALIDATION_FAILED", not_recognized(resource), pointer)
        for pointer, resource in missing_integrations(definition, region)
    ]


def _error(code: str, message: str, location: str | None = None) -> dict[str, str]:
    return {"severity": "ERROR", "code": code, "message": message} | ({"location": location} if location else {})


def _invalid(diagnostic: dict[str, str]) -> str:
    """A diagnostic as the message of CreateStateMachine's (and TestState's) InvalidDefinition."""
    where = f" at {diagnostic['location']}" if "location" in diagnostic else ""
    return f"Invalid State Machine Definition: '{diagnostic['code']}: {diagnostic['message']}{where}'"


def _answer(diagnostics: list[dict[str, str]]) -> dict[str, Any]:
    return {"result": "FAIL" if diagnostics else "OK", "diagnostics": diagnostics, "truncated": False}
