"""Simulated Amazon Translate batch translation (StartTextTranslationJob and friends), which moto lacks.

    register(TranslateSimulator("us-east-1", delay_seconds=60, clock=Clock(speedup=60)))

From then on, boto3 `translate` clients in this process are answered here, in botocore's request/response shapes.
A job goes SUBMITTED -> IN_PROGRESS (after half of `delay_seconds`) -> terminal (after `delay_seconds`), all in
simulated time. On completion it reads the input documents from moto S3 and writes, like Translate does, under
`{OutputDataConfig.S3Uri}{account}-TranslateText-{JobId}/`:

- `{target}.{file name}` per input document and target language; the "translation" is `[{target}] {source text}`;
- `details/{target}.auxiliary-translation-details.json` per target language.

Then it puts the documented event on the default bus: source `aws.translate`, detail-type
`Translate TextTranslationJob State Change`, detail `{"jobId", "jobStatus"}`, resources `[]` (also for FAILED and
STOPPED jobs).

Knobs (constructor arguments):
    delay_seconds: simulated seconds from StartTextTranslationJob to the terminal status (default 1.0); math.inf:
        jobs stay SUBMITTED, holding no timer (a caller puts their completions itself).
    clock: the offline cloud's clock (localcloud.clock), which delays and timestamps follow (default: real time).
    outcome: terminal status of every job: "COMPLETED" (default), "COMPLETED_WITH_ERROR" (the first input document
        fails, the others are translated) or "FAILED" (nothing is written).
    event_copies: how many times the terminal event is delivered (default 1; >1 simulates duplicate delivery).
    drop_events: finish jobs but emit no event at all (a lost event); DescribeTextTranslationJob still tells.
    list_denied: ListTextTranslationJobs answers AccessDeniedException, as for a role without that action (the
        reconciler then describes every job on its own, as it does for a service that cannot list its jobs).
`finish(job_ids)` ends jobs at once (a burst harness's jobs without an end).
Per job, a JobName starting with `fail-` ends FAILED and one starting with `partial-` ends COMPLETED_WITH_ERROR
(after the stack's `<stack>.` prefix, where the name has one), whatever `outcome` says. An input prefix without
documents (or a missing bucket) ends FAILED, as on AWS.

Approximations: Message texts, the error entries of the auxiliary file and request-validation errors (all
InvalidRequestException here) are modelled on AWS's documentation, not copied from live responses.
"""

from __future__ import annotations

import re
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

from botocore.exceptions import ClientError

from localcloud.account import ACCOUNT_ID
from localcloud.clock import Clock
from localcloud.simulators import ServiceError, Simulator, split_s3_uri
from localcloud.simulators.shapes import (
    TRANSLATE_REQUEST_FIELDS,
    text_translation_job,
    translate_details,
    translation_job_prefix,
    write_translations,
)

EVENT_SOURCE = "aws.translate"
EVENT_DETAIL_TYPE = "Translate TextTranslationJob State Change"
OUTCOMES = ("COMPLETED", "COMPLETED_WITH_ERROR", "FAILED")
ACTIVE = ("SUBMITTED", "IN_PROGRESS")
CONTENT_TYPES = (
    "text/plain",
    "text/html",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "application/x-xliff+xml",
)
# The patterns of botocore's model, which botocore itself does not check (\p{L}\p{Z}\p{N} approximated by \w\s).
PATTERNS = {
    "jobName": r"[\w\s.:/=+\-%@]*",
    "inputDataConfig.s3Uri": r"s3://[a-z0-9][\.\-a-z0-9]{1,61}[a-z0-9](/.*)?",
    "outputDataConfig.s3Uri": r"s3://[a-z0-9][\.\-a-z0-9]{1,61}[a-z0-9](/.*)?",
    "dataAccessRoleArn": r"arn:aws(-[^:]+)?:iam::[0-9]{12}:role/.+",
    "clientToken": r"[a-zA-Z0-9-]+",
}
REQUIRED = (
    "InputDataConfig",
    "OutputDataConfig",
    "DataAccessRoleArn",
    "SourceLanguageCode",
    "TargetLanguageCodes",
    "ClientToken",
)


@dataclass
class _Job:
    job_id: str
    request: dict[str, Any]
    account_id: str
    outcome: str
    submitted: datetime
    status: str = "SUBMITTED"
    end: datetime | None = None
    message: str | None = None
    details: dict[str, int] = field(default_factory=lambda: translate_details(0, 0, 0))

    def properties(self) -> dict[str, Any]:
        return text_translation_job(
            self.job_id, self.status, self.request, self.submitted, self.details, self.end, self.message
        )


