"""The HealthLake export workflow's logic: the run lock, the FHIR `$export` kick-off, the SQS-delay status checks, the
manifest, and publishing the exported records as events.

The lock is one item, `RUN {runStatus, lastRunTime, executionArn, triggerTime}`, taken with one conditional write.
A holder that is no longer running (timed out, aborted, crashed) is replaced on take-over; the status-change rule
also releases it. The waiting task's token travels in the SQS messages; every check either heartbeats and re-queues
itself with DelaySeconds, or ends the task with SendTaskSuccess/SendTaskFailure.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from email.message import Message
from typing import Any
from urllib.parse import urlencode

import boto3
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.exceptions import ClientError

from shared.adapters import HEALTHLAKE, Outcome, healthlake_job_id
from shared.aws import client, conditionally, error_code, table
from shared.callback import send_heartbeat, send_outcome
from shared.eventbus import MAX_BYTES_PER_CALL, entry_size, put_events
from shared.exceptions import ExportBusyError, ExportNotStartedError, ExportRefusedError
from shared.observability import logger
from shared.settings import ExportSettings

RUN = "RUN"
RUNNING, FAILED = "RUNNING", "FAILED"
EXPORT_SOURCE = "callback-kit.export"
PUBLISH_CHUNK = 100  # records read ahead of each PutEvents round (memory stays flat whatever the file size)


# ---- run lock ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Lock:
    acquired: bool
    last_run_time: str | None  # the previous successful run's trigger time: the export's `_since`
    holder: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"acquired": self.acquired, "lastRunTime": self.last_run_time, "holder": self.holder}


class RunLock:
    def __init__(self, table_name: str) -> None:
        self._table = table(table_name)

    def take(self, execution_arn: str, trigger_time: str) -> Lock:
        """Take the lock unless a running execution holds it; a retried take by the same execution succeeds."""
        claimed = self._claim(execution_arn, trigger_time, "attribute_not_exists(pk) OR runStatus <> :running", {})
        if claimed is not None:
            return Lock(True, claimed.get("lastRunTime"))
        holder = self._table.get_item(Key={"pk": RUN}, ConsistentRead=True).get("Item", {})
        holder_arn = str(holder.get("executionArn", ""))
        if holder_arn == execution_arn:
            return Lock(True, holder.get("lastRunTime"))
        if holder_arn and not _is_running(holder_arn):
            logger.warning("stale export lock taken over", extra={"holder": holder_arn})
            claimed = self._claim(execution_arn, trigger_time, "executionArn = :holder", {":holder": holder_arn})
            if claimed is not None:
                return Lock(True, claimed.get("lastRunTime"))
        return Lock(False, holder.get("lastRunTime"), holder_arn or None)

    def release(self, execution_arn: str) -> bool:
        """Mark this execution's run FAILED if it still holds the lock (lastRunTime stays, so the next run
        re-exports the gap). The workflow's own bookkeeping (MarkCompleted / MarkFailed) covers normal ends; this is
        for executions that died without it."""
        released = conditionally(
            lambda: self._table.update_item(
                Key={"pk": RUN},
                UpdateExpression="SET runStatus = :failed",
                ConditionExpression="executionArn = :me AND runStatus = :running",
                ExpressionAttributeValues={":failed": FAILED, ":me": execution_arn, ":running": RUNNING},
            )
        )
        return released is not None  # None: not (or no longer) the holder, nothing to release

    def _claim(
        self, execution_arn: str, trigger_time: str, condition: str, values: dict[str, Any]
    ) -> dict[str, Any] | None:
        """The RUN item after taking it for this execution, or None if `condition` (nor "it is ours") held."""
        claimed = conditionally(
            lambda: self._table.update_item(
                Key={"pk": RUN},
                UpdateExpression="SET runStatus = :running, executionArn = :me, triggerTime = :trigger",
                ConditionExpression=f"({condition}) OR executionArn = :me",
                ExpressionAttributeValues={
                    ":running": RUNNING,
                    ":me": execution_arn,
                    ":trigger": trigger_time,
                    **values,
                },
                ReturnValues="ALL_NEW",
            )
        )
        return None if claimed is None else dict(claimed["Attributes"])


def _is_running(execution_arn: str) -> bool:
    try:
        status = client("stepfunctions").describe_execution(executionArn=execution_arn)["status"]
    except ClientError as exc:
        if error_code(exc) == "ExecutionDoesNotExist":
            return False
        raise
    return bool(status == "RUNNING")


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


# ---- kick-off and checks -----------------------------------------------------------------------------------------


def start_export(settings: ExportSettings, execution_arn: str, job_name: str, since: str | None) -> str:
    """Kick off the data store's FHIR `$export` (at most once per execution); return the export job id.

    The job is named after the execution, so a redelivered start message finds it (the stored id, or HealthLake's
    list of jobs by name if the first delivery died between the kick-off and storing its answer) instead of starting
    a second export; two deliveries at the same instant are kept apart by HealthLake's one-export-at-a-time rule.
    """
    runs = table(settings.table_name)
    key = {"pk": f"EXPORT#{execution_arn}"}
    existing = runs.get_item(Key=key, ConsistentRead=True).get("Item")
    if existing:
        return str(existing["jobId"])
    name = job_name[:64]
    job_id = _export_named(settings.datastore_id, name) or _kick_off(settings, name, since)
    runs.put_item(Item={**key, "jobId": job_id, "startedAt": _now(), "since": since or ""})
    logger.info("export started", extra={"jobId": job_id, "since": since})
    return job_id


def _export_named(datastore_id: str, name: str) -> str | None:
    listed = client("healthlake").list_fhir_export_jobs(DatastoreId=datastore_id, JobName=name)
    jobs = listed.get("ExportJobPropertiesList", [])
    return str(jobs[0]["JobId"]) if jobs else None


def _kick_off(settings: ExportSettings, name: str, since: str | None) -> str:
    endpoint = client("healthlake").describe_fhir_datastore(DatastoreId=settings.datastore_id)["DatastoreProperties"][
        "DatastoreEndpoint"
    ]
    query = {"_outputFormat": "application/fhir+ndjson", **({"_since": since} if since else {})}
    body = {
        "JobName": name,
        "OutputDataConfig": {
            "S3Configuration": {"S3Uri": f"s3://{settings.bucket}/exports/", "KmsKeyId": settings.kms_key_id}
        },
        "DataAccessRoleArn": settings.data_access_role_arn,
    }
    status, headers, text = _signed_post(f"{endpoint.rstrip('/')}/$export?{urlencode(query)}", body)
    location = headers.get("Content-Location")
    if status == 429:
        raise ExportBusyError(f"HealthLake runs another export: {text[:500]}")
    if 400 <= status < 500:
        raise ExportRefusedError(f"$export answered {status}: {text[:1000]}")
    if status != 202 or not location:
        raise ExportNotStartedError(f"$export answered {status}: {text[:500]}")
    return str(location).rstrip("/").rsplit("/", 1)[-1]


def begin_export(settings: ExportSettings, task_token: str, execution_arn: str, name: str, since: str | None) -> str:
    """Start the export and schedule its first check. While HealthLake runs another export (one at a time), keep the
    waiting task alive and try again after the re-check delay."""
    try:
        job_id = start_export(settings, execution_arn, name, since)
    except ExportRefusedError as exc:  # retrying cannot help (bad role, key, permissions): fail the run, named
        refused = Outcome("healthlake", execution_arn, "EXPORT_REFUSED", False, {"message": str(exc)})
        return send_outcome(task_token, refused).value
    except ExportBusyError:
        if not send_heartbeat(task_token, f"export of {execution_arn}"):
            return "CLOSED"
        message = {"action": "start", "taskToken": task_token, "executionArn": execution_arn}
        client("sqs").send_message(
            QueueUrl=settings.queue_url,
            MessageBody=json.dumps({**message, "executionName": name, "lastRunTime": since}),
            DelaySeconds=settings.recheck_delay_seconds,
        )
        return "WAITING"
    # Also after a redelivered start (the first delivery may have died before queueing its check): two check chains
    # for one job are harmless, each heartbeat is valid and the second SendTaskSuccess is acknowledged as closed.
    enqueue_check(settings, task_token, job_id)
    return "STARTED"


def _signed_post(url: str, body: dict[str, Any]) -> tuple[int, Message, str]:
    """A SigV4-signed FHIR request (service `healthlake`), as HealthLake's FHIR REST API requires."""
    session = boto3.Session()
    credentials = session.get_credentials()
    if credentials is None:
        raise ExportNotStartedError("no AWS credentials to sign the $export request")
    request = AWSRequest(
        method="POST",
        url=url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/fhir+json", "Prefer": "respond-async"},
    )
    SigV4Auth(credentials.get_frozen_credentials(), "healthlake", session.region_name or "us-east-1").add_auth(request)
    prepared = request.prepare()
    outgoing = urllib.request.Request(  # noqa: S310 - the data store's own https endpoint
        prepared.url, data=prepared.body, headers=dict(prepared.headers), method="POST"
    )
    try:
        with urllib.request.urlopen(outgoing, timeout=20) as response:  # noqa: S310
            return response.status, response.headers, response.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read().decode(errors="replace")


