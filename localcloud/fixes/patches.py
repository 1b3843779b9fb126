"""Every change the offline cloud makes to moto, in one place: what it replaces and why; and every read of moto's
private state from elsewhere, each behind a named accessor at the end.

A `Patch` replaces one attribute of a moto class or module. Each one cites the gap it closes in the catalogue of
docs/offline-cloud.md ("gap N"), or says "speed" when it only makes the offline cloud faster (same answers).
`Patches` installs a set of them and uninstalls it, restoring moto exactly as it was; LocalCloud holds one set for
its lifetime, so a cloud nested in another (a test's own cloud inside a session's) restores the outer one's.
"""

from __future__ import annotations

import copy
import functools
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import moto.cloudformation.parsing
import moto.core.responses
import moto.core.routing
import moto.core.utils
from jsonpath_ng import parse as jsonpath_parse  # type: ignore[attr-defined]
from moto.awslambda.models import LambdaBackend, LambdaFunction
from moto.awslambda.responses import LambdaResponse
from moto.awslambda_simple.models import LambdaSimpleBackend
from moto.cloudformation import cloudformation_backends
from moto.cloudformation.custom_model import CustomModel
from moto.cloudformation.responses import CloudFormationResponse
from moto.core.exceptions import JsonRESTError, ServiceException
from moto.core.model import ServiceModel
from moto.core.routing import ServiceOperationRouter
from moto.core.utils import unix_time, unix_time_millis
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import Item
from moto.dynamodb.models.table import Table
from moto.events.models import EventsBackend, Rule
from moto.sqs.models import Message, Queue, SQSBackend
from moto.stepfunctions.models import StateMachine
from moto.stepfunctions.parser.asl.component.common.error_name.error_equals_decl import ErrorEqualsDecl
from moto.stepfunctions.parser.asl.component.common.path import result_path
from moto.stepfunctions.parser.asl.component.common.path.result_path import ResultPath
from moto.stepfunctions.parser.asl.component.common.string.string_expression import StringJSONata, StringVariableSample
from moto.stepfunctions.parser.asl.component.program.program import Program
from moto.stepfunctions.parser.asl.component.state import state
from moto.stepfunctions.parser.asl.component.state.exec import execute_state
from moto.stepfunctions.parser.asl.component.state.exec.execute_state import ExecutionState
from moto.stepfunctions.parser.asl.component.state.exec.state_parallel.branch_worker import BranchWorker
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_aws_sdk import (
    StateTaskServiceAwsSdk,
)
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_callback import (
    StateTaskServiceCallback,
)
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_sfn import (
    StateTaskServiceSfn,
)
from moto.stepfunctions.parser.asl.component.state.state import CommonStateField
from moto.stepfunctions.parser.asl.component.state.wait.wait_function import wait_function
from moto.stepfunctions.parser.asl.eval import environment
from moto.stepfunctions.parser.asl.eval.callback import callback
from moto.stepfunctions.parser.asl.eval.callback.callback import CallbackEndpoint, CallbackPoolManager
from moto.stepfunctions.parser.asl.eval.variable_store import VariableStore
from moto.stepfunctions.parser.asl.parse.preprocessor import Preprocessor
from moto.stepfunctions.parser.asl.utils import json_path
from moto.stepfunctions.parser.backend.execution import BaseExecutionWorkerCommunication, Execution
from moto.stepfunctions.parser.backend.execution_worker import ExecutionWorker
from moto.stepfunctions.parser.models import StepFunctionsParserBackend
from moto.stepfunctions.responses import StepFunctionResponse

from localcloud.clock import Clock
from localcloud.deploy import ResourceFailedError
from localcloud.fixes import atomic, events, jsonata, logs, pollers, sfn
from localcloud.runtime.lambdas import LambdaRuntime

_MISSING = object()


@dataclass(frozen=True)
class Patch:
    owner: Any  # the class or module whose attribute is replaced
    name: str
    replacement: Any
    why: str  # "gap N" or "gaps N, M" (docs/offline-cloud.md), or "speed"


class Unkept(list[Any]):
    """In place of a list moto appends to for its lifetime and never needs: it keeps nothing appended to it, so what
    would have been kept is freed when its work is done. moto's interpreter appends every thread it starts to
    `TMP_THREADS` (gap 23), and its models every instance they make to `instances_tracked` (gap 25)."""

    def append(self, kept: Any) -> None:
        pass


UNKEPT = Unkept()


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
                self.uninstall()
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


