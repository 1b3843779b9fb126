"""Both engines behind one API: a documents task run by the Step Functions workflow (`documents`) and one run by the
durable function (`documents-durable`), side by side from `POST /task`, their job waits resumed through the same
token store, resume function and reconciler; the task's status log tells the same story whichever ran it."""

from __future__ import annotations

import time
import uuid
from typing import Any

from localcloud.client import SignedClient, durable_history
from localcloud.cloud import LocalCloud
from tests.workflows.test_api import PERSONAL, documents_task, executions, follow, simulate, terminal_entries

DURABLE = "documents-durable"


def durable_task(cloud: LocalCloud, documents: dict[str, str] | None = None) -> dict[str, Any]:
    return {**documents_task(cloud, documents), "type": DURABLE}


def running_durable(cloud: LocalCloud, task_id: str) -> str:
    """The ARN of the task's durable execution, from its RUNNING entry."""
    entries = cloud.client("dynamodb").query(
        TableName=cloud.stack.outputs["TaskTableName"],
        KeyConditionExpression="taskId = :id",
        ExpressionAttributeValues={":id": {"S": task_id}},
        ConsistentRead=True,
    )["Items"]
    (arn,) = [e["detail"]["M"]["executionArn"]["S"] for e in entries if e["status"]["S"] == "RUNNING"]
    return str(arn)


def test_a_documents_task_on_each_engine_side_by_side(cloud: LocalCloud, api: SignedClient) -> None:
    # Given two folders with a document holding personal data, one task for each engine
    simulate(cloud)
    step_functions, durable = documents_task(cloud, {"contact.txt": PERSONAL}), durable_task(cloud, {"c.txt": PERSONAL})

    # When both are submitted together
    submitted = [api.request("POST", "/task", request) for request in (step_functions, durable)]

    # Then both are accepted and end SUCCEEDED with the same result: the translation, the classification, the tags
    assert [s.status_code for s in submitted] == [202, 202], [s.text for s in submitted]
    done = [follow(api, s.headers["Location"]) for s in submitted]
    assert [d["status"] for d in done] == ["SUCCEEDED", "SUCCEEDED"], done
    assert [d["type"] for d in done] == ["documents", DURABLE]
    results = [api.request("GET", d["resultUrl"]).json() for d in done]
    for result in results:
        assert result["tagged"] == {"documents": 1, "translations": 1, "withPii": 1}
        assert (result["translation"]["status"], result["classification"]["status"]) == ("COMPLETED", "JOB_COMPLETED")
    # And each engine ran one execution named after its task, and the log holds one end each
    sfn_id, durable_id = (d["id"] for d in done)
    assert [e["status"] for e in executions(cloud, sfn_id)] == ["SUCCEEDED"]
    assert terminal_entries(cloud, sfn_id) == ["SUCCEEDED"]
    assert terminal_entries(cloud, durable_id) == ["SUCCEEDED"]
    history = durable_history(cloud, running_durable(cloud, durable_id))
    closed = [e["EventType"] for e in history if e["EventType"].startswith("Callback")]
    assert sorted(closed) == ["CallbackStarted", "CallbackStarted", "CallbackSucceeded", "CallbackSucceeded"], closed


def test_a_failed_job_ends_a_durable_task_with_the_step_functions_error(cloud: LocalCloud, api: SignedClient) -> None:
    # Given Translate fails the job
    simulate(cloud, translate={"outcome": "FAILED"})
    task_id = api.request("POST", "/task", durable_task(cloud)).json()["id"]

    # When the task ends
    task = follow(api, f"/task/{task_id}")

    # Then it FAILED with the error and cause the Step Functions engine reports, and it has no result
    assert (task["status"], task["error"]) == ("FAILED", "Translate.FAILED"), task
    assert "ended FAILED" in task["cause"]
    assert api.request("GET", f"/task/{task_id}/result").status_code == 409
    assert terminal_entries(cloud, task_id) == ["FAILED"]


def test_cancelling_a_durable_task_stops_its_execution(cloud: LocalCloud, api: SignedClient) -> None:
    # Given a durable task waiting for jobs that take a while
    simulate(cloud, translate={"delay_seconds": 600}, macie={"delay_seconds": 600})
    task_id = api.request("POST", "/task", durable_task(cloud)).json()["id"]
    follow(api, f"/task/{task_id}", until={"RUNNING"}, timeout=10)
    arn = running_durable(cloud, task_id)

    # When the client cancels it
    cancelled = api.request("DELETE", f"/task/{task_id}")

    # Then the task is CANCELLED at once, its durable execution is stopped, and the log holds that one end
    assert (cancelled.status_code, cancelled.json()["status"]) == (200, "CANCELLED"), cancelled.text
    deadline = time.monotonic() + 10
    while (status := cloud.client("lambda").get_durable_execution(DurableExecutionArn=arn)["Status"]) == "RUNNING":
        assert time.monotonic() < deadline, "the durable execution still runs"
        time.sleep(0.1)
    assert status == "STOPPED"
    assert terminal_entries(cloud, task_id) == ["CANCELLED"]
    # And cancelling again is harmless
    again = api.request("DELETE", f"/task/{task_id}")
    assert (again.status_code, again.json()["status"]) == (200, "CANCELLED")


def test_a_repeated_durable_request_starts_one_execution(cloud: LocalCloud, api: SignedClient) -> None:
    # Given a durable task submitted with an Idempotency-Key
    simulate(cloud)
    request, key = durable_task(cloud), {"Idempotency-Key": str(uuid.uuid4())}
    first = api.request("POST", "/task", request, key)

    # When the same request comes again
    again = api.request("POST", "/task", request, key)

    # Then it is the same task, and it ran once
    assert (first.status_code, again.status_code) == (202, 202)
    assert again.json()["id"] == first.json()["id"]
    assert follow(api, first.headers["Location"])["status"] == "SUCCEEDED"
    assert terminal_entries(cloud, first.json()["id"]) == ["SUCCEEDED"]
