"""The documented shapes of what the simulated services answer and write, in one place for the simulators and the tests.

Each function builds one payload from plain values: a describe call's answer, the files a finished job writes, a log
message, a finding. The simulators fill them from their jobs; the unit tests fill them with fixed values and hand them
to botocore's Stubber (which validates them against the service's model). Timestamps are datetimes, as the SDK
parses them (the simulators' wire format turns them into the protocol's own), except Macie's, which its API and
its findings filter spell as ISO 8601 strings.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

TRANSLATE_REQUEST_FIELDS = (
    "JobName",
    "SourceLanguageCode",
    "TargetLanguageCodes",
    "TerminologyNames",
    "ParallelDataNames",
    "InputDataConfig",
    "OutputDataConfig",
    "DataAccessRoleArn",
    "Settings",
)


def iso(moment: datetime, timespec: str = "milliseconds") -> str:
    """ISO 8601 in UTC with a `Z`, as Macie writes times."""
    return moment.astimezone(UTC).isoformat(timespec=timespec).replace("+00:00", "Z")


# --- Amazon Translate -------------------------------------------------------------------------------------------
def translate_details(translated: int, with_errors: int, inputs: int) -> dict[str, int]:
    """TextTranslationJobProperties.JobDetails."""
    return {
        "TranslatedDocumentsCount": translated,
        "DocumentsWithErrorsCount": with_errors,
        "InputDocumentsCount": inputs,
    }


def text_translation_job(
    job_id: str,
    status: str,
    request: dict[str, Any],
    submitted: datetime,
    details: dict[str, int],
    end: datetime | None = None,
    message: str | None = None,
) -> dict[str, Any]:
    """DescribeTextTranslationJob's TextTranslationJobProperties: the job's request echoed, its status and counts."""
    props: dict[str, Any] = {"JobId": job_id, "JobStatus": status}
    props.update({k: request[k] for k in TRANSLATE_REQUEST_FIELDS if k in request})
    props["SubmittedTime"] = submitted
    props["JobDetails"] = dict(details)
    if end is not None:
        props["EndTime"] = end
    if message is not None:
        props["Message"] = message
    return props


def translation_job_prefix(output_prefix: str, account_id: str, job_id: str) -> str:
    """Where a batch job writes under its OutputDataConfig prefix: `<prefix><account>-TranslateText-<job id>/`."""
    if output_prefix and not output_prefix.endswith("/"):
        output_prefix += "/"
    return f"{output_prefix}{account_id}-TranslateText-{job_id}/"


def write_translations(
    s3: Any,
    sources: dict[str, str],
    input_uri: str,
    output_uri: str,
    job_prefix: str,
    source_language: str,
    targets: Iterable[str],
    failing: Iterable[str] = (),
    content_type: str = "text/plain",
) -> dict[str, list[str]]:
    """Write what a finished batch job writes for `sources` (key under the input prefix -> text): one translated file
    per document and target language, and one auxiliary translation details file per language under `details/`.
    A document in `failing` gets an error entry instead. Returns source key -> translated keys."""
    in_prefix = input_uri.removeprefix("s3://").partition("/")[2]
    out_bucket = output_uri.removeprefix("s3://").partition("/")[0]
    failed = set(failing)
    translated: dict[str, list[str]] = {key: [] for key in sources}
    for target in targets:
        entries: list[dict[str, Any]] = []
        for key, text in sources.items():
            folder, _, file_name = key[len(in_prefix) :].lstrip("/").rpartition("/")
            source_file = f"{folder}/{file_name}" if folder else file_name
            if key in failed:
                entries.append({"sourceFile": source_file, "errorMessage": "The document could not be translated."})
                continue
            target_file = f"{folder}/{target}.{file_name}" if folder else f"{target}.{file_name}"
            body = f"[{target}] {text}".encode()
            s3.put_object(Bucket=out_bucket, Key=job_prefix + target_file, Body=body, ContentType=content_type)
            entries.append({"sourceFile": source_file, "targetFile": target_file, "auxiliaryData": {}})
            translated[key].append(job_prefix + target_file)
        auxiliary = {
            "sourceLanguageCode": source_language,
            "targetLanguageCode": target,
            "charactersTranslated": str(sum(len(text) for key, text in sources.items() if key not in failed)),
            "documentCountWithCustomerError": str(len(failed)),
            "documentCountWithServerError": "0",
            "inputDataPrefix": input_uri,
            "outputDataPrefix": f"s3://{out_bucket}/{job_prefix}",
            "details": entries,
        }
        s3.put_object(
            Bucket=out_bucket,
            Key=f"{job_prefix}details/{target}.auxiliary-translation-details.json",
            Body=json.dumps(auxiliary, indent=2).encode(),
            ContentType="application/json",
        )
    return translated


# --- Amazon Macie -----------------------------------------------------------------------------------------------
def classification_job(
    job_id: str,
    arn: str,
    request: dict[str, Any],
    status: str,
    created: datetime,
    error: bool = False,
    objects_in_scope: int = 0,
) -> dict[str, Any]:
    """DescribeClassificationJob's answer for a job created with `request` (CreateClassificationJob's parameters)."""
    described: dict[str, Any] = {
        "allowListIds": [],
        "clientToken": request["clientToken"],
        "createdAt": iso(created),
        "customDataIdentifierIds": [],
        "initialRun": False,
        "jobArn": arn,
        "jobId": job_id,
        "jobStatus": status,
        "jobType": request["jobType"],
        "lastRunErrorStatus": {"code": "ERROR" if error else "NONE"},
        "lastRunTime": iso(created),
        "managedDataIdentifierSelector": request.get("managedDataIdentifierSelector", "RECOMMENDED"),
        "name": request["name"],
        "s3JobDefinition": request["s3JobDefinition"],
        "samplingPercentage": request.get("samplingPercentage", 100),
        "statistics": {
            "approximateNumberOfObjectsToProcess": 0 if status == "COMPLETE" else objects_in_scope,
            "numberOfRuns": 1,
        },
        "tags": request.get("tags", {}),
    }
    for optional in ("description", "managedDataIdentifierIds"):
        if optional in request:
            described[optional] = request[optional]
    return dict(sorted(described.items()))


def macie_log_message(
    account_id: str,
    job_id: str,
    job_name: str,
    event_type: str,
    description: str,
    occurred_at: datetime,
    run_date: datetime,
    **extra: Any,
) -> dict[str, Any]:
    """One message of a classification job's log (/aws/macie/classificationjobs, one stream per job)."""
    message: dict[str, Any] = {
        "adminAccountId": account_id,
        "jobId": job_id,
        "eventType": event_type,
        "occurredAt": iso(occurred_at, "microseconds"),
        "description": description,
        "jobName": job_name,
    }
    if "operation" in extra:
        message["operation"] = extra.pop("operation")
    message["runDate"] = iso(run_date, "microseconds")
    message.update(extra)
    return message


