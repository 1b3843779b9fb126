"""The task API's handler with API Gateway HTTP API (payload 2.0) events, on moto: what a client sees, what the
status log holds, which executions exist. (Imports of the handler happen inside the tests: see support.py.)"""

from __future__ import annotations

import base64
import hashlib
import json
import uuid
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from tests.unit.support import REPO, Deployed, asl_states, invoke
from tests.unit.task_support import GOOD_INPUT, OTHER, OWNER, TaskAccount, http_event


def call(event: dict[str, Any]) -> tuple[int, dict[str, str], Any]:
    response = invoke("task_api", event)
    body = response.get("body")
    return int(response["statusCode"]), response.get("headers") or {}, json.loads(body) if body else None


def submit(body: Any = None, key: str | None = None, caller: str = OWNER) -> tuple[int, dict[str, str], Any]:
    headers = {"idempotency-key": key} if key else {}
    return call(
        http_event(
            "POST", "/task", {"type": "documents", "input": GOOD_INPUT} if body is None else body, headers, caller
        )
    )


def end(tasks: TaskAccount, task_id: str, status: str, **detail: Any) -> None:
    from tests.unit.task_support import status_change

    invoke("record_task_status", status_change(tasks.execution_arn(task_id), status, **detail))


# ---- POST /task -----------------------------------------------------------------------------------------------------
def test_a_valid_request_is_accepted_and_its_workflow_started(tasks: TaskAccount) -> None:
    status, headers, body = submit()

    assert status == 202
    assert body == {"id": body["id"], "status": "SUBMITTED"}
    assert headers["Location"] == f"/task/{body['id']}"
    assert int(headers["Retry-After"]) > 0
    # the workflow runs under the task's id with the validated input and the task reference
    (execution,) = tasks.executions()
    assert execution["name"] == body["id"]
    described = tasks.sfn.describe_execution(executionArn=execution["executionArn"])
    started_with = json.loads(described["input"])
    assert started_with == {**GOOD_INPUT, "task": {"id": body["id"], "expiresAt": started_with["task"]["expiresAt"]}}
    # the log's head records owner, type and input; the start is logged too
    head, running = tasks.log(body["id"])
    assert (head["status"], head["owner"], head["type"]) == ("SUBMITTED", OWNER, "documents")
    assert json.loads(head["input"]) == GOOD_INPUT
    assert running["status"] == "RUNNING"
    days = int(tasks.environment["TASK_LOG_RETENTION_DAYS"])
    assert abs(int(head["expiresAt"]) - (datetime.now(UTC) + timedelta(days=days)).timestamp()) < 60


BAD = {
    "malformed JSON": ("{", 400, "not valid JSON"),
    "missing field": ({"type": "documents", "input": {"inputPrefix": "in/"}}, 422, "input.outputPrefix"),
    "unknown type": ({"type": "export-everything", "input": {}}, 422, "allowed types: bounded, documents"),
    "unknown field": ({"type": "documents", "input": {**GOOD_INPUT, "extra": 1}}, 422, "input.extra"),
    "no target language": ({"type": "documents", "input": {**GOOD_INPUT, "targetLanguages": []}}, 422, "target"),
    "too large": ({"type": "documents", "input": {**GOOD_INPUT, "outputPrefix": "o" * 70_000}}, 413, "bytes"),
    "extract: prefix and list": (
        {"type": "extract", "input": {"prefix": "in/", "documents": ["in/a.pdf"]}},
        422,
        "either prefix or documents",
    ),
    "extract: neither": ({"type": "extract", "input": {}}, 422, "either prefix or documents"),
    "extract: empty list": ({"type": "extract", "input": {"documents": []}}, 422, "input.documents"),
}


@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_bad_input_is_refused_before_anything_is_written_or_started(case: str, tasks: TaskAccount) -> None:
    body, expected, mentioned = BAD[case]

    status, _, answer = submit(body, key="k-1")

    assert status == expected
    assert mentioned in answer["message"]
    assert tasks.all_entries() == []
    assert tasks.executions() == []


