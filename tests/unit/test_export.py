"""The HealthLake export workflow's functions, as the workflow and its users see them: the run lock (one export at a
time, `_since` the last successful run), the export queue's consumer (kick-off once, checks through SQS delays,
the waiting task ended with a manifest or the export's failure) and the publishing of exported records.

HealthLake is a simulator (localcloud.simulators.healthlake) serving the data store's FHIR endpoint over real HTTP
with SigV4 checks; the waiting tasks are real executions on moto. Handlers are imported inside the tests (see
support.check_observability).
"""

from __future__ import annotations

import importlib
import json
from collections import Counter
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from localcloud.clock import ManualClock
from localcloud.simulators.healthlake import HealthLakeSimulator
from shared.exceptions import EventBusThrottledError
from tests.unit.payloads import fhir_patients, ndjson, sqs_event
from tests.unit.support import ACCOUNT, REGION, ClientSpy, ExportAccount, asl_states, invoke, template
from tests.unit.waiting import WaitingTask, wait_until

EXECUTIONS = f"arn:aws:states:{REGION}:{ACCOUNT}:execution:callback-kit-test-export"
LAST_RUN = "2026-01-15T10:25:00.087Z"
TRIGGER = "2026-01-15T10:30:00.123Z"


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def execution(name: str) -> str:
    return f"{EXECUTIONS}:{name}"


def take(execution_arn: str, trigger_time: str = TRIGGER) -> dict[str, Any]:
    return dict(invoke("take_export_lock", {"executionArn": execution_arn, "triggerTime": trigger_time}))


def execution_ended(execution_arn: str, status: str) -> dict[str, Any]:
    """The Step Functions Execution Status Change event the release function's rule delivers."""
    return {
        "version": "0",
        "id": "315c1398-40ff-a850-213b-158f73e60175",
        "detail-type": "Step Functions Execution Status Change",
        "source": "aws.states",
        "account": ACCOUNT,
        "time": "2026-01-15T10:52:41Z",
        "region": REGION,
        "resources": [execution_arn],
        "detail": {
            "executionArn": execution_arn,
            "stateMachineArn": EXECUTIONS.replace(":execution:", ":stateMachine:"),
            "name": execution_arn.rsplit(":", 1)[-1],
            "status": status,
            "startDate": 1768473000123,
            "stopDate": 1768474361456,
        },
    }


def start_message(task_token: str, name: str, last_run_time: str | None = LAST_RUN) -> dict[str, Any]:
    """The message the workflow's Export task sends."""
    return {
        "action": "start",
        "taskToken": task_token,
        "executionArn": execution(name),
        "executionName": name,
        "lastRunTime": last_run_time,
    }


def check_message(task_token: str, job_id: str) -> dict[str, Any]:
    return {"action": "check", "taskToken": task_token, "jobId": job_id}


def started(export: ExportAccount, task_token: str, name: str = "run-1") -> str:
    """Deliver a start message; return the export job it started."""
    assert invoke("export_job", sqs_event([start_message(task_token, name)])) == {"batchItemFailures": []}
    return export.started_exports()[execution(name)]


def wait_for_job(simulator: HealthLakeSimulator, job_id: str, status: str) -> None:
    wait_until(lambda: simulator.jobs[job_id].status == status, f"export {job_id} {status}")


# ----------------------------------------------------------------------------------------------------------------
# The run lock
# ----------------------------------------------------------------------------------------------------------------
def test_the_first_run_takes_the_lock_and_exports_everything(export_account: ExportAccount) -> None:
    # Given no export has ever run
    assert export_account.lock() is None

    # When the first execution takes the lock
    result = take(execution("first"))

    # Then it holds the lock, with no `_since`: everything is exported
    assert result == {"acquired": True, "lastRunTime": None, "holder": None}
    lock = export_account.lock()
    assert lock is not None
    assert (lock["runStatus"], lock["executionArn"], lock["triggerTime"]) == ("RUNNING", execution("first"), TRIGGER)


def test_a_second_execution_is_refused_while_the_holder_runs(
    export_account: ExportAccount, waiting_task: Callable[..., WaitingTask]
) -> None:
    # Given the lock held by an execution that is still running
    holder = waiting_task()
    export_account.hold(holder.execution_arn, last_run_time=LAST_RUN)
    before = export_account.lock()

    # When another execution tries to take it
    result = take(execution("second"), "2026-01-15T10:35:00.000Z")

    # Then it is refused and told who holds it; the lock is unchanged and the holder keeps running
    assert result == {"acquired": False, "lastRunTime": LAST_RUN, "holder": holder.execution_arn}
    assert export_account.lock() == before
    assert holder.status() == "RUNNING"


