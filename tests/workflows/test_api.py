"""The async request/reply API end to end: real HTTP with SigV4 against the offline cloud's HTTP API, the real
handlers, the documents workflow with simulated Translate and Macie, and the status log in DynamoDB."""

from __future__ import annotations

import json
import re
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from localcloud.client import SignedClient
from localcloud.cloud import LocalCloud
from localcloud.simulators.macie import MacieSimulator
from localcloud.simulators.translate import TranslateSimulator

ROOT = Path(__file__).resolve().parents[2]
TERMINAL = {"SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED", "CANCELLED"}
PERSONAL = "Please write to jane.doe@example.com about the contract."


def simulate(cloud: LocalCloud, translate: dict[str, Any] | None = None, macie: dict[str, Any] | None = None) -> None:
    region = cloud.config.region
    cloud.add_simulator(TranslateSimulator(region, clock=cloud.clock, **{"delay_seconds": 60, **(translate or {})}))
    cloud.add_simulator(MacieSimulator(region, clock=cloud.clock, **{"delay_seconds": 60, **(macie or {})}))


def documents_task(cloud: LocalCloud, documents: dict[str, str] | None = None) -> dict[str, Any]:
    """A documents task over its own folder of freshly uploaded documents."""
    bucket, folder = cloud.stack.outputs["DocumentBucketName"], uuid.uuid4().hex
    for name, text in (documents or {"doc.txt": "The meeting is on Tuesday."}).items():
        cloud.client("s3").put_object(Bucket=bucket, Key=f"{folder}/in/{name}", Body=text.encode())
    return {
        "type": "documents",
        "input": {
            "inputPrefix": f"{folder}/in/",
            "outputPrefix": f"{folder}/out/",
            "sourceLanguage": "en",
            "targetLanguages": ["de"],
        },
    }


def follow(api: SignedClient, location: str, until: set[str] = TERMINAL, timeout: float = 40) -> dict[str, Any]:
    """Poll the status resource until the task's status is one of `until`; return the last response's body."""
    deadline = time.monotonic() + timeout
    while True:
        response = api.request("GET", location)
        assert response.status_code == 200, response.text
        task: dict[str, Any] = response.json()
        if task["status"] in until:
            return task
        assert time.monotonic() < deadline, f"task still {task['status']} after {timeout} s"
        assert response.headers["Retry-After"].isdigit()  # a pending task tells the client when to come back
        time.sleep(0.1)


def log_entries(cloud: LocalCloud, task_id: str) -> list[dict[str, Any]]:
    """The task's status log as DynamoDB holds it."""
    return list(
        cloud.client("dynamodb").query(
            TableName=cloud.stack.outputs["TaskTableName"],
            KeyConditionExpression="taskId = :id",
            ExpressionAttributeValues={":id": {"S": task_id}},
            ConsistentRead=True,
        )["Items"]
    )


def log_size(cloud: LocalCloud) -> int:
    table = cloud.stack.outputs["TaskTableName"]
    return int(cloud.client("dynamodb").scan(TableName=table, Select="COUNT", ConsistentRead=True)["Count"])


def executions(
    cloud: LocalCloud, name: str | None = None, workflow: str = "DocumentsWorkflowArn"
) -> list[dict[str, Any]]:
    listed = cloud.client("stepfunctions").list_executions(stateMachineArn=cloud.stack.outputs[workflow])
    return [e for e in listed["executions"] if name is None or e["name"] == name]


def terminal_entries(cloud: LocalCloud, task_id: str) -> list[str]:
    """The terminal statuses the log holds for the task, once every pending status-change delivery is done."""
    cloud.runtime.drain()
    return [e["status"]["S"] for e in log_entries(cloud, task_id) if e["status"]["S"] in TERMINAL]


