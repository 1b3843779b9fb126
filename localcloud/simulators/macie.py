"""Simulated Amazon Macie sensitive data discovery jobs (CreateClassificationJob and friends), which moto lacks.

    register(MacieSimulator("us-east-1", delay_seconds=60, clock=Clock(speedup=60)))

From then on, boto3 `macie2` clients in this process are answered here for the operations below, in botocore's
request/response shapes (macie2 is a rest-json service; its timestamps travel as ISO-8601 strings, which botocore
turns into datetimes). Other macie2 operations (EnableMacie, GetMacieSession, ...) answer `InvalidAction` while the
simulator is registered.

Macie answers only where it is enabled (per account and Region: localcloud.account; a new account has it off). Until
then every operation but EnableMacie is AccessDeniedException (403) "Macie is not enabled.", as Macie answers.
    EnableMacie               turns Macie on; where it is on already, ConflictException.
    GetMacieSession           {status ENABLED, findingPublishingFrequency, serviceRole, createdAt, updatedAt}.
    DisableMacie              turns Macie off (its jobs and findings stay here, unlike on AWS).

Operations:
    CreateClassificationJob   ONE_TIME jobs only; idempotent on clientToken (the retry returns the same job).
                              Answers {jobArn, jobId}; jobId is 32 hex characters, jobArn
                              `arn:aws:macie2:{region}:{account}:classification-job/{jobId}`.
    DescribeClassificationJob jobStatus RUNNING -> COMPLETE (not COMPLETED) or CANCELLED; lastRunErrorStatus.code
                              NONE or ERROR; statistics.approximateNumberOfObjectsToProcess (objects in scope at
                              creation, 0 once COMPLETE) and numberOfRuns (1). Unknown jobId -> 404
                              ResourceNotFoundException.
    UpdateClassificationJob   jobStatus CANCELLED cancels a RUNNING job at once (other statuses: ValidationException).
    ListFindings              findingCriteria.criterion on any finding field by dotted path (e.g.
                              `classificationDetails.jobId`, `resourcesAffected.s3Object.key`, `severity.description`,
                              `sensitiveData.detections.type`) with eq / neq / eqExactMatch / gt / gte / lt / lte;
                              sortCriteria; maxResults (default 50) / nextToken pagination.
    GetFindings               findingIds (1 to 50); unknown ids are left out of the answer.

A job, `delay_seconds` of simulated time after its creation, lists the objects of every bucket in
`s3JobDefinition.bucketDefinitions` in moto S3, keeps those in `scoping` (simpleScopeTerm: OBJECT_KEY STARTS_WITH,
OBJECT_EXTENSION EQ/NE, OBJECT_SIZE and OBJECT_LAST_MODIFIED_DATE EQ/NE/GT/GTE/LT/LTE, the pairs the API reference
lists; any other pair, e.g. OBJECT_KEY EQ, is a ValidationException; terms within includes or excludes are ANDed,
excludes win over includes), reads them and runs regular expressions named after Macie's managed data identifiers:

    EMAIL_ADDRESS, USA_SOCIAL_SECURITY_NUMBER, PHONE_NUMBER    -> PERSONAL_INFORMATION
    CREDIT_CARD_NUMBER (Luhn-checked, 13-19 digits)             -> FINANCIAL_INFORMATION
    AWS_CREDENTIALS (an AKIA/ASIA access key id)                -> CREDENTIALS

Each object with at least one detection gets one finding (objects without sensitive data get none, so documents
without PII give a job without findings): type `SensitiveData:S3Object/Personal`, `/Financial`, `/Credentials` or,
for more than one category, `/Multiple`; category CLASSIFICATION; severity High for credentials, otherwise by the
number of occurrences (1: Low, 2-99: Medium, 100+: High); resourcesAffected.s3Bucket {name, arn, createdAt, owner,
tags, defaultServerSideEncryption} and .s3Object {bucketArn, key, path, extension, size, eTag, lastModified,
storageClass, serverSideEncryption, publicAccess, tags}; classificationDetails {jobId, jobArn, originType
SENSITIVE_DATA_DISCOVERY_JOB, result {status {code COMPLETE}, mimeType, sizeClassified, additionalOccurrences,
sensitiveData [{category, detections [{type, count, occurrences {lineRanges}}], totalCount}],
customDataIdentifiers {detections [], totalCount 0}}}; plus id, accountId, region, partition, schemaVersion, title,
description, createdAt, updatedAt, count 1, archived false, sample false. Every finding is also put on the default
bus as Macie does: source `aws.macie`, detail-type `Macie Finding`, detail = the finding, resources `[]`. At the end
of a job its findings are stored and its status set in one step; then the finding events are put, then the terminal
log line(s) are written, so a reaction to JOB_COMPLETED can list the findings and DescribeClassificationJob agrees.

Job log (CloudWatch Logs; Macie publishes no job event of its own): group `/aws/macie/classificationjobs` (created if
missing), one stream per job named after the jobId, one JSON message per job event:

    {"adminAccountId", "jobId", "eventType", "occurredAt" (ISO-8601, simulated clock), "description", "jobName",
     "operation" (only where one applies: CreateClassificationJob, UpdateClassificationJob, ListObjectsV2 for bucket
     errors, ListBuckets for ACCOUNT_ACCESS_DENIED), "runDate" (ISO-8601, the run's start),
     "affectedAccount" (error events), "affectedResource": {"type": "S3_BUCKET_NAME", "value": bucket}
     (bucket-level error events)}

Sequence: JOB_CREATED (operation CreateClassificationJob) and ONE_TIME_JOB_STARTED when the job is created; at the
end either the error events (one per bucket for BUCKET_* types, one per bucketDefinitions account for ACCOUNT_*
types), then JOB_COMPLETED; or JOB_CANCELLED (operation UpdateClassificationJob when cancelled through the API).
They are written with PutLogEvents, so moto's subscription-filter path (patched by localcloud.fixes.logs) delivers them
to subscribed Lambdas; each terminal copy is its own PutLogEvents call (its own subscription batch).

Knobs (constructor arguments):
    delay_seconds: simulated seconds from CreateClassificationJob to the end of the job (default 1.0).
    clock: the offline cloud's clock (localcloud.clock), which delays and timestamps follow (default: real time).
    outcome: how every job ends, one of OUTCOMES:
        "JOB_COMPLETED" (default): the job analyses its objects, jobStatus COMPLETE, lastRunErrorStatus NONE.
        "JOB_CANCELLED": the job ends CANCELLED without findings (as if someone cancelled it), logs JOB_CANCELLED.
        a job-level error event type (BUCKET_ERRORS, ACCOUNT_ERRORS), e.g. "BUCKET_ACCESS_DENIED": every bucket of
            the job is affected and not analysed (no findings from it), the error event is logged, then the job
            still ends COMPLETE with lastRunErrorStatus.code ERROR and logs JOB_COMPLETED, as Macie does.
    log_copies: how many times the terminal log line(s) are written (default 1; >1 simulates duplicate delivery).
    drop_logs: write no terminal log line at all (a lost event); DescribeClassificationJob still tells the truth.
A bucket that does not exist in moto S3 logs BUCKET_DOES_NOT_EXIST and makes the job end with ERROR, whatever
`outcome` says.

Approximations (modelled on the Macie API reference, the botocore model and the user guide, not copied from live
responses):
    - Detection is a handful of regular expressions over the object's bytes decoded as UTF-8 (any file type, no
      keyword-proximity rules, no allow lists, no custom data identifiers: customDataIdentifierIds, allowListIds,
      tagScopeTerm, bucketCriteria and SCHEDULED jobs are refused with ValidationException "not simulated offline").
      managedDataIdentifierSelector INCLUDE / EXCLUDE filter the simulated identifiers by id.
    - samplingPercentage below 100 analyses the first objects in key order, not a random sample.
    - Severity rules, finding titles/descriptions, log descriptions and the `operation` of error events (the S3
      call that failed: ListObjectsV2 for bucket errors) are modelled on the documentation's tables and examples.
      Occurrences are given as lineRanges only (at most 15 per finding, as Macie).
    - No detailedResultsLocation (no discovery-results repository is simulated); s3Object.publicAccess is always
      false and bucket public-access details are left out.
    - The CloudWatch Logs event timestamp is the simulated occurredAt, capped at wall-clock time + 1 hour because
      CloudWatch Logs (and moto) refuse events more than 2 hours in the future and the simulated clock runs ahead.
    - Errors: validation failures are ValidationException (400) with messages of this module's own wording.
"""