@pytest.mark.parametrize("ended", ["aborted", "never-started"])
def test_a_lock_whose_holder_no_longer_runs_is_taken_over_with_its_last_run_time(
    ended: str, export_account: ExportAccount, waiting_task: Callable[..., WaitingTask]
) -> None:
    # Given the lock still RUNNING for an execution that has ended without releasing it (or that Step Functions
    # does not know)
    if ended == "aborted":
        stale = waiting_task()
        stale.stop()
        stale_arn = stale.execution_arn
    else:
        stale_arn = execution("vanished")
    export_account.hold(stale_arn, last_run_time=LAST_RUN)

    # When the next execution takes the lock
    result = take(execution("next"))

    # Then it takes the lock over and exports from the last successful run on (the stale run's gap included)
    assert result == {"acquired": True, "lastRunTime": LAST_RUN, "holder": None}
    lock = export_account.lock()
    assert lock is not None
    assert (lock["runStatus"], lock["executionArn"], lock["lastRunTime"]) == ("RUNNING", execution("next"), LAST_RUN)


def test_a_retried_take_by_the_holder_succeeds(export_account: ExportAccount) -> None:
    # Given an execution that took the lock (its Lambda invoke is then retried, e.g. after a timeout)
    export_account.hold(execution("previous"), "COMPLETED", last_run_time=LAST_RUN)
    first = take(execution("retried"))

    # When the same execution takes it again
    again = take(execution("retried"))

    # Then it still holds the lock, with the same `_since`
    assert first == again == {"acquired": True, "lastRunTime": LAST_RUN, "holder": None}
    lock = export_account.lock()
    assert lock is not None
    assert (lock["runStatus"], lock["executionArn"]) == ("RUNNING", execution("retried"))


def test_releasing_marks_the_run_failed_and_keeps_the_last_run_time(export_account: ExportAccount) -> None:
    # Given the lock held by an execution triggered at TRIGGER, the previous success at LAST_RUN
    export_account.hold(execution("previous"), "COMPLETED", last_run_time=LAST_RUN)
    assert take(execution("current"))["acquired"]
    run_lock = importlib.import_module("shared.export.runlock").RunLock(export_account.environment["EXPORT_TABLE"])

    # When its execution died and the status-change rule releases its lock
    released = run_lock.release(execution("current"), "FAILED")

    # Then the lock is free and `_since` stays at the last success, so the next run exports the gap again
    assert released is True
    lock = export_account.lock()
    assert lock is not None
    assert (lock["runStatus"], lock["lastRunTime"]) == ("FAILED", LAST_RUN)
    assert take(execution("after"), "2026-01-15T10:35:00.000Z")["lastRunTime"] == LAST_RUN


def test_the_late_end_of_an_execution_that_lost_the_lock_changes_nothing(
    export_account: ExportAccount, waiting_task: Callable[..., WaitingTask]
) -> None:
    # Given a stale holder whose lock was taken over by a running execution
    stale = waiting_task()
    stale.stop()
    export_account.hold(stale.execution_arn, last_run_time=LAST_RUN)
    assert take(execution("current"))["acquired"]
    before = export_account.lock()

    # When the stale execution's status change reaches the release function
    result = invoke("release_export_lock", execution_ended(stale.execution_arn, "ABORTED"))

    # Then nothing is released: the current holder keeps the lock
    assert result == {"released": False}
    assert export_account.lock() == before


@pytest.mark.parametrize("status", ["RUNNING", "PENDING_REDRIVE"])
def test_a_release_for_an_execution_that_has_not_ended_is_refused_and_changes_nothing(
    export_account: ExportAccount, status: str
) -> None:
    # Given the lock held by a running execution
    export_account.hold(execution("current"), "COMPLETED", last_run_time=LAST_RUN)
    assert take(execution("current"))["acquired"]
    before = export_account.lock()

    # When the release function is invoked with a status that is not terminal (a rule wider than it should be)
    with pytest.raises(Exception) as refused:
        invoke("release_export_lock", execution_ended(execution("current"), status))

    # Then it fails with a named error (Lambda retries, then its on-failure destination), and the holder keeps the lock
    assert type(refused.value).__name__ == "ExecutionNotEndedError"
    assert status in str(refused.value)
    assert export_account.lock() == before