# ---- submit -> poll -> result ---------------------------------------------------------------------------------------
def test_a_documents_task_is_accepted_followed_and_its_result_fetched(cloud: LocalCloud, api: SignedClient) -> None:
    # Given a folder with a document holding personal data
    simulate(cloud)
    request = documents_task(cloud, {"contact.txt": PERSONAL})

    # When a client submits it
    submitted = api.request("POST", "/task", request)

    # Then it is accepted at once with the status URL
    assert submitted.status_code == 202, submitted.text
    task_id = submitted.json()["id"]
    assert submitted.json() == {"id": task_id, "status": "SUBMITTED"}
    assert submitted.headers["Location"] == f"/task/{task_id}"
    assert int(submitted.headers["Retry-After"]) > 0
    # And the status resource reports progress until it links the result
    done = follow(api, submitted.headers["Location"])
    assert done["status"] == "SUCCEEDED", done
    assert done["type"] == "documents"
    assert done["resultUrl"] == f"/task/{task_id}/result"
    final = api.request("GET", f"/task/{task_id}")
    assert final.headers["Location"] == done["resultUrl"]
    assert "Retry-After" not in final.headers
    result = api.request("GET", done["resultUrl"])
    assert result.status_code == 200
    assert result.json()["tagged"] == {"documents": 1, "translations": 1, "withPii": 1}
    assert result.json()["translation"]["status"] == "COMPLETED"
    # And the workflow was started once, named after the task
    assert [e["status"] for e in executions(cloud, task_id)] == ["SUCCEEDED"]


def test_an_export_task_runs_the_export_workflow(cloud: LocalCloud, api: SignedClient) -> None:
    # When a client asks for an export through the API (the other task type)
    submitted = api.request("POST", "/task", {"type": "export"})
    assert submitted.status_code == 202, submitted.text
    # Then the export workflow runs under the task's id and its result is linked
    done = follow(api, submitted.headers["Location"])
    assert (done["type"], done["status"]) == ("export", "SUCCEEDED"), done
    result = api.request("GET", done["resultUrl"]).json()
    assert result["status"] in {"COMPLETED", "SKIPPED"}
    assert [e["status"] for e in executions(cloud, done["id"], "ExportWorkflowArn")] == ["SUCCEEDED"]


def test_history_lists_every_entry_oldest_first(cloud: LocalCloud, api: SignedClient) -> None:
    simulate(cloud)
    task_id = api.request("POST", "/task", documents_task(cloud)).json()["id"]
    follow(api, f"/task/{task_id}")

    history = api.request("GET", f"/task/{task_id}/history")

    assert history.status_code == 200
    entries = history.json()["entries"]
    statuses = [e["status"] for e in entries]
    # submitted, started, both jobs waited for (in either order), tagging, and the one terminal entry last
    assert statuses[:2] == ["SUBMITTED", "RUNNING"]
    assert sorted(statuses[2:4]) == ["WAITING_FOR_CLASSIFICATION", "WAITING_FOR_TRANSLATION"]
    assert statuses[4:] == ["TAGGING", "SUCCEEDED"]
    times = [e["at"] for e in entries]
    assert [datetime.fromisoformat(t) for t in times] == sorted(map(datetime.fromisoformat, times)), "time-ordered"
    assert len(log_entries(cloud, task_id)) == len(entries)
    # And every time in the log, its sort keys' too (but the head's, fixed before every time), has one form, AWS's
    # as $$.State.EnteredTime gives it to the workflow's entries: milliseconds, none on a whole second (never .000),
    # whichever wrote the entry
    seqs = [item["seq"]["S"] for item in log_entries(cloud, task_id)]
    keys = [seq.split("#")[0] for seq in seqs if not seq.endswith("#SUBMITTED")]
    aws_form = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.(?!000)\d{3})?Z"
    assert all(re.fullmatch(aws_form, at) for at in times + keys), times + keys


def test_a_failing_workflow_ends_the_task_failed_with_a_cause(cloud: LocalCloud, api: SignedClient) -> None:
    # Given Translate fails the job
    simulate(cloud, translate={"outcome": "FAILED"})
    task_id = api.request("POST", "/task", documents_task(cloud)).json()["id"]

    task = follow(api, f"/task/{task_id}")

    assert task["status"] == "FAILED"
    assert task["error"] == "Translate.FAILED"
    assert task["cause"], "the cause is recorded (taken from the status-change event)"
    assert "resultUrl" not in task or task["resultUrl"] is None
    result = api.request("GET", f"/task/{task_id}/result")
    assert result.status_code == 409
    assert result.json()["status"] == "FAILED"
    assert terminal_entries(cloud, task_id) == ["FAILED"]