def check_export(settings: ExportSettings, task_token: str, job_id: str) -> str:
    """Look at the export once: heartbeat and re-check later, or end the waiting task. Returns what was done."""
    outcome = HEALTHLAKE.current(healthlake_job_id(settings.datastore_id, job_id))
    if outcome is None:
        if not send_heartbeat(task_token, job_id):
            return "CLOSED"  # the task is gone (timed out, stopped): stop checking
        enqueue_check(settings, task_token, job_id)
        return "RECHECK"
    if outcome.succeeded:
        files = list(_exported_files(settings.bucket, outcome.detail))
        manifest_key = f"manifests/{job_id}.json"
        client("s3").put_object(
            Bucket=settings.bucket,
            Key=manifest_key,
            Body=json.dumps([{"bucket": settings.bucket, "key": key} for key in files]).encode(),
            ContentType="application/json",
        )
        detail = {"bucket": settings.bucket, "manifestKey": manifest_key, "fileCount": len(files)}
        outcome = Outcome(outcome.service, outcome.job_id, outcome.status, True, detail)
    return send_outcome(task_token, outcome).value


def _exported_files(bucket: str, job: dict[str, Any]) -> Iterator[str]:
    """The job's NDJSON objects. Describe reports either the job folder or the requested prefix; both hold it."""
    uri = job["OutputDataConfig"]["S3Configuration"]["S3Uri"]
    prefix = uri.removeprefix(f"s3://{bucket}/")
    marker = f"-FHIR_EXPORT-{job['JobId']}/"
    for page in client("s3").get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            key = item["Key"]
            if marker in key and key.endswith(".ndjson") and "/OperationOutcome/" not in key:
                yield key


