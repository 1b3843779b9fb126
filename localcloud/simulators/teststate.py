"""Step Functions' TestState on the offline endpoint (boto3 `test_state`, `aws stepfunctions test-state`), answered as
AWS documents it (API reference: TestState, MockInput, TestStateConfiguration, InspectionData; developer guide:
"Testing state machines with TestState API") and as its recorded answers show.

One state of a definition runs once on moto's interpreter, with the offline cloud's fixes installed: its InputPath,
Parameters, ResultSelector, ResultPath, OutputPath, Choice rules, Retry and Catch are moto's evaluation of the ASL,
as in an execution, on this call's own parse of the state. TestState adds:
- the mock, in place of the state's work: a result (checked against the service's API output shape in botocore,
  `fieldValidationMode`) or an error. A Task takes it through moto's mocked mode, where its service call would be (a
  `.waitForTaskToken` Task as the callback's outcome, a `.sync` one as the job's); for a Parallel, a Map or an
  activity it stands for the branches, iterations or activity, which TestState never runs;
- one attempt: where moto would retry, TestState reports RETRIABLE with the matching Retry's index and the backoff
  it would wait after `retrierRetryCount` retries; once those are spent, the Catch takes the error (CAUGHT_ERROR,
  with the Catch's next state) or nothing does (FAILED);
- the answer: status, output, error, cause, nextState, and at DEBUG or TRACE the inspection data.

Not served (docs/offline-cloud.md, TestState): an HTTP Task's request and response (TRACE's own data; revealSecrets
is accepted and reveals nothing, as nothing secret is added offline); a Map's item inspection (afterItemsPath,
afterItemSelector, afterItemBatcher, afterItemsPointer: the iterations never run, and mapItemReaderData, which feeds
them, changes nothing); the check of a `.waitForTaskToken` Task's mock (the callback's outcome, whatever SendTaskSuccess
sent: AWS does not say it checks one) and of a `.sync` mock of a service other than Step Functions. A jittered
retrier's backoff is its ceiling, and a given context object is what the Task's Parameters read (its ResultSelector
reads the one made up).
"""

from __future__ import annotations

import copy
import json
import re
import threading
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

import botocore.session
from botocore.exceptions import UnknownServiceError
from botocore.model import Shape
from moto.stepfunctions.parser.api import HistoryEventType, StateMachineType, TaskFailedEventDetails
from moto.stepfunctions.parser.asl.component.common.catch.catch_outcome import CatchOutcome
from moto.stepfunctions.parser.asl.component.common.error_name.custom_error_name import (
    ILLEGAL_CUSTOM_ERROR_PREFIX,
    CustomErrorName,
)
from moto.stepfunctions.parser.asl.component.common.error_name.error_name import ErrorName
from moto.stepfunctions.parser.asl.component.common.error_name.failure_event import FailureEvent, FailureEventException
from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name import StatesErrorName
from moto.stepfunctions.parser.asl.component.common.retry.retry_outcome import RetryOutcome
from moto.stepfunctions.parser.asl.component.state.exec.execute_state import ExecutionState
from moto.stepfunctions.parser.asl.component.state.exec.state_map.state_map import StateMap
from moto.stepfunctions.parser.asl.component.state.exec.state_parallel.state_parallel import StateParallel
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.resource import ResourceCondition
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service import (
    StateTaskService,
)
from moto.stepfunctions.parser.asl.component.state.exec.state_task.state_task import StateTask
from moto.stepfunctions.parser.asl.component.state.exec.state_task.state_task_activitiy import StateTaskActivity
from moto.stepfunctions.parser.asl.component.state.state import CommonStateField
from moto.stepfunctions.parser.asl.component.state.state_pass.state_pass import StatePass
from moto.stepfunctions.parser.asl.component.state.state_type import StateType
from moto.stepfunctions.parser.asl.eval.environment import Environment
from moto.stepfunctions.parser.asl.eval.evaluation_details import AWSExecutionDetails
from moto.stepfunctions.parser.asl.eval.event.event_detail import EventDetails
from moto.stepfunctions.parser.asl.eval.event.event_manager import EventHistoryContext
from moto.stepfunctions.parser.asl.eval.program_state import ProgramError, ProgramRunning
from moto.stepfunctions.parser.asl.eval.states import ContextObjectData, ExecutionData, StateMachineData
from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser
from moto.stepfunctions.parser.asl.utils.encoding import to_json_str
from moto.stepfunctions.parser.mocking.mock_config import MockedResponseReturn
from moto.utilities.utils import get_partition

