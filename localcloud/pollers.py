"""Lambda's SQS event-source mappings and DynamoDB's TTL deletion, as background threads; `Periodic`, the loop of
every thread that acts at an interval (also events.Scheduler's).

moto runs an SQS mapping synchronously inside SendMessage, never delivers a delayed message and never retries. The
poller here does what Lambda's poller does: receive up to BatchSize messages (so DelaySeconds and the visibility
timeout apply), invoke the function synchronously, delete on success, delete all but the reported
`batchItemFailures` when the mapping has ReportBatchItemFailures, and leave everything for a retry after the
visibility timeout when the function raises. Redrive to the dead-letter queue after maxReceiveCount is moto's own
ReceiveMessage behaviour.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import boto3
from moto.awslambda.models import EventSourceMapping, LambdaBackend
from moto.dynamodb.models import dynamodb_backends

from localcloud import atomic
from localcloud.lambdas import FunctionError, LambdaRuntime, Throttled

LOG = logging.getLogger("localcloud.pollers")


class Periodic:
    """Calls `action` every `interval` seconds on a daemon thread from `start` to `stop`; a call that raises is
    logged, and the next one runs as usual."""

    def __init__(self, name: str, interval: float, action: Callable[[], object]) -> None:
        self.interval = interval
        self._action = action
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self._action()
            except Exception:  # one bad round must not stop the thread
                LOG.exception("%s failed", self._thread.name)


_moto_create_event_source_mapping = LambdaBackend.create_event_source_mapping


def create_event_source_mapping(self: LambdaBackend, spec: dict[str, Any]) -> EventSourceMapping:
    """The replacement installed by localcloud/patches.py: moto runs an SQS mapping inside SendMessage (no batching,
    visibility timeout or redrive); SqsPoller runs it instead."""
    esm = _moto_create_event_source_mapping(self, spec)
    from moto.sqs.models import sqs_backends

    for queue in sqs_backends[self.account_id][self.region_name].queues.values():
        queue.lambda_event_source_mappings.pop(esm.function_arn, None)
    return esm


def sqs_record(message: Mapping[str, Any], queue_arn: str, region: str) -> dict[str, Any]:
    """One record of the event Lambda passes to an SQS-triggered function."""
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": message.get("Attributes", {}),
        "messageAttributes": {
            name: {
                "stringValue": value.get("StringValue"),
                "binaryValue": value.get("BinaryValue"),
                "stringListValues": [],
                "binaryListValues": [],
                "dataType": value["DataType"],
            }
            for name, value in message.get("MessageAttributes", {}).items()
        },
        "md5OfBody": hashlib.md5(message["Body"].encode()).hexdigest(),  # noqa: S324 - SQS's own checksum
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": region,
    }


class SqsPoller:
    """Polls every enabled SQS event-source mapping of the account and invokes its function."""

    def __init__(self, runtime: LambdaRuntime, region: str, account_id: str, wait_seconds: float = 0.05) -> None:
        self.runtime = runtime
        self.region = region
        self.account_id = account_id
        self.wait_seconds = wait_seconds
        self._sqs = boto3.client("sqs", region_name=region)
        self._stop = threading.Event()
        self._threads: dict[str, threading.Thread] = {}

    def start(self) -> None:
        self._thread = threading.Thread(target=self._supervise, name="localcloud-sqs", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in [self._thread, *self._threads.values()]:
            thread.join(timeout=5)

    def _supervise(self) -> None:
        """Start one polling thread per SQS mapping, including mappings created after start."""
        from moto.awslambda_simple.models import lambda_simple_backends

        while not self._stop.wait(0.2):
            backend = lambda_simple_backends[self.account_id][self.region]
            for esm in backend.list_event_source_mappings(event_source_arn="", function_name=""):  # all of them
                if esm.event_source_arn.split(":")[2] == "sqs" and esm.uuid not in self._threads:
                    thread = threading.Thread(target=self._poll, args=(esm,), name=f"sqs-{esm.uuid}", daemon=True)
                    self._threads[esm.uuid] = thread
                    thread.start()

    def _poll(self, esm: EventSourceMapping) -> None:
        queue_name = esm.event_source_arn.split(":")[-1]
        queue_url = self._sqs.get_queue_url(QueueName=queue_name)["QueueUrl"]
        while not self._stop.is_set():
            if not esm.enabled:
                self._stop.wait(0.2)
                continue
            try:
                received = self._sqs.receive_message(
                    QueueUrl=queue_url,
                    MaxNumberOfMessages=min(int(esm.batch_size), 10),
                    AttributeNames=["All"],
                    MessageAttributeNames=["All"],
                ).get("Messages", [])
                if received:
                    self._process(esm, queue_url, received)
                else:
                    self._stop.wait(self.wait_seconds)
            except Exception:
                LOG.exception("polling %s failed", queue_name)
                self._stop.wait(0.5)

    def _process(self, esm: EventSourceMapping, queue_url: str, messages: Sequence[Mapping[str, Any]]) -> None:
        event = {"Records": [sqs_record(m, esm.event_source_arn, self.region) for m in messages]}
        try:
            result = self.runtime.invoke(esm.function_arn, event)
        except (FunctionError, Throttled):
            return  # every message becomes visible again after the visibility timeout
        failed: set[str] = set()
        if "ReportBatchItemFailures" in (esm.function_response_types or []) and isinstance(result, dict):
            failed = {f["itemIdentifier"] for f in result.get("batchItemFailures") or []}
        done = [m for m in messages if m["MessageId"] not in failed]
        for start in range(0, len(done), 10):
            self._sqs.delete_message_batch(
                QueueUrl=queue_url,
                Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done[start:][:10])],
            )


class TtlSweeper(Periodic):
    """Deletes DynamoDB items whose TTL attribute (epoch seconds) has passed, in tables with TTL enabled.

    It reads moto's tables in memory under the backend's lock (localcloud.atomic), instead of paging through Scan
    calls: at 2,000 items a sweep through the API took 2.2 s, every second, and failed now and then with
    "dictionary changed size during iteration" while the functions wrote."""

    def __init__(self, region: str, account_id: str, interval: float = 1.0) -> None:
        super().__init__("localcloud-ttl", interval, self.sweep)
        self.region = region
        self.account_id = account_id

    def sweep(self) -> int:
        """Delete every expired item now; return how many were deleted."""
        backend = dynamodb_backends[self.account_id][self.region]
        now = time.time()
        deleted = 0
        for table in list(backend.tables.values()):
            if table.ttl.get("TimeToLiveStatus") != "ENABLED":
                continue
            attribute = table.ttl["AttributeName"]
            key_names = [k for k in (table.hash_key_attr, table.range_key_attr) if k]
            with atomic.lock(backend):
                expired = [
                    {name: item.attrs[name].to_json() for name in key_names}
                    for item in table.all_items()
                    if _expired(item.attrs.get(attribute), now)
                ]
                for key in expired:
                    backend.delete_item(table.name, key)
            deleted += len(expired)
        return deleted


def _expired(value: Any, now: float) -> bool:
    """A TTL attribute is a Number of epoch seconds; any other type never expires (as on DynamoDB)."""
    if value is None or value.type != "N":
        return False
    try:
        return float(value.value) < now
    except ValueError:
        return False
