"""Check the target account and Region before a deploy: `make preflight ENV=dev` (`make deploy` runs it first).

A first `sam deploy` meets a real account: a small Lambda concurrency quota, Macie off (or on already, where the stack
would enable it), Macie's fixed log group `/aws/macie/classificationjobs` there already or not, that group with the two
subscription filters Logs allows, a Region without Bedrock Data Automation or an SDK integration a workflow uses, a
stack name too long for a name derived from it, another stack of the template beside it. Each check reads the template,
the stack's parameters (the template's defaults, samconfig.toml's `parameter_overrides` for the config env, then
`--parameter-overrides`) and calls only read-only AWS APIs. A check that finds something prints one line: what it found,
and the fix; a check that finds nothing prints nothing; a summary line ends the run. Exit 1 when a finding blocks the
deploy or a feature's first run, else 0 (warnings allowed); 2, with one line on stderr, for bad input or an AWS error.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
import tomllib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import yaml
from botocore.exceptions import BotoCoreError, ClientError
from samtranslator.yaml_helper import yaml_parse

Client = Callable[[str], Any]

MACIE_LOG_GROUP = "/aws/macie/classificationjobs"  # Macie's, fixed: one per account and Region
UNRESERVED_MINIMUM = 100  # Lambda keeps this much unreserved, or the whole quota where the quota is lower
SUBSCRIPTION_FILTERS_PER_GROUP = 2
QUOTA_INCREASE = (
    "request an increase: Service Quotas, Lambda 'Concurrent executions' L-B99A9384 (aws service-quotas "
    "request-service-quota-increase --service-code lambda --quota-code L-B99A9384 --desired-value 1000)"
)
STATE_MACHINES = ("AWS::Serverless::StateMachine", "AWS::StepFunctions::StateMachine")
FUNCTIONS = ("AWS::Serverless::Function", "AWS::Lambda::Function")
# Explicit names a resource may carry, and the longest each may be.
NAME_LIMITS = {
    ("AWS::Serverless::StateMachine", "Name"): 80,
    ("AWS::StepFunctions::StateMachine", "StateMachineName"): 80,
    ("AWS::SQS::Queue", "QueueName"): 80,  # ".fifo" included
    ("AWS::Events::EventBus", "Name"): 256,
    ("AWS::Logs::LogGroup", "LogGroupName"): 512,
}
STACK_NAME = re.compile(r"[A-Za-z][-A-Za-z0-9]{0,127}")  # CloudFormation's rule for a stack name
# A resource's placeholder ARN (the definitions are validated before the stack exists), from its name.
ARNS = {
    "AWS::Serverless::Function": "arn:{partition}:lambda:{region}:{account}:function:{name}",
    "AWS::Lambda::Function": "arn:{partition}:lambda:{region}:{account}:function:{name}",
    "AWS::Serverless::StateMachine": "arn:{partition}:states:{region}:{account}:stateMachine:{name}",
    "AWS::StepFunctions::StateMachine": "arn:{partition}:states:{region}:{account}:stateMachine:{name}",
    "AWS::SQS::Queue": "arn:{partition}:sqs:{region}:{account}:{name}",
    "AWS::SNS::Topic": "arn:{partition}:sns:{region}:{account}:{name}",
    "AWS::DynamoDB::Table": "arn:{partition}:dynamodb:{region}:{account}:table/{name}",
    "AWS::S3::Bucket": "arn:{partition}:s3:::{name}",
    "AWS::IAM::Role": "arn:{partition}:iam::{account}:role/{name}",
    "AWS::Events::EventBus": "arn:{partition}:events:{region}:{account}:event-bus/{name}",
    "AWS::Logs::LogGroup": "arn:{partition}:logs:{region}:{account}:log-group:{name}:*",
}
NAME_PROPERTIES = {
    "AWS::Serverless::Function": "FunctionName",
    "AWS::Lambda::Function": "FunctionName",
    "AWS::Serverless::StateMachine": "Name",
    "AWS::StepFunctions::StateMachine": "StateMachineName",
    "AWS::SQS::Queue": "QueueName",
    "AWS::SNS::Topic": "TopicName",
    "AWS::DynamoDB::Table": "TableName",
    "AWS::S3::Bucket": "BucketName",
    "AWS::IAM::Role": "RoleName",
    "AWS::Events::EventBus": "Name",
    "AWS::Logs::LogGroup": "LogGroupName",
}
REF_IS_ARN = {"AWS::Serverless::StateMachine", "AWS::StepFunctions::StateMachine", "AWS::SNS::Topic"}
HOLDS_NOTHING = ("DELETE_COMPLETE", "ROLLBACK_COMPLETE")  # a stack's statuses once it has no resources left


class BadInputError(Exception):
    """The run cannot start: a config env, an override, the template (exit 2)."""


@dataclass(frozen=True)
class Finding:
    label: str  # "BLOCKS DEPLOY", "BLOCKS DOCUMENTS", "BLOCKS EXTRACT", "WARNING"
    text: str  # what was found, then the fix

    @property
    def blocking(self) -> bool:
        return self.label.startswith("BLOCKS")

    def __str__(self) -> str:
        return f"{self.label}: {self.text}"


@dataclass(frozen=True)
class Target:
    """The stack a deploy would create, and where: the template with its parameters, in an account and Region."""

    template: dict[str, Any]
    directory: Path  # the template's: DefinitionUri is relative to it
    stack_name: str
    parameters: dict[str, str]
    region: str
    account: str

    @property
    def partition(self) -> str:
        return (
            "aws-cn" if self.region.startswith("cn-") else "aws-us-gov" if self.region.startswith("us-gov-") else "aws"
        )

    def resources(self, *types: str) -> Iterator[tuple[str, dict[str, Any]]]:
        """(logical id, properties) of the resources of these types the deploy creates (their Condition holds)."""
        for logical_id, resource in self.template.get("Resources", {}).items():
            if resource["Type"] in types and self.creates(logical_id):
                yield logical_id, resource.get("Properties", {})

    def creates(self, logical_id: str) -> bool:
        """Whether the deploy creates this resource: the template has it and its Condition holds."""
        resource = self.template.get("Resources", {}).get(logical_id)
        return resource is not None and ("Condition" not in resource or self.condition(resource["Condition"]))

    def condition(self, name: str) -> bool:
        conditions = self.template.get("Conditions", {})
        if name not in conditions:
            raise BadInputError(f"template: no condition {name}")
        return self._holds(conditions[name])

    def _holds(self, expression: Any) -> bool:
        ((function, argument),) = expression.items()
        if function == "Fn::Equals":
            left, right = (_text(self.resolve(a)) for a in argument)
            return left == right
        if function == "Fn::Not":
            return not self._holds(argument[0])
        if function == "Fn::And":
            return all(self._holds(a) for a in argument)
        if function == "Fn::Or":
            return any(self._holds(a) for a in argument)
        if function == "Condition":
            return self.condition(argument)
        raise BadInputError(f"template: condition function {function} is not evaluated by preflight")

    def resolve(self, value: Any) -> Any:
        """`value` with its intrinsic functions evaluated as CloudFormation would here; resources are placeholders."""
        if isinstance(value, dict) and len(value) == 1:
            ((function, argument),) = value.items()
            if function == "Ref":
                return self._ref(argument)
            if function == "Fn::GetAtt":
                logical_id, attribute = argument.split(".", 1) if isinstance(argument, str) else argument
                return self._attribute(logical_id, attribute)
            if function == "Fn::Sub":
                return self._sub(*(argument if isinstance(argument, list) else [argument, {}]))
            if function == "Fn::If":
                name, if_true, if_false = argument
                return self.resolve(if_true if self.condition(name) else if_false)
            if function == "Fn::FindInMap":
                return self._find_in_map(*(_text(self.resolve(a)) for a in argument))
            if function == "Fn::Join":
                separator, items = argument
                return separator.join(_text(i) for i in self.resolve(items))
            if function == "Fn::Select":
                index, items = argument
                return self.resolve(items)[int(self.resolve(index))]
            if function.startswith("Fn::"):
                raise BadInputError(f"template: {function} is not evaluated by preflight")
        if isinstance(value, dict):
            return {k: self.resolve(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        return value

    def _ref(self, name: str) -> Any:
        pseudo = {
            "AWS::Region": self.region,
            "AWS::AccountId": self.account,
            "AWS::Partition": self.partition,
            "AWS::StackName": self.stack_name,
            "AWS::URLSuffix": "amazonaws.com.cn" if self.partition == "aws-cn" else "amazonaws.com",
            "AWS::NoValue": None,
        }
        if name in pseudo:
            return pseudo[name]
        if name in self.parameters:
            return self.parameters[name]
        kind = self._resource(name)["Type"]
        if kind in REF_IS_ARN:
            return self._attribute(name, "Arn")
        if kind == "AWS::SQS::Queue":
            return f"https://sqs.{self.region}.amazonaws.com/{self.account}/{self._name(name)}"
        return self._name(name)

    def _attribute(self, logical_id: str, attribute: str) -> str:
        kind = str(self._resource(logical_id)["Type"])
        if attribute == "Arn":
            service = kind.split("::")[1].lower()
            arn = ARNS.get(kind, "arn:{partition}:" + service + ":{region}:{account}:{name}")
            return arn.format(
                partition=self.partition, region=self.region, account=self.account, name=self._name(logical_id)
            )
        if attribute == "QueueUrl":
            return str(self._ref(logical_id))
        return self._name(logical_id)  # Name, QueueName, ...: the resource's name

    def _name(self, logical_id: str) -> str:
        resource = self._resource(logical_id)
        explicit = resource.get("Properties", {}).get(NAME_PROPERTIES.get(resource["Type"], ""))
        return _text(self.resolve(explicit)) if explicit is not None else f"{self.stack_name}-{logical_id}".lower()

    def _resource(self, logical_id: str) -> dict[str, Any]:
        resources = self.template.get("Resources", {})
        if logical_id not in resources:
            raise BadInputError(f"template: Ref or GetAtt names {logical_id}, which is no parameter or resource")
        return dict(resources[logical_id])

    def _sub(self, text: str, variables: dict[str, Any]) -> str:
        def value(match: re.Match[str]) -> str:
            name = match.group(1)
            if name.startswith("!"):
                return "${" + name[1:] + "}"
            if name in variables:
                return _text(self.resolve(variables[name]))
            if "." in name and not name.startswith("AWS::"):
                return _text(self._attribute(*name.split(".", 1)))
            return _text(self._ref(name))

        return re.sub(r"\$\{([^}]+)\}", value, text)

    def _find_in_map(self, mapping: str, key: str, attribute: str) -> Any:
        try:
            return self.template["Mappings"][mapping][key][attribute]
        except KeyError:
            # CloudFormation's words: the template is refused before any resource is created.
            raise MappingError(f"Template error: Unable to get mapping for {mapping}::{key}::{attribute}") from None


class MappingError(BadInputError):
    """Fn::FindInMap finds no entry: CloudFormation refuses the template (a deploy blocker, not bad input)."""


def _text(value: Any) -> str:
    """A template value as CloudFormation compares and substitutes it (YAML's true is "true")."""
    return str(value).lower() if isinstance(value, bool) else str(value)


# --- checks: each (target, client) -> findings ------------------------------------------------------------------------


def check_lambda_concurrency(target: Target, client: Client) -> list[Finding]:
    """The stack's reservations must leave Lambda's unreserved minimum; a quota below 100 throttles under load."""
    limit = client("lambda").get_account_settings()["AccountLimit"]
    quota, unreserved = limit["ConcurrentExecutions"], limit["UnreservedConcurrentExecutions"]
    minimum = min(UNRESERVED_MINIMUM, quota)
    defaults = target.template.get("Globals", {}).get("Function", {})
    reserved = sum(
        int(
            target.resolve(props.get("ReservedConcurrentExecutions", defaults.get("ReservedConcurrentExecutions"))) or 0
        )
        for _, props in target.resources(*FUNCTIONS)
    )
    findings = []
    if unreserved - reserved < minimum:
        findings.append(
            Finding(
                "BLOCKS DEPLOY",
                f"the stack's functions reserve {reserved} concurrent executions, the account has {unreserved} of "
                f'{quota} unreserved and keeps {minimum}: CreateFunction fails "Specified ReservedConcurrentExecutions '
                "for function decreases account's UnreservedConcurrentExecution below its minimum value of "
                f'[{minimum}]." and the stack rolls back; fix: reserve at most {max(0, unreserved - minimum)} in '
                f"all (ReservedConcurrentExecutions in template.yaml), or {QUOTA_INCREASE}",
            )
        )
    if quota < UNRESERVED_MINIMUM:
        findings.append(
            Finding(
                "WARNING",
                f"Lambda's concurrency quota in {target.region} is {quota}: functions will be throttled under load; "
                f"{QUOTA_INCREASE}",
            )
        )
    return findings


def check_macie(target: Target, client: Client) -> list[Finding]:
    """Macie must be on for documents tasks; the stack may turn it on (EnableMacie) only where it is off."""
    if not target.creates("DocumentsWorkflow"):
        return []
    try:
        status = client("macie2").get_macie_session()["status"]
    except ClientError as exc:
        error = exc.response["Error"]
        if error["Code"] != "AccessDeniedException" or "not authorized" in error.get("Message", ""):
            raise  # IAM refused the call: that says nothing about Macie
        status = "OFF"  # Macie answers every call but EnableMacie so while it is not enabled
    enable = target.parameters["EnableMacie"] == "true"
    if status == "OFF" and not enable:
        return [
            Finding(
                "BLOCKS DOCUMENTS",
                f"Macie is not enabled in {target.region}: documents tasks will fail Macie.NotEnabled; fix: deploy "
                "with EnableMacie=true (Macie bills while on) or run aws macie2 enable-macie",
            )
        ]
    if status != "OFF" and enable:
        return [
            Finding(
                "BLOCKS DEPLOY",
                f"Macie is already enabled in {target.region} ({status}): the stack's MacieSession would fail "
                "(ConflictException) and the stack roll back; fix: set EnableMacie=false",
            )
        ]
    if status == "PAUSED":
        return [
            Finding(
                "BLOCKS DOCUMENTS",
                f"Macie is paused in {target.region}: documents tasks' classification jobs will not run; fix: run "
                "aws macie2 update-macie-session --status ENABLED",
            )
        ]
    return []


def check_macie_log_group(target: Target, client: Client) -> list[Finding]:
    """The stack makes Macie's log group where it is absent (a custom resource) and subscribes to it: a group takes
    two subscription filters, so a third stack's would fail."""
    if not target.creates("MacieLogGroup"):
        return []
    logs = client("logs")
    exists = any(
        group["logGroupName"] == MACIE_LOG_GROUP
        for page in logs.get_paginator("describe_log_groups").paginate(logGroupNamePrefix=MACIE_LOG_GROUP)
        for group in page["logGroups"]
    )
    if not exists:
        return []
    filters = logs.describe_subscription_filters(logGroupName=MACIE_LOG_GROUP)["subscriptionFilters"]
    others = [f["filterName"] for f in filters if not f["filterName"].startswith(f"{target.stack_name}-")]
    if len(others) >= SUBSCRIPTION_FILTERS_PER_GROUP:
        return [
            Finding(
                "BLOCKS DEPLOY",
                f"log group {MACIE_LOG_GROUP} has {len(others)} subscription filters already ({', '.join(others)}): a "
                "group takes two, this stack's would be the third (LimitExceededException); fix: set "
                "MacieJobEvents=reconciler (the reconciler resumes this stack's Macie jobs), or remove one, e.g. "
                f"aws logs delete-subscription-filter --log-group-name {MACIE_LOG_GROUP} --filter-name {others[0]}",
            )
        ]
    return []


def check_state_machines(target: Target, client: Client) -> list[Finding]:
    """Every state machine's definition, with its substitutions, as Step Functions validates it in this Region."""
    findings, definitions = [], []
    for logical_id, props in target.resources(*STATE_MACHINES):
        uri = props.get("DefinitionUri")
        if not isinstance(uri, str):
            continue  # an S3 location or an inline definition: nothing of this project's
        path = target.directory / uri
        try:
            text = path.read_text()
            substitutions = {k: _text(v) for k, v in target.resolve(props.get("DefinitionSubstitutions", {})).items()}
        except OSError as exc:
            raise BadInputError(f"{logical_id}: cannot read its DefinitionUri {path}: {exc.strerror}") from None
        except MappingError as exc:
            findings.append(
                Finding(
                    "BLOCKS DEPLOY",
                    f"{logical_id}'s DefinitionSubstitutions: {exc} in {target.region}: CloudFormation refuses the "
                    "template; fix: deploy in a Region of that mapping",
                )
            )
            continue
        definitions.append((logical_id, uri, props.get("Type", "STANDARD"), substitute(text, substitutions)))
    sfn = client("stepfunctions")
    for logical_id, uri, kind, definition in definitions:
        diagnostics = sfn.validate_state_machine_definition(definition=definition, type=kind)["diagnostics"]
        for diagnostic in diagnostics:
            if diagnostic["severity"] == "ERROR":
                where = f" at {diagnostic['location']}" if diagnostic.get("location") else ""
                findings.append(
                    Finding(
                        "BLOCKS DEPLOY",
                        f"state machine {logical_id} ({uri}) is invalid in {target.region}: {diagnostic['code']}: "
                        f"{diagnostic['message']}{where}; fix: change {uri}, or deploy in a Region that offers what it "
                        "uses",
                    )
                )
    return findings


def substitute(definition: str, substitutions: dict[str, str]) -> str:
    """DefinitionSubstitutions applied as Step Functions applies them: each ${Key} with its value; others stay."""
    return re.sub(r"\$\{([^}]+)\}", lambda m: substitutions.get(m.group(1), m.group(0)), definition)


def check_name_lengths(target: Target, client: Client) -> list[Finding]:
    """Explicit names (most built from the stack name) must fit their limits; so must the stack name itself."""
    stack = target.stack_name
    if not STACK_NAME.fullmatch(stack):
        return [
            Finding(
                "BLOCKS DEPLOY",
                f"stack name {stack!r} is not a CloudFormation stack name (a letter, then letters, digits and "
                "hyphens, 128 characters at most); fix: another --stack-name or samconfig stack_name",
            )
        ]
    too_long, fits = [], 128  # (length, logical id, name, limit); the longest stack name every name fits with
    for logical_id, resource in target.template.get("Resources", {}).items():
        for (kind, prop), limit in NAME_LIMITS.items():
            if resource["Type"] != kind or prop not in resource.get("Properties", {}):
                continue
            if not target.creates(logical_id):
                continue
            raw = resource["Properties"][prop]
            name = _text(target.resolve(raw))
            uses = json.dumps(raw).count("AWS::StackName")
            if uses:
                fits = min(fits, (limit - (len(name) - uses * len(stack))) // uses)
            if len(name) > limit:
                too_long.append((len(name), logical_id, name, limit))
    if not too_long:
        return []
    too_long.sort(reverse=True)
    _, logical_id, longest, limit = too_long[0]
    over = ", ".join(f"{lid} {length} > {lim}" for length, lid, _, lim in too_long)
    return [
        Finding(
            "BLOCKS DEPLOY",
            f"stack name {stack!r} ({len(stack)} characters) makes {len(too_long)} names too long ({over}); the "
            f"longest, {logical_id}'s: {longest!r}; fix: a stack name of at most {fits} characters (--stack-name, "
            "samconfig stack_name)",
        )
    ]


def check_data_automation(target: Target, client: Client) -> list[Finding]:
    """Bedrock Data Automation must be in the Region, and the profile of the Region's geography."""
    regions = target.template.get("Mappings", {}).get("DataAutomationRegions")
    if regions is None:
        return []
    extract = target.parameters.get("Extract", "auto")
    if extract == "false":
        return []
    if target.region not in regions:
        if extract == "auto":
            return [
                Finding(
                    "WARNING",
                    f"Bedrock Data Automation is not in {target.region}: the extract feature is left out "
                    f"(Extract=auto) and POST /task offers no extract type; to use it, deploy in one of "
                    f"{', '.join(regions)}",
                )
            ]
        return [
            Finding(
                "BLOCKS DEPLOY",
                f"Bedrock Data Automation is not in {target.region}, and Extract=true: its state machines would fail "
                f"CreateStateMachine; fix: set Extract=auto (or false), or deploy in one of {', '.join(regions)}",
            )
        ]
    profile = target.parameters.get("DataAutomationProfile", "")
    expected = regions[target.region]["Profile"]
    if profile and profile.split(".")[0] != expected.split(".")[0]:
        return [
            Finding(
                "BLOCKS EXTRACT",
                f"DataAutomationProfile={profile} is not of {target.region}'s geography ({expected.split('.')[0]}.): "
                f"BDA refuses its jobs; fix: set DataAutomationProfile={expected}, or leave it empty",
            )
        ]
    return []


def check_durable_functions(target: Target, client: Client) -> list[Finding]:
    """The documents workflow's durable engine (DocumentsDurableFunction) needs Lambda durable functions in the Region:
    the template's RegionHasDurableFunctions names the Regions known to have them."""
    conditions = target.template.get("Conditions", {})
    if "RegionHasDurableFunctions" not in conditions or not target.condition("DocumentsEnabled"):
        return []
    setting = target.parameters.get("DurableFunctions", "auto")
    if setting == "false" or target.condition("RegionHasDurableFunctions"):
        return []
    if setting == "auto":
        return [
            Finding(
                "WARNING",
                f"Lambda durable functions are not known to be in {target.region}: the documents-durable task type is "
                "left out (DurableFunctions=auto); the documents type runs on Step Functions as usual",
            )
        ]
    return [
        Finding(
            "WARNING",
            f"DurableFunctions=true, but Lambda durable functions are not known to be in {target.region}: unless "
            "Lambda lists the Region for them, DocumentsDurableFunction fails and the stack rolls back; fix: "
            "DurableFunctions=auto, or add the Region to template.yaml's RegionHasDurableFunctions",
        )
    ]


def check_other_stacks(target: Target, client: Client) -> list[Finding]:
    """Other stacks of the template in the account and Region (`dev` beside `prod`): each acts on its own jobs only,
    but two that export one HealthLake data store cannot tell their exports apart. A stack of the template is one
    whose Description names the application as this template's does ("callback-kit - ...")."""
    application = str(target.template.get("Description", "")).partition(" - ")[0].strip()
    if not application:
        return []
    others = [
        stack
        for page in client("cloudformation").get_paginator("describe_stacks").paginate()
        for stack in page["Stacks"]
        if stack["StackName"] != target.stack_name
        and stack["StackStatus"] not in HOLDS_NOTHING
        and str(stack.get("Description", "")).startswith(f"{application} - ")
    ]
    if not others:
        return []
    findings = [
        Finding(
            "WARNING",
            f"other {application} stacks in {target.region}: {', '.join(s['StackName'] for s in others)}: each stack "
            "acts on its own jobs only (a Macie or Bedrock Data Automation completion reaches only its stack's rules, "
            "by the job's name or the bucket it wrote to); another stack's Translate completion reaches this stack's "
            "resume function too, costs one invocation and one DescribeTextTranslationJob, and is acknowledged "
            "FOREIGN with nothing stored; nothing to fix",
        )
    ]
    datastore = target.parameters.get("HealthLakeDatastoreId", "")
    sharing = [
        s["StackName"]
        for s in others
        if datastore
        and any(
            p["ParameterKey"] == "HealthLakeDatastoreId" and p.get("ParameterValue") == datastore
            for p in s.get("Parameters", [])
        )
    ]
    if sharing:
        findings.append(
            Finding(
                "WARNING",
                f"the HealthLake data store {datastore} is exported by {', '.join(sharing)} too: the stacks' export "
                "completions are not told apart (an export's events carry the data store and the job id, no stack's "
                "name), so each stack keeps the other's as early completions until TaskTimeoutSeconds + "
                "TokenTtlMarginSeconds have passed, and their runs wait for each other (HealthLake runs one export at "
                "a time per data store); fix: give each stack its own data store, or set HealthLakeDatastoreId in "
                "one of them only",
            )
        )
    return findings


CHECKS = (
    check_lambda_concurrency,
    check_macie,
    check_macie_log_group,
    check_state_machines,
    check_name_lengths,
    check_data_automation,
    check_durable_functions,
    check_other_stacks,
)


# --- input ------------------------------------------------------------------------------------------------------------


def load_template(path: Path) -> dict[str, Any]:
    try:
        template = yaml_parse(path.read_text())
    except OSError as exc:
        raise BadInputError(f"cannot read the template {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise BadInputError(f"the template {path} is not YAML: {' '.join(str(exc).split())}") from None
    if not isinstance(template, dict) or "Resources" not in template:
        raise BadInputError(f"the template {path} has no Resources")
    return template


def samconfig(path: Path, env: str) -> dict[str, Any]:
    """The deploy settings of `env`: its global parameters, then its deploy parameters."""
    try:
        config = tomllib.loads(path.read_text())
    except OSError as exc:
        raise BadInputError(f"cannot read {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise BadInputError(f"{path} is not TOML: {exc}") from None
    envs = [name for name, table in config.items() if isinstance(table, dict)]
    if env not in envs:
        raise BadInputError(f"no config env {env!r} in {path}; its envs: {', '.join(envs)}")
    sections = config[env]
    return {**sections.get("global", {}).get("parameters", {}), **sections.get("deploy", {}).get("parameters", {})}


def parameters(template: dict[str, Any], *overrides: Sequence[str]) -> dict[str, str]:
    """The template's defaults, then each list of Key=Value overrides in turn."""
    declared = template.get("Parameters", {})
    values = {name: _text(p["Default"]) for name, p in declared.items() if "Default" in p}
    for tokens in overrides:
        for token in tokens:
            key, equals, value = token.partition("=")
            if not equals or not key:
                raise BadInputError(f"parameter override {token!r} is not Key=Value")
            if key not in declared:
                raise BadInputError(f"parameter override {token!r}: the template has no parameter {key}")
            values[key] = value
    missing = [name for name in declared if name not in values]
    if missing:
        raise BadInputError(f"parameters without a default or a value: {', '.join(missing)}")
    return values


def _override_tokens(value: str | list[str]) -> list[str]:
    """samconfig's parameter_overrides: one string ("A=1 B='two words'") or a list of Key=Value strings."""
    try:
        return shlex.split(value) if isinstance(value, str) else list(value)
    except ValueError as exc:
        raise BadInputError(f"samconfig parameter_overrides {value!r}: {exc}") from None


def preflight(target: Target, client: Client) -> list[Finding]:
    """Every check's findings, in order."""
    return [finding for check in CHECKS for finding in check(target, client)]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--config-env", default="default", help="samconfig.toml's env (default: default)")
    parser.add_argument("--config-file", type=Path, default=Path("samconfig.toml"))
    parser.add_argument("--template", type=Path, default=Path("template.yaml"))
    parser.add_argument("--stack-name", help="default: the config env's stack_name")
    parser.add_argument("--region", help="default: the config env's region, else boto3's")
    parser.add_argument("--parameter-overrides", nargs="+", default=[], metavar="Key=Value")
    args = parser.parse_args(argv)

    try:
        template = load_template(args.template)
        config = samconfig(args.config_file, args.config_env)
        values = parameters(template, _override_tokens(config.get("parameter_overrides", [])), args.parameter_overrides)
        stack_name = args.stack_name or config.get("stack_name")
        if not stack_name:
            raise BadInputError(f"no stack name: pass --stack-name or set stack_name for {args.config_env!r}")
        session = boto3.session.Session(
            profile_name=config.get("profile"), region_name=args.region or config.get("region")
        )
        if session.region_name is None:
            raise BadInputError("no Region: pass --region or set AWS_REGION")
        account = session.client("sts").get_caller_identity()["Account"]
        target = Target(template, args.template.parent, stack_name, values, session.region_name, account)
        findings = preflight(target, session.client)
    except (BadInputError, BotoCoreError, ClientError) as exc:
        print(f"preflight: {' '.join(str(exc).split())}", file=sys.stderr)
        raise SystemExit(2) from None

    for finding in findings:
        print(finding)
    blocking = sum(f.blocking for f in findings)
    warnings = sum(f.label == "WARNING" for f in findings)
    print(
        f"preflight {stack_name} in {account}/{target.region}: {len(CHECKS)} checks; blocking {blocking}, "
        f"warnings {warnings}"
    )
    if blocking:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