from localcloud.account import ACCOUNT_ID
from localcloud.aslcheck import scopes, states_of
from localcloud.fixes.atomic import built_once
from localcloud.fixes.sfn import aws_timestamp
from localcloud.moto_state import declare_variables, variables
from localcloud.simulators import ServiceError

SINGLE_STATE: Final[str] = "StateName"  # AWS's name for the state of a single-state definition ("/States/StateName/")
TIME_LIMIT_SECONDS: Final[float] = 300  # "The TestState API can run for up to five minutes" (API_TestState)
LEVELS: Final[tuple[str, ...]] = ("INFO", "DEBUG", "TRACE")
VALIDATION_MODES: Final[tuple[str, ...]] = ("STRICT", "PRESENT", "NONE")
_MOCKABLE: Final[tuple[StateType, ...]] = (StateType.Task, StateType.Map, StateType.Parallel)
_ROLE_ARN = re.compile(r"arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+")
# The context object's fields a test may give (API_TestState: "a valid Context object"; the recorded refusals name
# the field, and 'Map', which TestState makes up itself).
_CONTEXT_FIELDS: Final[dict[str, dict[str, type]]] = {
    "Execution": {"Id": str, "Input": object, "Name": str, "RoleArn": str, "StartTime": str},
    "State": {"EnteredTime": str, "Name": str, "RetryCount": int},
    "StateMachine": {"Id": str, "Name": str},
    "Task": {"Token": str},
}


def single_state_machine(state: Any) -> dict[str, Any]:
    """A single-state definition as the one state of a state machine, the form every check and parse takes."""
    return {"StartAt": SINGLE_STATE, "States": {SINGLE_STATE: state}}


def run(machine: dict[str, Any], name: str, params: dict[str, Any], region: str, now: datetime) -> dict[str, Any]:
    """TestState's answer for state `name` of `machine`, a definition Step Functions accepts; ServiceError for a
    request AWS refuses."""
    found = _locate(machine, name, machine.get("QueryLanguage", "JSONPath"))
    if found is None:
        raise _invalid("State not found in definition")
    state_json, language = found
    state = _parse(state_json, name, language)
    run = _request(params, state, state_json)
    run.execute(state, _environment(run, region, now))
    return run.answer()


@dataclass
class _Mock:
    result: Any = None
    error: str | None = None
    cause: str = ""


@dataclass
class _Run:
    """One TestState call: what it asked for, and what the state's run gathers (shared by moto's environment and
    every frame it opens)."""

    state_name: str
    input: Any
    level: str
    mock: _Mock | None
    retries: int  # stateConfiguration.retrierRetryCount: the retries already made
    map_failures: int | None  # stateConfiguration.mapIterationFailureCount
    tolerances: frozenset[str]  # the Map's tolerated failures it declares: "count", "percentage"
    role_arn: str | None
    context: dict[str, Any] | None  # the test's context object, in place of the one made up
    variables: dict[str, Any]
    inspection: dict[str, Any] = field(default_factory=dict)
    error_details: dict[str, int] = field(default_factory=dict)
    status: str | None = None  # RETRIABLE, CAUGHT_ERROR or FAILED, once the state's run decides it
    error: str | None = None
    cause: str | None = None
    output: Any = None
    next_state: str | None = None

    def record(self, key: str, value: Any) -> None:
        self.inspection[key] = to_json_str(value)

    def decide(self, status: str, error: str | None, cause: str | None) -> None:
        self.status, self.error, self.cause = status, error, cause

    def execute(self, state: CommonStateField, env: _Environment) -> None:
        """The state's one run, on a thread of its own: past TestState's time limit it fails States.Timeout."""
        _instrument(state, self)
        self.record("input", self.input)
        env.next_state_name = state.name

        def attempt() -> None:
            try:
                state.eval(env)
            except FailureEventException as failure:  # an error nothing caught, or a Fail state's
                error, cause = failure.extract_error_cause_pair() or (None, None)
                self.decide("FAILED", error, cause)
            except Exception as exc:  # noqa: BLE001 - what moto raises beyond the ASL's errors fails the state, as
                # moto's own TestState reports it: States.Runtime, with the exception as its cause
                self.decide("FAILED", "States.Runtime", f"{type(exc).__name__}({exc})")

        worker = threading.Thread(target=attempt, name=f"TestState {state.name}", daemon=True)
        worker.start()
        worker.join(TIME_LIMIT_SECONDS)
        program = env.program_state()
        if worker.is_alive():
            env.set_timed_out()  # moto's loops stop at their next check
            self.decide("FAILED", "States.Timeout", None)
        elif isinstance(program, ProgramError) and self.status != "FAILED":  # an error that ends an execution at once
            details = program.error or {}
            self.decide("FAILED", details.get("error"), details.get("cause"))
        elif self.status is None:
            self.status = "SUCCEEDED"
        if self.status in ("SUCCEEDED", "CAUGHT_ERROR"):
            self.output = env.states.get_input()
            self.next_state = env.next_state_name if isinstance(program, ProgramRunning) else None
        if held := variables(env.variable_store):
            self.record("variables", held)

    def answer(self) -> dict[str, Any]:
        answer: dict[str, Any] = {"status": self.status}
        if self.status in ("SUCCEEDED", "CAUGHT_ERROR"):
            answer["output"] = to_json_str(self.output)
            if self.next_state is not None:
                answer["nextState"] = self.next_state
        if self.status != "SUCCEEDED":
            answer |= {key: value for key, value in (("error", self.error), ("cause", self.cause)) if value is not None}
        if self.level != "INFO":
            details = {"errorDetails": self.error_details} if self.error_details else {}
            answer["inspectionData"] = self.inspection | details
        return answer


