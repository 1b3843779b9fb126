"""The HealthLake export workflow end to end: run lock, FHIR $export kick-off, SQS-delay checks with heartbeats,
manifest, Distributed Map fan-out of every record onto the export bus, and the run bookkeeping."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest
from moto.events.models import EventsBackend
from moto.s3.exceptions import MissingKey
from moto.s3.models import S3Backend

from localcloud.client import wait_for_execution
from localcloud.cloud import LocalCloud
from localcloud.simulators.healthlake import HealthLakeSimulator
from tests.localcloud.simulated import wait_for


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def start(cloud: LocalCloud, name: str | None = None) -> str:
    return str(
        cloud.client("stepfunctions").start_execution(
            stateMachineArn=cloud.stack.outputs["ExportWorkflowArn"], name=name or str(uuid.uuid4()), input="{}"
        )["executionArn"]
    )


def run(cloud: LocalCloud, name: str | None = None) -> dict[str, Any]:
    return wait_for_execution(cloud, start(cloud, name), timeout=40, show=False)


def run_state(cloud: LocalCloud) -> dict[str, str]:
    item = cloud.client("dynamodb").get_item(
        TableName=cloud.stack.outputs["ExportStateTableName"], Key={"pk": {"S": "RUN"}}, ConsistentRead=True
    )["Item"]
    return {k: v["S"] for k, v in item.items() if "S" in v}


def exported_lines(cloud: LocalCloud, output: dict[str, Any]) -> list[dict[str, Any]]:
    s3 = cloud.client("s3")
    bucket, _, key = output["manifest"].removeprefix("s3://").partition("/")
    files = json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    lines = []
    for file in files:
        body = s3.get_object(Bucket=file["bucket"], Key=file["key"])["Body"].read().decode()
        lines += [json.loads(line) for line in body.splitlines() if line.strip()]
    return lines


@pytest.fixture
def bus_queue(cloud: LocalCloud) -> Iterator[str]:
    """An SQS queue receiving every event on the export bus (what a consumer of the bus would see)."""
    sqs, events = cloud.client("sqs"), cloud.client("events")
    name = f"export-events-{uuid.uuid4().hex[:8]}"
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    bus = cloud.stack.outputs["ExportBusName"]
    events.put_rule(Name=name, EventBusName=bus, EventPattern=json.dumps({"source": ["callback-kit.export"]}))
    events.put_targets(Rule=name, EventBusName=bus, Targets=[{"Id": "queue", "Arn": arn}])
    yield url
    events.remove_targets(Rule=name, EventBusName=bus, Ids=["queue"])
    events.delete_rule(Name=name, EventBusName=bus)


def received(cloud: LocalCloud, queue_url: str) -> list[dict[str, Any]]:
    sqs, events = cloud.client("sqs"), []
    while True:
        batch = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0)
        if not batch.get("Messages"):
            return events
        for message in batch["Messages"]:
            events.append(json.loads(message["Body"]))
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])


def patients(count: int) -> list[dict[str, Any]]:
    return [
        {"resourceType": "Patient", "id": f"p-{uuid.uuid4()}", "meta": {"lastUpdated": now()}} for _ in range(count)
    ]


def test_every_exported_record_arrives_on_the_bus_exactly_once(
    cloud: LocalCloud, healthlake: HealthLakeSimulator, bus_queue: str
) -> None:
    # Given new resources in the data store
    fresh = healthlake.add_resources(cloud.config.parameters["HealthLakeDatastoreId"], patients(7))
    # When the export workflow runs
    described = run(cloud)
    # Then it succeeds, and each exported record is on the bus exactly once, with the configured detail-type
    assert described["status"] == "SUCCEEDED", described
    output = json.loads(described["output"])
    lines = exported_lines(cloud, output)
    events = received(cloud, bus_queue)
    assert sorted(e["detail"]["id"] for e in events) == sorted(line["id"] for line in lines)
    assert {e["detail-type"] for e in events} == {"FHIR Resource Exported"}
    assert {r["id"] for r in fresh} <= {e["detail"]["id"] for e in events}
    assert output["fileCount"] >= 1
    # And the run is recorded as completed at its trigger time
    assert run_state(cloud)["runStatus"] == "COMPLETED"
    assert run_state(cloud)["lastRunTime"] == output["triggerTime"]


def test_the_next_run_exports_only_what_changed_since_the_previous_successful_trigger(
    cloud: LocalCloud, healthlake: HealthLakeSimulator
) -> None:
    # Given resources HealthLake stamped as they were written (no lastUpdated of the test's), and a run exporting them
    datastore = cloud.config.parameters["HealthLakeDatastoreId"]
    healthlake.add_resources(datastore, [{"resourceType": "Patient"} for _ in range(3)])
    first = json.loads(run(cloud)["output"])
    # When two more are written and the next run goes
    changed = healthlake.add_resources(datastore, [{"resourceType": "Patient"} for _ in range(2)])
    second = json.loads(run(cloud)["output"])
    # Then it asked HealthLake for what changed since the first run was triggered, and exported those two alone
    assert second["since"] == first["triggerTime"]
    job = max(healthlake.jobs.values(), key=lambda j: j.submitted)
    assert job.since is not None and job.since.isoformat().startswith(first["triggerTime"][:19])
    assert sorted(line["id"] for line in exported_lines(cloud, second)) == sorted(r["id"] for r in changed)


def test_a_trigger_while_a_run_holds_the_lock_is_skipped_and_changes_nothing(cloud: LocalCloud) -> None:
    # Given a run in progress
    holder = start(cloud)
    wait_until_export_started(cloud, holder)
    before = run_state(cloud)
    # When another trigger arrives
    skipped = run(cloud)
    # Then it ends successfully as skipped, naming the holder, and the run state is untouched
    assert skipped["status"] == "SUCCEEDED"
    assert json.loads(skipped["output"]) == {"status": "SKIPPED", "runningExecution": holder}
    assert run_state(cloud) == before
    assert wait_for_execution(cloud, holder, timeout=40, show=False)["status"] == "SUCCEEDED"


def wait_until_export_started(cloud: LocalCloud, execution_arn: str) -> None:
    import time

    history = cloud.client("stepfunctions").get_execution_history
    for _ in range(200):
        events = history(executionArn=execution_arn)["events"]
        if any(e["type"] == "TaskSubmitted" for e in events):
            return
        time.sleep(0.05)
    raise AssertionError("the export never started")


def test_a_lock_left_by_an_execution_that_is_gone_is_taken_over(cloud: LocalCloud) -> None:
    # Given a RUN item still RUNNING for an execution that no longer exists (it crashed without bookkeeping)
    table = cloud.stack.outputs["ExportStateTableName"]
    last = run_state(cloud).get("lastRunTime") if _has_run(cloud) else None
    item = {"pk": {"S": "RUN"}, "runStatus": {"S": "RUNNING"}}
    item["executionArn"] = {
        "S": cloud.stack.outputs["ExportWorkflowArn"].replace(":stateMachine:", ":execution:") + ":gone"
    }
    if last:
        item["lastRunTime"] = {"S": last}
    cloud.client("dynamodb").put_item(TableName=table, Item=item)
    # When the next trigger arrives
    described = run(cloud)
    # Then it takes the lock over and exports since the last successful run
    assert described["status"] == "SUCCEEDED", described
    assert json.loads(described["output"])["since"] == last


def _has_run(cloud: LocalCloud) -> bool:
    table = cloud.stack.outputs["ExportStateTableName"]
    return "Item" in cloud.client("dynamodb").get_item(TableName=table, Key={"pk": {"S": "RUN"}})


def test_an_aborted_run_releases_its_lock_through_the_status_change_rule(cloud: LocalCloud) -> None:
    # Given a run that is stopped while it waits for its export (its own bookkeeping never runs)
    execution = start(cloud)
    wait_until_export_started(cloud, execution)
    cloud.client("stepfunctions").stop_execution(executionArn=execution)
    assert wait_for_execution(cloud, execution, timeout=20, show=False)["status"] == "ABORTED"
    # Then the Step Functions status-change rule releases the lock (the status event is delivered asynchronously)
    wait_for(lambda: run_state(cloud)["runStatus"] == "FAILED", timeout=30, what="the lock released as FAILED")
    # And the next trigger runs: it keeps its task alive while HealthLake finishes the aborted run's export, then
    # starts its own
    assert run(cloud)["status"] == "SUCCEEDED"


@pytest.mark.parametrize(
    "prefix,error", [("fail-", "HealthLake.FAILED"), ("partial-", "HealthLake.COMPLETED_WITH_ERRORS")]
)
def test_a_failed_export_fails_the_run_and_keeps_last_run_time(cloud: LocalCloud, prefix: str, error: str) -> None:
    # Given a previous successful run
    assert run(cloud)["status"] == "SUCCEEDED"
    last = run_state(cloud)["lastRunTime"]
    # When HealthLake ends the next export with an error (the JobName is the execution name)
    described = run(cloud, name=f"{prefix}{uuid.uuid4()}")
    # Then the run fails with the status as the error, and the next run will export the gap again
    assert described["status"] == "FAILED"
    assert described["error"] == error
    assert run_state(cloud)["runStatus"] == "FAILED"
    assert run_state(cloud)["lastRunTime"] == last


def test_a_stuck_export_times_out_into_a_failed_run(cloud: LocalCloud, healthlake: HealthLakeSimulator) -> None:
    # Given an export that never leaves IN_PROGRESS (ExportTimeoutSeconds is 15 real seconds here)
    name = f"stuck-{uuid.uuid4()}"
    try:
        described = wait_for_execution(cloud, start(cloud, name=name), timeout=40, show=False)
    finally:  # an operator cancels the stuck export, or HealthLake would refuse every later one
        for job in healthlake.jobs.values():
            if job.name == name:
                job.status = "CANCEL_COMPLETED"
    # Then the waiting task times out, the timeout is caught and the run is recorded FAILED
    assert described["status"] == "FAILED"
    assert described["error"] == "HealthLake.Timeout"
    assert run_state(cloud)["runStatus"] == "FAILED"


def test_a_file_larger_than_the_state_size_limit_is_published(
    cloud: LocalCloud, healthlake: HealthLakeSimulator, bus_queue: str
) -> None:
    # Given resources padded to 100 KB each, so one exported file holds more than 256 KB
    healthlake.record_bytes = 100_000
    try:
        healthlake.add_resources(cloud.config.parameters["HealthLakeDatastoreId"], patients(4))
        described = run(cloud)
    finally:
        healthlake.record_bytes = None
    # Then the run succeeds (only counts travel through the state machine) and every record is published
    assert described["status"] == "SUCCEEDED", described
    lines = exported_lines(cloud, json.loads(described["output"]))
    assert len(received(cloud, bus_queue)) == len(lines) >= 4


def test_a_poison_line_costs_one_line_and_the_run_completes_with_errors(
    cloud: LocalCloud, healthlake: HealthLakeSimulator, bus_queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a previous run, then 12 new resources of which one is exported as a truncated line (a torn write: its
    # line can never be published)
    datastore = cloud.config.parameters["HealthLakeDatastoreId"]
    assert run(cloud)["status"] == "SUCCEEDED"
    before = run_state(cloud)["lastRunTime"]
    good = healthlake.add_resources(datastore, patients(11))
    poison = healthlake.add_resources(datastore, patients(1))[0]
    whole_line = healthlake._line
    monkeypatch.setattr(healthlake, "_line", lambda r: whole_line(r)[: -7 if r["id"] == poison["id"] else None])
    received(cloud, bus_queue)  # the previous run's events

    # When the export workflow runs
    described = run(cloud)

    # Then it ends COMPLETED_WITH_ERRORS with every record accounted for and where the kept line is
    assert described["status"] == "SUCCEEDED", described
    output = json.loads(described["output"])
    assert output["status"] == "COMPLETED_WITH_ERRORS"
    assert (output["records"], output["published"], output["quarantined"], output["undelivered"]) == (12, 11, 1, 0)
    name = described["executionArn"].rsplit(":", 1)[-1]
    location = output["quarantineLocation"]
    assert location.endswith(f"/runs/{name}/quarantine/")
    # And the quarantine holds the line as exported, with its file, line number and the reason
    s3 = cloud.client("s3")
    bucket, _, prefix = location.removeprefix("s3://").partition("/")
    keys = [item["Key"] for item in s3.list_objects_v2(Bucket=bucket, Prefix=prefix)["Contents"]]
    kept = [json.loads(line) for key in keys for line in s3.get_object(Bucket=bucket, Key=key)["Body"].iter_lines()]
    assert len(kept) == 1
    assert f'"id":"{poison["id"]}"' in kept[0]["content"]
    exported = s3.get_object(Bucket=kept[0]["bucket"], Key=kept[0]["key"])["Body"].read().decode().splitlines()
    assert exported[kept[0]["line"] - 1] == kept[0]["content"]
    assert kept[0]["reason"].startswith("not JSON")
    # And each good record was published exactly once, the poison line never
    ids = Counter(event["detail"]["id"] for event in received(cloud, bus_queue))
    assert ids == Counter(record["id"] for record in good)
    # And lastRunTime moved, so the next run does not meet the same line again
    assert run_state(cloud)["runStatus"] == "COMPLETED_WITH_ERRORS"
    assert run_state(cloud)["lastRunTime"] == output["triggerTime"] != before
    after = json.loads(run(cloud)["output"])
    assert (after["status"], after["since"], after["quarantined"]) == ("COMPLETED", output["triggerTime"], 0)


@dataclass
class ThrottlingBus:
    never: set[str] = field(default_factory=set)  # ids of the records the bus never takes
    throttled: set[str] = field(default_factory=set)  # the entries' Detail it refused at least once


@pytest.fixture
def throttling_bus(monkeypatch: pytest.MonkeyPatch) -> ThrottlingBus:
    """The export bus refuses (ThrottlingException) every fifth entry of a call the first time it sees it, and the
    records in `never` every time."""
    bus = ThrottlingBus()
    never, refused_once = bus.never, bus.throttled
    put = EventsBackend.put_events

    def put_events(self: EventsBackend, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        refused: dict[int, dict[str, Any]] = {}
        for i, event in enumerate(events):
            detail = str(event.get("Detail", ""))
            if event.get("Source") != "callback-kit.export":
                continue
            if json.loads(detail).get("id") in never or (i % 5 == 0 and detail not in refused_once):
                refused_once.add(detail)
                refused[i] = {"ErrorCode": "ThrottlingException", "ErrorMessage": "Rate exceeded"}
        taken = iter(put(self, [e for i, e in enumerate(events) if i not in refused]))
        return [refused[i] if i in refused else next(taken) for i in range(len(events))]

    monkeypatch.setattr(EventsBackend, "put_events", put_events)
    return bus


def test_refused_events_are_retried_and_what_stays_refused_is_kept_not_reported_delivered(
    cloud: LocalCloud, healthlake: HealthLakeSimulator, bus_queue: str, throttling_bus: ThrottlingBus
) -> None:
    # Given a previous run, then 12 new resources, and a bus that throttles about 20 % of the entries once and never
    # takes one of the records
    datastore = cloud.config.parameters["HealthLakeDatastoreId"]
    assert run(cloud)["status"] == "SUCCEEDED"
    fresh = healthlake.add_resources(datastore, patients(12))
    throttling_bus.never.add(fresh[4]["id"])
    received(cloud, bus_queue)

    # When the export workflow runs
    described = run(cloud)

    # Then the throttled entries were put again and arrived once each; the one never taken is kept as undelivered
    assert described["status"] == "SUCCEEDED", described
    output = json.loads(described["output"])
    assert output["status"] == "COMPLETED_WITH_ERRORS"
    assert (output["records"], output["published"], output["quarantined"], output["undelivered"]) == (12, 11, 0, 1)
    assert len(throttling_bus.throttled) >= 3  # the never-taken one and at least two throttled once
    ids = Counter(event["detail"]["id"] for event in received(cloud, bus_queue))
    assert ids == Counter(record["id"] for record in fresh if record["id"] != fresh[4]["id"])
    s3 = cloud.client("s3")
    bucket, _, prefix = output["undeliveredLocation"].removeprefix("s3://").partition("/")
    keys = [item["Key"] for item in s3.list_objects_v2(Bucket=bucket, Prefix=prefix)["Contents"]]
    kept = [json.loads(line) for key in keys for line in s3.get_object(Bucket=bucket, Key=key)["Body"].iter_lines()]
    assert [(json.loads(k["entry"]["Detail"])["id"], k["errorCode"]) for k in kept] == [
        (fresh[4]["id"], "ThrottlingException")
    ]
    assert run_state(cloud)["lastRunTime"] == output["triggerTime"]


def test_a_file_that_never_finished_fails_the_run_as_unaccounted_and_keeps_last_run_time(
    cloud: LocalCloud, healthlake: HealthLakeSimulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a previous run, then 6 new resources (two files), and an exported file that cannot be read however often
    # its Map item is retried (offline the Map then goes on, as a Map with a failure tolerance would on AWS)
    assert run(cloud)["status"] == "SUCCEEDED"
    last = run_state(cloud)["lastRunTime"]
    healthlake.add_resources(cloud.config.parameters["HealthLakeDatastoreId"], patients(6))
    get_object = S3Backend.get_object

    def unreadable_second_file(self: S3Backend, bucket_name: str, key_name: str, *args: Any, **kwargs: Any) -> Any:
        if "-FHIR_EXPORT-" in key_name and key_name.endswith("-2-0.ndjson"):
            raise MissingKey(key_name)
        return get_object(self, bucket_name, key_name, *args, **kwargs)

    monkeypatch.setattr(S3Backend, "get_object", unreadable_second_file)

    # When the export workflow runs
    described = run(cloud)

    # Then the check that every record is accounted for fails the run with its named error, and the next run will
    # export the window again
    assert described["status"] == "FAILED", described
    assert described["error"] == "Export.RecordsUnaccounted"
    assert run_state(cloud)["runStatus"] == "FAILED"
    assert run_state(cloud)["lastRunTime"] == last