# --- the table ----------------------------------------------------------------------------------------------------
# moto's interpreter parses a JSONPath (building a new yacc parser) every time a state reads one, and moto's response
# classes list their own methods with `inspect` on every request; both answers depend on their argument alone.
_cached_jsonpath = functools.lru_cache(maxsize=4096)(jsonpath_parse)
_method_names = functools.cache(moto.core.responses.method_names_from_class)

_moto_table_query = Table.query


def _query_partition(table: Table, hash_key: Any, *args: Any, **kwargs: Any) -> Any:
    """Table.query on the one partition a query of the table itself names. moto lists and sorts every item of the
    table for each such query, then keeps that partition's: a status log's GET /task read every task ever submitted.
    A query of an index (the 8th argument, as moto's backend passes it, or by name) is moto's own."""
    index_name = args[6] if len(args) > 6 else kwargs.get("index_name")
    if index_name or hash_key is None:
        return _moto_table_query(table, hash_key, *args, **kwargs)
    partition = copy.copy(table)  # a shallow view: the same items, only this partition listed
    partition.items = {hash_key: table.items[hash_key]} if hash_key in table.items else {}  # type: ignore[assignment]
    return _moto_table_query(partition, hash_key, *args, **kwargs)


# --- the queue ----------------------------------------------------------------------------------------------------
# moto's SQS asks each message whether it is visible and whether it is delayed, each asking the clock again through
# datetime, and counts every message of the queue three times for the queue's attributes, which SendMessage reads
# (ContentBasedDeduplication) and ReceiveMessage reads for every message it returns (MessageRetentionPeriod): each call
# cost time in proportion to the queue's depth, so a deep queue's messages cost the square of its depth. Filling a
# queue 5,000 deep with status-change events and draining it (make bench's P4 at 5,000 jobs) was 78 % of the cloud's
# busy samples. The same answers, from one reading of the clock per call and the message's own times.
def _queue_messages(queue: Queue) -> list[Message]:
    now = unix_time_millis()
    return [message for message in queue._messages if now > message.visible_at and now >= message.delayed_until]


def _delayed(queue: Queue) -> int:
    now = unix_time_millis()
    return sum(now < message.delayed_until for message in queue._messages)


def _not_visible(queue: Queue) -> int:
    now = unix_time_millis()
    return sum(now <= message.visible_at for message in queue._messages)


def _within_retention(backend: SQSBackend, queue_name: str, message: Message) -> bool:
    retention_seconds = int(backend.get_queue(queue_name).message_retention_period)
    return bool(retention_seconds + message.sent_timestamp / 1000 > unix_time())


SPEED = (
    Patch(json_path, "parse", events.jsonpath, "speed"),
    Patch(Table, "query", _query_partition, "speed"),
    Patch(Queue, "messages", property(_queue_messages), "speed"),
    Patch(Queue, "approximate_number_of_messages_delayed", property(_delayed), "speed"),
    Patch(Queue, "approximate_number_of_messages_not_visible", property(_not_visible), "speed"),
    Patch(SQSBackend, "is_message_valid_based_on_retention_period", _within_retention, "speed"),
    Patch(result_path, "parse", _cached_jsonpath, "speed"),
    Patch(moto.core.responses, "method_names_from_class", _method_names, "speed"),
)