class _Environment(Environment):
    """moto's evaluation environment for one TestState run: its Task states find the mock in moto's mocked mode, and
    every frame moto opens for the state (where the Task's call runs) is one of these, sharing the run."""

    run: _Run

    @classmethod
    def as_frame_of(cls, env: Any, event_history_frame_cache: Any = None) -> Any:
        # moto's own makes a plain Environment, which would not find the mock
        return cls.as_inner_frame_of(env, env.variable_store, event_history_frame_cache)

    @classmethod
    def as_inner_frame_of(cls, env: Any, variable_store: Any, event_history_frame_cache: Any = None) -> Any:
        frame = super().as_inner_frame_of(
            env=env, variable_store=variable_store, event_history_frame_cache=event_history_frame_cache
        )
        frame.run = env.run
        return frame

    def is_mocked_mode(self) -> bool:
        return self.run.mock is not None

    def get_current_mocked_response(self) -> MockedResponseReturn:
        """The mocked result; a mocked error is raised here, where the service's call would fail."""
        mock = self.run.mock
        assert mock is not None  # moto asks only in mocked mode
        if mock.error is not None:
            raise FailureEventException(_failure(self, mock.error, mock.cause))
        return MockedResponseReturn(range_start=0, range_end=0, payload=copy.deepcopy(mock.result))


def _failure(env: Environment, error: str, cause: str) -> FailureEvent:
    """A failure of the state as moto raises a Task's. An error named `States.*` is that error of the ASL's, as on AWS
    (recorded: a mocked States.TaskFailed is caught by a Catch on States.TaskFailed): a mocked States.Timeout is
    caught by a Catch on States.Timeout, and moto's matching leaves it to no Catch on States.TaskFailed."""
    name: ErrorName
    if not error.startswith(ILLEGAL_CUSTOM_ERROR_PREFIX):
        name = CustomErrorName(error)
    else:
        try:
            name = StatesErrorName.from_name(error)
        except ValueError:  # a States.* name the ASL does not define: only States.ALL matches it
            name = ErrorName(error)
    details = TaskFailedEventDetails(error=error, cause=cause)
    return FailureEvent(
        env=env,
        error_name=name,
        event_type=HistoryEventType.TaskFailed,
        event_details=EventDetails(taskFailedEventDetails=details),
    )


# --- the definition ---------------------------------------------------------------------------------------------
def _locate(scope: dict[str, Any], name: str, language: str) -> tuple[dict[str, Any], str] | None:
    """The state named `name` in `scope` or any scope nested in its states (Parallel branches, Map processors), with
    the query language it runs in: its own, else that of the nearest state enclosing it, else the machine's."""
    for state_name, state in states_of(scope).items():
        own = state.get("QueryLanguage", language) if isinstance(state, dict) else language
        if state_name == name:
            return state, own
        for child in scopes(state):
            if found := _locate(child, name, own):
                return found
    return None