def sensitive_data_finding(
    finding_id: str,
    account_id: str,
    region: str,
    job_arn: str,
    bucket: dict[str, Any],
    s3_object: dict[str, Any],
    sensitive_data: list[dict[str, Any]],
    finding_type: str,
    texts: tuple[str, str],
    severity: str,
    created: datetime,
    *,
    size: int,
    mime_type: str,
    additional_occurrences: bool = False,
) -> dict[str, Any]:
    """A sensitive-data finding for one S3 object, as GetFindings answers it. `bucket` and `s3_object` are the
    finding's resourcesAffected parts; `sensitive_data` its classification result's categories and detections;
    `texts` its (title, description)."""
    title, description = texts
    return {
        "accountId": account_id,
        "archived": False,
        "category": "CLASSIFICATION",
        "classificationDetails": {
            "jobArn": job_arn,
            "jobId": job_arn.rsplit("/", 1)[-1],
            "originType": "SENSITIVE_DATA_DISCOVERY_JOB",
            "result": {
                "additionalOccurrences": additional_occurrences,
                "customDataIdentifiers": {"detections": [], "totalCount": 0},
                "mimeType": mime_type,
                "sensitiveData": sensitive_data,
                "sizeClassified": size,
                "status": {"code": "COMPLETE"},
            },
        },
        "count": 1,
        "createdAt": iso(created),
        "description": description,
        "id": finding_id,
        "partition": "aws",
        "region": region,
        "resourcesAffected": {"s3Bucket": bucket, "s3Object": s3_object},
        "sample": False,
        "schemaVersion": "1.0",
        "severity": {"description": severity, "score": {"Low": 1, "Medium": 2, "High": 3}[severity]},
        "title": title,
        "type": finding_type,
        "updatedAt": iso(created),
    }


# --- AWS HealthLake ---------------------------------------------------------------------------------------------
def fhir_export_job(
    job_id: str,
    name: str | None,
    status: str,
    submitted: datetime,
    datastore_id: str,
    s3_uri: str,
    kms_key_id: str,
    role_arn: str,
    end: datetime | None = None,
    message: str | None = None,
) -> dict[str, Any]:
    """DescribeFHIRExportJob's ExportJobProperties."""
    props: dict[str, Any] = {"JobId": job_id}
    if name is not None:
        props["JobName"] = name
    props.update({"JobStatus": status, "SubmitTime": submitted})
    if end is not None:
        props["EndTime"] = end
    props.update(
        {
            "DatastoreId": datastore_id,
            "OutputDataConfig": {"S3Configuration": {"S3Uri": s3_uri, "KmsKeyId": kms_key_id}},
            "DataAccessRoleArn": role_arn,
        }
    )
    if message is not None:
        props["Message"] = message
    return props


# --- Amazon Bedrock Data Automation -----------------------------------------------------------------------------
def data_automation_status(
    status: str,
    submitted: datetime,
    ended: datetime | None = None,
    output_uri: str | None = None,
    error_type: str | None = None,
    error_message: str | None = None,
) -> dict[str, Any]:
    """GetDataAutomationStatus's answer (`status`: Created, InProgress, Success, ServiceError, ClientError)."""
    response: dict[str, Any] = {"status": status, "jobSubmissionTime": submitted}
    if ended is not None:
        response |= {"jobCompletionTime": ended, "jobDurationInSeconds": int((ended - submitted).total_seconds())}
    if output_uri is not None:
        response["outputConfiguration"] = {"s3Uri": output_uri}
    if error_type:
        response |= {"errorType": error_type, "errorMessage": error_message or "The job failed."}
    return response