# ---- idempotency ----------------------------------------------------------------------------------------------------
def test_a_repeated_request_with_the_same_idempotency_key_returns_the_same_task(
    cloud: LocalCloud, api: SignedClient
) -> None:
    simulate(cloud)
    request, key = documents_task(cloud), {"Idempotency-Key": str(uuid.uuid4())}
    first = api.request("POST", "/task", request, key)

    again = api.request("POST", "/task", request, key)

    assert (first.status_code, again.status_code) == (202, 202)
    assert again.json()["id"] == first.json()["id"]
    assert again.headers["Location"] == first.headers["Location"]
    assert len(executions(cloud, first.json()["id"])) == 1
    follow(api, first.headers["Location"])


def test_concurrent_duplicates_start_exactly_one_workflow(cloud: LocalCloud, api: SignedClient) -> None:
    # Given eight clients sending the same request with the same key at the same moment
    simulate(cloud)
    request, key = documents_task(cloud), {"Idempotency-Key": str(uuid.uuid4())}
    clients = [SignedClient(api.base_url, cloud.config.credentials[0], cloud.config.region) for _ in range(8)]

    with ThreadPoolExecutor(max_workers=8) as pool:
        responses = list(pool.map(lambda client: client.request("POST", "/task", request, key), clients))

    # Then all of them get the same task, whose workflow started once, and whose log has one head
    assert {r.status_code for r in responses} == {202}
    ids = {r.json()["id"] for r in responses}
    assert len(ids) == 1
    task_id = ids.pop()
    assert len(executions(cloud, task_id)) == 1
    assert [e["status"]["S"] for e in log_entries(cloud, task_id)].count("SUBMITTED") == 1
    assert follow(api, f"/task/{task_id}")["status"] == "SUCCEEDED"
    assert terminal_entries(cloud, task_id) == ["SUCCEEDED"]


def test_the_same_key_with_another_body_is_refused(cloud: LocalCloud, api: SignedClient) -> None:
    simulate(cloud)
    key = {"Idempotency-Key": str(uuid.uuid4())}
    first = api.request("POST", "/task", documents_task(cloud), key)
    executions_before = len(executions(cloud))

    reused = api.request("POST", "/task", documents_task(cloud), key)

    assert reused.status_code == 422
    assert "Idempotency-Key" in reused.json()["message"]
    # nothing new: no other execution, and the first task still has its one head, with its own input
    assert len(executions(cloud)) == executions_before
    heads = [e for e in log_entries(cloud, first.json()["id"]) if e["status"]["S"] == "SUBMITTED"]
    assert len(heads) == 1
    follow(api, first.headers["Location"])


# ---- cancel ---------------------------------------------------------------------------------------------------------
def test_cancel_while_waiting_on_a_callback(cloud: LocalCloud, api: SignedClient) -> None:
    # Given a task whose jobs take a while (the workflow waits on task tokens)
    simulate(cloud, translate={"delay_seconds": 300}, macie={"delay_seconds": 300})
    task_id = api.request("POST", "/task", documents_task(cloud)).json()["id"]
    follow(api, f"/task/{task_id}", until={"WAITING_FOR_TRANSLATION", "WAITING_FOR_CLASSIFICATION"}, timeout=10)

    # When the client cancels it
    cancelled = api.request("DELETE", f"/task/{task_id}")

    # Then the task is CANCELLED at once and its execution is stopped
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["status"] == "CANCELLED"
    deadline = time.monotonic() + 10
    while (status := executions(cloud, task_id)[0]["status"]) == "RUNNING":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert status == "ABORTED"
    # And the execution's ABORTED does not add a second terminal entry
    assert terminal_entries(cloud, task_id) == ["CANCELLED"]
    assert api.request("GET", f"/task/{task_id}").json()["status"] == "CANCELLED"
    # And cancelling again is harmless; there is no result
    again = api.request("DELETE", f"/task/{task_id}")
    assert (again.status_code, again.json()["status"]) == (200, "CANCELLED")
    assert api.request("GET", f"/task/{task_id}/result").status_code == 409
    assert terminal_entries(cloud, task_id) == ["CANCELLED"]


