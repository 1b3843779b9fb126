"""Which Regions have which service, so the offline cloud refuses what a Region lacks as AWS does.

Step Functions rejects a definition whose Task names an integration (an optimized one or `aws-sdk:<service>`) that its
Region lacks: CreateStateMachine, hence the whole stack, fails, and ValidateStateMachineDefinition answers FAIL. The
Regions of a service are botocore's endpoint data (the SDK's own list); for a service botocore lists by rules rather
than by Region, AWS's documentation, below. A service known to neither is taken to be in every Region (a gap:
docs/offline-cloud.md). Likewise, a call signed for a Region without its service (of ENDPOINT_SERVICES) finds no
endpoint (localcloud.simulators), a function with DurableConfig fails where Lambda has no durable functions
(localcloud.deploy), and a Bedrock Data Automation job must name its Region's geography's profile
(localcloud.simulators.bda).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from typing import Any

import botocore.session

# Services whose Regions botocore's endpoint data does not list: their user guides' "Supported Regions".
DOCUMENTED_REGIONS: dict[str, frozenset[str]] = {
    "bedrock-data-automation-runtime": frozenset(
        {"us-east-1", "us-west-2", "eu-central-1", "eu-west-1", "eu-west-2", "ap-south-1", "ap-southeast-2"}
    ),
}
# The services this project calls whose endpoints are in some Regions only (the rest, Lambda, Step Functions, S3,
# DynamoDB..., are in every Region it deploys to): a call signed for a Region without one has no endpoint to reach.
ENDPOINT_SERVICES = frozenset({"translate", "macie2", "healthlake", "bedrock-data-automation-runtime"})

# Lambda durable functions (a function's DurableConfig), which botocore's endpoint data does not tell apart from
# Lambda's. They launched in December 2025 in US East (Ohio) alone (AWS What's New):
# https://aws.amazon.com/about-aws/whats-new/2025/12/lambda-durable-multi-step-applications-ai-workflows/
# AWS has added Regions since, 31 by April 2026 as Lambda's team wrote in aws/aws-lambda-roadmap#80, linking
# https://aws.amazon.com/about-aws/whats-new/2026/04/lambda-durable-functions-16-new-regions/
# No list of them could be read here, so this holds the Regions that can be cited: us-east-2, the launch, and
# us-east-1, where an AWS maintainer wrote in aws/aws-lambda-dotnet#2434 (June 2026) that .NET durable support is
# "deployed to at least us-east-1", and whose KMS key AWS's durable configuration documentation uses in its example.
# Regions not listed are refused offline (stricter than AWS, never friendlier); a Region read from AWS's list goes
# here and into template.yaml's RegionHasDurableFunctions (tests/unit/test_template.py holds the two equal).
DURABLE_FUNCTIONS_REGIONS = frozenset({"us-east-1", "us-east-2"})

# Bedrock Data Automation runs a job on the cross-Region profile of the geography of the Region it is called in
# (`<geography>.data-automation-v1`), by Region as its user guide's "Cross Region support required for Bedrock Data
# Automation" lists them: https://docs.aws.amazon.com/bedrock/latest/userguide/bda-cris.html
DATA_AUTOMATION_GEOGRAPHIES = {
    "us-east-1": "us",
    "us-west-2": "us",
    "eu-central-1": "eu",
    "eu-west-1": "eu",
    "eu-west-2": "eu",
    "ap-south-1": "apac",
    "ap-southeast-2": "apac",
}
_INTEGRATION = re.compile(r"^arn:aws[a-z-]*:states:::(?:aws-sdk:)?([a-z0-9-]+):")
_OPTIMIZED_NAMES = {"states": "stepfunctions"}  # the optimized integrations' names that are not their SDK's


@cache
def _session() -> botocore.session.Session:
    return botocore.session.get_session()


@cache
def _sdk_names() -> dict[str, str]:
    """An integration's service name (the SDK's name without hyphens: `bedrockdataautomationruntime`) -> the SDK's."""
    return {name.replace("-", ""): name for name in _session().get_available_services()}


@cache
def service_regions(service: str) -> frozenset[str]:
    """The Regions of an SDK service (`translate`, `bedrock-data-automation-runtime`); empty when none is known. Read
    once per service: every call the offline endpoint answers for a service of ENDPOINT_SERVICES asks (42 us a read)."""
    return DOCUMENTED_REGIONS.get(service) or frozenset(_session().get_available_regions(service))


def has_service(service: str, region: str) -> bool:
    regions = service_regions(service)
    return not regions or region in regions


def bucket_location(region: str) -> dict[str, Any]:
    """CreateBucket's arguments for a bucket in `region`: S3 refuses a LocationConstraint in us-east-1, needs one
    elsewhere."""
    return {} if region == "us-east-1" else {"CreateBucketConfiguration": {"LocationConstraint": region}}


def has_durable_functions(region: str) -> bool:
    return region in DURABLE_FUNCTIONS_REGIONS


def missing_integrations(definition: Any, region: str) -> list[tuple[str, str]]:
    """(JSON pointer, Resource) of every Task of a parsed definition whose integration the Region lacks."""
    return [
        (pointer, resource)
        for pointer, resource in _resources(definition, "")
        if (match := _INTEGRATION.match(resource))
        and not has_service(_sdk_names().get(match[1], _OPTIMIZED_NAMES.get(match[1], match[1])), region)
    ]


def _resources(node: Any, pointer: str) -> Iterator[tuple[str, str]]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "Resource" and isinstance(value, str):
                yield f"{pointer}/Resource", value
            else:
                yield from _resources(value, f"{pointer}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _resources(value, f"{pointer}/{index}")


def not_recognized(resource: str) -> str:
    """Step Functions' diagnostic (SCHEMA_VALIDATION_FAILED) for an integration its Region lacks."""
    return (
        f"The resource provided {resource} is not recognized. The value is not a valid resource ARN, or the resource "
        "is not available in this region."
    )