def _nested_names(state: dict[str, Any]) -> set[str]:
    """The names of the states inside a Parallel's branches or a Map's processor, at any depth."""
    names: set[str] = set()
    for scope in scopes(state):
        for name, inner in states_of(scope).items():
            names |= {name} | _nested_names(inner)
    return names


def _parse(state: dict[str, Any], name: str, language: str) -> CommonStateField:
    """This call's own parse of the state by moto (the state alone is a small parse; nothing else shares what the
    run then hooks into)."""
    machine = {"QueryLanguage": language, "StartAt": name, "States": {name: state}}
    try:
        program = AmazonStateLanguageParser.parse(json.dumps(machine))[0]
    except Exception as exc:  # moto's parser raises ASLParserException, ValueError, TypeError, ...
        # a definition Step Functions' checks passed but moto cannot run: said as such (make lint's aslcheck
        # reports it for this project's own definitions)
        message = f"Invalid State Machine Definition: 'the offline interpreter (moto) cannot parse the state: {exc}'"
        raise ServiceError("InvalidDefinition", message) from exc
    return program.states.states[name]


# --- the request ------------------------------------------------------------------------------------------------
def _invalid(message: str) -> ServiceError:
    return ServiceError("ValidationException", message)


def _request(params: dict[str, Any], state: CommonStateField, state_json: dict[str, Any]) -> _Run:
    """The run a request asks for, or AWS's refusal of it."""
    level = params.get("inspectionLevel", "INFO")
    if level not in LEVELS:
        raise _invalid(_enum_message(level, "inspectionLevel", LEVELS))
    try:
        value = json.loads(params.get("input") or "{}")
    except ValueError as exc:
        raise ServiceError("InvalidExecutionInput", f"Invalid State Machine Execution Input: '{exc}'") from exc
    role_arn = params.get("roleArn")
    if role_arn is not None and not _ROLE_ARN.fullmatch(role_arn):
        raise ServiceError("InvalidArn", f"Invalid Arn: '{role_arn}'")
    mock = _mock(params, state, state_json)
    config = params.get("stateConfiguration") or {}
    map_failures = _map_failures(config, mock)
    if mock is None:
        _check_unmocked(params, state, role_arn)
    retries = config.get("retrierRetryCount", 0)
    if not isinstance(retries, int) or retries < 0:
        raise _invalid("retrierRetryCount must be an integer of 0 or more")
    _check_caused_by(config, mock, state, state_json)
    return _Run(
        state_name=state.name,
        input=value,
        level=level,
        mock=mock,
        retries=retries,
        map_failures=map_failures,
        tolerances=_tolerances(state_json),
        role_arn=role_arn,
        context=_context(params["context"], state) if "context" in params else None,
        variables=_variables(params.get("variables")),
    )


def _tolerances(state_json: dict[str, Any]) -> frozenset[str]:
    """The tolerated failures a Map declares ("count": ToleratedFailureCount(Path), "percentage": ...Percentage(Path)):
    moto's defaults (0) cannot tell a Map that tolerates none from one that says nothing, which AWS does not fail."""
    return frozenset(kind for kind in ("count", "percentage") if any(kind.title() in key for key in state_json))


def _enum_message(value: Any, member: str, allowed: tuple[str, ...]) -> str:
    return (
        f"1 validation error detected: Value '{value}' at '{member}' failed to satisfy constraint: Member must satisfy "
        f"enum value set: [{', '.join(allowed)}]"
    )


def _check_unmocked(params: dict[str, Any], state: CommonStateField, role_arn: str | None) -> None:
    """What TestState runs only with a mock (API_TestState; developer guide, "Mocking service integrations")."""
    if state.state_type in (StateType.Map, StateType.Parallel):
        raise ServiceError(
            "InvalidDefinition",
            "TestState API does not support Map or Parallel states. Supported state types include: "
            "[Task, Wait, Pass, Succeed, Fail, Choice]",
        )
    if isinstance(state, StateTask):
        if not role_arn:
            raise _invalid("RoleArn must be specified when testing a Task state")
        if isinstance(state, StateTaskActivity) or _waits(state):
            raise _invalid(
                "TestState only supports Activity tasks and the .sync and .waitForTaskToken service integration "
                "patterns when a mock is specified"
            )
    if "context" in params:
        raise _invalid("TestState does not support Context when a mock is not specified.")