TASK = {"type": "export"}  # a valid task with nothing to pad: what a form field could smuggle in
FORM = "type=export&input=&padding="
MULTIPART = (
    '--XyZ\r\nContent-Disposition: form-data; name="type"\r\n\r\nexport\r\n'
    '--XyZ\r\nContent-Disposition: form-data; name="padding"\r\n\r\n{padding}\r\n--XyZ--\r\n'
)
RAW_BAD: dict[str, tuple[bytes, str, int, str]] = {
    "a task in an array": (json.dumps([TASK]).encode(), "application/json", 422, "body: must be a JSON object"),
    "a bare string": (b'"export"', "application/json", 422, "body: must be a JSON object"),
    "multipart over the limit": (
        MULTIPART.format(padding="x" * 100_000).encode(),
        "multipart/form-data; boundary=XyZ",
        413,
        "65536 bytes",
    ),
    "multipart": (MULTIPART.format(padding="").encode(), "multipart/form-data; boundary=XyZ", 415, "JSON"),
    "form over the limit": ((FORM + "x" * 2 * 1024 * 1024).encode(), "application/x-www-form-urlencoded", 413, "bytes"),
    "form": (FORM.encode(), "application/x-www-form-urlencoded", 415, "Content-Type: application/json"),
    "JSON as text/plain": (json.dumps(TASK).encode(), "text/plain", 415, "text/plain"),
    "no content type": (json.dumps(TASK).encode(), "", 415, "JSON"),
    "JSON over the limit, base64-encoded": (
        json.dumps(TASK).encode() + b" " * 70_000,
        "application/json",
        413,
        "bytes",
    ),
    "invalid UTF-8": (b'{"type": "export", "input": {"x": "\xff\xfe"}}', "application/json", 400, "UTF-8"),
    "nested 20,000 deep": (b"[" * 20_000 + b"]" * 20_000, "application/json", 400, "nested too deeply"),
    "an object nested 10,000 deep": (b'{"a":' * 10_000 + b"1" + b"}" * 10_000, "application/json", 400, "too deeply"),
}


def post(body: bytes, content_type: str, encode: bool) -> dict[str, Any]:
    """POST /task with these bytes, as API Gateway hands them over: text, or base64 (binary, or not UTF-8)."""
    event = http_event("POST", "/task", "", {"content-type": content_type} if content_type else {})
    if not content_type:
        del event["headers"]["content-type"]
    if encode:
        event["body"], event["isBase64Encoded"] = base64.b64encode(body).decode(), True
    else:
        event["body"] = body.decode()
    return event


@pytest.mark.parametrize("case", RAW_BAD, ids=list(RAW_BAD))
def test_a_body_that_is_not_a_json_object_is_refused_on_its_bytes_before_anything_starts(
    case: str, tasks: TaskAccount
) -> None:
    # Given a body that is not a task's JSON object (base64-encoded whenever API Gateway would, and for the limit)
    body, content_type, expected, mentioned = RAW_BAD[case]
    encode = "base64" in case or not _is_utf8(body)

    # When it is posted
    status, _, answer = call(post(body, content_type, encode))

    # Then it is refused with the documented error shape, and nothing is written or started
    assert (status, mentioned in answer["message"]) == (expected, True), answer
    assert set(answer) <= {"message", "errors", "status"}
    assert tasks.all_entries() == []
    assert tasks.executions() == []


def _is_utf8(body: bytes) -> bool:
    try:
        body.decode()
    except UnicodeDecodeError:
        return False
    return True


@pytest.mark.parametrize(
    "content_type",
    ["application/json", "application/json; charset=utf-8", "Application/JSON", "application/vnd.task+json"],
)
def test_a_json_body_is_accepted_under_any_json_content_type(content_type: str, tasks: TaskAccount) -> None:
    body = json.dumps({"type": "documents", "input": GOOD_INPUT}).encode()

    status, _, answer = call(post(body, content_type, encode=False))

    assert status == 202, answer
    assert [e["name"] for e in tasks.executions()] == [answer["id"]]


