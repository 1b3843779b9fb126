"""Two stacks of the template in one account, as samconfig.toml's `dev` and `prod` make them: each deploys with the
parameters the account calls for, runs its own documents and extract flows, acts on its own Translate, Macie and
Bedrock Data Automation jobs only; and a stack is deleted and created again as CloudFormation does it."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from localcloud.client import wait_for_execution
from localcloud.cloud import LocalCloud
from localcloud.deploy import Stack, StackDeleteFailedError, StackRolledBackError
from localcloud.simulators.bda import BdaSimulator
from localcloud.simulators.macie import MacieSimulator
from localcloud.simulators.translate import TranslateSimulator
from tests.workflows.conftest import PARAMETERS

PROD, THIRD = "callback-kit-prod", "callback-kit-test"
KINDS = (("translate", "translation"), ("macie", "classification"))  # job key prefix, the output's field
# Where the session's stack (dev) turned Macie on, as `make preflight` would advise (Macie's log group, made by dev,
# is subscribed to as it is)
PROD_PARAMETERS = {**PARAMETERS, "EnableMacie": "false"}


def start_documents(cloud: LocalCloud, stack: Stack) -> str:
    """A documents execution of `stack` over one document of its own bucket."""
    folder, bucket = uuid.uuid4().hex, stack.outputs["DocumentBucketName"]
    cloud.client("s3").put_object(Bucket=bucket, Key=f"{folder}/in/doc.txt", Body=b"Write to jane.doe@example.com.")
    request = {"inputPrefix": f"{folder}/in/", "outputPrefix": f"{folder}/out/", "targetLanguages": ["de"]}
    execution = cloud.client("stepfunctions").start_execution(
        stateMachineArn=stack.outputs["DocumentsWorkflowArn"], input=json.dumps({**request, "sourceLanguage": "en"})
    )
    return str(execution["executionArn"])


def start_extract(cloud: LocalCloud, stack: Stack) -> str:
    """An extract execution of `stack` over one document of its own bucket (one Bedrock Data Automation job)."""
    key, bucket = f"{uuid.uuid4().hex}/invoice.pdf", stack.outputs["DocumentBucketName"]
    cloud.client("s3").put_object(Bucket=bucket, Key=key, Body=b"Invoice 7: 3 widgets")
    execution = cloud.client("stepfunctions").start_execution(
        stateMachineArn=stack.outputs["ExtractWorkflowArn"], input=json.dumps({"documents": [key]})
    )
    return str(execution["executionArn"])


def job_keys(cloud: LocalCloud, stack: Stack) -> set[str]:
    """The job keys the stack's token table holds (tokens, or completions kept for a token to come)."""
    items = cloud.client("dynamodb").scan(TableName=stack.outputs["TokenTableName"], ConsistentRead=True)["Items"]
    return {item["jobKey"]["S"] for item in items}


def empty(cloud: LocalCloud, bucket: str) -> None:
    s3 = cloud.client("s3")
    for listed in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for item in listed.get("Contents", []):
            s3.delete_object(Bucket=bucket, Key=item["Key"])