def test_cancelling_a_finished_task_is_a_conflict(cloud: LocalCloud, api: SignedClient) -> None:
    simulate(cloud)
    task_id = api.request("POST", "/task", documents_task(cloud)).json()["id"]
    follow(api, f"/task/{task_id}")

    response = api.request("DELETE", f"/task/{task_id}")

    assert response.status_code == 409
    assert response.json()["status"] == "SUCCEEDED"
    assert terminal_entries(cloud, task_id) == ["SUCCEEDED"]


def test_the_result_of_a_pending_task_is_not_found_yet(cloud: LocalCloud, api: SignedClient) -> None:
    simulate(cloud, translate={"delay_seconds": 300}, macie={"delay_seconds": 300})
    task_id = api.request("POST", "/task", documents_task(cloud)).json()["id"]

    response = api.request("GET", f"/task/{task_id}/result")

    assert response.status_code == 404
    assert int(response.headers["Retry-After"]) > 0
    assert api.request("DELETE", f"/task/{task_id}").status_code == 200


# ---- isolation and authentication -----------------------------------------------------------------------------------
def test_another_callers_task_is_not_found(cloud: LocalCloud, api: SignedClient, other: SignedClient) -> None:
    simulate(cloud)
    key = {"Idempotency-Key": str(uuid.uuid4())}
    task_id = api.request("POST", "/task", documents_task(cloud), key).json()["id"]
    unknown = str(uuid.uuid4())

    for method, path in [("GET", ""), ("GET", "/result"), ("GET", "/history"), ("DELETE", "")]:
        theirs = other.request(method, f"/task/{task_id}{path}")
        missing = other.request(method, f"/task/{unknown}{path}")
        assert theirs.status_code == missing.status_code == 404, (method, path)
        assert theirs.json()["message"].replace(task_id, "ID") == missing.json()["message"].replace(unknown, "ID")
    # And the same Idempotency-Key from another caller is another task
    own = other.request("POST", "/task", documents_task(cloud), key)
    assert own.status_code == 202
    assert own.json()["id"] != task_id
    assert follow(api, f"/task/{task_id}")["status"] == "SUCCEEDED"
    assert follow(other, f"/task/{own.json()['id']}")["status"] == "SUCCEEDED"


def test_unsigned_requests_are_refused_before_anything_happens(cloud: LocalCloud, api: SignedClient) -> None:
    entries_before, executions_before = log_size(cloud), len(executions(cloud))

    responses = [
        api.request("POST", "/task", documents_task(cloud), sign=False),
        api.request("GET", f"/task/{uuid.uuid4()}", sign=False),
        api.request("GET", "/openapi.json", sign=False),
    ]

    assert [r.status_code for r in responses] == [403, 403, 403]
    assert (log_size(cloud), len(executions(cloud))) == (entries_before, executions_before)


# ---- bad input ------------------------------------------------------------------------------------------------------
GOOD_INPUT = {"inputPrefix": "a/in/", "outputPrefix": "a/out/", "sourceLanguage": "en", "targetLanguages": ["de"]}
BAD_REQUESTS: dict[str, tuple[Any, int, list[str]]] = {
    "malformed JSON": ('{"type": "documents", "input": ', 400, ["JSON"]),
    "empty body": ("", 422, ["body"]),
    "not an object": ("[1, 2]", 422, ["body"]),
    "missing input": ({"type": "documents"}, 422, ["input"]),
    "missing field": (
        {"type": "documents", "input": {k: v for k, v in GOOD_INPUT.items() if k != "targetLanguages"}},
        422,
        ["input.targetLanguages"],
    ),
    "wrong field type": ({"type": "documents", "input": {**GOOD_INPUT, "targetLanguages": "de"}}, 422, ["input"]),
    "bad language code": ({"type": "documents", "input": {**GOOD_INPUT, "sourceLanguage": "EN!"}}, 422, ["source"]),
    "unknown field": ({"type": "documents", "input": {**GOOD_INPUT, "bucket": "x"}}, 422, ["input.bucket"]),
    "unknown type": ({"type": "transcode", "input": {}}, 422, ["type", "documents"]),
    "missing type": ({"input": GOOD_INPUT}, 422, ["type", "documents"]),
    "body over the limit": (
        {"type": "documents", "input": {**GOOD_INPUT, "inputPrefix": "x" * 70_000}},
        413,
        ["bytes"],
    ),
}