def enqueue_check(settings: ExportSettings, task_token: str, job_id: str) -> None:
    client("sqs").send_message(
        QueueUrl=settings.queue_url,
        MessageBody=json.dumps({"action": "check", "taskToken": task_token, "jobId": job_id}),
        DelaySeconds=settings.recheck_delay_seconds,
    )


# ---- fan-out ----------------------------------------------------------------------------------------------------


def publish_records(bucket: str, key: str, bus: str, detail_type: str) -> int:
    """Stream one NDJSON object and put each record on the bus; return how many were published.

    A record too large for one event (256 KB) is published as a reference to its line in the object instead, so
    consumers still get every record and can fetch the large ones."""
    body = client("s3").get_object(Bucket=bucket, Key=key)["Body"]
    published = 0
    chunk: list[dict[str, Any]] = []
    for number, line in enumerate(body.iter_lines(), start=1):
        if not line.strip():
            continue
        record = json.loads(line)
        entry = {
            "Source": EXPORT_SOURCE,
            "DetailType": detail_type,
            "Detail": json.dumps(record, separators=(",", ":")),
            "Resources": [],
            "EventBusName": bus,
        }
        if entry_size(entry) > MAX_BYTES_PER_CALL:
            location = {"bucket": bucket, "key": key, "line": number}
            reference = {"resourceType": record.get("resourceType"), "id": record.get("id"), "location": location}
            entry["Detail"] = json.dumps({**reference, "oversized": True}, separators=(",", ":"))
        chunk.append(entry)
        if len(chunk) == PUBLISH_CHUNK:
            published += put_events(chunk)
            chunk = []
    if chunk:
        published += put_events(chunk)
    return published
