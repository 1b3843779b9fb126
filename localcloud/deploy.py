"""Deploy a SAM template into moto the way `sam package && sam deploy` would.

The template goes through aws-sam-translator (the library SAM CLI uses), then moto's CloudFormation creates
the resources. What moto's CloudFormation does not build is either emulated by another part of the offline
cloud (EMULATED, read back from the stack with intrinsics resolved) or deliberately ignored (IGNORED). Any
other resource type, or a property the offline cloud cannot honour, stops the deploy with a message naming it.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import time
import uuid
import warnings
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
from moto.cloudformation import cloudformation_backends
from moto.cloudformation.parsing import clean_json, get_model_map
from moto.stepfunctions.models import stepfunctions_backends
from moto.stepfunctions.parser.models import stepfunctions_parser_backends
from samtranslator.model.exceptions import InvalidDocumentException
from samtranslator.translator.transform import transform
from samtranslator.yaml_helper import yaml_parse

from localcloud.account import ACCOUNT_ID, Account, MacieAlreadyEnabledError
from localcloud.moto_state import parsed_resource
from localcloud.regions import bucket_location, has_durable_functions, missing_integrations, not_recognized

# Built by the offline cloud itself rather than moto's CloudFormation (see the module that consumes each).
EMULATED = {
    "AWS::ApiGatewayV2::Api": "served by localcloud.httpapi",
    "AWS::ApiGatewayV2::Stage": "served by localcloud.httpapi ($default stage only)",
    "AWS::Lambda::EventInvokeConfig": "async retries and on-failure destination in localcloud.runtime.lambdas",
    "AWS::Logs::SubscriptionFilter": "created through the Logs API after the stack",
    "AWS::Macie::Session": "enables Macie in the offline account (localcloud.account)",
}

# Accepted and not emulated: they change nothing a workflow or a test can observe offline.
IGNORED = {
    "AWS::CloudWatch::Alarm": "no metrics offline",
    "AWS::CloudWatch::Dashboard": "no metrics offline",
    "AWS::KMS::Key": "moto stores data unencrypted",
    "AWS::KMS::Alias": "moto stores data unencrypted",
    "AWS::SQS::QueuePolicy": "IAM is not enforced offline",
    "AWS::S3::BucketPolicy": "IAM is not enforced offline",
    "AWS::Lambda::Permission": "IAM is not enforced offline",
    "AWS::Scheduler::ScheduleGroup": "no scheduler groups offline",
}

INVALID_PARAMETER = "InvalidParameterValueException"  # what Lambda answers a function it cannot create as asked

CUSTOM_RESOURCE_TIMEOUT_SECONDS = 60  # a custom resource's function answers in seconds here (AWS waits an hour)

LIFECYCLE_RULE_KEYS = {"Id", "Status", "Prefix", "TagFilters", "ExpirationInDays"}

# Properties whose value the offline cloud cannot honour: (type, property) -> predicate on the value.
UNSUPPORTED_PROPERTIES = {
    ("AWS::Lambda::Function", "PackageType"): lambda v: v == "Image",
    ("AWS::Lambda::Function", "Runtime"): lambda v: not str(v).startswith("python"),
    # Lifecycle rules are put through the S3 API after the stack (_apply_bucket_lifecycle_rules), for these keys.
    ("AWS::S3::Bucket", "LifecycleConfiguration"): lambda v: any(
        set(rule) - LIFECYCLE_RULE_KEYS for rule in v.get("Rules", [])
    ),
}


class UnsupportedResourceError(Exception):
    """The template uses something the offline cloud cannot emulate."""


class TemplateError(Exception):
    """The template fails to transform, exactly as `sam deploy` would refuse it."""


class ResourceFailedError(Exception):
    """A resource of the stack failed to create, with CloudFormation's reason (raised inside moto: gap 26)."""


class StackDeleteFailedError(Exception):
    """A resource CloudFormation cannot delete (a bucket that is not empty): the stack stays, DELETE_FAILED."""


class StackRolledBackError(Exception):
    """A resource failed as it fails on AWS (the account's rules, localcloud.account): the stack was rolled back and
    deleted, and the message is CloudFormation's reason for the resource that failed."""


@dataclass
class Resource:
    logical_id: str
    type: str
    physical_id: str
    properties: dict[str, Any]  # with every intrinsic resolved
    deletion_policy: str = "Delete"


@dataclass
class Stack:
    name: str
    outputs: dict[str, str]
    resources: list[Resource] = field(default_factory=list)

    def of_type(self, resource_type: str) -> list[Resource]:
        return [r for r in self.resources if r.type == resource_type]