@pytest.mark.parametrize("case", BAD_REQUESTS, ids=list(BAD_REQUESTS))
def test_bad_input_is_refused_and_leaves_no_trace(case: str, cloud: LocalCloud, api: SignedClient) -> None:
    body, status, mentioned = BAD_REQUESTS[case]
    entries_before, executions_before = log_size(cloud), len(executions(cloud))

    response = api.request("POST", "/task", body, {"Idempotency-Key": str(uuid.uuid4())})

    assert response.status_code == status, response.text
    message = response.json()["message"]
    for word in mentioned:
        assert word in message, f"{message!r} should mention {word!r}"
    assert (log_size(cloud), len(executions(cloud))) == (entries_before, executions_before)


MULTIPART = (
    '--XyZ\r\nContent-Disposition: form-data; name="type"\r\n\r\ndocuments\r\n'
    '--XyZ\r\nContent-Disposition: form-data; name="padding"\r\n\r\n{padding}\r\n--XyZ--\r\n'
)
TASK_BYTES = json.dumps({"type": "documents", "input": GOOD_INPUT}).encode()
RAW_BODIES: dict[str, tuple[bytes, str, int, str]] = {
    "a task in an array": (b"[" + TASK_BYTES + b"]", "application/json", 422, "body: must be a JSON object"),
    "multipart over the limit": (
        MULTIPART.format(padding="x" * 100_000).encode(),
        "multipart/form-data; boundary=XyZ",
        413,
        "bytes",
    ),
    "multipart": (MULTIPART.format(padding="").encode(), "multipart/form-data; boundary=XyZ", 415, "JSON"),
    "form over the limit": (
        b"type=documents&padding=" + b"x" * 2 * 1024 * 1024,
        "application/x-www-form-urlencoded",
        413,
        "bytes",
    ),
    "form": (b"type=documents", "application/x-www-form-urlencoded", 415, "Content-Type: application/json"),
    "JSON as text/plain": (TASK_BYTES, "text/plain", 415, "text/plain"),
    "invalid UTF-8": (TASK_BYTES[:-2] + b', "note": "caf\xe9"}}', "application/json", 400, "UTF-8"),
    "nested 20,000 deep": (b"[" * 20_000 + b"]" * 20_000, "application/json", 400, "nested too deeply"),
}


@pytest.mark.parametrize("case", RAW_BODIES, ids=list(RAW_BODIES))
def test_a_body_that_is_not_a_json_object_is_refused_with_the_error_shape(
    case: str, cloud: LocalCloud, api: SignedClient
) -> None:
    body, content_type, status, mentioned = RAW_BODIES[case]
    entries_before, executions_before = log_size(cloud), len(executions(cloud))

    response = api.request("POST", "/task", body, {"content-type": content_type})

    assert response.status_code == status, response.text
    assert mentioned in response.json()["message"]
    assert set(response.json()) <= {"message", "errors", "status"}
    assert (log_size(cloud), len(executions(cloud))) == (entries_before, executions_before)


def test_unknown_task_is_not_found(api: SignedClient) -> None:
    response = api.request("GET", f"/task/{uuid.uuid4()}")
    assert response.status_code == 404
    assert response.json()["message"].startswith("no task")


# ---- the OpenAPI document -------------------------------------------------------------------------------------------
def test_the_served_openapi_document_is_the_committed_one(api: SignedClient) -> None:
    served = api.request("GET", "/openapi.json")
    assert served.status_code == 200
    committed = json.loads((ROOT / "docs" / "openapi.json").read_text())
    assert served.json() == committed, "docs/openapi.json is stale: regenerate it (docs/api.md says how)"
    assert set(committed["paths"]) == {"/task", "/task/{task_id}", "/task/{task_id}/result", "/task/{task_id}/history"}