# ----------------------------------------------------------------------------------------------------------------
# The export queue's consumer
# ----------------------------------------------------------------------------------------------------------------
def test_a_start_message_kicks_off_one_export_even_when_delivered_twice(
    export_account: ExportAccount, healthlake: Callable[..., HealthLakeSimulator], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a data store, checks configured 45 s apart, and the workflow's start message
    monkeypatch.setenv("EXPORT_RECHECK_DELAY_SECONDS", "45")
    simulator = healthlake(delay_seconds=60)
    event = sqs_event([start_message("token-1", "run-1")])

    # When SQS delivers the message twice (at-least-once delivery)
    first = invoke("export_job", event)
    second = invoke("export_job", event)

    # Then one export was kicked off (a second one would have been refused: one export at a time), both deliveries
    # succeed, and every check queued is of that export, 45 s later
    assert first == second == {"batchItemFailures": []}
    assert len(simulator.jobs) == 1
    (job_id,) = simulator.jobs
    assert export_account.started_exports() == {execution("run-1"): job_id}
    checks = export_account.checks_queued()
    assert checks
    assert {json.dumps(body, sort_keys=True) for body, _ in checks} == {
        json.dumps(check_message("token-1", job_id), sort_keys=True)
    }
    assert {delay for _, delay in checks} == {45}


def test_the_first_run_exports_everything_and_a_later_one_what_changed_since(
    export_account: ExportAccount, healthlake: Callable[..., HealthLakeSimulator]
) -> None:
    # Given a data store
    simulator = healthlake(delay_seconds=60, one_running_export=False)

    # When the first run (no lastRunTime) and a later run start their exports
    event = sqs_event([start_message("token-1", "first", None), start_message("token-2", "later", LAST_RUN)])
    assert invoke("export_job", event) == {"batchItemFailures": []}

    # Then the first export has no `_since`, the later one the last run's trigger time
    requests = {
        execution: str(simulator.jobs[job].request) for execution, job in export_account.started_exports().items()
    }
    assert "_since" not in requests[execution("first")]
    assert f"_since={LAST_RUN.replace(':', '%3A')}" in requests[execution("later")]


def test_a_check_while_the_export_runs_heartbeats_and_checks_again_later(
    export_account: ExportAccount,
    healthlake: Callable[..., HealthLakeSimulator],
    waiting_task: Callable[..., WaitingTask],
    sfn_spy: ClientSpy,
) -> None:
    # Given a workflow waiting for an export that is in progress
    simulator = healthlake(outcome="STUCK", delay_seconds=0.1)
    task = waiting_task(heartbeat_seconds=600)
    job_id = started(export_account, task.token)
    wait_for_job(simulator, job_id, "IN_PROGRESS")
    export_account.sqs.calls.clear()

    # When its check message arrives
    result = invoke("export_job", sqs_event([check_message(task.token, job_id)]))

    # Then the task gets a heartbeat and keeps waiting, and exactly one check is queued for later
    assert result == {"batchItemFailures": []}
    assert sfn_spy.calls_to("send_task_heartbeat") == [{"taskToken": task.token}]
    assert task.status() == "RUNNING"
    delay = int(export_account.environment["EXPORT_RECHECK_DELAY_SECONDS"])
    assert export_account.checks_queued() == [(check_message(task.token, job_id), delay)]


def test_a_completed_export_ends_the_task_with_a_manifest_of_its_files(
    export_account: ExportAccount,
    healthlake: Callable[..., HealthLakeSimulator],
    waiting_task: Callable[..., WaitingTask],
    sfn_spy: ClientSpy,
) -> None:
    # Given a workflow waiting for an export that completed with 3 files, next to files that are not its records
    # (an OperationOutcome file and another export's file)
    simulator = healthlake(file_count=3, records_per_file=2)
    task = waiting_task(heartbeat_seconds=600)
    job_id = started(export_account, task.token)
    wait_for_job(simulator, job_id, "COMPLETED")
    exported = sorted(url for _, url in simulator.jobs[job_id].output)
    assert len(exported) == 3
    folder = exported[0].removeprefix(f"s3://{export_account.bucket}/").split("/", 2)
    datastore_id = export_account.environment["HEALTHLAKE_DATASTORE_ID"]
    for key in (
        f"{folder[0]}/{folder[1]}/OperationOutcome/OperationOutcome-4726190385126740913-1-0.ndjson",
        f"exports/{datastore_id}-FHIR_EXPORT-0000000000000000000000000000other/Patient/Patient-1-1-0.ndjson",
    ):
        export_account.s3.put_object(Bucket=export_account.bucket, Key=key, Body=b"{}\n")
    export_account.sqs.calls.clear()

    # When its check message arrives
    result = invoke("export_job", sqs_event([check_message(task.token, job_id)]))

    # Then the task succeeds with the manifest, which lists exactly the export's NDJSON files, and checking stops
    assert result == {"batchItemFailures": []}
    execution_ = task.wait_until_closed()
    assert execution_["status"] == "SUCCEEDED"
    output = json.loads(execution_["output"])
    assert {key: output[key] for key in ("bucket", "fileCount", "status")} == {
        "bucket": export_account.bucket,
        "fileCount": 3,
        "status": "COMPLETED",
    }
    manifest = export_account.manifest(output["manifestKey"])
    assert sorted(f"s3://{entry['bucket']}/{entry['key']}" for entry in manifest) == exported
    assert len(sfn_spy.calls_to("send_task_success")) == 1
    assert export_account.checks_queued() == []


@pytest.mark.parametrize("outcome", ["COMPLETED_WITH_ERRORS", "FAILED"])
def test_an_export_that_did_not_complete_fails_the_task_with_its_status(
    outcome: str,
    export_account: ExportAccount,
    healthlake: Callable[..., HealthLakeSimulator],
    waiting_task: Callable[..., WaitingTask],
) -> None:
    # Given a workflow waiting for an export that ended without all its records
    simulator = healthlake(outcome=outcome)
    task = waiting_task(heartbeat_seconds=600)
    job_id = started(export_account, task.token)
    wait_for_job(simulator, job_id, outcome)
    export_account.sqs.calls.clear()

    # When its check message arrives
    result = invoke("export_job", sqs_event([check_message(task.token, job_id)]))

    # Then the task fails with an error its Catch can match, no manifest is written and checking stops
    assert result == {"batchItemFailures": []}
    execution_ = task.wait_until_closed()
    assert (execution_["status"], execution_["error"]) == ("FAILED", f"HealthLake.{outcome}")
    manifests = export_account.s3.list_objects_v2(Bucket=export_account.bucket, Prefix="manifests/")
    assert manifests.get("KeyCount", 0) == 0
    assert export_account.checks_queued() == []


def test_a_check_for_a_task_that_timed_out_stops_checking(
    export_account: ExportAccount,
    healthlake: Callable[..., HealthLakeSimulator],
    waiting_task: Callable[..., WaitingTask],
    sfn_spy: ClientSpy,
    clock: ManualClock,
) -> None:
    # Given an export still running for a workflow whose task has timed out (its hour has passed)
    simulator = healthlake(outcome="STUCK", delay_seconds=0.1)
    task = waiting_task(timeout_seconds=3600, heartbeat_seconds=600)
    job_id = started(export_account, task.token)
    wait_for_job(simulator, job_id, "IN_PROGRESS")
    clock.armed()
    clock.advance(3600)
    closed = task.wait_until_closed()
    assert (closed["status"], closed["error"]) == ("FAILED", "States.Timeout")
    export_account.sqs.calls.clear()

    # When its check message arrives
    result = invoke("export_job", sqs_event([check_message(task.token, job_id)]))

    # Then the message is done with (no retry) and no further check is queued
    assert result == {"batchItemFailures": []}
    assert sfn_spy.calls_to("send_task_heartbeat") == [{"taskToken": task.token}]
    assert export_account.checks_queued() == []


def test_a_bad_message_fails_alone_and_the_rest_of_the_batch_is_processed(
    export_account: ExportAccount,
    healthlake: Callable[..., HealthLakeSimulator],
    waiting_task: Callable[..., WaitingTask],
    sfn_spy: ClientSpy,
) -> None:
    # Given a batch with a good check message among messages the function cannot read
    simulator = healthlake(outcome="STUCK", delay_seconds=0.1)
    task = waiting_task(heartbeat_seconds=600)
    job_id = started(export_account, task.token)
    wait_for_job(simulator, job_id, "IN_PROGRESS")
    export_account.sqs.calls.clear()
    event = sqs_event(
        [
            "not json",
            {"action": "check", "jobId": job_id},  # no task token
            check_message(task.token, job_id),
            {"action": "stop", "taskToken": task.token, "jobId": job_id},
        ]
    )
    records = event["Records"]

    # When the batch arrives
    result = invoke("export_job", event)

    # Then only the bad records are reported (SQS retries them, then dead-letters them); the good one is done
    assert result == {"batchItemFailures": [{"itemIdentifier": records[n]["messageId"]} for n in (0, 1, 3)]}
    assert sfn_spy.calls_to("send_task_heartbeat") == [{"taskToken": task.token}]
    assert len(export_account.checks_queued()) == 1


def test_a_start_while_another_export_runs_keeps_the_task_alive_and_tries_again_later(
    export_account: ExportAccount,
    healthlake: Callable[..., HealthLakeSimulator],
    waiting_task: Callable[..., WaitingTask],
    sfn_spy: ClientSpy,
) -> None:
    # Given another export running in the account (HealthLake runs one at a time: its kick-off answers 429)
    simulator = healthlake(delay_seconds=60)
    started(export_account, "token-1", "running")
    export_account.sqs.calls.clear()
    task = waiting_task(heartbeat_seconds=600)
    message = start_message(task.token, "waiting")

    # When this workflow's start message arrives
    result = invoke("export_job", sqs_event([message]))

    # Then no second export is started; the task gets a heartbeat and the start is queued again for later
    assert result == {"batchItemFailures": []}
    assert len(simulator.jobs) == 1
    assert execution("waiting") not in export_account.started_exports()
    assert sfn_spy.calls_to("send_task_heartbeat") == [{"taskToken": task.token}]
    assert task.status() == "RUNNING"
    delay = int(export_account.environment["EXPORT_RECHECK_DELAY_SECONDS"])
    assert export_account.checks_queued() == [(message, delay)]


def test_a_refused_kick_off_fails_the_run_with_a_named_error(
    export_account: ExportAccount,
    healthlake: Callable[..., HealthLakeSimulator],
    waiting_task: Callable[..., WaitingTask],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a data store that refuses the kick-off for good (a data access role that is not a role ARN: 400)
    simulator = healthlake()
    monkeypatch.setenv("EXPORT_DATA_ACCESS_ROLE_ARN", "not-a-role")
    task = waiting_task(heartbeat_seconds=600)

    # When the start message arrives
    result = invoke("export_job", sqs_event([start_message(task.token, "refused")]))

    # Then the message is done with (retrying cannot help), no export was started or check queued, and the
    # workflow fails at once with a named error and HealthLake's answer as the cause
    assert result == {"batchItemFailures": []}
    assert simulator.jobs == {}
    assert export_account.checks_queued() == []
    ended = task.wait_until_closed()
    assert (ended["status"], ended["error"]) == ("FAILED", "HealthLake.EXPORT_REFUSED")
    assert "answered 400" in ended["cause"]


def test_a_redelivered_start_after_a_lost_answer_finds_the_export_by_name(
    export_account: ExportAccount,
    healthlake: Callable[..., HealthLakeSimulator],
    waiting_task: Callable[..., WaitingTask],
) -> None:
    # Given an export kicked off for an execution whose start never stored the job id (the function died between)
    simulator = healthlake(delay_seconds=600)
    task = waiting_task(heartbeat_seconds=600)
    first = started(export_account, task.token, name="lost-answer")
    export_account.table.delete_item(Key={"pk": f"EXPORT#{execution('lost-answer')}"})

    # When the start message is delivered again
    result = invoke("export_job", sqs_event([start_message(task.token, "lost-answer")]))

    # Then no second export is started: the one named after the execution is found, stored and checked
    assert result == {"batchItemFailures": []}
    assert list(simulator.jobs) == [first]
    assert export_account.started_exports() == {execution("lost-answer"): first}


# ----------------------------------------------------------------------------------------------------------------
# Publishing the exported records
# ----------------------------------------------------------------------------------------------------------------
RUN = "5b0c7f3e-run"
FILE_KEY = "exports/ds-FHIR_EXPORT-job/Patient/Patient-4726190385126740913-1-0.ndjson"


def exported_file(export: ExportAccount, records: list[dict[str, Any]]) -> dict[str, str]:
    body = ndjson(records[:3]) + b"\n" + ndjson(records[3:]) + b"  \n"  # blank lines are not records
    return exported_body(export, body)


def exported_body(export: ExportAccount, body: bytes) -> dict[str, str]:
    export.s3.put_object(Bucket=export.bucket, Key=FILE_KEY, Body=body)
    return {"run": RUN, "bucket": export.bucket, "key": FILE_KEY}


def kept(export: ExportAccount, kind: str, run: str = RUN) -> list[dict[str, Any]]:
    """The lines the run kept under runs/<run>/<kind>/ (quarantine or undelivered), in line order."""
    listed = export.s3.list_objects_v2(Bucket=export.bucket, Prefix=f"runs/{run}/{kind}/").get("Contents", [])
    lines = []
    for item in listed:
        assert item["Key"].startswith(f"runs/{run}/{kind}/{FILE_KEY}/"), item["Key"]
        body = export.s3.get_object(Bucket=export.bucket, Key=item["Key"])["Body"].read().decode()
        lines += [json.loads(line) for line in body.splitlines()]
    return sorted(lines, key=lambda line: int(line["line"]))


def counts(published: int, quarantined: int = 0, undelivered: int = 0, lines: int | None = None) -> dict[str, Any]:
    """The publish function's result for FILE_KEY."""
    records = published + quarantined + undelivered
    return {
        "key": FILE_KEY,
        "lines": records if lines is None else lines,
        "records": records,
        "published": published,
        "quarantined": quarantined,
        "undelivered": undelivered,
        "complete": True,
    }


class RefusingBus:
    """The functions' EventBridge client, recording its calls. `refuse(entry)` returns an ErrorCode for an entry
    PutEvents refuses (EventBridge's partial failure: the others are put); `throttled(nth)` says whether the nth
    PutEvents call (1-based) raises ThrottlingException as a whole, as a throttled call does once botocore's own
    retries are spent."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.eventbus = importlib.import_module("shared.eventbus")
        real_client = self.eventbus.client
        self._real = real_client("events")
        self.refuse: Callable[[dict[str, Any]], str | None] = lambda entry: None
        self.throttled: Callable[[int], bool] = lambda nth: False
        self.spy = ClientSpy(self)
        self.delays: list[float] = []
        monkeypatch.setattr(self.eventbus, "client", lambda s: self.spy if s == "events" else real_client(s))
        monkeypatch.setattr(self.eventbus, "time", SimpleNamespace(sleep=self.delays.append))  # its sleeps only

    def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, Any]:  # keyword spelled as the API's
        if self.throttled(len(self.spy.calls_to("put_events"))):
            from botocore.exceptions import ClientError

            raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}, "PutEvents")
        codes = [self.refuse(entry) for entry in Entries]
        accepted = [entry for entry, code in zip(Entries, codes, strict=True) if code is None]
        answers = iter(self._real.put_events(Entries=accepted)["Entries"] if accepted else [])
        results = [next(answers) if code is None else {"ErrorCode": code, "ErrorMessage": code} for code in codes]
        return {"FailedEntryCount": sum(code is not None for code in codes), "Entries": results}

    def entries_put(self) -> list[dict[str, Any]]:
        return [entry for call in self.spy.calls_to("put_events") for entry in call["Entries"]]


def test_every_record_of_a_file_becomes_one_event_on_the_export_bus(
    export_account: ExportAccount, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an exported file of 205 records (and blank lines)
    records = fhir_patients(205)
    item = exported_file(export_account, records)
    bus = RefusingBus(monkeypatch)

    # When the map's PublishFile step invokes the function with it
    result = invoke("publish_records", item)

    # Then each record is one PutEvents entry for the export bus with the configured detail-type, at most 10 entries
    # a call, and the result carries counts only
    assert result == counts(205, lines=207)
    calls = bus.spy.calls_to("put_events")
    assert all(1 <= len(call["Entries"]) <= 10 for call in calls)
    entries = bus.entries_put()
    assert {(entry["EventBusName"], entry["DetailType"]) for entry in entries} == {
        (export_account.environment["EXPORT_BUS"], export_account.environment["EXPORT_DETAIL_TYPE"])
    }
    assert Counter(entry["Detail"] for entry in entries) == Counter(
        json.dumps(record, separators=(",", ":")) for record in records
    )
    delivered = export_account.published.delivered()
    assert len(delivered) == 205


def test_records_refused_by_put_events_are_put_again_and_none_twice(
    export_account: ExportAccount, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an exported file, and an event bus that throttles 4 entries once each
    records = fhir_patients(25)
    item = exported_file(export_account, records)
    bus = RefusingBus(monkeypatch)
    throttled = {json.dumps(record, separators=(",", ":")) for record in records[5:9]}
    bus.refuse = lambda entry: "ThrottlingException" if throttled and entry["Detail"] in throttled else None
    put = bus.put_events

    def refusing_once(Entries: list[dict[str, Any]]) -> dict[str, Any]:
        answer = put(Entries=Entries)
        throttled.difference_update(entry["Detail"] for entry in Entries)
        return answer

    monkeypatch.setattr(bus, "put_events", refusing_once)

    # When the function publishes the file
    result = invoke("publish_records", item)

    # Then only the refused entries were put again, after a jittered backoff, and the bus got every record once
    assert result == counts(25, lines=27)
    assert len(bus.entries_put()) == 25 + 4
    assert len(bus.delays) == 1 and 0 < bus.delays[0] <= 0.15
    delivered = export_account.published.delivered()
    assert Counter(json.dumps(event["detail"], sort_keys=True) for event in delivered) == Counter(
        json.dumps(record, sort_keys=True) for record in records
    )
    assert kept(export_account, "undelivered") == []


def test_a_put_events_call_throttled_as_a_whole_is_put_again_and_the_file_published_once(
    export_account: ExportAccount, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a file of 25 records, and a bus that throttles the second and third PutEvents calls as a whole (past the
    # SDK's own retries)
    records = fhir_patients(25)
    item = exported_file(export_account, records)
    bus = RefusingBus(monkeypatch)
    bus.throttled = lambda nth: nth in {2, 3}

    # When the function publishes the file
    result = invoke("publish_records", item)

    # Then the throttled call's entries were put again in the next rounds, after a growing jittered backoff, as
    # refused entries are: the run goes on, every record on the bus once, none kept as undelivered
    assert result == counts(25, lines=27)
    assert len(bus.spy.calls_to("put_events")) == 3 + 2
    assert len(bus.delays) == 2 and 0.05 <= bus.delays[0] <= 0.15 and 0.1 <= bus.delays[1] <= 0.3
    delivered = export_account.published.delivered()
    assert Counter(json.dumps(event["detail"], sort_keys=True) for event in delivered) == Counter(
        json.dumps(record, sort_keys=True) for record in records
    )
    assert kept(export_account, "undelivered") == []


def test_the_map_item_retries_a_bus_still_throttled_after_the_publishers_budget() -> None:
    # The error the publisher raises once its rounds are spent is one the Map item's Retry names: the file is
    # published on from its checkpoint later, instead of failing the run
    publish = next(s for s in asl_states("export") if "PublishRecordsFunctionArn" in json.dumps(s.get("Parameters")))
    assert any("EventBusThrottledError" in retry["ErrorEquals"] for retry in publish["Retry"])


def test_entries_put_events_keeps_refusing_are_kept_as_undelivered_and_counted(
    export_account: ExportAccount, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a file of 12 records, two of which the bus refuses every time
    records = fhir_patients(12)
    item = exported_body(export_account, ndjson(records))
    bus = RefusingBus(monkeypatch)
    refused = {records[2]["id"]: "ThrottlingException", records[10]["id"]: "InternalFailure"}
    bus.refuse = lambda entry: refused.get(json.loads(entry["Detail"])["id"])
    # (the jitter at its middle, so that the delays show the backoff alone)
    monkeypatch.setattr(bus.eventbus, "random", SimpleNamespace(uniform=lambda low, high: (low + high) / 2))

    # When the function publishes the file
    result = invoke("publish_records", item)

    # Then the run goes on: the two are retried a bounded number of times with growing delays, then kept in S3 with
    # their line, file and ErrorCode, and counted as undelivered, never as published
    assert result == counts(10, undelivered=2)
    put_ids = Counter(json.loads(entry["Detail"])["id"] for entry in bus.entries_put())
    eventbus = importlib.import_module("shared.eventbus")
    assert {put_ids[record_id] for record_id in refused} == {eventbus.ATTEMPTS}
    assert bus.delays[1] > bus.delays[0]  # backoff
    undelivered = kept(export_account, "undelivered")
    assert [(u["line"], u["errorCode"], u["key"]) for u in undelivered] == [
        (3, "ThrottlingException", FILE_KEY),
        (11, "InternalFailure", FILE_KEY),
    ]
    assert json.loads(undelivered[0]["entry"]["Detail"]) == records[2]
    assert sorted(e["detail"]["id"] for e in export_account.published.delivered()) == sorted(
        r["id"] for r in records if r["id"] not in refused
    )


def test_bad_lines_are_quarantined_with_their_file_line_and_reason_and_cost_only_themselves(
    export_account: ExportAccount, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a file whose lines 4 to 6 are not publishable records, among good ones
    good = fhir_patients(5)
    bad = [b"{not json", b"[1, 2]", b'{"id": "no-type"}']
    body = ndjson(good[:3]) + b"\n".join(bad) + b"\n" + ndjson(good[3:])
    item = exported_body(export_account, body)
    RefusingBus(monkeypatch)

    # When the function publishes the file
    result = invoke("publish_records", item)

    # Then the good records are published, and each bad line is in the run's quarantine with why, costing one line
    assert result == counts(5, quarantined=3)
    assert sorted(e["detail"]["id"] for e in export_account.published.delivered()) == sorted(r["id"] for r in good)
    quarantined = kept(export_account, "quarantine")
    assert [(q["line"], q["key"], q["bucket"], q["content"].encode()) for q in quarantined] == [
        (4 + n, FILE_KEY, export_account.bucket, line) for n, line in enumerate(bad)
    ]
    reasons = [q["reason"] for q in quarantined]
    assert reasons[0].startswith("not JSON")
    assert reasons[1] == "not a JSON object but list"
    assert reasons[2] == "no resourceType"


def test_a_record_too_large_for_an_event_is_published_as_a_reference_to_its_line(
    export_account: ExportAccount, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a file whose second record is larger than one event entry (256 KB)
    small, large = fhir_patients(2)
    large["text"] = {"status": "generated", "div": "x" * 300_000}
    item = exported_body(export_account, ndjson([small, large]))
    RefusingBus(monkeypatch)

    # When the function publishes the file
    result = invoke("publish_records", item)

    # Then both are published, the large one as a reference to its line that a consumer can fetch
    assert result == counts(2)
    details = {e["detail"]["id"]: e["detail"] for e in export_account.published.delivered()}
    assert details[small["id"]] == small
    assert details[large["id"]] == {
        "resourceType": "Patient",
        "id": large["id"],
        "oversized": True,
        "location": {"bucket": export_account.bucket, "key": FILE_KEY, "line": 2},
    }


def test_a_retried_file_resumes_after_its_checkpoint_and_publishes_no_record_twice(
    export_account: ExportAccount, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a file of 35 records and a bus that throttles every PutEvents call as a whole from the third on, past the
    # SDK's retries and the publisher's own rounds
    records = fhir_patients(35)
    item = exported_body(export_account, ndjson(records))
    bus = RefusingBus(monkeypatch)
    bus.throttled = lambda nth: nth >= 3
    # (the function fails with EventBusThrottledError, a name the Map item's Retry matches)
    with pytest.raises(EventBusThrottledError, match="ThrottlingException"):
        invoke("publish_records", item)
    eventbus = importlib.import_module("shared.eventbus")
    assert len(bus.spy.calls_to("put_events")) == 2 + eventbus.ATTEMPTS  # the third group's call, every round
    assert len(bus.delays) == eventbus.ATTEMPTS - 1
    assert len(export_account.published.delivered()) == 20  # two groups of 10, each checkpointed

    # When the Map's Retry invokes the function again with the same item
    bus.throttled = lambda nth: False
    result = invoke("publish_records", item)

    # Then it resumes after the checkpoint: the whole file is published, each record exactly once in the run
    assert result == counts(35)
    delivered = [event["detail"]["id"] for event in export_account.published.delivered()]
    assert sorted(delivered) == sorted(record["id"] for record in records[20:])


def test_a_file_already_published_in_the_run_is_not_published_again(
    export_account: ExportAccount, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a file the run published (and quarantined a line of)
    item = exported_body(export_account, ndjson(fhir_patients(3)) + b"oops\n")
    bus = RefusingBus(monkeypatch)
    first = invoke("publish_records", item)
    export_account.published.delivered()
    calls = len(bus.spy.calls_to("put_events"))

    # When the same item is invoked again in the same run (a retry after a lost answer), and then by the next run
    again = invoke("publish_records", item)
    assert len(bus.spy.calls_to("put_events")) == calls
    next_run = invoke("publish_records", {**item, "run": "next-run"})

    # Then the retry publishes nothing and answers the same counts; the next run publishes the file afresh
    assert again == first == counts(3, quarantined=1)
    assert next_run == first
    assert len(export_account.published.delivered()) == 3


def test_a_checkpoint_moved_by_another_invocation_stops_this_one(export_account: ExportAccount) -> None:
    # Given a file's checkpoint at line 10
    fanout = importlib.import_module("shared.export.fanout")
    checkpoints = fanout.FileCheckpoints(export_account.environment["EXPORT_TABLE"], RUN)
    at_ten = fanout.FileProgress(lines=10, records=10, published=10)
    checkpoints.advance(FILE_KEY, fanout.FileProgress(), at_ten)

    # When an invocation that still believes it is at line 0 tries to move it
    with pytest.raises(Exception) as moved:
        checkpoints.advance(FILE_KEY, fanout.FileProgress(), fanout.FileProgress(lines=5, records=5, published=5))

    # Then it is refused with a named error (the Map's Retry resumes from the real checkpoint), and nothing changed
    assert type(moved.value).__name__ == "CheckpointMovedError"
    assert checkpoints.load(FILE_KEY) == at_ten


def test_the_tally_counts_every_file_of_the_manifest_and_an_unfinished_one_as_unfinished(
    export_account: ExportAccount, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a run's manifest of two files, of which only the first was published (with one bad line)
    RefusingBus(monkeypatch)
    item = exported_body(export_account, ndjson(fhir_patients(4)) + b"oops\n")
    invoke("publish_records", item)
    files = [{"bucket": export_account.bucket, "key": FILE_KEY}, {"bucket": export_account.bucket, "key": "other"}]
    export_account.s3.put_object(Bucket=export_account.bucket, Key="manifests/job.json", Body=json.dumps(files))

    # When the workflow's Tally step runs, before and after the second file is published
    before = invoke("tally_export_run", {"run": RUN, "manifestKey": "manifests/job.json"})
    export_account.s3.put_object(Bucket=export_account.bucket, Key="other", Body=ndjson(fhir_patients(2, start=9)))
    invoke("publish_records", {**item, "key": "other"})
    after = invoke("tally_export_run", {"run": RUN, "manifestKey": "manifests/job.json"})

    # Then the unfinished file is reported (the workflow fails the run), and then every record is accounted for
    assert (before["filesUnfinished"], before["records"]) == (1, 5)
    assert after == {
        "status": "COMPLETED_WITH_ERRORS",
        "files": 2,
        "filesUnfinished": 0,
        "records": 7,
        "published": 6,
        "quarantined": 1,
        "undelivered": 0,
        "accounted": 7,
        "quarantineLocation": f"s3://{export_account.bucket}/runs/{RUN}/quarantine/",
        "undeliveredLocation": f"s3://{export_account.bucket}/runs/{RUN}/undelivered/",
    }


@pytest.mark.parametrize("function", ["PublishRecordsFunction", "TallyExportRunFunction"])
def test_the_fan_out_functions_reach_only_the_run_prefix_and_the_file_checkpoints(function: str) -> None:
    # Given the function's policies in template.yaml
    policies = template()["Resources"][function]["Properties"]["Policies"]
    statements = [s for p in policies if isinstance(p, dict) and "Statement" in p for s in p["Statement"]]
    # Then it writes S3 objects only under the runs/ prefix its kept lines go to
    fanout = importlib.import_module("shared.export.fanout")
    assert fanout.run_prefix(RUN, "quarantine").startswith("runs/")
    writes = [s["Resource"] for s in statements if "s3:PutObject" in as_list(s["Action"])]
    assert writes == ([{"Fn::Sub": "${ExportBucket.Arn}/runs/*"}] if function == "PublishRecordsFunction" else [])
    # And it reaches only FILE# items of the state table (never the RUN lock), with no broad table policy template
    assert not [p for p in policies if isinstance(p, dict) and any(name.startswith("DynamoDB") for name in p)]
    table_access = [s for s in statements if any(str(a).startswith("dynamodb:") for a in as_list(s["Action"]))]
    assert table_access
    for statement in table_access:
        assert statement["Condition"] == {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["FILE#*"]}}


def test_the_workflow_writes_the_start_message_the_consumer_reads() -> None:
    # Given the export workflow's SQS task (its MessageBody) and the queue's start model
    from shared.export.messages import Start

    tasks = [s for s in asl_states("export") if s.get("Resource", "").startswith("arn:aws:states:::sqs:sendMessage")]
    assert len(tasks) == 1, tasks
    body = tasks[0]["Parameters"]["MessageBody"]
    # Then the workflow writes exactly the model's fields, in the wire's names, and the start action
    written = {name.removesuffix(".$") for name in body}
    assert written == {field.alias or name for name, field in Start.model_fields.items()}
    assert body["action"] == "start"