def test_dev_and_prod_share_an_account_and_each_acts_on_its_own_jobs(cloud: LocalCloud) -> None:
    # Given prod deployed beside the session's stack (dev): with EnableMacie=true it is refused, as Macie is on
    with pytest.raises(StackRolledBackError, match=r"MacieSession: .*already enabled.*\(ConflictException\)"):
        cloud.deploy_stack(PROD, {**PROD_PARAMETERS, "EnableMacie": "true"})
    prod = cloud.deploy_stack(PROD, PROD_PARAMETERS)
    try:
        region = cloud.config.region
        cloud.add_simulator(TranslateSimulator(region, delay_seconds=60, clock=cloud.clock))
        macie = MacieSimulator(region, delay_seconds=60, clock=cloud.clock)
        cloud.add_simulator(macie)
        bda = BdaSimulator(region, delay_seconds=60, clock=cloud.clock)
        cloud.add_simulator(bda)

        # When each stack runs a documents flow and an extract flow (one document) at once
        dev_run, prod_run = start_documents(cloud, cloud.stack), start_documents(cloud, prod)
        extract_runs = start_extract(cloud, cloud.stack), start_extract(cloud, prod)
        described = [wait_for_execution(cloud, arn, timeout=40, show=False) for arn in (dev_run, prod_run)]
        extracted = [wait_for_execution(cloud, arn, timeout=40, show=False) for arn in extract_runs]

        # Then all four succeed, each Macie job named after its stack, each BDA job writing to its stack's bucket
        assert [d["status"] for d in described + extracted] == ["SUCCEEDED"] * 4, described + extracted
        names = {job.request["name"].partition(".")[0] for job in macie.jobs.values()}
        assert {cloud.stack.name, PROD} <= names
        documents = [json.loads(e["output"])["documents"] for e in extracted]
        for stack, (document,) in zip((cloud.stack, prod), documents, strict=True):
            assert document["output"].startswith(f"s3://{stack.outputs['DocumentBucketName']}/"), document
        # And neither stack keeps anything of the other's jobs: a Macie or BDA completion never reaches the other stack
        # (its relay and rules take its own jobs only: by name, by the bucket written to), a Translate one does and is
        # acknowledged as another stack's
        dev_jobs, prod_jobs = (
            {f"{key}#{json.loads(d['output'])[field]['jobId']}" for key, field in KINDS} | {f"bda#{document['jobId']}"}
            for d, (document,) in zip(described, documents, strict=True)
        )
        macie.settle()  # every log line is written and every BDA event put, then every relay and resume they caused ran
        bda.settle()
        assert cloud.runtime.drain(timeout=60), "the invocations those caused never all ended"
        assert not prod_jobs & job_keys(cloud, cloud.stack)
        assert not dev_jobs & job_keys(cloud, prod)
        third_stack_without_the_relay(cloud)
    finally:
        delete_and_recreate(cloud, prod)


def third_stack_without_the_relay(cloud: LocalCloud) -> None:
    # When a third stack of the account subscribes to Macie's log group, it fails: a group takes two filters
    with pytest.raises(StackRolledBackError, match=r"ForwardMacieLogsFunctionMacieJobLog: .*LimitExceededException"):
        cloud.deploy_stack(THIRD, PROD_PARAMETERS)
    # And without the relay (MacieJobEvents=reconciler) it deploys, and its reconciler resumes its Macie job
    third = cloud.deploy_stack(THIRD, {**PROD_PARAMETERS, "MacieJobEvents": "reconciler"})
    try:
        assert not third.of_type("AWS::Logs::SubscriptionFilter")
        described = wait_for_execution(cloud, start_documents(cloud, third), timeout=40, show=False)
        assert described["status"] == "SUCCEEDED", described
    finally:
        for output in ("DocumentBucketName", "TaskResultBucketName"):
            empty(cloud, third.outputs[output])
        cloud.delete_stack(third)


def delete_and_recreate(cloud: LocalCloud, prod: Stack) -> None:
    # When prod is deleted with documents in its bucket, CloudFormation refuses: the bucket is not empty
    with pytest.raises(StackDeleteFailedError, match=r"DocumentBucket: .*not empty"):
        cloud.delete_stack(prod)
    assert PROD in stack_names(cloud)
    # And emptied first, it is deleted
    for output in ("DocumentBucketName", "TaskResultBucketName"):
        empty(cloud, prod.outputs[output])
    cloud.delete_stack(prod)
    assert PROD not in stack_names(cloud)
    # And created again, it deploys (nothing it made was retained under a fixed name)
    again = cloud.deploy_stack(PROD, PROD_PARAMETERS)
    cloud.delete_stack(again)


def stack_names(cloud: LocalCloud) -> set[str]:
    summaries: list[dict[str, Any]] = cloud.client("cloudformation").list_stacks()["StackSummaries"]
    return {s["StackName"] for s in summaries if s["StackStatus"] != "DELETE_COMPLETE"}