STEP_FUNCTIONS = (
    Patch(StateTaskServiceAwsSdk, "_normalise_parameters", sfn.normalise_parameters, "gap 1"),
    Patch(StateTaskServiceAwsSdk, "_normalise_response", sfn.sdk_normalise_response, "gaps 1, 33"),
    Patch(StateTaskServiceSfn, "_normalise_parameters", sfn.sfn_normalise_parameters, "gap 1"),
    Patch(StateTaskServiceSfn, "_normalise_response", sfn.normalise_response, "gap 1"),
    Patch(StateTaskServiceAwsSdk, "_get_boto_service_name", sfn.sdk_boto_service_name, "gap 1"),
    Patch(StateTaskServiceAwsSdk, "_normalise_service_error_name", staticmethod(sfn.sdk_error_prefix), "gap 1"),
    Patch(StateTaskServiceAwsSdk, "_normalise_exception_name", staticmethod(sfn.sdk_error_name), "gap 1"),
    Patch(CallbackEndpoint, "setup_heartbeat_endpoint", sfn.setup_heartbeat_endpoint, "gap 3"),
    Patch(CallbackEndpoint, "interrupt_all", sfn.interrupt_all, "gap 30"),
    Patch(ExecutionWorker, "stop", sfn.stop, "gap 4"),
    Patch(ExecutionState, "_evaluate_with_timeout", sfn.evaluate_with_timeout, "gaps 4, 34, 41"),
    Patch(StateTaskServiceCallback, "_eval_wait_for_task_token", sfn.eval_wait_for_task_token, "gap 41"),
    Patch(ErrorEqualsDecl, "_eval_body", sfn.error_equals, "gap 37"),
    Patch(ResultPath, "_eval_body", sfn.result_path, "gap 38"),
    Patch(StepFunctionsParserBackend, "start_execution", sfn.start_execution, "gaps 5, 24"),
    Patch(StepFunctionResponse, "send_task_failure", sfn.send_task_failure, "gap 7"),
    Patch(BaseExecutionWorkerCommunication, "terminated", sfn.terminated, "gap 8"),
    Patch(Execution, "__init__", sfn.execution_init, "gap 8"),
    Patch(Execution, "start", sfn.execution_start, "gap 8"),
    Patch(ExecutionWorker, "_get_evaluation_environment", sfn.evaluation_environment, "gaps 9, 32"),
    Patch(state, "StateData", sfn.entered_state, "gap 32"),  # what a state writes to $$.State as it is entered
    Patch(CallbackPoolManager, "add", sfn.pool_add, "gap 10"),
    Patch(StepFunctionsParserBackend, "send_task_success", sfn.send_task_success_by_key, "gaps 10, 30"),
    Patch(StepFunctionsParserBackend, "send_task_failure", sfn.send_task_failure_by_key, "gaps 10, 30"),
    Patch(StepFunctionsParserBackend, "send_task_heartbeat", sfn.send_task_heartbeat_by_key, "gaps 10, 28"),
    Patch(BranchWorker, "_thread_routine", sfn.branch_routine, "gap 13"),
    Patch(BranchWorker, "start", sfn.branch_start, "speed"),  # its thread not named after its program's text
    Patch(Preprocessor, "__init__", sfn.own_query_language_scopes, "gap 31"),  # one ASL parse's own scopes
    Patch(ExecutionWorker, "_get_evaluation_entrypoint", sfn.evaluation_entrypoint, "speed"),
    Patch(Program, "eval", sfn.program_eval, "speed"),
    Patch(Program, "_get_state", sfn.get_state_after_requests, "speed"),  # the HTTP API's requests first
    Patch(StateMachine, "_handle_name_input_idempotency", sfn.name_idempotency, "speed"),
    Patch(StringJSONata, "_eval_body", jsonata.string_jsonata_eval, "gap 36"),  # every `{% %}` expression
    Patch(StringVariableSample, "_eval_body", jsonata.variable_sample_eval, "gap 36"),  # JSONPath's `$name`
    Patch(Preprocessor, "visitString_jsonata", jsonata.visit_string_jsonata, "gap 36"),  # the expression's field
    Patch(VariableStore, "set", jsonata.assign_on_exit, "gap 36"),  # an Assign, kept until its state exits
    Patch(CommonStateField, "_get_state_exited_event_details", jsonata.exit_with_assignments, "gap 36"),  # then applied
    Patch(ExecutionState, "_handle_catch", jsonata.catch_without_own_assignments, "gap 36"),  # or dropped if it failed
)


def step_functions() -> list[Patch]:
    """The interpreter's fixes, with one client per service in every interpreter module that imported moto's
    client factory (gap 11), and no list of finished threads in any that imported moto's (gap 23)."""
    shared = [
        Patch(module, "boto_client_for", sfn.shared_boto_client_for, "gap 11")
        for module in sfn.interpreter_client_modules()
    ]
    unkept = [Patch(module, "TMP_THREADS", UNKEPT, "gap 23") for module in sfn.thread_registry_modules()]
    return [*STEP_FUNCTIONS, *shared, *unkept]


def step_function_timers(clock: Clock) -> list[Patch]:
    """The interpreter's timed waits on `clock` (gap 19): a Wait state's Seconds, a task's TimeoutSeconds and
    HeartbeatSeconds and a callback's wait, each an Event wait of moto's. Retry intervals stay on the wall clock:
    what they wait out (a throttled Lambda, a busy service) runs on it."""
    threading_on_clock, time_on_clock = clock.threading_module(), clock.time_module()
    return [
        Patch(environment, "threading", threading_on_clock, "gap 19"),  # the Wait state's program_state_event
        Patch(wait_function, "time", time_on_clock, "gap 19"),  # how long a Wait state has waited
        Patch(execute_state, "threading", threading_on_clock, "gap 19"),  # TimeoutSeconds
        Patch(callback, "Event", clock.event_class, "gap 19"),  # callback and heartbeat waits
        Patch(sfn, "CLOCK", clock, "gap 19"),  # a waiting task's TimeoutSeconds (gap 41)
    ]