class TranslateSimulator(Simulator):
    """Amazon Translate's batch API (Start/Describe/Stop/ListTextTranslationJob(s)); see the module docstring."""

    service: ClassVar[str] = "translate"
    outcomes = OUTCOMES
    throttling_error: ClassVar[str] = "TooManyRequestsException"
    jobs: dict[str, _Job]

    def __init__(
        self,
        region: str,
        delay_seconds: float = 1.0,
        clock: Clock | None = None,
        *,
        outcome: str = "COMPLETED",
        event_copies: int = 1,
        drop_events: bool = False,
        list_denied: bool = False,
    ) -> None:
        super().__init__(region, delay_seconds, clock, outcome)
        if event_copies < 1:
            raise ValueError("event_copies must be at least 1 (use drop_events=True for no event)")
        self.event_copies, self.drop_events, self.list_denied = event_copies, drop_events, list_denied

    # --- operations -------------------------------------------------------------------------------------------

    def StartTextTranslationJob(self, params: dict[str, Any]) -> dict[str, Any]:
        self._validate(params)
        with self._lock:
            if params["ClientToken"] in self._by_token:  # idempotent retry: the same job
                job = self.jobs[self._by_token[params["ClientToken"]]]
                return {"JobId": job.job_id, "JobStatus": job.status}
        name = str(params.get("JobName", "")).split(".", 1)[-1]  # a stack names its jobs `<stack>.<execution>`
        outcome = (
            "FAILED"
            if name.startswith("fail-")
            else "COMPLETED_WITH_ERROR"
            if name.startswith("partial-")
            else self.outcome
        )
        job = _Job(
            uuid.uuid4().hex,
            {k: params[k] for k in TRANSLATE_REQUEST_FIELDS if k in params},
            ACCOUNT_ID,
            outcome,
            self.now(),
        )
        with self._lock:
            self.jobs[job.job_id] = job
            self._by_token[params["ClientToken"]] = job.job_id
        self.later(self.delay_seconds / 2, lambda: self._begin(job))
        self.later(self.delay_seconds, lambda: self._finish(job))
        return {"JobId": job.job_id, "JobStatus": job.status}

    def DescribeTextTranslationJob(self, params: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            return {"TextTranslationJobProperties": self._job(params["JobId"]).properties()}

    def StopTextTranslationJob(self, params: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            job = self._job(params["JobId"])
            if job.status in ACTIVE:
                job.status = "STOP_REQUESTED"
                self.later(self.delay_seconds / 4, lambda: self._stopped(job))
            return {"JobId": job.job_id, "JobStatus": job.status}

    def ListTextTranslationJobs(self, params: dict[str, Any]) -> dict[str, Any]:
        if self.list_denied:
            raise ServiceError("AccessDeniedException", "not authorized to perform: translate:ListTextTranslationJobs")
        wanted = params.get("Filter", {})
        with self._lock:
            jobs = [
                job.properties()
                for job in self.jobs.values()
                if wanted.get("JobName", job.request.get("JobName")) == job.request.get("JobName")
                and wanted.get("JobStatus", job.status) == job.status
                and job.submitted.timestamp() < float(wanted.get("SubmittedBeforeTime", float("inf")))
                and job.submitted.timestamp() > float(wanted.get("SubmittedAfterTime", float("-inf")))
            ]
        token = str(params.get("NextToken", "0"))
        if not token.isdigit():
            raise ServiceError("InvalidRequestException", "The NextToken is not valid.")
        start, size = int(token), int(params.get("MaxResults", 100))
        response: dict[str, Any] = {"TextTranslationJobPropertiesList": jobs[start : start + size]}
        if start + size < len(jobs):
            response["NextToken"] = str(start + size)
        return response

    def finish(self, job_ids: list[str]) -> None:
        """End these jobs now, together, as their delay would have ended each (a burst of jobs ending at once)."""
        with self._lock:
            jobs = [self._job(job_id) for job_id in job_ids]
        with ThreadPoolExecutor(max_workers=16) as pool:  # each writes its outputs to S3 first
            list(pool.map(self._finish, jobs))

    # --- lifecycle (timer threads) ----------------------------------------------------------------------------

    def _begin(self, job: _Job) -> None:
        with self._lock:
            if job.status == "SUBMITTED":
                job.status = "IN_PROGRESS"

    def _finish(self, job: _Job) -> None:
        with self._lock:
            if job.status not in ACTIVE:
                return
            job.status = "IN_PROGRESS"
        status, message, details = self._translate(job)  # S3 I/O outside the lock
        with self._lock:
            if job.status != "IN_PROGRESS":  # stopped meanwhile: the stop wins
                return
            job.status, job.message, job.details, job.end = status, message, details, self.now()
        self._announce(job)

    def _stopped(self, job: _Job) -> None:
        with self._lock:
            if job.status != "STOP_REQUESTED":
                return
            job.status, job.end = "STOPPED", self.now()
        self._announce(job)

    def _announce(self, job: _Job) -> None:
        if self.drop_events:
            return
        for _ in range(self.event_copies):
            self.emit(EVENT_SOURCE, EVENT_DETAIL_TYPE, {"jobId": job.job_id, "jobStatus": job.status}, [])

    def _translate(self, job: _Job) -> tuple[str, str | None, dict[str, int]]:
        """Do the job against moto S3; returns (terminal status, Message, JobDetails)."""
        s3 = self.client("s3")
        in_uri, out_uri = job.request["InputDataConfig"]["S3Uri"], job.request["OutputDataConfig"]["S3Uri"]
        in_bucket, in_prefix = split_s3_uri(in_uri)
        try:
            pages = s3.get_paginator("list_objects_v2").paginate(Bucket=in_bucket, Prefix=in_prefix)
            keys = sorted(o["Key"] for page in pages for o in page.get("Contents", []) if not o["Key"].endswith("/"))
        except ClientError as exc:
            return "FAILED", f"Unable to read the input S3 location {in_uri}: {exc}", translate_details(0, 0, 0)
        if not keys:
            return (
                "FAILED",
                f"No documents were found at the input S3 location {in_uri}.",
                translate_details(0, 0, 0),
            )
        if job.outcome == "FAILED":
            return "FAILED", "The job failed (simulated by localcloud).", translate_details(0, 0, len(keys))
        failing = {keys[0]} if job.outcome == "COMPLETED_WITH_ERROR" else set()
        out_prefix = split_s3_uri(out_uri)[1]
        try:
            texts = {
                key: s3.get_object(Bucket=in_bucket, Key=key)["Body"].read().decode(errors="replace") for key in keys
            }
            write_translations(
                s3,
                texts,
                in_uri,
                out_uri,
                translation_job_prefix(out_prefix, job.account_id, job.job_id),
                job.request["SourceLanguageCode"],
                job.request["TargetLanguageCodes"],
                failing,
                job.request["InputDataConfig"]["ContentType"],
            )
        except ClientError as exc:
            return (
                "FAILED",
                f"Unable to write to the output S3 location {out_uri}: {exc}",
                translate_details(0, 0, len(keys)),
            )
        counts = translate_details(len(keys) - len(failing), len(failing), len(keys))
        return ("COMPLETED_WITH_ERROR" if failing else "COMPLETED"), None, counts

    # --- helpers ----------------------------------------------------------------------------------------------

    def _job(self, job_id: str) -> _Job:
        if job_id not in self.jobs:
            raise ServiceError("ResourceNotFoundException", f"Translation job {job_id} was not found.")
        return self.jobs[job_id]

    @staticmethod
    def _validate(params: dict[str, Any]) -> None:
        """What the service checks beyond botocore's client-side validation (required members are checked again
        for callers that bypass botocore)."""
        missing = [name for name in REQUIRED if name not in params]
        if missing:
            raise ServiceError("InvalidRequestException", f"Missing required parameters: {', '.join(missing)}")
        values = {
            "jobName": params.get("JobName", ""),
            "inputDataConfig.s3Uri": params["InputDataConfig"].get("S3Uri", ""),
            "outputDataConfig.s3Uri": params["OutputDataConfig"].get("S3Uri", ""),
            "dataAccessRoleArn": params["DataAccessRoleArn"],
            "clientToken": params["ClientToken"],
        }
        for member, value in values.items():
            if not re.fullmatch(PATTERNS[member], str(value)):
                raise ServiceError(
                    "InvalidRequestException",
                    f"1 validation error detected: Value '{value}' at '{member}' failed to satisfy constraint: "
                    f"Member must satisfy regular expression pattern: {PATTERNS[member]}",
                )
        content_type = params["InputDataConfig"].get("ContentType")
        if content_type not in CONTENT_TYPES:
            raise ServiceError("InvalidRequestException", f"The content type {content_type} is not supported.")
        if not params["TargetLanguageCodes"]:
            raise ServiceError("InvalidRequestException", "TargetLanguageCodes must contain at least one language.")