class _NoManagedPolicies:
    """samtranslator asks IAM for managed-policy ARNs only when a template names one; none is needed offline."""

    def load(self) -> dict[str, str]:
        return {}


def package(template: dict[str, Any], root: Path, bucket: str, region: str) -> dict[str, Any]:
    """Do what `sam package` does: put each CodeUri (and a layer's ContentUri) in S3 and inline each DefinitionUri.

    The S3 key is the CodeUri relative to the template's directory (for a built template: the function's or layer's
    artifact directory), which is where the offline Lambda runtime runs the code from; the object itself is only a
    pointer, since the artifact never leaves this machine.
    """
    s3 = boto3.client("s3", region_name=region)
    s3.create_bucket(Bucket=bucket, **bucket_location(region))
    global_code_uri = template.get("Globals", {}).get("Function", {}).get("CodeUri")
    for resource in template.get("Resources", {}).values():
        props = resource.setdefault("Properties", {})
        if resource["Type"] in ("AWS::Serverless::Function", "AWS::Serverless::LayerVersion"):
            uri_property = "CodeUri" if resource["Type"] == "AWS::Serverless::Function" else "ContentUri"
            code_uri = props.get(uri_property, global_code_uri if uri_property == "CodeUri" else None)
            if isinstance(code_uri, str) and not code_uri.startswith("s3://"):
                key = Path(code_uri).as_posix().strip("/") or "."
                s3.put_object(Bucket=bucket, Key=key, Body=_pointer(root / code_uri))
                props[uri_property] = f"s3://{bucket}/{key}"
        elif resource["Type"] == "AWS::Serverless::StateMachine" and isinstance(props.get("DefinitionUri"), str):
            props["Definition"] = json.loads((root / props.pop("DefinitionUri")).read_text())
    return template


def _pointer(path: Path) -> bytes:
    """A zip that names the code directory (moto's Lambda wants a code object; the workers read the directory)."""
    if not path.is_dir():
        raise TemplateError(f"CodeUri {path} is not a directory")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(".localcloud-code-dir", str(path.resolve()))
    return buffer.getvalue()


def translate(sam_template: dict[str, Any], parameters: dict[str, str]) -> dict[str, Any]:
    try:
        cfn: dict[str, Any] = transform(sam_template, parameters, _NoManagedPolicies())  # type: ignore[arg-type]
    except InvalidDocumentException as exc:
        raise TemplateError("; ".join(getattr(c, "message", str(c)) for c in exc.causes)) from exc
    return cfn


def check_supported(cfn: dict[str, Any]) -> None:
    """Stop with a message naming every resource type or property the offline cloud cannot emulate."""
    supported = set(get_model_map()) | set(EMULATED) | set(IGNORED)
    problems = []
    for logical_id, resource in sorted(cfn.get("Resources", {}).items()):
        rtype = resource["Type"]
        if rtype not in supported and not rtype.startswith("Custom::"):  # custom resources: their function answers
            problems.append(f"{logical_id}: resource type {rtype} is not supported offline")
            continue
        for prop, value in resource.get("Properties", {}).items():
            rejects = UNSUPPORTED_PROPERTIES.get((rtype, prop))
            if rejects and rejects(value):
                problems.append(f"{logical_id}: {rtype} property {prop}={value!r} is not supported offline")
    if problems:
        raise UnsupportedResourceError("\n".join(problems))


