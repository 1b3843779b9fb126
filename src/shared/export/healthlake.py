"""The export itself: the FHIR `$export` kick-off and the SQS-delay status checks. The waiting task's token travels in
the SQS messages; every check either heartbeats and re-queues itself with DelaySeconds, or ends the task with
SendTaskSuccess/SendTaskFailure (with the manifest of the exported files as output)."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import replace
from email.message import Message
from typing import Any
from urllib.parse import urlencode

import boto3
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest

from shared.aws import client, table
from shared.callback.adapters import HEALTHLAKE, healthlake_job_id
from shared.exceptions import ExportBusyError, ExportNotStartedError, ExportRefusedError
from shared.export.messages import Check, Start
from shared.observability import logger
from shared.outcome import Outcome
from shared.settings import ExportSettings
from shared.waits import send_heartbeat, send_outcome


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
        refused = Outcome(
            HEALTHLAKE.service, execution_arn, "EXPORT_REFUSED", False, {"message": str(exc)}, HEALTHLAKE.name
        )
        return send_outcome(task_token, refused).value
    except ExportBusyError:
        if not send_heartbeat(task_token, f"export of {execution_arn}"):
            return "CLOSED"
        again = Start(
            action="start", task_token=task_token, execution_arn=execution_arn, execution_name=name, last_run_time=since
        )
        client("sqs").send_message(
            QueueUrl=settings.queue_url, MessageBody=again.body(), DelaySeconds=settings.recheck_delay_seconds
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
        outcome = replace(outcome, detail=detail)
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
        MessageBody=Check(action="check", task_token=task_token, job_id=job_id).body(),
        DelaySeconds=settings.recheck_delay_seconds,
    )


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
