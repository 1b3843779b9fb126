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

import functools
import hashlib
import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import boto3
from moto.awslambda.models import EventSourceMapping, LambdaBackend
from moto.dynamodb.models import DynamoDBBackend, dynamodb_backends
from moto.dynamodb.models.dynamo_type import Item
from moto.dynamodb.models.table import Table

from localcloud.fixes import atomic
from localcloud.runtime.lambdas import FunctionError, LambdaRuntime, Throttled

LOG = logging.getLogger("localcloud.fixes.pollers")


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
    """The replacement installed by localcloud/fixes/patches.py: moto runs an SQS mapping inside SendMessage (no
    batching, visibility timeout or redrive); SqsPoller runs it instead."""
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


class ExpiryIndex:
    """When each item written with a TTL attribute expires, soonest first: the TTL sweeper's work list.

    Every PutItem and UpdateItem (also inside BatchWriteItem and TransactWriteItems) notes the item it wrote, under
    the DynamoDB backend's lock (`noting_expiry`, installed by localcloud/fixes/patches.py). An entry is a hint, not the
    truth: the sweeper reads the item again before it deletes it, so an entry of an item since deleted, or written
    again with a later TTL (which noted an entry of its own), is dropped. PartiQL writes are not noted."""

    def __init__(self) -> None:
        self._due: list[tuple[float, int, str, dict[str, Any]]] = []  # (expires at, tie-breaker, table, key)
        self._count = itertools.count()
        self.seeded: dict[str, str] = {}  # table name -> TTL attribute whose items are all in the index

    def note(self, table: Table, item: Item) -> None:
        attribute = self.seeded.get(table.name)
        expires_at = _epoch_seconds(item.attrs.get(attribute)) if attribute else None
        if expires_at is not None:
            key = {name: item.attrs[name].to_json() for name in (table.hash_key_attr, table.range_key_attr) if name}
            heapq.heappush(self._due, (expires_at, next(self._count), table.name, key))

    def pop_due(self, now: float) -> list[tuple[str, dict[str, Any]]]:
        due = []
        while self._due and self._due[0][0] < now:
            _, _, table_name, key = heapq.heappop(self._due)
            due.append((table_name, key))
        return due


def expiries(backend: DynamoDBBackend) -> ExpiryIndex:
    """The expiry index of a DynamoDB backend (one per account and Region, as its tables)."""
    return backend.__dict__.setdefault("localcloud_expiries", ExpiryIndex())  # type: ignore[no-any-return]


def noting_expiry(write: Callable[..., Item]) -> Callable[..., Item]:
    """moto's `put_item` or `update_item` of DynamoDBBackend (both take the table's name first, and return the item
    as written), noting the item in the backend's expiry index."""

    @functools.wraps(write)
    def noted(self: DynamoDBBackend, table_name: str, *args: Any, **kwargs: Any) -> Item:
        item = write(self, table_name, *args, **kwargs)
        expiries(self).note(self.get_table(table_name), item)
        return item

    return noted


class TtlSweeper(Periodic):
    """Deletes DynamoDB items whose TTL attribute (epoch seconds) has passed, in tables with TTL enabled.

    It works from the backend's ExpiryIndex: a sweep reads only the items due, under the backend's lock
    (localcloud.fixes.atomic). A table whose TTL it finds newly enabled is read whole once, to index the items written
    before. It used to read every item of every such table each second, holding the lock every DynamoDB call needs:
    15 ms a sweep at 10,000 items (the status log of about 450 documents tasks). Through the API (Scan) a sweep of
    2,000 items had taken 2.2 s, and failed now and then with "dictionary changed size during iteration"."""

    def __init__(self, region: str, account_id: str, interval: float = 1.0) -> None:
        super().__init__("localcloud-ttl", interval, self.sweep)
        self.region = region
        self.account_id = account_id

    def sweep(self) -> int:
        """Delete every expired item now; return how many were deleted."""
        backend = dynamodb_backends[self.account_id][self.region]
        index = expiries(backend)
        now = time.time()
        deleted = 0
        with atomic.lock(backend):
            self._index_newly_enabled(backend, index)
            for table_name, key in index.pop_due(now):
                table = backend.tables.get(table_name)
                attribute = index.seeded.get(table_name)
                if table is None or attribute is None:
                    continue  # the table was deleted, or its TTL turned off
                item = backend.get_item(table_name, key)
                expires_at = _epoch_seconds(item.attrs.get(attribute)) if item is not None else None
                if expires_at is not None and expires_at < now:
                    backend.delete_item(table_name, key)
                    deleted += 1
        return deleted

    @staticmethod
    def _index_newly_enabled(backend: DynamoDBBackend, index: ExpiryIndex) -> None:
        for table in list(backend.tables.values()):  # CreateTable does not take the lock
            enabled = table.ttl.get("TimeToLiveStatus") == "ENABLED"
            attribute = table.ttl.get("AttributeName") if enabled else None
            if attribute is None:
                index.seeded.pop(table.name, None)
            elif index.seeded.get(table.name) != attribute:
                index.seeded[table.name] = attribute
                for item in table.all_items():
                    index.note(table, item)


def _epoch_seconds(value: Any) -> float | None:
    """A TTL attribute's time: a Number of epoch seconds; any other type never expires (as on DynamoDB)."""
    if value is None or value.type != "N":
        return None
    try:
        return float(value.value)
    except ValueError:
        return None
