"""Gap 1 (names), docs/offline-cloud.md: an aws-sdk integration's service and errors are named as AWS names them, for
every service: the resource's service is the AWS SDK for Java v2 client's package (`sfn`, `databasemigration`), and
an error is `ServiceName.ErrorName`, both in Pascal case (`S3.NoSuchBucketException`), where moto 5.2.5 kept the
resource's lower-case name for every service but DynamoDB and Step Functions.

As in test_sfn_fixes.py, the scenario runs twice: in a fresh Python process on unpatched moto (this file run as a
script; it never imports localcloud), and in this process with `localcloud.fixes.patches.step_functions()` installed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from inspect import signature
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

REPO = Path(__file__).resolve().parents[2]
REGION = "us-east-1"
ROLE_ARN = "arn:aws:iam::123456789012:role/sdk-error-names"
MOTO_CONFIG: Any = {"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}

# aws-sdk calls that fail, each with the error AWS names it (the name their Catch waits for).
CALLS: dict[str, tuple[str, dict[str, Any], str]] = {
    "s3": ("s3:getObject", {"Bucket": "no-such-bucket", "Key": "k"}, "S3.NoSuchBucketException"),
    "secretsmanager": (
        "secretsmanager:getSecretValue",
        {"SecretId": "no-such-secret"},
        "SecretsManager.ResourceNotFoundException",
    ),
    "sfn": (
        "sfn:describeExecution",
        {"ExecutionArn": f"arn:aws:states:{REGION}:123456789012:execution:none:none"},
        "Sfn.ExecutionDoesNotExistException",
    ),
    # boto3's `dms`; the error's shape is ResourceNotFoundFault, the Java SDK's exception ResourceNotFoundException
    "dms": (
        "databasemigration:deleteReplicationTask",
        {"ReplicationTaskArn": f"arn:aws:dms:{REGION}:123456789012:task:NOSUCHTASK"},
        "DatabaseMigration.ResourceNotFoundException",
    ),
}


def scenario() -> dict[str, Any]:
    """Each call of CALLS as an aws-sdk Task whose Catch names the error as AWS does: the status and error each
    execution ended with (SUCCEEDED and the caught error when the Catch matched), and where the patched attributes
    are in the interpreter this process runs."""
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_aws_sdk import (
        StateTaskServiceAwsSdk,
    )

    sfn = boto3.session.Session(region_name=REGION).client("stepfunctions")
    ended: dict[str, Any] = {}
    for case, (resource, parameters, aws_name) in CALLS.items():
        states = {
            "Call": {
                "Type": "Task",
                "Resource": f"arn:aws:states:::aws-sdk:{resource}",
                "Parameters": parameters,
                "Catch": [{"ErrorEquals": [aws_name], "Next": "Caught"}],
                "End": True,
            },
            "Caught": {"Type": "Pass", "End": True},
        }
        machine = sfn.create_state_machine(
            name=f"sdk-errors-{case}", definition=json.dumps({"StartAt": "Call", "States": states}), roleArn=ROLE_ARN
        )["stateMachineArn"]
        execution = sfn.start_execution(stateMachineArn=machine)["executionArn"]
        deadline = time.monotonic() + 30
        while (described := sfn.describe_execution(executionArn=execution))["status"] == "RUNNING":
            assert time.monotonic() < deadline, f"{case}: the execution is still RUNNING after 30 s"
            time.sleep(0.02)
        caught = json.loads(described.get("output") or "{}").get("Error")
        ended[case] = [described["status"], caught or described.get("error")]
    targets = ("_get_boto_service_name", "_normalise_service_error_name", "_normalise_exception_name")
    found = {name: list(signature(getattr(StateTaskServiceAwsSdk, name)).parameters) for name in targets}
    return {"ended": ended, "targets": found}


@pytest.fixture(scope="module")
def unpatched() -> dict[str, Any]:
    """The scenario on pristine moto: this file run as a script by a fresh interpreter."""
    run = subprocess.run([sys.executable, __file__], cwd=REPO, capture_output=True, text=True, timeout=90, check=False)
    assert run.returncode == 0, f"the unpatched run crashed:\n{run.stderr[-4000:]}"
    return dict(json.loads(run.stdout.strip().splitlines()[-1]))


@pytest.fixture
def patched() -> Iterator[None]:
    from localcloud.fixes import patches

    with patches.Patches(patches.step_functions()), mock_aws(config=MOTO_CONFIG):
        yield


# The Java SDK's names for botocore's services, as its code generator derives them from serviceId, and the names
# AWS documents: `aws-sdk:acmpca` fails with AcmPca.ResourceNotFoundException; S3's BucketAlreadyExists is
# S3.BucketAlreadyExistsException.
NAMES = [
    # (aws-sdk resource's service, boto3's service, error prefix)
    ("acmpca", "acm-pca", "AcmPca"),
    ("s3", "s3", "S3"),
    ("translate", "translate", "Translate"),
    ("macie2", "macie2", "Macie2"),
    ("dynamodb", "dynamodb", "DynamoDb"),
    ("sfn", "stepfunctions", "Sfn"),
    ("bedrockdataautomationruntime", "bedrock-data-automation-runtime", "BedrockDataAutomationRuntime"),
    ("secretsmanager", "secretsmanager", "SecretsManager"),
    ("sqs", "sqs", "Sqs"),
    ("ec2", "ec2", "Ec2"),
    ("healthlake", "healthlake", "HealthLake"),
    ("cloudwatchlogs", "logs", "CloudWatchLogs"),
    ("databasemigration", "dms", "DatabaseMigration"),  # serviceId `Database Migration Service`
    ("elasticloadbalancingv2", "elbv2", "ElasticLoadBalancingV2"),
    ("sesv2", "sesv2", "SesV2"),
]


@pytest.mark.parametrize(("sdk_name", "boto_name", "prefix"), NAMES)
def test_every_service_is_named_as_the_java_sdk_names_it(sdk_name: str, boto_name: str, prefix: str) -> None:
    from localcloud.fixes import sfn

    assert sfn.sdk_service(sdk_name) == (boto_name, prefix)


def test_a_name_no_sdk_client_has_names_no_service() -> None:
    from localcloud.fixes import sfn

    # `states` is the optimized integrations' name for Step Functions, boto3's `stepfunctions` no Java client's
    assert (sfn.sdk_service("states"), sfn.sdk_service("stepfunctions")) == (None, None)


@pytest.mark.parametrize(
    ("shape", "exception"),
    [
        ("NoSuchKey", "NoSuchKeyException"),
        ("BucketAlreadyExists", "BucketAlreadyExistsException"),
        ("TooManyRequestsException", "TooManyRequestsException"),
        ("EC2ThrottledException", "Ec2ThrottledException"),
        ("ResourceNotFoundFault", "ResourceNotFoundException"),
    ],
)
def test_errors_are_named_after_the_java_sdks_exception_classes(shape: str, exception: str) -> None:
    from localcloud.fixes import sfn

    assert sfn.sdk_exception_name(shape) == exception


def test_patched_aws_sdk_errors_carry_aws_names_and_their_catch_matches(patched: None) -> None:
    # Given moto with the Step Functions patches installed
    # When aws-sdk tasks of S3, Secrets Manager, Step Functions and DMS fail, each caught by its AWS error name
    ended = scenario()["ended"]

    # Then each Catch matched: the error is named as AWS names it
    assert ended == {case: ["SUCCEEDED", aws_name] for case, (_, _, aws_name) in CALLS.items()}


def test_unpatched_moto_names_errors_after_the_lower_case_resource(unpatched: dict[str, Any]) -> None:
    # Given pristine moto
    # When the same tasks fail
    ended = unpatched["ended"]

    # Then no Catch matched: S3's and Secrets Manager's errors keep the resource's lower-case service name; boto3
    # knows no `databasemigration`, and Step Functions' call failed on its parameters (moto passes the ASL's
    # `ExecutionArn` verbatim where boto3 wants `executionArn`)
    assert ended == {
        "s3": ["FAILED", "s3.NoSuchBucketException"],
        "secretsmanager": ["FAILED", "secretsmanager.ResourceNotFoundException"],
        "sfn": ["FAILED", "States.Runtime"],
        "dms": ["FAILED", "States.Runtime"],
    }


def test_the_patched_attributes_are_where_moto_defines_them(unpatched: dict[str, Any]) -> None:
    # Given pristine moto, the attributes localcloud.fixes.patches replaces for these names take what the fixes take
    assert unpatched["targets"] == {
        "_get_boto_service_name": ["self", "boto_service_name"],
        "_normalise_service_error_name": ["service_name"],
        "_normalise_exception_name": ["norm_service_name", "ex"],
    }


if __name__ == "__main__":
    # The unpatched run: `python test_sdk_error_names.py` prints the scenario's observations as one JSON line.
    with mock_aws(config=MOTO_CONFIG):
        print(json.dumps(scenario()))
