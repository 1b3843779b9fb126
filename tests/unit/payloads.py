"""What the services write and answer, and what Lambda hands the functions: localcloud's shapes (the same the
simulators and the offline Lambda runtime produce), filled with this suite's fixed values for botocore's Stubber
and the handlers."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import uuid
from datetime import UTC, datetime
from typing import Any

from localcloud.fixes.logs import subscription_payload
from localcloud.fixes.pollers import sqs_record
from localcloud.simulators.macie import DESCRIPTIONS, FINDING_TEXTS, LOG_GROUP
from localcloud.simulators.shapes import (
    classification_job,
    data_automation_status,
    fhir_export_job,
    macie_log_message,
    sensitive_data_finding,
    text_translation_job,
    translate_details,
    translation_job_prefix,
    write_translations,
)
from tests.unit import support
from tests.unit.support import ACCOUNT, REGION, STACK

SUBMITTED_AT = datetime(2026, 1, 15, 10, 30, 5, tzinfo=UTC)
ENDED_AT = datetime(2026, 1, 15, 10, 42, 7, tzinfo=UTC)


def logs_subscription_event(log_events: list[dict[str, Any]], log_stream: str) -> dict[str, Any]:
    """What the Macie job log's subscription hands the forward function."""
    filter_name = f"{STACK}-ForwardMacieLogsFunctionMacieJobLog-UNITTEST"
    return subscription_payload(ACCOUNT, LOG_GROUP, log_stream, filter_name, log_events)


def logs_data(event: dict[str, Any]) -> dict[str, Any]:
    """The decoded payload of a CloudWatch Logs subscription event."""
    return dict(json.loads(gzip.decompress(base64.b64decode(event["awslogs"]["data"]))))


def macie_log_events(job_id: str, event_types: list[str], start_ms: int = 1_768_473_600_000) -> list[dict[str, Any]]:
    """Log events of a Macie classification job (one JSON message each), a second apart."""
    events = []
    for n, event_type in enumerate(event_types):
        at = datetime.fromtimestamp((start_ms + n * 1000) / 1000, UTC)
        extra: dict[str, Any] = {}
        if event_type.startswith("BUCKET_"):
            bucket = {"type": "S3_BUCKET_NAME", "value": f"bucket-{n}"}
            extra = {"operation": "ListObjectsV2", "affectedAccount": ACCOUNT, "affectedResource": bucket}
        name, description = f"{STACK}.documents-{job_id[:8]}", DESCRIPTIONS[event_type]
        message = macie_log_message(ACCOUNT, job_id, name, event_type, description, at, SUBMITTED_AT, **extra)
        events.append({"id": f"{start_ms + n:056d}", "timestamp": start_ms + n * 1000, "message": json.dumps(message)})
    return events


def translation_output(
    s3: Any,
    bucket: str,
    input_prefix: str,
    output_prefix: str,
    job_id: str,
    languages: list[str],
    failed: frozenset[str] = frozenset(),
) -> dict[str, list[str]]:
    """Write what a finished Translate batch job writes for the documents under `input_prefix` (documents in
    `failed` get an error entry instead of a translation). Returns source key -> translated keys."""
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=input_prefix)
    keys = [o["Key"] for page in pages for o in page.get("Contents", []) if not o["Key"].endswith("/")]
    texts = {key: s3.get_object(Bucket=bucket, Key=key)["Body"].read().decode() for key in keys}
    into = translation_job_prefix(output_prefix, ACCOUNT, job_id)
    source, target = f"s3://{bucket}/{input_prefix}", f"s3://{bucket}/{output_prefix}"
    return write_translations(s3, texts, source, target, into, "en", languages, failed)


def macie_finding(bucket: str, key: str, classification_job_id: str) -> dict[str, Any]:
    """A Macie personal-information finding for one S3 object, as GetFindings answers it."""
    detections = [{"type": "NAME", "count": 2, "occurrences": {"lineRanges": [{"start": 1, "end": 1}]}}]
    return sensitive_data_finding(
        uuid.uuid5(uuid.NAMESPACE_URL, f"s3://{bucket}/{key}#{classification_job_id}").hex,
        ACCOUNT,
        REGION,
        f"arn:aws:macie2:{REGION}:{ACCOUNT}:classification-job/{classification_job_id}",
        {"arn": f"arn:aws:s3:::{bucket}", "name": bucket},
        {"bucketArn": f"arn:aws:s3:::{bucket}", "key": key, "path": f"{bucket}/{key}"},
        [{"category": "PERSONAL_INFORMATION", "detections": detections, "totalCount": 2}],
        "SensitiveData:S3Object/Personal",
        FINDING_TEXTS["SensitiveData:S3Object/Personal"],
        "Medium",
        ENDED_AT,
        size=1024,
        mime_type="text/plain",
    )