def _waits(state: CommonStateField) -> bool:
    """A Task of the .sync or .waitForTaskToken integration pattern (the ones whose context has a Task field)."""
    return isinstance(state, StateTaskService) and state.resource.condition is not None


def _mock(params: dict[str, Any], state: CommonStateField, state_json: dict[str, Any]) -> _Mock | None:
    spec = params.get("mock")
    if spec is None:
        return None
    if params.get("revealSecrets"):
        raise _invalid("TestState does not support RevealSecrets when a mock is specified.")
    if state.state_type not in _MOCKABLE:
        raise _invalid(f"State type '{state.state_type.name}' is not supported when a mock is specified")
    if ("result" in spec) == ("errorOutput" in spec):
        raise _invalid("A test mock should have only one of the following fields: [result, errorOutput].")
    mode = spec.get("fieldValidationMode", "STRICT")
    if mode not in VALIDATION_MODES:
        raise _invalid(_enum_message(mode, "mock.fieldValidationMode", VALIDATION_MODES))
    if "errorOutput" in spec:
        error_output = spec["errorOutput"]
        if "error" not in error_output:
            raise _invalid("mock.errorOutput.error is required when mock.errorOutput is specified")
        return _Mock(error=error_output["error"], cause=error_output.get("cause", ""))
    try:
        result = json.loads(spec["result"])
    except ValueError as exc:
        raise _invalid("Mocked result must be valid JSON") from exc
    if state.state_type == StateType.Parallel:
        if not isinstance(result, list):
            raise _invalid("Mocked result must be an array.")
        if len(result) != len(state_json.get("Branches", [])):
            raise _invalid("Mocked result must contain the same number of items as number of Parallel branches.")
    elif state.state_type == StateType.Map:
        if "ResultWriter" in state_json and not isinstance(result, dict):
            raise _invalid("Mocked result must be a JSON object.")
        if "ResultWriter" not in state_json and not isinstance(result, list):
            raise _invalid("Mocked result must be an array.")
    elif mode != "NONE" and (problem := _api_problem(result, state, strict=mode == "STRICT")) is not None:
        raise _invalid(f"Mock result schema validation error: {problem}")
    return _Mock(result=result)


def _map_failures(config: dict[str, Any], mock: _Mock | None) -> int | None:
    failures = config.get("mapIterationFailureCount")
    if failures is None:
        return None
    if mock is None:
        raise _invalid("TestState does not support MapIterationFailureCount when a mock is not specified.")
    if isinstance(mock.result, list) and failures > len(mock.result):
        raise _invalid("Map iteration failure count must be less than or equal to the number of Map iterations")
    return int(failures)


def _check_caused_by(
    config: dict[str, Any], mock: _Mock | None, state: CommonStateField, state_json: dict[str, Any]
) -> None:
    """A mocked error of a Map or Parallel state names the state inside it that raised it (developer guide,
    "Specifying error source with errorCausedByState")."""
    if mock is None or mock.error is None or state.state_type not in (StateType.Map, StateType.Parallel):
        return
    caused_by = config.get("errorCausedByState")
    if caused_by is None:
        raise _invalid(
            "stateConfiguration.errorCausedByState is required when an error is mocked for a Map or Parallel state"
        )
    if caused_by not in _nested_names(state_json):
        raise _invalid(f"errorCausedByState '{caused_by}' is not a state of the tested {state.state_type.name} state")