from __future__ import annotations

import bisect
import contextlib
import json
import math
import mimetypes
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar

from botocore.exceptions import ClientError
from botocore.model import OperationModel

from localcloud.account import ACCOUNT_ID, MACIE_LOG_GROUP, MacieAlreadyEnabledError
from localcloud.clock import Clock
from localcloud.simulators import ServiceError, Simulator
from localcloud.simulators.shapes import classification_job, iso, macie_log_message, sensitive_data_finding

EVENT_SOURCE = "aws.macie"
FINDING_DETAIL_TYPE = "Macie Finding"
LOG_GROUP = MACIE_LOG_GROUP
SERVICE_ROLE = "AWSServiceRoleForAmazonMacie"  # the service-linked role EnableMacie creates
BUCKET_ERRORS = (
    "BUCKET_ACCESS_DENIED",
    "BUCKET_DETAILS_UNAVAILABLE",
    "BUCKET_DOES_NOT_EXIST",
    "BUCKET_IN_DIFFERENT_REGION",
    "BUCKET_OWNER_CHANGED",
)
ACCOUNT_ERRORS = (  # the user guide's account-level error events, all of them
    "ACCOUNT_ACCESS_DENIED",
    "ACCOUNT_DISABLED",
    "ACCOUNT_DISASSOCIATED",
    "ACCOUNT_ISOLATED",
    "ACCOUNT_REGION_DISABLED",
    "ACCOUNT_SUSPENDED",
    "ACCOUNT_TERMINATED",
)
OUTCOMES = ("JOB_COMPLETED", "JOB_CANCELLED", *BUCKET_ERRORS, *ACCOUNT_ERRORS)
DESCRIPTIONS = {
    "JOB_CREATED": "The job was created.",
    "ONE_TIME_JOB_STARTED": "The one-time job started running.",
    "JOB_COMPLETED": "The job finished running.",
    "JOB_CANCELLED": "The job was cancelled.",
    "BUCKET_ACCESS_DENIED": "Macie doesn't have permission to access the affected S3 bucket.",
    "BUCKET_DETAILS_UNAVAILABLE": "A temporary issue prevented Macie from retrieving details about the bucket.",
    "BUCKET_DOES_NOT_EXIST": "The affected S3 bucket doesn't exist.",
    "BUCKET_IN_DIFFERENT_REGION": "The affected S3 bucket was moved to a different AWS Region.",
    "BUCKET_OWNER_CHANGED": "The owner of the affected S3 bucket changed.",
    "ACCOUNT_ACCESS_DENIED": "Macie doesn't have permission to access S3 bucket data for the affected account.",
    "ACCOUNT_DISABLED": "Macie is disabled for the affected account.",
    "ACCOUNT_DISASSOCIATED": "The affected account is no longer associated with the Macie administrator account.",
    "ACCOUNT_ISOLATED": "The affected account is isolated.",
    "ACCOUNT_REGION_DISABLED": "The affected account isn't active in the current AWS Region.",
    "ACCOUNT_SUSPENDED": "Macie is suspended for the affected account.",
    "ACCOUNT_TERMINATED": "The affected account was terminated.",
}
MAX_OCCURRENCES = 15  # location data per finding, as Macie
MAX_FINDING_IDS = 50  # GetFindings
DEFAULT_PAGE_SIZE = 50
SCOPE_COMPARATORS = {
    "OBJECT_KEY": ("STARTS_WITH",),
    "OBJECT_EXTENSION": ("EQ", "NE"),
    "OBJECT_SIZE": ("EQ", "NE", "GT", "GTE", "LT", "LTE"),
    "OBJECT_LAST_MODIFIED_DATE": ("EQ", "NE", "GT", "GTE", "LT", "LTE"),
}
ORDER: dict[str, Callable[[Any, Any], bool]] = {
    "EQ": lambda a, b: a == b,
    "NE": lambda a, b: a != b,
    "GT": lambda a, b: a > b,
    "GTE": lambda a, b: a >= b,
    "LT": lambda a, b: a < b,
    "LTE": lambda a, b: a <= b,
}