def test_the_limit_is_on_the_decoded_bytes_of_a_base64_body(tasks: TaskAccount) -> None:
    # Given a task padded to 50,000 bytes: under the limit, but over it once base64-encoded
    body = json.dumps({"type": "documents", "input": GOOD_INPUT}).encode() + b" " * 50_000

    status, _, answer = call(post(body, "application/json", encode=True))

    assert status == 202, answer


@pytest.mark.parametrize(
    ("bounded", "allowed"), [(True, "bounded"), (False, "none (every feature is left out)")], ids=["one", "none"]
)
def test_a_type_whose_feature_the_stack_left_out_is_not_offered(
    tasks: TaskAccount, monkeypatch: pytest.MonkeyPatch, bounded: bool, allowed: str
) -> None:
    from tests.unit.support import cold_start

    # Given the API of a stack without the documents feature: the template maps its type to ""
    arn = tasks.state_machine.replace("-documents", "-bounded") if bounded else ""
    machines = {"documents": "", "bounded": arn, "extract": "", "export": ""}
    monkeypatch.setenv("TASK_STATE_MACHINES", json.dumps(machines))
    monkeypatch.setenv("TASK_DURABLE_FUNCTIONS", json.dumps({"documents-durable": ""}))
    cold_start()

    status, _, answer = submit()

    assert status == 422
    assert answer["message"] == f"invalid request: type: unknown task type; allowed types: {allowed}"
    assert tasks.all_entries() == []


def test_the_same_key_and_body_return_the_same_task_and_start_once(tasks: TaskAccount) -> None:
    KEY = str(uuid.uuid4())
    first = submit(key=KEY)
    again = submit(key=KEY)

    assert (first[0], again[0]) == (202, 202)
    assert again[2]["id"] == first[2]["id"]
    assert len(tasks.executions()) == 1
    assert [e["status"] for e in tasks.log(first[2]["id"])] == ["SUBMITTED", "RUNNING"]


def test_the_same_key_with_another_body_is_a_422_and_changes_nothing(tasks: TaskAccount) -> None:
    KEY = str(uuid.uuid4())
    first = submit(key=KEY)
    before = tasks.all_entries()

    status, _, answer = submit({"type": "documents", "input": {**GOOD_INPUT, "targetLanguages": ["fr"]}}, KEY)

    assert status == 422
    assert "Idempotency-Key" in answer["message"]
    assert tasks.all_entries() == before
    assert [e["name"] for e in tasks.executions()] == [first[2]["id"]]


def test_keys_are_per_caller(tasks: TaskAccount) -> None:
    key = str(uuid.uuid4())
    mine, theirs = submit(key=key), submit(key=key, caller=OTHER)
    assert mine[2]["id"] != theirs[2]["id"]
    assert len(tasks.executions()) == 2