def translate_job(job_id: str, status: str, message: str | None = None) -> dict[str, Any]:
    """DescribeTextTranslationJob's answer."""
    request = {
        "JobName": f"documents-{job_id[:8]}",
        "SourceLanguageCode": "en",
        "TargetLanguageCodes": ["fr", "de"],
        "InputDataConfig": {"S3Uri": "s3://documents/incoming/", "ContentType": "text/plain"},
        "OutputDataConfig": {"S3Uri": "s3://documents/translated/"},
        "DataAccessRoleArn": f"arn:aws:iam::{ACCOUNT}:role/{STACK}-TranslateDataAccessRole",
    }
    ended = None if status in {"SUBMITTED", "IN_PROGRESS"} else ENDED_AT
    job = text_translation_job(job_id, status, request, SUBMITTED_AT, translate_details(3, 0, 3), ended, message)
    return {"TextTranslationJobProperties": job}


def macie_job(job_id: str, status: str, last_run_error: str = "NONE") -> dict[str, Any]:
    """DescribeClassificationJob's answer for a one-time job (`status` as the API spells it: COMPLETE, ...)."""
    request = {
        "clientToken": f"documents-{job_id[:8]}",
        "jobType": "ONE_TIME",
        "name": f"{STACK}.documents-{job_id[:8]}",
        "s3JobDefinition": {"bucketDefinitions": [{"accountId": ACCOUNT, "buckets": ["documents"]}]},
    }
    arn = f"arn:aws:macie2:{REGION}:{ACCOUNT}:classification-job/{job_id}"
    return classification_job(job_id, arn, request, status, SUBMITTED_AT, last_run_error != "NONE", 3)


def bda_status(status: str, error_type: str | None = None, error_message: str | None = None) -> dict[str, Any]:
    """GetDataAutomationStatus's answer."""
    ended = ENDED_AT if status in {"Success", "ClientError", "ServiceError"} else None
    output = "s3://documents/bda-output/job_metadata.json" if status == "Success" else None
    return data_automation_status(status, SUBMITTED_AT, ended, output, error_type, error_message)


def healthlake_export(datastore_id: str, job_id: str, status: str, message: str | None = None) -> dict[str, Any]:
    """DescribeFHIRExportJob's answer."""
    ended = ENDED_AT if status in {"COMPLETED", "COMPLETED_WITH_ERRORS", "FAILED", "CANCEL_COMPLETED"} else None
    role, output = f"arn:aws:iam::{ACCOUNT}:role/{STACK}-HealthLakeExport", "s3://exports/fhir/"
    job = fhir_export_job(
        job_id, "nightly-export", status, SUBMITTED_AT, datastore_id, output, "alias/exports", role, ended, message
    )
    return {"ExportJobProperties": job}


def invocation_arn(job_id: str) -> str:
    """The Bedrock Data Automation invocation ARN whose last part is the job id its events carry."""
    return f"arn:aws:bedrock:{REGION}:{ACCOUNT}:data-automation-invocation/{job_id}"


def sqs_event(bodies: list[dict[str, Any] | str], queue_logical_id: str = "ExportQueue") -> dict[str, Any]:
    """What Lambda's SQS event source mapping hands the function (localcloud's records): one per message body."""
    queue_name = support._deployed[-1].physical_id(queue_logical_id).rsplit("/", 1)[-1]
    queue_arn = f"arn:aws:sqs:{REGION}:{ACCOUNT}:{queue_name}"
    messages = [
        {
            "MessageId": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{n}:{body}")),
            "ReceiptHandle": f"AQEB{uuid.uuid4().hex}",
            "Body": body if isinstance(body, str) else json.dumps(body),
            "Attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "1768473000123"},
        }
        for n, body in enumerate(bodies)
    ]
    return {"Records": [sqs_record(message, queue_arn, REGION) for message in messages]}


def with_bodies(event: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """An SQS event sample whose message bodies carry `changes` (e.g. this test's task token), md5OfBody to match."""
    copy = json.loads(json.dumps(event))
    for record in copy["Records"]:
        record["body"] = json.dumps({**json.loads(record["body"]), **changes})
        record["md5OfBody"] = hashlib.md5(record["body"].encode()).hexdigest()  # noqa: S324 - what SQS sends
    return copy


def ndjson(records: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(record, separators=(",", ":")).encode() + b"\n" for record in records)


def fhir_patients(count: int, start: int = 0) -> list[dict[str, Any]]:
    """FHIR Patient resources as a HealthLake export writes them (one per NDJSON line)."""
    return [
        {
            "resourceType": "Patient",
            "id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"patient-{n}")),
            "meta": {"versionId": "1", "lastUpdated": "2026-01-15T10:20:00.000Z"},
            "name": [{"family": f"Family{n}", "given": [f"Given{n}"]}],
            "gender": "unknown",
        }
        for n in range(start, start + count)
    ]


def registration(service: str, job_id: str, token: str, **extra: Any) -> dict[str, Any]:
    """What a workflow's waiting task sends the register function. Each token gets its own execution unless
    `executionArn` (and the state's name and entry time) are given: the same ones make a retry of one Task state."""
    execution = uuid.uuid5(uuid.NAMESPACE_URL, token)
    return {
        "service": service,
        "jobId": job_id,
        "taskToken": token,
        "executionArn": f"arn:aws:states:{REGION}:{ACCOUNT}:execution:{STACK}-documents:{execution}",
        "stateName": "WaitForTranslation",
        "stateEnteredTime": "2026-01-15T10:30:06.123Z",
        "retryCount": 0,
        **extra,
    }