def _luhn(number: str) -> bool:
    digits = [int(d) for d in re.sub(r"\D", "", number)]
    if not 13 <= len(digits) <= 19:
        return False
    total = sum(d if i % 2 == 0 else (d * 2 - 9 if d > 4 else d * 2) for i, d in enumerate(reversed(digits)))
    return total % 10 == 0


@dataclass(frozen=True)
class Identifier:
    """A simulated managed data identifier: Macie's id, the category it reports, and how it detects."""

    id: str
    category: str
    pattern: re.Pattern[str]
    check: Callable[[str], bool] = lambda _: True


IDENTIFIERS = (
    Identifier("AWS_CREDENTIALS", "CREDENTIALS", re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b")),
    Identifier(
        "CREDIT_CARD_NUMBER", "FINANCIAL_INFORMATION", re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])"), _luhn
    ),
    Identifier(
        "EMAIL_ADDRESS",
        "PERSONAL_INFORMATION",
        re.compile(r"\b[\w.%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b"),
    ),
    Identifier(
        "PHONE_NUMBER",
        "PERSONAL_INFORMATION",
        re.compile(r"(?<![\w-])(?:\+1[ .-]?)?(?:\(\d{3}\) ?|\d{3}[ .-])\d{3}[ .-]\d{4}(?![\w-])"),
    ),
    Identifier(
        "USA_SOCIAL_SECURITY_NUMBER",
        "PERSONAL_INFORMATION",
        re.compile(r"(?<![\w-])(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}(?![\w-])"),
    ),
)
FINDING_TYPES = {
    "PERSONAL_INFORMATION": "SensitiveData:S3Object/Personal",
    "FINANCIAL_INFORMATION": "SensitiveData:S3Object/Financial",
    "CREDENTIALS": "SensitiveData:S3Object/Credentials",
}
FINDING_TEXTS = {
    "SensitiveData:S3Object/Personal": (
        "The S3 object contains personal information.",
        "The object contains personal information such as full names, mailing addresses, or contact information.",
    ),
    "SensitiveData:S3Object/Financial": (
        "The S3 object contains financial information.",
        "The object contains financial information such as bank account numbers or credit card numbers.",
    ),
    "SensitiveData:S3Object/Credentials": (
        "The S3 object contains credentials data.",
        "The object contains credentials data such as AWS secret access keys or private keys.",
    ),
    "SensitiveData:S3Object/Multiple": (
        "The S3 object contains multiple categories of sensitive data.",
        "The object contains more than one category of sensitive data.",
    ),
}