def test_a_failed_start_is_logged_and_the_client_sees_a_failed_task(
    tasks: TaskAccount, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the type's state machine does not exist (StartExecution fails after the head was written)
    from tests.unit.support import cold_start

    missing = tasks.state_machine.rsplit(":", 1)[0] + ":gone"
    monkeypatch.setenv("TASK_STATE_MACHINES", json.dumps({"documents": missing}))
    cold_start()

    status, _, body = submit()

    assert (status, body["status"]) == (202, "FAILED")
    _, _, task = call(http_event("GET", f"/task/{body['id']}"))
    assert task["status"] == "FAILED"
    assert task["error"] == "StartExecution.StateMachineDoesNotExist"
    assert task["cause"]


def test_a_task_accepted_but_never_started_is_started_by_a_resubmission(tasks: TaskAccount) -> None:
    # Given a task accepted minutes ago whose start never happened (the accepting request died in between)
    from shared.tasks.service import _IDEMPOTENCY_NAMESPACE
    from shared.tasks.statuslog import HEAD_SEQ, SUBMITTED, Entry, StatusLog, timestamp

    key = str(uuid.uuid4())
    task_id = str(uuid.uuid5(_IDEMPOTENCY_NAMESPACE, f"{OWNER}\n{key}"))
    request = json.dumps({"type": "documents", "input": GOOD_INPUT}, sort_keys=True, separators=(",", ":"))
    StatusLog(tasks.environment["TASK_TABLE"]).create(
        task_id,
        Entry(
            seq=HEAD_SEQ,
            status=SUBMITTED,
            at=timestamp(datetime.now(UTC) - timedelta(minutes=5)),
            expires_at=2_000_000_000,
            owner=OWNER,
            type="documents",
            input=GOOD_INPUT,
            request_hash=hashlib.sha256(request.encode()).hexdigest(),
            execution_arn=tasks.execution_arn(task_id),
        ),
    )

    # When the client repeats its request
    status, _, body = submit(key=key)

    # Then that task's workflow is started now, once
    assert (status, body["id"]) == (202, task_id)
    assert [e["name"] for e in tasks.executions()] == [task_id]
    assert [e["status"] for e in tasks.log(task_id)] == ["SUBMITTED", "RUNNING"]


# ---- GET /task/{id}, /result, /history --------------------------------------------------------------------------
def test_a_pending_task_says_when_to_come_back(tasks: TaskAccount) -> None:
    task_id = submit()[2]["id"]

    status, headers, task = call(http_event("GET", f"/task/{task_id}"))

    assert status == 200
    assert (task["id"], task["type"], task["status"]) == (task_id, "documents", "RUNNING")
    assert task["createdAt"] <= task["updatedAt"]
    assert int(headers["Retry-After"]) > 0
    assert "Location" not in headers
    result = call(http_event("GET", f"/task/{task_id}/result"))
    assert result[0] == 404
    assert int(result[1]["Retry-After"]) > 0


def test_a_succeeded_task_links_its_result(tasks: TaskAccount) -> None:
    task_id = submit()[2]["id"]
    end(tasks, task_id, "SUCCEEDED", output=json.dumps({"tagged": {"documents": 3}}))

    status, headers, task = call(http_event("GET", f"/task/{task_id}"))

    assert (status, task["status"]) == (200, "SUCCEEDED")
    assert headers["Location"] == task["resultUrl"] == f"/task/{task_id}/result"
    assert "Retry-After" not in headers
    assert call(http_event("GET", task["resultUrl"]))[::2] == (200, {"tagged": {"documents": 3}})


def test_a_result_too_large_for_the_log_is_stored_in_s3_and_returned_the_same(tasks: TaskAccount) -> None:
    task_id = submit()[2]["id"]
    output = {"rows": ["x" * 1000] * 200}  # 200 KB: more than a log entry takes
    end(tasks, task_id, "SUCCEEDED", output=json.dumps(output))

    status, _, result = call(http_event("GET", f"/task/{task_id}/result"))

    assert (status, result) == (200, output)
    (stored,) = tasks.s3.list_objects_v2(Bucket=tasks.bucket)["Contents"]
    assert stored["Key"] == f"results/{task_id}.json"
    assert "output" not in tasks.log(task_id)[-1]


def test_a_failed_task_shows_error_and_cause_and_has_no_result(tasks: TaskAccount) -> None:
    task_id = submit()[2]["id"]
    end(tasks, task_id, "FAILED", error="Translate.FAILED", cause="The input documents could not be read.")

    _, headers, task = call(http_event("GET", f"/task/{task_id}"))

    assert (task["status"], task["error"], task["cause"]) == (
        "FAILED",
        "Translate.FAILED",
        "The input documents could not be read.",
    )
    assert "Location" not in headers and "Retry-After" not in headers
    status, _, answer = call(http_event("GET", f"/task/{task_id}/result"))
    assert (status, answer["status"]) == (409, "FAILED")


def test_history_is_every_entry_oldest_first(tasks: TaskAccount) -> None:
    task_id = submit()[2]["id"]
    end(tasks, task_id, "TIMED_OUT", error="States.Timeout")

    status, _, history = call(http_event("GET", f"/task/{task_id}/history"))

    assert status == 200
    assert [e["status"] for e in history["entries"]] == ["SUBMITTED", "RUNNING", "TIMED_OUT"]
    assert history["entries"][-1]["detail"] == {"error": "States.Timeout"}


def test_history_is_in_time_order_when_a_workflow_entry_fell_on_a_whole_second(tasks: TaskAccount) -> None:
    # Given a task whose workflow wrote two entries within one second, the first on the whole second: Step Functions
    # gives $$.State.EnteredTime no fraction there (...:06Z), which sorts after ...:06.500Z as text
    from shared.tasks.statuslog import Entry, StatusLog

    task_id = submit()[2]["id"]
    log = StatusLog(tasks.environment["TASK_TABLE"])
    for at, status in (("2099-01-01T00:00:06.500Z", "TAGGING"), ("2099-01-01T00:00:06Z", "WAITING_FOR_TRANSLATION")):
        log.append(task_id, Entry(seq=f"{at}#{status}", status=status, at=at, expires_at=4_000_000_000))

    status, _, history = call(http_event("GET", f"/task/{task_id}/history"))

    # Then the history lists them as they happened
    assert status == 200
    assert [e["status"] for e in history["entries"]] == ["SUBMITTED", "RUNNING", "WAITING_FOR_TRANSLATION", "TAGGING"]


def test_the_logs_own_times_have_the_one_form_step_functions_gives_entered_time() -> None:
    from shared.tasks.statuslog import timestamp

    # UTC to the millisecond with Z, and no fraction at all on a whole second, as $$.State.EnteredTime (the
    # workflows' entries) and localcloud's aws_timestamp write it
    assert timestamp(datetime(2026, 1, 15, 10, 31, 47, 123999, tzinfo=UTC)) == "2026-01-15T10:31:47.123Z"
    assert timestamp(datetime(2026, 1, 15, 10, 31, 47, 999, tzinfo=UTC)) == "2026-01-15T10:31:47Z"
    assert timestamp(datetime(2026, 1, 15, 11, 31, 47, 5000, tzinfo=timezone(timedelta(hours=1)))) == (
        "2026-01-15T10:31:47.005Z"
    )


@pytest.mark.parametrize("path", ["", "/result", "/history"])
def test_another_callers_task_is_as_unknown_as_a_missing_one(path: str, tasks: TaskAccount) -> None:
    task_id = submit()[2]["id"]

    theirs = call(http_event("GET", f"/task/{task_id}{path}", caller=OTHER))
    missing = call(http_event("GET", f"/task/no-such-task{path}", caller=OTHER))

    assert theirs[0] == missing[0] == 404
    assert theirs[2]["message"].replace(task_id, "?") == missing[2]["message"].replace("no-such-task", "?")


# ---- DELETE /task/{id} -------------------------------------------------------------------------------------------
def test_cancel_records_cancelled_and_stops_the_workflow(tasks: TaskAccount) -> None:
    task_id = submit()[2]["id"]

    status, _, task = call(http_event("DELETE", f"/task/{task_id}"))

    assert (status, task["status"]) == (200, "CANCELLED")
    assert tasks.wait_until_stopped(task_id) == "ABORTED"
    # the ABORTED that follows, and a second cancel, change nothing
    end(tasks, task_id, "ABORTED")
    again = call(http_event("DELETE", f"/task/{task_id}"))
    assert (again[0], again[2]["status"]) == (200, "CANCELLED")
    assert [e["status"] for e in tasks.log(task_id)] == ["SUBMITTED", "RUNNING", "CANCELLED"]


def test_cancelling_an_ended_task_is_a_conflict_with_its_status(tasks: TaskAccount) -> None:
    task_id = submit()[2]["id"]
    end(tasks, task_id, "SUCCEEDED", output="{}")

    status, _, answer = call(http_event("DELETE", f"/task/{task_id}"))

    assert (status, answer["status"]) == (409, "SUCCEEDED")
    assert [e["status"] for e in tasks.log(task_id)][-1] == "SUCCEEDED"


def test_another_caller_cannot_cancel(tasks: TaskAccount) -> None:
    task_id = submit()[2]["id"]
    assert call(http_event("DELETE", f"/task/{task_id}", caller=OTHER))[0] == 404
    assert tasks.sfn.describe_execution(executionArn=tasks.execution_arn(task_id))["status"] == "RUNNING"


def test_a_request_without_an_iam_caller_is_refused(tasks: TaskAccount) -> None:
    status, _, _ = submit(caller=None)  # type: ignore[arg-type]
    assert status == 403
    assert tasks.all_entries() == []


@pytest.mark.parametrize(
    ("method", "path"), [("GET", "/tasks"), ("PUT", "/task"), ("GET", "/task/a/b/c")], ids=["path", "method", "deeper"]
)
def test_a_route_the_function_does_not_serve_is_a_404_with_the_error_shape(method: str, path: str) -> None:
    status, _, answer = call(http_event(method, path))

    assert (status, answer) == (404, {"message": f"no route {method} {path}"})


# ---- the OpenAPI document and the template ------------------------------------------------------------------------
def test_the_committed_openapi_document_is_the_generated_one(tasks: TaskAccount) -> None:
    from handlers.task_api import openapi_document

    committed = (REPO / "docs" / "openapi.json").read_text()
    assert json.loads(openapi_document()) == json.loads(committed), (
        "docs/openapi.json drifted from the API: regenerate it (docs/api.md, 'OpenAPI')"
    )
    served = call(http_event("GET", "/openapi.json"))
    assert served[0] == 200 and served[2] == json.loads(committed)


def test_every_error_answer_is_documented_with_the_one_error_shape() -> None:
    # Given the committed OpenAPI document
    document = json.loads((REPO / "docs" / "openapi.json").read_text())
    error_shape = {"$ref": "#/components/schemas/ErrorMessage"}

    # Then every route documents its 4xx answers, each with the ErrorMessage body the handlers send
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            errors = {code: r for code, r in operation["responses"].items() if code.startswith("4")}
            assert {"403", "422"} <= set(errors), (method, path)
            for code, response in errors.items():
                assert response["content"]["application/json"]["schema"] == error_shape, (method, path, code)
    assert {"400", "413", "415", "422"} <= set(document["paths"]["/task"]["post"]["responses"])


def test_every_task_state_machine_is_in_the_status_rule_and_the_api_policy(stack: Deployed) -> None:
    api = stack.function("task_api")
    machines = set(json.loads(stack.environment(api)["TASK_STATE_MACHINES"]).values()) - {""}  # "": a feature left out
    (rule,) = stack.rule_patterns("record_task_status").values()
    in_rule = set(rule["detail"]["stateMachineArn"])
    role = stack.resource(f"{api.logical_id}Role")  # the execution role SAM makes from the function's Policies
    startable = {
        resource
        for policy in role.properties.get("Policies", [])
        for statement in policy["PolicyDocument"]["Statement"]
        if "states:StartExecution" in statement["Action"]
        for resource in statement["Resource"]
    }
    assert len(machines) == 4  # documents, bounded, extract, export
    assert machines == in_rule == startable


def test_every_event_sample_of_the_api_names_a_route_of_the_template() -> None:
    from tests.unit.support import template

    events = template()["Resources"]["TaskApiFunction"]["Properties"]["Events"]
    routes = {f"{e['Properties']['Method']} {e['Properties']['Path']}" for e in events.values()}
    samples = sorted(Path(REPO / "events").glob("task_api.*.json"))
    assert samples
    for sample in samples:
        assert json.loads(sample.read_text())["routeKey"] in routes, sample.name


def test_the_workflows_progress_entries_have_the_status_logs_shape() -> None:
    # Given the status log's entry item and the documents workflow's writes to the task table
    from shared.tasks.statuslog import Entry

    fields = set(Entry(seq="s", status="S", at="a").item("t"))
    writes = [
        state["Parameters"]
        for state in asl_states("documents")
        if state.get("Resource") == "arn:aws:states:::dynamodb:putItem"
        and state["Parameters"]["TableName"] == "${TaskTable}"
    ]
    assert writes, "the documents workflow writes no progress entry"
    for write in writes:
        # Then each writes exactly the entry's fields, appends only, and keys its entry by time and its own status
        assert set(write["Item"]) == fields, write
        assert write["ConditionExpression"] == "attribute_not_exists(seq)"
        status = write["Item"]["status"]["S"]
        assert write["Item"]["seq"]["S.$"].endswith(f"#{status}', $$.State.EnteredTime)"), write