def dynamodb_atomic() -> list[Patch]:
    """Every item operation under the backend's lock (gap 14); PutItem and UpdateItem also note when what they
    wrote expires, for the TTL sweeper (localcloud.fixes.pollers.ExpiryIndex)."""
    noting = {"put_item": pollers.noting_expiry, "update_item": pollers.noting_expiry}
    return [
        Patch(DynamoDBBackend, name, atomic.serialised(DynamoDBBackend, name, noting.get(name)), "gap 14")
        for name in atomic.OPERATIONS[DynamoDBBackend]
    ]


# DynamoDB makes an Item for every write and a deep copy of every item a read answers with (and the speed patch a
# Table per query): moto's instance tracking kept each one for the cloud's lifetime. Only moto's dashboard reads them.
DYNAMODB_UNTRACKED = (
    Patch(Item, "instances_tracked", UNKEPT, "gap 25"),
    Patch(Table, "instances_tracked", UNKEPT, "gap 25"),
)


def events_atomic() -> list[Patch]:
    return [
        Patch(EventsBackend, name, atomic.serialised(EventsBackend, name), "gap 21")
        for name in atomic.OPERATIONS[EventsBackend]
    ]


# moto's builders of a service's model, pagination model and request router (caches that build without a lock), and
# the modules that imported each by name.
_MOTO_BUILDERS = {
    "get_service_model": moto.core.utils.get_service_model,
    "get_pagination_model": moto.core.utils.get_pagination_model,
    "get_service_router": moto.core.routing.get_service_router,
}
_IMPORTED_BY = {
    moto.core.utils: ("get_service_model", "get_pagination_model"),
    moto.core.routing: ("get_service_model", "get_service_router"),
    moto.core.responses: ("get_service_model", "get_pagination_model", "get_service_router"),
}


def routing_atomic() -> list[Patch]:
    """A service's operation models (gap 22), and its model, pagination model and request router, each built once
    however many of its first requests come at once (speed)."""
    once = {name: atomic.built_once(build) for name, build in _MOTO_BUILDERS.items()}
    return [
        Patch(ServiceModel, "operation_model", atomic.serialised(ServiceModel, "operation_model"), "gap 22"),
        Patch(ServiceOperationRouter, "_get_router", atomic.serialised(ServiceOperationRouter, "_get_router"), "speed"),
        *(Patch(module, name, once[name], "speed") for module, names in _IMPORTED_BY.items() for name in names),
    ]


def event_delivery(deliver: events.Deliver, send_to_dlq: events.SendToDlq) -> list[Patch]:
    return [
        Patch(Rule, "send_to_targets", events.rule_delivery(deliver, send_to_dlq), "gap 15"),
        Patch(EventsBackend, "put_events", events.put_events, "gap 12"),
    ]


# --- CloudFormation ---------------------------------------------------------------------------------------------------
_moto_create_resource = moto.cloudformation.parsing.parse_and_create_resource


