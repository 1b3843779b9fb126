"""The custom resource behind Macie's job log group: made when absent (with its retention), left as it is when there,
never deleted; CloudFormation always gets an answer, FAILED with the reason when the work failed.

The function runs as CloudFormation calls it, on moto's CloudWatch Logs; its answer goes to a local HTTP server in
place of the request's pre-signed S3 URL, recorded as CloudFormation would read it."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from tests.unit.support import EVENTS, REGION, Aws, invoke

SAMPLE = EVENTS / "ensure_macie_log_group.create.json"


class CloudFormationEndpoint:
    """An HTTP server standing in for the pre-signed S3 URL: every PUT's JSON body, in order."""

    def __init__(self) -> None:
        answers: list[dict[str, Any]] = []

        class Handler(BaseHTTPRequestHandler):
            def do_PUT(self) -> None:
                answers.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.answers = answers
        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/cfn-response?signature=x"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def endpoint(aws: Aws) -> Iterator[CloudFormationEndpoint]:
    server = CloudFormationEndpoint()
    yield server
    server.close()


def request(endpoint: CloudFormationEndpoint, request_type: str, group: str) -> dict[str, Any]:
    """The sample, as CloudFormation sends it for `request_type`, about log group `group`."""
    event = json.loads(Path(SAMPLE).read_text())
    event |= {"RequestType": request_type, "ResponseURL": endpoint.url}
    event["ResourceProperties"]["LogGroupName"] = group
    if request_type != "Create":
        event["PhysicalResourceId"] = group
    return event


def groups(name: str) -> list[dict[str, Any]]:
    found = boto3.client("logs", region_name=REGION).describe_log_groups(logGroupNamePrefix=name)["logGroups"]
    return [g for g in found if g["logGroupName"] == name]


def test_create_makes_the_group_when_absent_and_answers_its_name(endpoint: CloudFormationEndpoint) -> None:
    # Given no log group of that name (a new account: Macie made none yet)
    group = f"/aws/macie/test-{uuid.uuid4().hex}"
    # When CloudFormation creates the resource
    invoke("ensure_macie_log_group", request(endpoint, "Create", group))
    # Then the group exists with the retention asked for
    assert [g.get("retentionInDays") for g in groups(group)] == [90]
    # And CloudFormation is answered SUCCESS, with the name as physical id and as the LogGroupName attribute
    (answer,) = endpoint.answers
    assert (answer["Status"], answer["PhysicalResourceId"], answer["Data"]) == (
        "SUCCESS",
        group,
        {"LogGroupName": group},
    )
    assert (answer["LogicalResourceId"], answer["RequestId"]) == (
        "MacieLogGroup",
        "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0",
    )


def test_create_leaves_a_group_that_exists_as_it_is(endpoint: CloudFormationEndpoint) -> None:
    # Given the group made before (by another stack, a deleted one, or Macie), with its own retention
    group = f"/aws/macie/test-{uuid.uuid4().hex}"
    logs = boto3.client("logs", region_name=REGION)
    logs.create_log_group(logGroupName=group)
    logs.put_retention_policy(logGroupName=group, retentionInDays=7)
    # When a stack creates the resource
    invoke("ensure_macie_log_group", request(endpoint, "Create", group))
    # Then it succeeds and changes nothing
    assert [a["Status"] for a in endpoint.answers] == ["SUCCESS"]
    assert [g.get("retentionInDays") for g in groups(group)] == [7]


def test_delete_never_deletes_the_group(endpoint: CloudFormationEndpoint) -> None:
    # Given the group a stack made
    group = f"/aws/macie/test-{uuid.uuid4().hex}"
    invoke("ensure_macie_log_group", request(endpoint, "Create", group))
    # When the stack is deleted
    invoke("ensure_macie_log_group", request(endpoint, "Delete", group))
    # Then CloudFormation is answered and the group stays: Macie goes on writing to it
    assert [a["Status"] for a in endpoint.answers] == ["SUCCESS", "SUCCESS"]
    assert len(groups(group)) == 1


def test_a_failure_is_answered_failed_with_its_reason_never_left_unanswered(
    endpoint: CloudFormationEndpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given CloudWatch Logs refusing the call (the function's role lacks the permission, say)
    from shared.aws import client

    logs = client("logs")
    stubber = Stubber(logs)
    stubber.add_client_error("create_log_group", "AccessDeniedException", "not authorized to perform CreateLogGroup")
    stubber.activate()
    # When CloudFormation creates the resource
    invoke("ensure_macie_log_group", request(endpoint, "Create", "/aws/macie/classificationjobs"))
    # Then the function returns normally, and CloudFormation reads FAILED with the reason (the stack rolls back now,
    # not after an hour)
    (answer,) = endpoint.answers
    assert answer["Status"] == "FAILED"
    assert "(AccessDeniedException) when calling the CreateLogGroup operation" in answer["Reason"]
    stubber.deactivate()
