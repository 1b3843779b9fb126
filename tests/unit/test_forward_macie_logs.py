"""Relaying Macie's job log to EventBridge: every log event of a subscription batch reaches the resume function's
rules exactly once, in PutEvents calls within EventBridge's limits, retrying only what PutEvents refuses.

The forward function runs as Lambda calls it, on moto's EventBridge; the resume function's rules from template.yaml
deliver to a queue standing in for the function. PutEvents refusing some entries (which EventBridge does, in a 200
response with FailedEntryCount) is played by a wrapper around moto's client.
"""

from __future__ import annotations

import importlib
import json
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest
from botocore.stub import Stubber

from shared.exceptions import EventsNotDeliveredError
from tests.unit.payloads import logs_subscription_event, macie_job, macie_log_events
from tests.unit.support import ACCOUNT, Aws, EventBus, invoke

JOB_ID = "85a55dc0fa6ed0be5939d0408f2e1c7b"
MACIE_SOURCE, MACIE_DETAIL_TYPE = "callback-kit.macie", "Macie Classification Job Log Event"
# A job over many buckets that Macie could not read, then its completion: what the subscription filter lets through.
MANY_BUCKETS_DENIED = ["BUCKET_ACCESS_DENIED"] * 22 + ["JOB_COMPLETED"]


class Events:
    """The functions' EventBridge client (moto), recording every PutEvents call; `refuse(entry, nth)` may name an
    error code for the nth time an entry is put, and that entry is then refused as EventBridge refuses one: not
    put, reported with ErrorCode in a 200 response that counts it in FailedEntryCount."""

    def __init__(self, target: Any, refuse: Callable[[dict[str, Any], int], str | None]) -> None:
        self._target = target
        self._refuse = refuse
        self.calls: list[list[dict[str, Any]]] = []
        self.puts: Counter[str] = Counter()  # entry (its Detail) -> how many times it was put

    def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, Any]:  # keyword spelled as the API's
        self.calls.append(list(Entries))
        refusals: list[str | None] = []
        for entry in Entries:
            self.puts[entry["Detail"]] += 1
            refusals.append(self._refuse(entry, self.puts[entry["Detail"]]))
        accepted = [entry for entry, code in zip(Entries, refusals, strict=True) if code is None]
        results = iter(self._target.put_events(Entries=accepted)["Entries"] if accepted else [])
        return {
            "FailedEntryCount": sum(code is not None for code in refusals),
            "Entries": [
                next(results) if code is None else {"ErrorCode": code, "ErrorMessage": f"{code} (simulated)"}
                for code in refusals
            ],
        }


@pytest.fixture
def events(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Events]:
    """`events(refuse=...)`: the forward function's EventBridge client, recording its calls, refusing as told."""

    def install(refuse: Callable[[dict[str, Any], int], str | None] = lambda entry, nth: None) -> Events:
        eventbus = importlib.import_module("shared.eventbus")
        spy = Events(importlib.import_module("shared.aws").client("events"), refuse)
        real_client = eventbus.client
        monkeypatch.setattr(eventbus, "client", lambda service: spy if service == "events" else real_client(service))
        return spy

    return install