def _create_resource_or_fail(logical_id: str, resource_json: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
    """Gap 26: a resource its service refuses (a log group whose fixed name exists) fails the stack, named, as on AWS:
    moto let the service's error out of CreateStack, in the service's protocol, which the CloudFormation client
    cannot read, and kept the half-made stack."""
    try:
        return _moto_create_resource(logical_id, resource_json, *args, **kwargs)
    except (JsonRESTError, ServiceException) as exc:
        code = exc.error_type if isinstance(exc, JsonRESTError) else exc.code
        if code.endswith("AlreadyExistsException"):
            _, _, name = moto.cloudformation.parsing.parse_resource_and_generate_name(logical_id, resource_json, *args)
            reason = f"Resource of type '{resource_json['Type']}' with identifier '{name}' already exists."
        else:
            reason = f'Resource handler returned message: "{exc.message}" ({code})'
        raise ResourceFailedError(f"{logical_id}: {reason}") from exc


_moto_create_function = LambdaFunction.create_from_cloudformation_json


def _create_function_with_layers(
    cls: type[LambdaFunction], /, name: str, template: dict[str, Any], account_id: str, region: str, **kwargs: Any
) -> LambdaFunction:
    """Gap 29: a function gets its Layers, as CloudFormation gives them (moto's CloudFormation dropped the property,
    and resolves a Ref to a LayerVersion of the stack to its model, whose ARN is what CloudFormation's Ref gives)."""
    function = _moto_create_function(name, template, account_id, region, **kwargs)
    layers = template["Properties"].get("Layers")
    if layers:
        function.layers = function._get_layers_data([str(getattr(layer, "arn", layer)) for layer in layers])
    return function


InvokeCustomResource = Callable[[str, dict[str, Any]], None]  # (ServiceToken, CloudFormation's request)


def custom_resources(invoke: InvokeCustomResource, endpoint: Callable[[], str]) -> list[Patch]:
    """Gap 27: a custom resource's function is invoked as CloudFormation invokes it (asynchronously, through `invoke`)
    with a ResponseURL on the offline endpoint; its FAILED answer fails the stack. moto invoked it through its Docker
    path (nothing ran, the stack stayed CREATE_IN_PROGRESS) and ignored a FAILED answer."""

    def create(
        cls: type[CustomModel], /, name: str, template: dict[str, Any], account_id: str, region: str, **kwargs: Any
    ) -> CustomModel:
        resource = CustomModel(region, str(uuid.uuid4()), kwargs["LogicalId"], name)
        cloudformation_backends[account_id][region].get_stack(kwargs["StackId"]).add_custom_resource(resource)
        properties = template["Properties"]
        invoke(
            properties["ServiceToken"],
            {
                "RequestType": "Create",
                "ServiceToken": properties["ServiceToken"],
                "ResponseURL": f"{endpoint()}/cloudformation_{region}/cfnresponse?stack={kwargs['StackId']}",
                "StackId": kwargs["StackId"],
                "RequestId": resource.request_id,
                "LogicalResourceId": kwargs["LogicalId"],
                "ResourceType": kwargs["ResourceType"],
                "ResourceProperties": properties,
            },
        )
        return resource

    return [
        Patch(CustomModel, "create_from_cloudformation_json", classmethod(create), "gap 27"),
        Patch(CloudFormationResponse, "process_cfn_response", _process_cfn_response, "gap 27"),
    ]


_moto_process_cfn_response = CloudFormationResponse.process_cfn_response


def _process_cfn_response(self: CloudFormationResponse) -> Any:
    """A FAILED answer is kept on its resource (`failure`), where localcloud.deploy reads it; SUCCESS is moto's. The
    answer is about a stack of the Region its StackId names (moto took the unsigned request for its default one)."""
    self.region = str(self._get_param("StackId")).split(":")[3]
    if self._get_param("Status") == "FAILED":
        stack = self.cloudformation_backend.get_stack(self._get_param("StackId"))
        resource = stack.get_custom_resource(self._get_param("LogicalResourceId"))
        resource.failure = self._get_param("Reason") or "the custom resource answered FAILED"
    return _moto_process_cfn_response(self)


_MOTO_INVOKE = LambdaResponse.invoke


def _invoke_with_its_qualifier(self: LambdaResponse) -> Any:
    """moto's Invoke reads its version from a `qualifier` query parameter; the SDKs send `Qualifier` (gap 39)."""
    if "Qualifier" in self.querystring:
        self.querystring.setdefault("qualifier", self.querystring["Qualifier"])
    return _MOTO_INVOKE(self)


def offline_cloud(runtime: LambdaRuntime, deliver: events.Deliver, send_to: events.SendToDlq, clock: Clock) -> Patches:
    """Everything the offline cloud changes in moto, for one cloud: its Lambda runtime, its rule targets' delivery
    (`deliver`), its dead-letter and destination sends (`send_to`) and its clock."""
    return Patches(
        [
            *SPEED,
            *step_functions(),
            *step_function_timers(clock),
            *dynamodb_atomic(),
            *DYNAMODB_UNTRACKED,
            *events_atomic(),
            *routing_atomic(),
            Patch(LambdaSimpleBackend, "invoke", runtime.moto_invoke(), "gap 16"),
            Patch(LambdaResponse, "invoke", _invoke_with_its_qualifier, "gap 39"),
            Patch(LambdaBackend, "create_event_source_mapping", pollers.create_event_source_mapping, "gap 17"),
            Patch(LambdaBackend, "send_log_event", logs.subscription_delivery(runtime.invoke_async), "gap 18"),
            *event_delivery(deliver, send_to),
            Patch(moto.cloudformation.parsing, "parse_and_create_resource", _create_resource_or_fail, "gap 26"),
            Patch(
                LambdaFunction, "create_from_cloudformation_json", classmethod(_create_function_with_layers), "gap 29"
            ),
            *custom_resources(runtime.invoke_async, lambda: runtime.endpoint),
        ]
    )