def deploy(
    template_path: Path,
    stack_name: str,
    parameters: dict[str, str],
    region: str,
    artifact_bucket: str,
    account: Account | None = None,
) -> Stack:
    """Package, transform and create the stack in moto; return its outputs and resolved resources. What the account
    refuses (localcloud.account; a new account's by default) rolls the stack back: StackRolledBackError."""
    account = account or Account()
    sam_template = yaml_parse(template_path.read_text())
    packaged = package(sam_template, template_path.parent, artifact_bucket, region)
    cfn = translate(packaged, parameters)
    check_supported(cfn)
    declared = cfn.get("Parameters", {})
    cfn_client = boto3.client("cloudformation", region_name=region)
    with warnings.catch_warnings():  # moto warns about each EMULATED/IGNORED type, already accounted for above
        warnings.simplefilter("ignore")
        logging.getLogger("moto").setLevel(logging.ERROR)
        try:
            cfn_client.create_stack(
                StackName=stack_name,
                TemplateBody=json.dumps(cfn),
                Parameters=[{"ParameterKey": k, "ParameterValue": v} for k, v in parameters.items() if k in declared],
                Capabilities=["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM", "CAPABILITY_AUTO_EXPAND"],
            )
        except ResourceFailedError as exc:
            cfn_client.delete_stack(StackName=stack_name)
            raise StackRolledBackError(f"stack {stack_name} ended ROLLBACK_COMPLETE: {exc}") from exc
    described = cfn_client.describe_stacks(StackName=stack_name)["Stacks"][0]
    failure = _custom_resources_answered(described["StackId"], region)
    if failure:
        cfn_client.delete_stack(StackName=stack_name)
        raise StackRolledBackError(f"stack {stack_name} ended ROLLBACK_COMPLETE: {failure}")
    described = cfn_client.describe_stacks(StackName=stack_name)["Stacks"][0]
    if described["StackStatus"] != "CREATE_COMPLETE":
        raise TemplateError(f"stack {stack_name} ended {described['StackStatus']}")
    resources = _resources(cfn, described["StackId"], region)
    refusal = _account_refusal(resources, account, region) or _create_subscription_filters(
        resources, region, stack_name
    )
    if refusal:
        cfn_client.delete_stack(StackName=stack_name)
        unsubscribe(Stack(stack_name, {}, resources), region)  # the filters made before the one refused
        raise StackRolledBackError(f"stack {stack_name} ended ROLLBACK_COMPLETE: {refusal}")
    _apply_to_the_account(resources, account, region)
    _move_state_machines_to_executing_backend(resources, region)
    _enable_table_ttl(resources, region)
    _apply_bucket_lifecycle_rules(resources, region)
    outputs = {o["OutputKey"]: o["OutputValue"] for o in described.get("Outputs", [])}
    return Stack(name=stack_name, outputs=outputs, resources=resources)


def delete(stack: Stack, region: str) -> None:
    """Delete the stack as CloudFormation does: a bucket with objects fails the delete (StackDeleteFailedError, and
    nothing is deleted offline, where AWS deletes what it can first); a resource with DeletionPolicy Retain stays
    behind (moto keeps it), so its fixed name is taken for the next stack."""
    s3 = boto3.client("s3", region_name=region)
    for bucket in stack.of_type("AWS::S3::Bucket"):
        if bucket.deletion_policy != "Retain" and s3.list_objects_v2(Bucket=bucket.physical_id, MaxKeys=1)["KeyCount"]:
            raise StackDeleteFailedError(
                f"stack {stack.name} ended DELETE_FAILED: {bucket.logical_id}: Resource handler returned message: "
                '"The bucket you tried to delete is not empty" (BucketNotEmpty)'
            )
    boto3.client("cloudformation", region_name=region).delete_stack(StackName=stack.name)
    unsubscribe(stack, region)
    executing = stepfunctions_parser_backends[ACCOUNT_ID][region]
    for machine in stack.of_type("AWS::StepFunctions::StateMachine"):  # the copy deploy made where executions run
        executing.delete_state_machine(machine.physical_id)


def unsubscribe(stack: Stack, region: str) -> None:
    """Delete the stack's subscription filters (made through the Logs API, not by moto): a log group takes two."""
    logs = boto3.client("logs", region_name=region)
    for subscription in stack.of_type("AWS::Logs::SubscriptionFilter"):
        with contextlib.suppress(logs.exceptions.ResourceNotFoundException):  # its group may be gone with the stack
            logs.delete_subscription_filter(
                logGroupName=subscription.properties["LogGroupName"], filterName=subscription.physical_id
            )


def _resources(cfn: dict[str, Any], stack_id: str, region: str) -> list[Resource]:
    stack = cloudformation_backends[ACCOUNT_ID][region].stacks[stack_id]
    resource_map = stack.resource_map
    resources = []
    for logical_id, resource in cfn["Resources"].items():
        condition = resource.get("Condition")
        if condition and not resource_map.lazy_condition_map[condition]:
            continue  # not created, as CloudFormation skips a resource whose condition is false
        parsed = parsed_resource(resource_map, logical_id)
        physical_id = getattr(parsed, "physical_resource_id", None) or logical_id
        properties = clean_json(resource.get("Properties", {}), resource_map)
        if resource["Type"] != "AWS::StepFunctions::StateMachine":  # a definition's nulls are its own
            properties = _no_value_removed(properties)
        policy = resource.get("DeletionPolicy", "Delete")
        resources.append(Resource(logical_id, resource["Type"], str(physical_id), properties, policy))
    return resources


