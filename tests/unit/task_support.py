"""Helpers for the task API's unit tests (the `tasks` fixture lives in conftest.py).

The functions' environment, table and bucket are the deployed template's; the task types' state machines are real
moto state machines that wait, so StartExecution / StopExecution act on real executions.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import boto3

from tests.unit.support import ACCOUNT, REGION, Deployed
from tests.unit.waiting import wait_until

OWNER = f"arn:aws:iam::{ACCOUNT}:user/local-developer"
OTHER = f"arn:aws:iam::{ACCOUNT}:user/other-developer"
GOOD_INPUT = {"inputPrefix": "in/", "outputPrefix": "out/", "sourceLanguage": "en", "targetLanguages": ["de"]}


def http_event(
    method: str,
    path: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
    caller: str | None = OWNER,
) -> dict[str, Any]:
    """An API Gateway HTTP API (payload format 2.0) event as API Gateway sends it for an IAM-authorized route."""
    route = re.sub(r"^/task/[^/]+", "/task/{task_id}", path)
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": f"{method} {route}",
        "rawPath": path,
        "rawQueryString": "",
        "headers": {
            "accept": "*/*",
            "content-type": "application/json",
            "host": "abcdef1234.execute-api.us-east-1.amazonaws.com",
            "x-amz-date": "20260115T103147Z",
            "x-forwarded-proto": "https",
            **(headers or {}),
        },
        "requestContext": {
            "accountId": ACCOUNT,
            "apiId": "abcdef1234",
            "domainName": "abcdef1234.execute-api.us-east-1.amazonaws.com",
            "domainPrefix": "abcdef1234",
            "http": {
                "method": method,
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": "192.0.2.10",
                "userAgent": "curl/8.5.0",
            },
            "requestId": "Xyz1AbCdIAMEbcQ=",
            "routeKey": f"{method} {route}",
            "stage": "$default",
            "time": "15/Jan/2026:10:31:47 +0000",
            "timeEpoch": 1768473107000,
        },
        "isBase64Encoded": False,
    }
    if caller is not None:
        user = caller.rsplit("/", 1)[1]
        event["requestContext"]["authorizer"] = {
            "iam": {
                "accessKey": "AKIAEXAMPLE" + user.upper().replace("-", "")[:9],
                "accountId": ACCOUNT,
                "callerId": "AIDA" + user.upper().replace("-", "")[:16],
                "cognitoIdentity": None,
                "principalOrgId": None,
                "userArn": caller,
                "userId": "AIDA" + user.upper().replace("-", "")[:16],
            }
        }
    if route != path:
        event["pathParameters"] = {"task_id": path.split("/")[2]}
    if body is not None:
        event["body"] = body if isinstance(body, str) else json.dumps(body)
    return event


def status_change(execution_arn: str, status: str, **detail: Any) -> dict[str, Any]:
    """A `Step Functions Execution Status Change` event as EventBridge delivers it."""
    machine = execution_arn.replace(":execution:", ":stateMachine:").rsplit(":", 1)[0]
    return {
        "version": "0",
        "id": "315c1398-40ff-a850-213b-158f73e60175",
        "detail-type": "Step Functions Execution Status Change",
        "source": "aws.states",
        "account": ACCOUNT,
        "time": "2026-01-15T10:42:07Z",
        "region": REGION,
        "resources": [execution_arn],
        "detail": {
            "executionArn": execution_arn,
            "stateMachineArn": machine,
            "name": execution_arn.rsplit(":", 1)[1],
            "status": status,
            "startDate": 1768473107000,
            "stopDate": 1768473727000,
            "input": "{}",
            "output": None,
            "inputDetails": {"included": True},
            "outputDetails": None,
            "error": None,
            "cause": None,
            **detail,
        },
    }


@dataclass
class TaskAccount:
    """The task table, result bucket and the documents state machine on moto, with the functions' environment."""

    environment: dict[str, str]
    state_machine: str
    table: Any
    s3: Any
    sfn: Any
    earlier: frozenset[str] = frozenset()  # executions of earlier tests (moto keeps them)

    @property
    def bucket(self) -> str:
        return self.environment["TASK_RESULT_BUCKET"]

    def log(self, task_id: str) -> list[dict[str, Any]]:
        items = self.table.query(
            KeyConditionExpression="taskId = :id", ExpressionAttributeValues={":id": task_id}, ConsistentRead=True
        )["Items"]
        return list(items)

    def all_entries(self) -> list[dict[str, Any]]:
        return list(self.table.scan(ConsistentRead=True)["Items"])

    def executions(self) -> list[dict[str, Any]]:
        """The executions this test started."""
        listed = self.sfn.list_executions(stateMachineArn=self.state_machine)["executions"]
        return [e for e in listed if e["executionArn"] not in self.earlier]

    def execution_arn(self, task_id: str) -> str:
        return self.state_machine.replace(":stateMachine:", ":execution:") + f":{task_id}"

    def wait_until_stopped(self, task_id: str) -> str:
        """The execution's status once it has left RUNNING."""

        def ended() -> str | None:
            status = str(self.sfn.describe_execution(executionArn=self.execution_arn(task_id))["status"])
            return None if status == "RUNNING" else status

        return str(wait_until(ended, f"the end of task {task_id}'s execution"))

    def clear(self) -> None:
        for execution in self.sfn.list_executions(stateMachineArn=self.state_machine, statusFilter="RUNNING")[
            "executions"
        ]:
            self.sfn.stop_execution(executionArn=execution["executionArn"])
        with self.table.batch_writer() as batch:
            for item in self.all_entries():
                batch.delete_item(Key={"taskId": item["taskId"], "seq": item["seq"]})
        for listed in self.s3.list_objects_v2(Bucket=self.bucket).get("Contents", []):
            self.s3.delete_object(Bucket=self.bucket, Key=listed["Key"])


def task_account(stack: Deployed) -> TaskAccount:
    """What the task functions use, as deployed. The task types' state machines become stand-ins that wait (the API
    only starts and stops them; tests/workflows runs the real ones)."""
    sfn = boto3.client("stepfunctions", region_name=REGION)
    s3 = boto3.client("s3", region_name=REGION)
    environment = stack.environment(stack.function("task_api")) | stack.environment(
        stack.function("record_task_status")
    )
    definition = {"StartAt": "Work", "States": {"Work": {"Type": "Wait", "Seconds": 30, "End": True}}}
    workflows = {kind: arn for kind, arn in json.loads(environment["TASK_STATE_MACHINES"]).items() if arn}
    for arn in workflows.values():
        sfn.update_state_machine(stateMachineArn=arn, definition=json.dumps(definition))
    table = boto3.resource("dynamodb", region_name=REGION).Table(environment["TASK_TABLE"])
    documents = workflows["documents"]
    earlier = frozenset(e["executionArn"] for e in sfn.list_executions(stateMachineArn=documents)["executions"])
    return TaskAccount(environment, documents, table, s3, sfn, earlier)