@pytest.fixture
def backoff(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The delays the forward function sleeps between PutEvents rounds (recorded, not slept)."""
    delays: list[float] = []
    monkeypatch.setattr(importlib.import_module("shared.eventbus"), "time", SimpleNamespace(sleep=delays.append))
    return delays


@pytest.fixture
def confirmations(stubbed: Callable[[str], Stubber]) -> Callable[[list[dict[str, Any]]], None]:
    """The resume function confirms every relayed Macie event through DescribeClassificationJob (its source can be
    forged): answer as Macie does for the job that logged them (COMPLETE, with errors if it logged any)."""

    def confirm(delivered: list[dict[str, Any]]) -> None:
        errors = any(e["detail"]["eventType"] not in {"JOB_COMPLETED", "JOB_CANCELLED"} for e in delivered)
        for event in delivered:
            job_id = event["detail"]["jobId"]
            status = "CANCELLED" if event["detail"]["eventType"] == "JOB_CANCELLED" else "COMPLETE"
            answer = macie_job(job_id, status, "ERROR" if errors else "NONE")
            stubbed("macie2").add_response("describe_classification_job", answer, {"jobId": job_id})

    return confirm


def messages_of(log_events: list[dict[str, Any]]) -> Counter[str]:
    return Counter(json.dumps(json.loads(e["message"]), sort_keys=True) for e in log_events)


def details_of(delivered: list[dict[str, Any]]) -> Counter[str]:
    return Counter(json.dumps(event["detail"], sort_keys=True) for event in delivered)


# ----------------------------------------------------------------------------------------------------------------
# Batches
# ----------------------------------------------------------------------------------------------------------------
def test_a_batch_of_23_log_events_is_put_in_three_calls_and_each_reaches_the_rules_once(
    aws: Aws, events: Callable[..., Events], resume_rules: EventBus
) -> None:
    # Given a subscription batch of 23 log events of one Macie job
    log_events = macie_log_events(JOB_ID, MANY_BUCKETS_DENIED)
    spy = events()

    # When the forward function gets it
    result = invoke("forward_macie_logs", logs_subscription_event(log_events, log_stream=JOB_ID))

    # Then it puts them in log order in three PutEvents calls of at most ten entries
    assert result == {"forwarded": 23}
    assert [len(call) for call in spy.calls] == [10, 10, 3]
    put = [entry for call in spy.calls for entry in call]
    assert [json.loads(entry["Detail"]) for entry in put] == [json.loads(e["message"]) for e in log_events]
    # and the resume function's rules deliver each of them once, under the relay's source and detail-type, at the
    # time Macie logged it
    delivered = resume_rules.delivered()
    assert details_of(delivered) == messages_of(log_events)
    assert {(e["source"], e["detail-type"]) for e in delivered} == {(MACIE_SOURCE, MACIE_DETAIL_TYPE)}
    logged_at = {datetime.fromtimestamp(e["timestamp"] / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ") for e in log_events}
    assert {e["time"] for e in delivered} == logged_at


def test_a_relayed_log_event_is_what_the_resume_function_reads_as_the_end_of_the_job(
    aws: Aws, resume_rules: EventBus, confirmations: Callable[[list[dict[str, Any]]], None]
) -> None:
    # Given the log events of a job that could not read a bucket and then completed
    log_events = macie_log_events(JOB_ID, ["BUCKET_ACCESS_DENIED", "JOB_COMPLETED"])

    # When they are forwarded, and the rules deliver them
    invoke("forward_macie_logs", logs_subscription_event(log_events, log_stream=JOB_ID))
    delivered = resume_rules.delivered()
    confirmations(delivered)

    # Then the resume function reads each as the end of the job, with the log event's fields as detail
    outcome_of = importlib.import_module("shared.callback.adapters").outcome_of
    outcomes = {event["detail"]["eventType"]: outcome_of(event) for event in delivered}
    assert set(outcomes) == {"BUCKET_ACCESS_DENIED", "JOB_COMPLETED"}
    assert outcomes["BUCKET_ACCESS_DENIED"].error == "Macie.BUCKET_ACCESS_DENIED"
    assert outcomes["BUCKET_ACCESS_DENIED"].detail["affectedAccount"] == ACCOUNT
    assert {outcome.job_id for outcome in outcomes.values()} == {JOB_ID}


# ----------------------------------------------------------------------------------------------------------------
# Refused entries
# ----------------------------------------------------------------------------------------------------------------
def test_entries_putevents_refuses_are_retried_alone_and_nothing_is_lost_or_duplicated(
    aws: Aws, events: Callable[..., Events], backoff: list[float], resume_rules: EventBus
) -> None:
    # Given 23 log events, and EventBridge refusing the 4th and the 17th the first time they are put
    log_events = macie_log_events(JOB_ID, MANY_BUCKETS_DENIED)
    refused = {log_events[3]["message"], log_events[16]["message"]}

    def refuse(entry: dict[str, Any], nth: int) -> str | None:
        return (
            "ThrottlingException"
            if nth == 1 and entry["Detail"] in {json.dumps(json.loads(m)) for m in refused}
            else None
        )

    spy = events(refuse)

    # When the forward function gets the batch
    result = invoke("forward_macie_logs", logs_subscription_event(log_events, log_stream=JOB_ID))

    # Then only the two refused entries are put again, in one more call after a short backoff
    assert result == {"forwarded": 23}
    assert [len(call) for call in spy.calls] == [10, 10, 3, 2]
    assert {entry["Detail"] for entry in spy.calls[-1]} == {json.dumps(json.loads(m)) for m in refused}
    assert len(backoff) == 1
    assert 0 < backoff[0] <= 0.15
    # and every log event reaches the rules exactly once
    assert details_of(resume_rules.delivered()) == messages_of(log_events)


def test_entries_refused_on_every_attempt_fail_the_invocation_with_a_named_error(
    aws: Aws, events: Callable[..., Events], backoff: list[float], resume_rules: EventBus
) -> None:
    # Given 23 log events, and EventBridge refusing one of them every time
    log_events = macie_log_events(JOB_ID, MANY_BUCKETS_DENIED)
    stuck = json.dumps(json.loads(log_events[5]["message"]))
    spy = events(lambda entry, nth: "InternalFailure" if entry["Detail"] == stuck else None)

    # When the forward function gets the batch
    with pytest.raises(EventsNotDeliveredError) as failed:
        invoke("forward_macie_logs", logs_subscription_event(log_events, log_stream=JOB_ID))

    # Then the invocation fails with EventsNotDeliveredError (Lambda retries it, then its on-failure destination
    # takes the batch), saying how many were refused
    assert "1 of 23" in str(failed.value)
    # after five attempts for the refused entry only, with growing backoff in between
    assert spy.puts[stuck] == 5
    assert all(count == 1 for detail, count in spy.puts.items() if detail != stuck)
    assert len(backoff) == 4
    for attempt, delay in enumerate(backoff):
        assert 0.1 * 2**attempt * 0.5 <= delay <= 0.1 * 2**attempt * 1.5
    # and the others reached the rules once each, so a retried invocation only duplicates what was put before
    assert details_of(resume_rules.delivered()) == messages_of(log_events) - messages_of([log_events[5]])


# ----------------------------------------------------------------------------------------------------------------
# EventBridge's limits: 10 entries and 256 KB per PutEvents call
# ----------------------------------------------------------------------------------------------------------------
LIMIT_BYTES = 256 * 1024


def size(entry: dict[str, Any]) -> int:
    """An entry's size as EventBridge documents it: Time counts 14 bytes; Source, DetailType, Detail and each
    Resources entry count their UTF-8 bytes."""
    fields = [entry["Source"], entry["DetailType"], entry["Detail"], *entry.get("Resources", [])]
    return 14 + sum(len(field.encode("utf-8")) for field in fields)


def entry_of(size_bytes: int, fill: str = "x") -> dict[str, Any]:
    """A relay entry of exactly `size_bytes` as EventBridge counts them (fill: a one- or two-byte character)."""
    entry = {
        "Source": MACIE_SOURCE,
        "DetailType": MACIE_DETAIL_TYPE,
        "Detail": json.dumps({"jobId": JOB_ID, "pad": ""}),
        "Time": datetime(2026, 1, 15, tzinfo=UTC),
        "Resources": [],
    }
    room = size_bytes - size(entry)
    per_char = len(fill.encode("utf-8"))
    assert room >= 0 and room % per_char == 0
    entry["Detail"] = json.dumps({"jobId": JOB_ID, "pad": fill * (room // per_char)}, ensure_ascii=False)
    assert size(entry) == size_bytes
    return entry


def batches() -> Callable[[list[dict[str, Any]]], list[list[dict[str, Any]]]]:
    return importlib.import_module("shared.eventbus").batches  # type: ignore[no-any-return]


def test_entries_that_fill_256_kb_exactly_go_in_one_call_and_one_byte_more_in_two(aws: Aws) -> None:
    # Given four entries that add up to exactly 256 KB, and the same with one byte more
    exactly = [entry_of(LIMIT_BYTES // 4) for _ in range(4)]
    over = [*exactly[:3], entry_of(LIMIT_BYTES // 4 + 1)]

    # When they are split into PutEvents calls
    # Then the first fit one call, the second need two, and no entry is lost or reordered
    assert [len(call) for call in batches()(exactly)] == [4]
    assert [len(call) for call in batches()(over)] == [3, 1]
    assert [entry for call in batches()(over) for entry in call] == over


def test_large_entries_are_split_by_size_before_count(aws: Aws) -> None:
    # Given seven entries of 100 KB (each call could take ten by count, but only two by size)
    entries = [entry_of(100 * 1024) for _ in range(7)]

    # When they are split into PutEvents calls
    calls = batches()(entries)

    # Then no call exceeds 256 KB, every call is as full as the limit allows, and the order is kept
    assert [len(call) for call in calls] == [2, 2, 2, 1]
    assert all(sum(size(entry) for entry in call) <= LIMIT_BYTES for call in calls)
    assert [entry for call in calls for entry in call] == entries


def test_the_size_limit_counts_bytes_not_characters(aws: Aws) -> None:
    # Given two entries of 100,000 characters each, most of them two-byte "é" (about 195 KB each in UTF-8)
    entries = [entry_of(200_000 - 200_000 % 2, fill="é") for _ in range(2)]
    assert sum(len(entry["Detail"]) for entry in entries) < LIMIT_BYTES  # fits by characters

    # When they are split into PutEvents calls
    calls = batches()(entries)

    # Then each goes in its own call (together they are over 256 KB)
    assert [len(call) for call in calls] == [1, 1]


def test_many_small_entries_are_split_by_count(aws: Aws) -> None:
    # Given 31 small entries
    entries = [entry_of(300) for _ in range(31)]

    # When they are split into PutEvents calls
    calls = batches()(entries)

    # Then each call holds at most ten, in order
    assert [len(call) for call in calls] == [10, 10, 10, 1]
    assert [entry for call in calls for entry in call] == entries


def test_large_log_events_are_put_within_the_size_limit(
    aws: Aws, events: Callable[..., Events], resume_rules: EventBus
) -> None:
    # Given five Macie log events of about 90 KB each (a long description)
    log_events = macie_log_events(JOB_ID, ["BUCKET_ACCESS_DENIED"] * 5)
    for n, log_event in enumerate(log_events):
        message = json.loads(log_event["message"])
        message["description"] = f"{n}: " + "Macie could not read the bucket. " * 2800
        log_event["message"] = json.dumps(message)
    spy = events()

    # When the forward function gets them
    result = invoke("forward_macie_logs", logs_subscription_event(log_events, log_stream=JOB_ID))

    # Then no PutEvents call exceeds 256 KB, and all five reach the rules once
    assert result == {"forwarded": 5}
    assert [len(call) for call in spy.calls] == [2, 2, 1]
    assert all(sum(size(entry) for entry in call) <= LIMIT_BYTES for call in spy.calls)
    assert details_of(resume_rules.delivered()) == messages_of(log_events)