def _no_value_removed(value: Any) -> Any:
    """A value as CloudFormation resolves it: moto's clean_json drops an AWS::NoValue member of an object but leaves a
    null in a list (an `Fn::If: [Condition, statement, AWS::NoValue]` of a policy), where the element goes. Not for a
    state machine, whose definition's nulls (`"Result": [1, null]`) are its own and look the same by then."""
    if isinstance(value, dict):
        return {key: _no_value_removed(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_no_value_removed(item) for item in value if item is not None]
    return value


def _custom_resources_answered(stack_id: str, region: str) -> str | None:
    """Wait for every custom resource's answer (its function runs asynchronously, as CloudFormation invokes it): None
    once all answered SUCCESS, else CloudFormation's reason for the first that answered FAILED or did not answer in
    CUSTOM_RESOURCE_TIMEOUT_SECONDS (AWS waits an hour)."""
    stack = cloudformation_backends[ACCOUNT_ID][region].stacks[stack_id]
    deadline = time.monotonic() + CUSTOM_RESOURCE_TIMEOUT_SECONDS
    while True:
        for logical_id, resource in stack.custom_resources.items():
            failure = getattr(resource, "failure", None)  # set by the offline cloud on a FAILED answer (gap 27)
            if failure:
                return (
                    f"{logical_id}: Received response status [FAILED] from custom resource. Message returned: {failure}"
                )
        if stack.status != "CREATE_IN_PROGRESS":  # moto marks it complete after the last answer's data is set
            return None
        if time.monotonic() > deadline:
            waiting = [logical_id for logical_id, r in stack.custom_resources.items() if not r.is_created()]
            seconds = CUSTOM_RESOURCE_TIMEOUT_SECONDS
            return f"{', '.join(waiting)}: no answer from the custom resource's function in {seconds} s"
        time.sleep(0.05)


def _account_refusal(resources: list[Resource], account: Account, region: str) -> str | None:
    """The first resource the account or its Region refuses, with CloudFormation's reason; None if it refuses none.
    The functions of other stacks (and of none) count with what they reserve already; a function with DurableConfig
    fails CreateFunction where Lambda has no durable functions, and a state machine whose Task names an integration
    the Region lacks fails CreateStateMachine (localcloud.regions)."""
    functions = [r for r in resources if r.type == "AWS::Lambda::Function"]
    mine = {f.physical_id for f in functions}
    held = sum(reserved for name, reserved in account.reserved(region).items() if name not in mine)
    reservations = [
        (f.logical_id, int(f.properties["ReservedConcurrentExecutions"]))
        for f in functions
        if "ReservedConcurrentExecutions" in f.properties
    ]
    refused = account.reservation_refusal(reservations, held)
    if refused:
        return f'{refused[0]}: Resource handler returned message: "{refused[1]}" ({INVALID_PARAMETER})'
    for resource in resources:
        if resource.type == "AWS::Macie::Session" and account.macie_enabled(region):
            message = MacieAlreadyEnabledError.MESSAGE
            return f'{resource.logical_id}: Resource handler returned message: "{message}" (ConflictException)'
        durable = resource.type == "AWS::Lambda::Function" and "DurableConfig" in resource.properties
        if durable and not has_durable_functions(region):  # Lambda's words are not documented: ours (offline-cloud.md)
            message = f"Lambda durable functions (DurableConfig) are not available in {region}."
            return f'{resource.logical_id}: Resource handler returned message: "{message}" ({INVALID_PARAMETER})'
        if resource.type == "AWS::StepFunctions::StateMachine":
            for pointer, arn in missing_integrations(json.loads(_definition(resource)), region)[:1]:
                diagnostic = f"{not_recognized(arn)} at {pointer}"
                message = f"Invalid State Machine Definition: 'SCHEMA_VALIDATION_FAILED: {diagnostic}'"
                return f'{resource.logical_id}: Resource handler returned message: "{message}" (InvalidDefinition)'
    return None


def _apply_to_the_account(resources: list[Resource], account: Account, region: str) -> None:
    """What the account keeps of a stack it accepted: AWS::Macie::Session turns Macie on (a stack rolled back
    leaves Macie as it was)."""
    if any(resource.type == "AWS::Macie::Session" for resource in resources):
        account.enable_macie(region)


def _create_subscription_filters(resources: list[Resource], region: str, stack_name: str) -> str | None:
    """Put each subscription filter through the Logs API, as CloudFormation does (a filter without FilterName gets a
    name of the stack's own, so two stacks' filters are two filters); the first one Logs refuses (a log group that
    does not exist, a group with two filters already), with CloudFormation's reason."""
    client = boto3.client("logs", region_name=region)
    for resource in resources:
        if resource.type != "AWS::Logs::SubscriptionFilter":
            continue
        props = resource.properties
        resource.physical_id = props.get("FilterName", f"{stack_name}-{resource.logical_id}-{uuid.uuid4().hex[:12]}")
        try:
            client.put_subscription_filter(
                logGroupName=props["LogGroupName"],
                filterName=resource.physical_id,
                filterPattern=props.get("FilterPattern", ""),
                destinationArn=props["DestinationArn"],
            )
        except client.exceptions.ClientError as exc:
            error = exc.response["Error"]
            return f'{resource.logical_id}: Resource handler returned message: "{error["Message"]}" ({error["Code"]})'
    return None


def _move_state_machines_to_executing_backend(resources: list[Resource], region: str) -> None:
    """moto's CloudFormation creates state machines where nothing executes them, drops their type and ignores
    DefinitionSubstitutions; recreate each in the parser backend, the one `execute_state_machine` uses, under the
    same ARN, with its definition substituted as CloudFormation does."""
    source = stepfunctions_backends[ACCOUNT_ID][region]
    target = stepfunctions_parser_backends[ACCOUNT_ID][region]
    for resource in resources:
        if resource.type != "AWS::StepFunctions::StateMachine":
            continue
        machine = source.describe_state_machine(resource.physical_id)
        props = resource.properties
        target.create_state_machine(
            name=machine.name,
            definition=_definition(resource),
            roleArn=machine.roleArn,
            tags=[{"key": t["Key"], "value": t["Value"]} for t in props.get("Tags", [])],
            loggingConfiguration=props.get("LoggingConfiguration"),
            tracingConfiguration=props.get("TracingConfiguration"),
            sm_type=props.get("StateMachineType", "STANDARD"),
        )


def _definition(state_machine: Resource) -> str:
    """A state machine's definition with its DefinitionSubstitutions made, as CloudFormation makes them."""
    props = state_machine.properties
    definition = props.get("DefinitionString") or json.dumps(props["Definition"])
    for key, value in props.get("DefinitionSubstitutions", {}).items():
        definition = definition.replace("${" + key + "}", str(value))
    return str(definition)


def _enable_table_ttl(resources: list[Resource], region: str) -> None:
    """moto's CloudFormation ignores a table's TimeToLiveSpecification; enable TTL as CloudFormation does, so the
    TTL sweeper (localcloud.fixes.pollers.TtlSweeper) sees it."""
    client = boto3.client("dynamodb", region_name=region)
    for resource in resources:
        spec = resource.properties.get("TimeToLiveSpecification")
        if resource.type == "AWS::DynamoDB::Table" and spec and str(spec.get("Enabled")).lower() == "true":
            client.update_time_to_live(
                TableName=resource.physical_id,
                TimeToLiveSpecification={"AttributeName": spec["AttributeName"], "Enabled": True},
            )


def _apply_bucket_lifecycle_rules(resources: list[Resource], region: str) -> None:
    """moto's CloudFormation ignores a bucket's LifecycleConfiguration; put it as CloudFormation does, so it can be
    read back (moto stores lifecycle rules but never expires objects)."""
    client = boto3.client("s3", region_name=region)
    for resource in resources:
        rules = resource.properties.get("LifecycleConfiguration", {}).get("Rules")
        if resource.type == "AWS::S3::Bucket" and rules:
            client.put_bucket_lifecycle_configuration(
                Bucket=resource.physical_id, LifecycleConfiguration={"Rules": [_lifecycle_rule(r) for r in rules]}
            )


def _lifecycle_rule(rule: dict[str, Any]) -> dict[str, Any]:
    """A CloudFormation lifecycle rule in the S3 API's shape (LIFECYCLE_RULE_KEYS; check_supported refuses others)."""
    tags = [{"Key": t["Key"], "Value": t["Value"]} for t in rule.get("TagFilters", [])]
    if len(tags) > 1 or (tags and rule.get("Prefix")):
        filter_: dict[str, Any] = {"And": {"Prefix": rule.get("Prefix", ""), "Tags": tags}}
    else:
        filter_ = {"Tag": tags[0]} if tags else {"Prefix": rule.get("Prefix", "")}
    converted: dict[str, Any] = {"ID": rule.get("Id", ""), "Status": rule["Status"], "Filter": filter_}
    if "ExpirationInDays" in rule:
        converted["Expiration"] = {"Days": int(rule["ExpirationInDays"])}
    return converted