def _context(text: str, state: CommonStateField) -> dict[str, Any]:
    invalid = "Invalid Context object provided: "
    try:
        context = json.loads(text)
    except ValueError as exc:
        raise _invalid(f"{invalid}{exc}") from exc
    if not isinstance(context, dict):
        raise _invalid(f"{invalid}the Context object must be a JSON object")
    for key, fields in context.items():
        if key == "Map":
            raise _invalid(f"{invalid}'Map' field is not supported when mocking a Context object")
        if key not in _CONTEXT_FIELDS:
            raise _invalid(f"{invalid}Field '{key}' is not allowed")
        if key == "Task" and not _waits(state):
            raise _invalid(
                f"{invalid}Context object contains 'Task' when state is not a Task state with a '.sync' or "
                "'.waitForTaskToken' service integration pattern"
            )
        if not isinstance(fields, dict):
            raise _invalid(f"{invalid}{key} must be an object")
        for name, value in fields.items():
            kind = _CONTEXT_FIELDS[key].get(name)
            if kind is None:
                raise _invalid(f"{invalid}Field '{name}' is not allowed")
            if kind is str and not isinstance(value, str):
                raise _invalid(f"{invalid}{key}.{name} must be a string")
            if kind is int and (not isinstance(value, int) or isinstance(value, bool)):
                raise _invalid(f"{invalid}{key}.{name} must be an integer")
    return context


def _variables(text: str | None) -> dict[str, Any]:
    try:
        found = json.loads(text) if text is not None else {}
    except ValueError as exc:
        raise _invalid(f"Invalid variables: {exc}") from exc
    if not isinstance(found, dict):
        raise _invalid("Invalid variables: a JSON object of the variables' names and values is expected")
    return found


# --- the mock's check against the service's API -------------------------------------------------------------------
def _api_output(state: CommonStateField) -> Shape | None:
    """botocore's model of the answer a service Task's mocked result stands for; None where there is none to check
    against: a callback's outcome (whatever SendTaskSuccess sent), a Lambda function or activity resource's own
    output, an integration botocore does not model (HTTP, API Gateway, EKS: AWS validates none of them)."""
    if not isinstance(state, StateTaskService):
        return None
    condition = state.resource.condition
    service = state._get_boto_service_name()
    if condition is None:
        return _output_shape(service, state.resource.api_action)
    if condition == ResourceCondition.WaitForTaskToken:
        return None
    # .sync: the API Step Functions polls for the job ("for startExecution.sync:2 ... the DescribeExecution response
    # schema"); the other services' polling APIs are not mapped here
    return _output_shape(service, "describeExecution") if service == "stepfunctions" else None


def _api_problem(result: Any, state: CommonStateField, strict: bool) -> str | None:
    shape = _api_output(state)
    return None if shape is None else _shape_problem(result, shape, None, strict)


@built_once
def _output_shape(service: str, action: str) -> Shape | None:
    try:
        model = botocore.session.get_session().get_service_model(service)
    except UnknownServiceError:
        return None
    operation = action[:1].upper() + action[1:]
    return model.operation_model(operation).output_shape if operation in model.operation_names else None


def _shape_problem(value: Any, shape: Shape, name: str | None, strict: bool) -> str | None:
    """The first way `value` breaks `shape`, in AWS's words; None if it conforms. Members are named as Step Functions
    names them (`ExecutionArn`, not botocore's `executionArn`); a field the model does not define is not checked, and
    required members are only required in STRICT mode."""
    kind = shape.type_name
    if kind == "structure":
        if not isinstance(value, dict):
            return f"Field '{name}' must be an object" if name else "Mock result must be a JSON object"
        members = {StateTaskService._to_sfn_cased(member): inner for member, inner in shape.members.items()}
        if strict:
            for member in shape.required_members:
                if StateTaskService._to_sfn_cased(member) not in value:
                    return f"Required field '{StateTaskService._to_sfn_cased(member)}' is missing"
        problems = (_shape_problem(inner, members[key], key, strict) for key, inner in value.items() if key in members)
        return next((problem for problem in problems if problem is not None), None)
    if kind == "list":
        if not isinstance(value, list):
            return f"Field '{name}' must be an array"
        return next((p for item in value if (p := _shape_problem(item, shape.member, name, strict)) is not None), None)
    if kind == "map":
        if not isinstance(value, dict):
            return f"Field '{name}' must be an object"
        items = value.values()
        return next((p for item in items if (p := _shape_problem(item, shape.value, name, strict)) is not None), None)
    return _scalar_problem(value, shape, name)