def _parse_time(value: str) -> datetime:
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


@dataclass
class _Job:
    job_id: str
    arn: str
    request: dict[str, Any]
    account_id: str
    outcome: str
    created: datetime
    objects_in_scope: int
    status: str = "RUNNING"
    error: bool = False

    def description(self) -> dict[str, Any]:
        return classification_job(
            self.job_id, self.arn, self.request, self.status, self.created, self.error, self.objects_in_scope
        )


class MacieSimulator(Simulator):
    """Amazon Macie's one-time classification jobs, their findings and their job log; see the module docstring."""

    service: ClassVar[str] = "macie2"
    outcomes = OUTCOMES
    jobs: dict[str, _Job]

    def __init__(
        self,
        region: str,
        delay_seconds: float = 1.0,
        clock: Clock | None = None,
        *,
        outcome: str = "JOB_COMPLETED",
        log_copies: int = 1,
        drop_logs: bool = False,
    ) -> None:
        super().__init__(region, delay_seconds, clock, outcome)
        if log_copies < 1:
            raise ValueError("log_copies must be at least 1 (use drop_logs=True for no terminal log line)")
        self.log_copies, self.drop_logs = log_copies, drop_logs
        self.findings: dict[str, dict[str, Any]] = {}  # by id, in creation order
        self._log_lock = threading.Lock()
        self._log_streams: set[str] = set()  # the jobs whose log stream is made

    # --- operations -------------------------------------------------------------------------------------------

    def handle(self, operation: OperationModel, params: dict[str, Any]) -> dict[str, Any]:
        if operation.name != "EnableMacie" and not self.account.macie_enabled(self.region):
            raise ServiceError("AccessDeniedException", "Macie is not enabled.", 403)
        return super().handle(operation, params)

    def EnableMacie(self, params: dict[str, Any]) -> dict[str, Any]:
        try:
            self.account.enable_macie(self.region)
        except MacieAlreadyEnabledError as exc:
            raise ServiceError("ConflictException", str(exc), 409) from exc
        return {}

    def DisableMacie(self, params: dict[str, Any]) -> dict[str, Any]:
        self.account.disable_macie(self.region)
        return {}

    def GetMacieSession(self, params: dict[str, Any]) -> dict[str, Any]:
        return {
            "status": "ENABLED",
            "findingPublishingFrequency": "FIFTEEN_MINUTES",
            "serviceRole": f"arn:aws:iam::{ACCOUNT_ID}:role/aws-service-role/macie.amazonaws.com/{SERVICE_ROLE}",
            "createdAt": iso(self.now()),
            "updatedAt": iso(self.now()),
        }

    def CreateClassificationJob(self, params: dict[str, Any]) -> dict[str, Any]:
        _validate(params)
        token = params["clientToken"]
        with self._lock:
            if token in self._by_token:  # idempotent retry: the same job
                job = self.jobs[self._by_token[token]]
                return {"jobArn": job.arn, "jobId": job.job_id}
        job_id = uuid.uuid4().hex
        request = dict(params)
        in_scope = sum(len(self._objects(bucket, request)) for _, bucket in _buckets(request))
        job = _Job(
            job_id=job_id,
            arn=f"arn:aws:macie2:{self.region}:{ACCOUNT_ID}:classification-job/{job_id}",
            request=request,
            account_id=ACCOUNT_ID,
            outcome=self.outcome,
            created=self.now(),
            objects_in_scope=in_scope,
        )
        with self._lock:
            if token in self._by_token:  # a concurrent retry won
                job = self.jobs[self._by_token[token]]
                return {"jobArn": job.arn, "jobId": job.job_id}
            self.jobs[job_id] = job
            self._by_token[token] = job_id
        self._log(job, [self._event(job, "JOB_CREATED", operation="CreateClassificationJob")])
        self._log(job, [self._event(job, "ONE_TIME_JOB_STARTED")])
        self.later(self.delay_seconds, lambda: self._finish(job))
        return {"jobArn": job.arn, "jobId": job.job_id}

    def DescribeClassificationJob(self, params: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            return self._job(params.get("jobId", "")).description()

    def UpdateClassificationJob(self, params: dict[str, Any]) -> dict[str, Any]:
        wanted = params.get("jobStatus")
        with self._lock:
            job = self._job(params.get("jobId", ""))
            if wanted != "CANCELLED":
                raise ServiceError(
                    "ValidationException", f"Changing a job's status to {wanted} is not simulated offline."
                )
            if job.status != "RUNNING":
                raise ServiceError(
                    "ValidationException", f"The job can't be cancelled because its status is {job.status}."
                )
            job.status = "CANCELLED"
        self._terminal_log(job, [("JOB_CANCELLED", {"operation": "UpdateClassificationJob"})])
        return {}

    def ListFindings(self, params: dict[str, Any]) -> dict[str, Any]:
        criteria = params.get("findingCriteria", {}).get("criterion", {})
        with self._lock:
            found = [f for f in self.findings.values() if all(_matches(f, p, c) for p, c in criteria.items())]
        sort = params.get("sortCriteria")
        if sort and sort.get("attributeName"):
            found.sort(key=lambda f: _sort_key(f, sort["attributeName"]), reverse=sort.get("orderBy", "ASC") == "DESC")
        token = str(params.get("nextToken", "0"))
        if not token.isdigit():
            raise ServiceError("ValidationException", "The nextToken is not valid.")
        size = int(params.get("maxResults", DEFAULT_PAGE_SIZE))
        if size < 1:
            raise ServiceError("ValidationException", "maxResults must be at least 1.")
        start = int(token)
        response: dict[str, Any] = {"findingIds": [f["id"] for f in found[start : start + size]]}
        if start + size < len(found):
            response["nextToken"] = str(start + size)
        return response

    def GetFindings(self, params: dict[str, Any]) -> dict[str, Any]:
        ids = params.get("findingIds")
        if not ids or len(ids) > MAX_FINDING_IDS:
            raise ServiceError("ValidationException", f"findingIds must list 1 to {MAX_FINDING_IDS} finding ids.")
        with self._lock:
            findings = [self.findings[i] for i in ids if i in self.findings]
        sort = params.get("sortCriteria")
        if sort and sort.get("attributeName"):
            findings.sort(
                key=lambda f: _sort_key(f, sort["attributeName"]), reverse=sort.get("orderBy", "ASC") == "DESC"
            )
        return {"findings": findings}

    # --- lifecycle (timer thread) -----------------------------------------------------------------------------

    def _finish(self, job: _Job) -> None:
        with self._lock:
            if job.status != "RUNNING":
                return
        if job.outcome == "JOB_CANCELLED":
            with self._lock:
                if job.status != "RUNNING":
                    return
                job.status = "CANCELLED"
            self._terminal_log(job, [("JOB_CANCELLED", {})])
            return
        findings, errors = self._classify(job)  # S3 I/O outside the lock
        with self._lock:
            if job.status != "RUNNING":  # cancelled meanwhile: the cancel wins
                return
            for finding in findings:
                self.findings[finding["id"]] = finding
            job.status, job.error = "COMPLETE", bool(errors)
        for finding in findings:
            self.emit(EVENT_SOURCE, FINDING_DETAIL_TYPE, finding, [])
        self._terminal_log(job, [*errors, ("JOB_COMPLETED", {})])

    def _classify(self, job: _Job) -> tuple[list[dict[str, Any]], list[tuple[str, dict[str, Any]]]]:
        """Analyse the job's objects; returns (findings, error events as (eventType, extra fields))."""
        findings: list[dict[str, Any]] = []
        errors: list[tuple[str, dict[str, Any]]] = []
        if job.outcome in ACCOUNT_ERRORS:
            accounts = dict.fromkeys(d["accountId"] for d in job.request["s3JobDefinition"]["bucketDefinitions"])
            # Access denied names the S3 call that was refused, as the guide's example does (ListBuckets)
            operation = {"operation": "ListBuckets"} if job.outcome == "ACCOUNT_ACCESS_DENIED" else {}
            return [], [(job.outcome, {"affectedAccount": account, **operation}) for account in accounts]
        s3 = self.client("s3")
        listing = s3.list_buckets()
        buckets = {b["Name"]: b for b in listing.get("Buckets", [])}
        for account, bucket in _buckets(job.request):
            affected = {
                "operation": "ListObjectsV2",
                "affectedAccount": account,
                "affectedResource": {"type": "S3_BUCKET_NAME", "value": bucket},
            }
            if job.outcome in BUCKET_ERRORS:
                errors.append((job.outcome, affected))
                continue
            if bucket not in buckets:
                errors.append(("BUCKET_DOES_NOT_EXIST", affected))
                continue
            details = _bucket_details(s3, buckets[bucket], listing.get("Owner", {}))
            for summary in self._objects(bucket, job.request):
                finding = self._finding(s3, job, details, summary)
                if finding is not None:
                    findings.append(finding)
        return findings, errors

    def _finding(self, s3: Any, job: _Job, bucket: dict[str, Any], summary: dict[str, Any]) -> dict[str, Any] | None:
        key = summary["Key"]
        obj = s3.get_object(Bucket=bucket["name"], Key=key)
        data: bytes = obj["Body"].read()
        text = data.decode("utf-8", errors="replace")
        selected = _selected_identifiers(job.request)
        hits: dict[str, list[re.Match[str]]] = {}
        for identifier in selected:
            matches = [m for m in identifier.pattern.finditer(text) if identifier.check(m.group())]
            if matches:
                hits[identifier.id] = matches
        if not hits:
            return None
        line_starts = [0] + [m.end() for m in re.finditer(r"\n", text)]
        shown = 0
        by_category: dict[str, list[dict[str, Any]]] = {}
        total = 0
        for identifier in selected:
            if identifier.id not in hits:
                continue
            matches = hits[identifier.id]
            ranges = []
            for match in matches[: max(0, MAX_OCCURRENCES - shown)]:
                line = bisect.bisect_right(line_starts, match.start())  # 1-based
                ranges.append({"start": line, "end": line, "startColumn": match.start() - line_starts[line - 1] + 1})
            shown += len(ranges)
            total += len(matches)
            detection = {"count": len(matches), "occurrences": {"lineRanges": ranges}, "type": identifier.id}
            by_category.setdefault(identifier.category, []).append(detection)
        categories = sorted(by_category)
        finding_type = FINDING_TYPES[categories[0]] if len(categories) == 1 else "SensitiveData:S3Object/Multiple"
        severity = "High" if "CREDENTIALS" in categories or total >= 100 else "Medium" if total > 1 else "Low"
        extension = key.rsplit("/", 1)[-1].rpartition(".")[2] if "." in key.rsplit("/", 1)[-1] else ""
        s3_object: dict[str, Any] = {
            "bucketArn": bucket["arn"],
            "eTag": str(summary.get("ETag", "")).strip('"'),
            "extension": extension,
            "key": key,
            "lastModified": iso(summary["LastModified"]),
            "path": f"{bucket['name']}/{key}",
            "publicAccess": False,
            "serverSideEncryption": {"encryptionType": obj.get("ServerSideEncryption", "NONE")},
            "size": int(summary["Size"]),
            "storageClass": summary.get("StorageClass", "STANDARD"),
            "tags": [
                {"key": t["Key"], "value": t["Value"]}
                for t in s3.get_object_tagging(Bucket=bucket["name"], Key=key)["TagSet"]
            ],
        }
        if obj.get("VersionId") and obj["VersionId"] != "null":
            s3_object["versionId"] = obj["VersionId"]
        sensitive_data = [
            {
                "category": category,
                "detections": by_category[category],
                "totalCount": sum(d["count"] for d in by_category[category]),
            }
            for category in categories
        ]
        return sensitive_data_finding(
            uuid.uuid4().hex,
            job.account_id,
            self.region,
            job.arn,
            bucket,
            s3_object,
            sensitive_data,
            finding_type,
            FINDING_TEXTS[finding_type],
            severity,
            self.now(),
            size=len(data),
            mime_type=mimetypes.guess_type(key)[0] or "text/plain",
            additional_occurrences=shown < total,
        )

    def _objects(self, bucket: str, request: dict[str, Any]) -> list[dict[str, Any]]:
        """The object summaries (ListObjectsV2 `Contents`) of `bucket` that the job's scoping and sampling select;
        [] for a bucket that cannot be listed."""
        scoping = request["s3JobDefinition"].get("scoping", {})
        includes = scoping.get("includes", {}).get("and", [])
        excludes = scoping.get("excludes", {}).get("and", [])
        # An included key prefix (the terms are ANDed) narrows the listing: same objects, less of the bucket to list.
        prefixes = [
            t["simpleScopeTerm"]["values"][0]
            for t in includes
            if t["simpleScopeTerm"]["key"] == "OBJECT_KEY" and len(t["simpleScopeTerm"]["values"]) == 1
        ]
        s3 = self.client("s3")
        try:
            prefix = max(prefixes, key=len, default="")
            pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
            objects = [o for page in pages for o in page.get("Contents", []) if not o["Key"].endswith("/")]
        except ClientError:
            return []
        selected = [
            o
            for o in sorted(objects, key=lambda o: o["Key"])
            if all(_term_matches(t, o) for t in includes)
            and not (excludes and all(_term_matches(t, o) for t in excludes))
        ]
        percentage = int(request.get("samplingPercentage", 100))
        return selected[: math.ceil(len(selected) * percentage / 100)]

    # --- the job log ------------------------------------------------------------------------------------------

    def _event(self, job: _Job, event_type: str, **extra: Any) -> dict[str, Any]:
        return macie_log_message(
            job.account_id,
            job.job_id,
            job.request["name"],
            event_type,
            DESCRIPTIONS[event_type],
            self.now(),
            job.created,
            **extra,
        )

    def _terminal_log(self, job: _Job, events: list[tuple[str, dict[str, Any]]]) -> None:
        if self.drop_logs:
            return
        messages = [self._event(job, event_type, **dict(extra)) for event_type, extra in events]
        for _ in range(self.log_copies):
            self._log(job, messages)

    def _log(self, job: _Job, messages: list[dict[str, Any]]) -> None:
        """Write the messages to the job's stream in one PutLogEvents call (one subscription batch); the group (if
        missing) and the stream come with the job's first line."""
        logs = self.client("logs")
        with self._log_lock:
            if job.job_id not in self._log_streams:
                for create in (
                    lambda: logs.create_log_group(logGroupName=LOG_GROUP),
                    lambda: logs.create_log_stream(logGroupName=LOG_GROUP, logStreamName=job.job_id),
                ):
                    with contextlib.suppress(logs.exceptions.ResourceAlreadyExistsException):
                        create()
                self._log_streams.add(job.job_id)
            ceiling = int((time.time() + 3600) * 1000)
            response = logs.put_log_events(
                logGroupName=LOG_GROUP,
                logStreamName=job.job_id,
                logEvents=[
                    {
                        "timestamp": min(int(_parse_time(m["occurredAt"]).timestamp() * 1000), ceiling),
                        "message": json.dumps(m),
                    }
                    for m in messages
                ],
            )
        if response.get("rejectedLogEventsInfo"):
            raise RuntimeError(f"CloudWatch Logs refused Macie job log events: {response['rejectedLogEventsInfo']}")

    # --- helpers ----------------------------------------------------------------------------------------------

    def _job(self, job_id: str) -> _Job:
        if job_id not in self.jobs:
            raise ServiceError("ResourceNotFoundException", f"The classification job {job_id} wasn't found.", 404)
        return self.jobs[job_id]


def _buckets(request: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(account id, bucket name) of every bucket the job names, once each."""
    seen: set[str] = set()
    for definition in request["s3JobDefinition"]["bucketDefinitions"]:
        for bucket in definition["buckets"]:
            if bucket not in seen:
                seen.add(bucket)
                yield definition["accountId"], bucket


def _bucket_details(s3: Any, listed: dict[str, Any], owner: dict[str, Any]) -> dict[str, Any]:
    """resourcesAffected.s3Bucket of a finding, from ListBuckets' entry and owner."""
    name = listed["Name"]
    try:
        tags = [{"key": t["Key"], "value": t["Value"]} for t in s3.get_bucket_tagging(Bucket=name)["TagSet"]]
    except ClientError:
        tags = []
    try:
        rules = s3.get_bucket_encryption(Bucket=name)["ServerSideEncryptionConfiguration"]["Rules"]
        default = rules[0]["ApplyServerSideEncryptionByDefault"]
        encryption = {"encryptionType": default["SSEAlgorithm"]}
        if default.get("KMSMasterKeyID"):
            encryption["kmsMasterKeyId"] = default["KMSMasterKeyID"]
    except (ClientError, KeyError, IndexError):
        encryption = {"encryptionType": "NONE"}
    details: dict[str, Any] = {
        "arn": f"arn:aws:s3:::{name}",
        "createdAt": iso(listed["CreationDate"]),
        "defaultServerSideEncryption": encryption,
        "name": name,
        "tags": tags,
    }
    if owner:
        details["owner"] = {"displayName": owner.get("DisplayName", ""), "id": owner.get("ID", "")}
    return details


def _selected_identifiers(request: dict[str, Any]) -> list[Identifier]:
    selector = request.get("managedDataIdentifierSelector", "RECOMMENDED")
    ids = set(request.get("managedDataIdentifierIds", []))
    if selector == "INCLUDE":
        return [i for i in IDENTIFIERS if i.id in ids]
    if selector == "EXCLUDE":
        return [i for i in IDENTIFIERS if i.id not in ids]
    return list(IDENTIFIERS)


def _term_matches(term: dict[str, Any], obj: dict[str, Any]) -> bool:
    simple = term["simpleScopeTerm"]
    comparator, values = simple["comparator"], simple["values"]
    name = obj["Key"].rsplit("/", 1)[-1]
    if simple["key"] == "OBJECT_KEY":
        return any(obj["Key"].startswith(v) for v in values)
    if simple["key"] == "OBJECT_EXTENSION":
        extension = name.rpartition(".")[2].lower() if "." in name else ""
        found = extension in {v.lower().lstrip(".") for v in values}
        return found if comparator == "EQ" else not found
    if simple["key"] == "OBJECT_SIZE":
        return ORDER[comparator](int(obj["Size"]), int(values[0]))
    return ORDER[comparator](obj["LastModified"], _parse_time(values[0]))


# --- finding criteria ---------------------------------------------------------------------------------------------


def _leaves(value: Any, path: list[str]) -> list[Any]:
    """The values at a dotted path, through lists (`sensitiveData.detections.type` gives every detection's type)."""
    if isinstance(value, list):
        return [leaf for item in value for leaf in _leaves(item, path)]
    if not path:
        return [value]
    if isinstance(value, dict) and path[0] in value:
        return _leaves(value[path[0]], path[1:])
    return []


def _field(finding: dict[str, Any], attribute: str) -> list[Any]:
    path = attribute.split(".")
    if path[0] in ("sensitiveData", "customDataIdentifiers"):  # Macie's short names for the result's fields
        path = ["classificationDetails", "result", *path]
    return _leaves(finding, path)


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _number(value: Any) -> float:
    """Numbers as they are; ISO timestamps as epoch milliseconds (how Macie's criteria give dates)."""
    if isinstance(value, str):
        return _parse_time(value).timestamp() * 1000
    return float(value)


def _matches(finding: dict[str, Any], attribute: str, condition: dict[str, Any]) -> bool:
    leaves = _field(finding, attribute)
    texts = {_text(leaf) for leaf in leaves}
    if "eq" in condition and not texts & {str(v) for v in condition["eq"]}:
        return False
    if "neq" in condition and texts & {str(v) for v in condition["neq"]}:
        return False
    if "eqExactMatch" in condition and texts != {str(v) for v in condition["eqExactMatch"]}:
        return False
    for operator, compare in (("gt", "GT"), ("gte", "GTE"), ("lt", "LT"), ("lte", "LTE")):
        if operator in condition:
            try:
                numbers = [_number(leaf) for leaf in leaves]
            except (TypeError, ValueError):
                return False
            if not any(ORDER[compare](n, float(condition[operator])) for n in numbers):
                return False
    return True


def _sort_key(finding: dict[str, Any], attribute: str) -> tuple[int, Any]:
    leaves = _field(finding, attribute)
    if not leaves:
        return (0, "")
    try:
        return (1, _number(leaves[0]))
    except (TypeError, ValueError):
        return (2, _text(leaves[0]))


# --- request validation -------------------------------------------------------------------------------------------


def _invalid(message: str) -> ServiceError:
    return ServiceError("ValidationException", message)


def _validate(params: dict[str, Any]) -> None:
    """What the service checks beyond botocore's client-side validation (required members are checked again for
    callers that bypass botocore)."""
    missing = [name for name in ("clientToken", "jobType", "name", "s3JobDefinition") if name not in params]
    if missing:
        raise _invalid(f"Missing required parameters: {', '.join(missing)}")
    if params["jobType"] == "SCHEDULED":
        raise _invalid("SCHEDULED classification jobs are not simulated offline; use jobType ONE_TIME.")
    if params["jobType"] != "ONE_TIME":
        raise _invalid(f"jobType must be ONE_TIME or SCHEDULED, not {params['jobType']!r}.")
    if "scheduleFrequency" in params:
        raise _invalid("scheduleFrequency can't be specified for a ONE_TIME job.")
    if not 1 <= len(str(params["name"])) <= 500:
        raise _invalid("The job name must contain 1 to 500 characters.")
    if len(str(params.get("description", ""))) > 200:
        raise _invalid("The job description can contain as many as 200 characters.")
    if not 1 <= int(params.get("samplingPercentage", 100)) <= 100:
        raise _invalid("samplingPercentage must be between 1 and 100.")
    for unsupported in ("customDataIdentifierIds", "allowListIds"):
        if params.get(unsupported):
            raise _invalid(f"{unsupported} is not simulated offline (no custom identifiers or allow lists exist).")
    selector = params.get("managedDataIdentifierSelector", "RECOMMENDED")
    if selector == "NONE":
        raise _invalid("managedDataIdentifierSelector NONE needs custom data identifiers, not simulated offline.")
    if selector in ("INCLUDE", "EXCLUDE") and not params.get("managedDataIdentifierIds"):
        raise _invalid(f"managedDataIdentifierSelector {selector} requires managedDataIdentifierIds.")
    if selector in ("ALL", "RECOMMENDED") and params.get("managedDataIdentifierIds"):
        raise _invalid(f"managedDataIdentifierIds can't be specified with managedDataIdentifierSelector {selector}.")
    definition = params["s3JobDefinition"]
    if "bucketCriteria" in definition:
        raise _invalid("s3JobDefinition.bucketCriteria is not simulated offline; list buckets in bucketDefinitions.")
    definitions = definition.get("bucketDefinitions")
    if not definitions:
        raise _invalid("s3JobDefinition must specify bucketDefinitions or bucketCriteria.")
    for entry in definitions:
        if not re.fullmatch(r"\d{12}", str(entry.get("accountId", ""))):
            account = entry.get("accountId")
            raise _invalid(f"bucketDefinitions.accountId must be a 12-digit account id, not {account!r}.")
        if not entry.get("buckets"):
            raise _invalid("bucketDefinitions.buckets must list at least one bucket.")
    for block in ("includes", "excludes"):
        for term in definition.get("scoping", {}).get(block, {}).get("and", []):
            _validate_term(term, f"scoping.{block}")


def _validate_term(term: dict[str, Any], where: str) -> None:
    if "tagScopeTerm" in term:
        raise _invalid(f"{where}: tagScopeTerm is not simulated offline.")
    simple = term.get("simpleScopeTerm")
    if not simple:
        raise _invalid(f"{where}: each term must specify a simpleScopeTerm or a tagScopeTerm.")
    key, comparator, values = simple.get("key"), simple.get("comparator"), simple.get("values") or []
    if key not in SCOPE_COMPARATORS:
        raise _invalid(f"{where}: key must be one of {', '.join(SCOPE_COMPARATORS)}.")
    if comparator not in SCOPE_COMPARATORS[key]:
        valid = "|".join(SCOPE_COMPARATORS[key])
        raise _invalid(f"{where}: comparator {comparator} isn't valid for {key}; use {valid}.")
    if not values:
        raise _invalid(f"{where}: values must list at least one value.")
    if key in ("OBJECT_SIZE", "OBJECT_LAST_MODIFIED_DATE") and len(values) != 1:
        raise _invalid(f"{where}: {key} takes exactly one value.")
    try:
        if key == "OBJECT_SIZE":
            int(values[0])
        elif key == "OBJECT_LAST_MODIFIED_DATE":
            _parse_time(values[0])
    except ValueError as exc:
        raise _invalid(f"{where}: {values[0]!r} isn't a valid value for {key}.") from exc