def _scalar_problem(value: Any, shape: Shape, name: str | None) -> str | None:
    kind, limits = shape.type_name, shape.metadata
    if kind in ("string", "blob", "timestamp"):
        if not isinstance(value, str):
            return f"Field '{name}' must be a string"
        if kind == "string" and shape.enum and value not in shape.enum:
            return f"Field '{name}' is not an expected value"
        if kind != "timestamp" and len(value) < limits.get("min", 0):
            return f"Field '{name}' is smaller than the minimum length"
    elif kind in ("integer", "long", "float", "double"):
        numbers = (int,) if kind in ("integer", "long") else (int, float)
        if isinstance(value, bool) or not isinstance(value, numbers):
            return f"Field '{name}' must be a number"
        if "min" in limits and value < limits["min"]:
            return f"Field '{name}' is less than the minimum value"
        if "max" in limits and value > limits["max"]:
            return f"Field '{name}' exceeds the maximum value"
    elif kind == "boolean" and not isinstance(value, bool):
        return f"Field '{name}' must be a boolean"
    return None  # it conforms (a document is any JSON)


# --- the run ----------------------------------------------------------------------------------------------------
def _environment(run: _Run, region: str, now: datetime) -> _Environment:
    """moto's environment for the run, with the context object TestState makes up (the recorded answers' form: an
    Express execution of a state machine of its own, the role given, the state's name, RetryCount 0)."""
    partition = get_partition(region)
    machine, execution = f"TestState-{uuid.uuid4()}", str(uuid.uuid4())
    context = ContextObjectData(
        Execution=ExecutionData(
            Id=f"arn:{partition}:states:{region}:{ACCOUNT_ID}:express:{machine}:{execution}",
            Input=run.input,
            Name=execution,
            RoleArn=run.role_arn,
            StartTime=aws_timestamp(now),
        ),
        StateMachine=StateMachineData(
            Id=f"arn:{partition}:states:{region}:{ACCOUNT_ID}:stateMachine:{machine}", Name=machine
        ),
    )
    env = _Environment(
        aws_execution_details=AWSExecutionDetails(account=ACCOUNT_ID, region=region, role_arn=run.role_arn),
        execution_type=StateMachineType.EXPRESS,
        context=context,
        event_history_context=EventHistoryContext.of_program_start(),
        cloud_watch_logging_session=None,
        activity_store={},
    )
    env.run = run
    env.states.reset(copy.deepcopy(run.input))
    declare_variables(env.variable_store, run.variables)
    return env


def _instrument(state: CommonStateField, run: _Run) -> None:
    """Hooks on this call's own parse of the state: what the inspection data reports, the test's context object,
    the mock where moto has no mocked mode, and one attempt in place of moto's retries. moto calls each hooked
    method with the environment (or the frame it opened for the state's work) alone."""
    jsonpath = state._is_language_query_jsonpath()
    accepts_parameters = isinstance(state, (StateTask, StatePass, StateParallel))

    read_input = state._eval_state_input

    def eval_state_input(env: Any) -> None:
        read_input(env)
        if jsonpath:
            run.record("afterInputPath", env.stack[-1])
            if accepts_parameters:
                run.record("afterParameters", env.stack[-1])  # what Parameters, when the state has them, replaces

    state._eval_state_input = eval_state_input
    parargs = state.parameters if isinstance(state, StatePass) else getattr(state, "parargs", None)
    if accepts_parameters and parargs is not None:
        evaluate_parargs = parargs._eval_body

        def eval_parargs(env: Any) -> None:
            evaluate_parargs(env)
            run.record("afterParameters" if jsonpath else "afterArguments", env.stack[-1])

        parargs._eval_body = eval_parargs
    if isinstance(state, StateTask) and not isinstance(state, StateTaskActivity):
        execute = state._eval_execution

        def eval_execution(env: Any) -> None:
            if run.context is not None:  # the test's context object, as given, is the $$ the Task's Parameters read
                data = env.states.context_object.context_object_data  # the frame's: moto's own stays whole
                data.clear()
                data.update(copy.deepcopy(run.context))
            execute(env)
            run.record("result", env.stack[-1])

        state._eval_execution = eval_execution
    result_path = getattr(state, "result_path", None)
    if jsonpath and result_path is not None:
        place = result_path._eval_body

        def eval_result_path(env: Any) -> None:
            run.record("afterResultSelector", env.stack[-1])  # the result ResultPath places
            place(env)
            run.record("afterResultPath", env.stack[-1])

        result_path._eval_body = eval_result_path
    if isinstance(state, ExecutionState):
        _instrument_execution(state, run)


def _instrument_execution(state: ExecutionState, run: _Run) -> None:
    if run.mock is not None and isinstance(state, (StateParallel, StateMap, StateTaskActivity)):
        state._eval_execution = lambda env: _mocked_execution(state, env)
    convert = state._from_error

    def from_error(env: Any, ex: Exception) -> FailureEvent:
        # a failure already made (the mocked error, the ASL's own) is the state's: moto's DynamoDB and API Gateway
        # integrations would make every exception their own (DynamoDB.AmazonDynamoDBException)
        return ex.failure_event if isinstance(ex, FailureEventException) else convert(env=env, ex=ex)

    state._from_error = from_error
    if state.retry is not None:
        state._handle_retry = lambda env, failure_event: _handle_retry(state, run, env, failure_event)
    if state.catch is not None:
        catch = state._handle_catch

        def handle_catch(env: Any, failure_event: FailureEvent) -> None:
            catch(env, failure_event)
            if env.stack[-1] == CatchOutcome.Caught:
                catchers = enumerate(state.catch.catchers)
                index = next(i for i, catcher in catchers if _matches(catcher.error_equals, failure_event, env))
                run.error_details["catchIndex"] = index
                run.decide("CAUGHT_ERROR", *_error_cause(failure_event))

        state._handle_catch = handle_catch


def _handle_retry(state: ExecutionState, run: _Run, env: Any, failure_event: FailureEvent) -> RetryOutcome:
    """The state's Retry after `run.retries` retries: the first retrier whose ErrorEquals matches retries while its
    MaxAttempts allows, after IntervalSeconds x BackoffRate^retries, at most MaxDelaySeconds (the ASL's Retry rules);
    a JitterStrategy's random share is not taken off. TestState reports that retry and ends: it never makes it."""
    for index, retrier in enumerate(state.retry.retriers):
        if not _matches(retrier.error_equals, failure_event, env):
            continue
        run.error_details["retryIndex"] = index
        if run.retries >= retrier.max_attempts.attempts:
            return RetryOutcome.CannotRetry
        backoff = retrier.interval_seconds.seconds * retrier.backoff_rate.rate**run.retries
        run.error_details["retryBackoffIntervalSeconds"] = int(
            min(backoff, retrier.max_delay_seconds.max_delays_seconds)
        )
        run.decide("RETRIABLE", *_error_cause(failure_event))
        env.set_ended()  # moto's retry loop stops here
        return RetryOutcome.CanRetry
    return RetryOutcome.NoRetrier


def _matches(error_equals: Any, failure_event: FailureEvent, env: Any) -> bool:
    """Whether an ErrorEquals matches the failure, by moto's evaluation of it."""
    env.stack.append(failure_event.error_name)
    error_equals.eval(env)
    return bool(env.stack.pop())


def _error_cause(failure_event: FailureEvent) -> tuple[str, str]:
    output = ExecutionState._construct_error_output_value(failure_event)
    return output["Error"], output["Cause"]


def _mocked_execution(state: ExecutionState, env: Any) -> None:
    """A Parallel's branches, a Map's iterations, an activity's work: the mock stands for them."""
    payload = env.get_current_mocked_response().payload
    if isinstance(state, StateMap):
        _check_tolerance(state, env, len(payload))
    env.stack.append(payload)


def _check_tolerance(state: StateMap, env: Any, items: int) -> None:
    """A Map's concurrency and the failures it tolerates, inspected as AWS reports them (each tolerance when the Map
    declares it); its failed iterations (mapIterationFailureCount) past a declared tolerance fail it with the error
    and cause AWS gives."""
    run: _Run = env.run
    values = []
    for decl in (
        state.max_concurrency_decl,
        state.tolerated_failure_count_decl,
        state.tolerated_failure_percentage_decl,
    ):
        decl.eval(env)
        values.append(env.stack.pop())
    concurrency, count, percentage = values
    run.inspection["maxConcurrency"] = concurrency
    if "count" in run.tolerances:
        run.inspection["toleratedFailureCount"] = count
    if "percentage" in run.tolerances:
        run.inspection["toleratedFailurePercentage"] = percentage
    failures = run.map_failures or 0
    if ("count" in run.tolerances and failures > count) or (
        "percentage" in run.tolerances and items and failures * 100 / items > percentage
    ):
        cause = "The specified tolerated failure threshold was exceeded"
        raise FailureEventException(_failure(env, "States.ExceedToleratedFailureThreshold", cause))
