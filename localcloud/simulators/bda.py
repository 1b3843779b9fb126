"""Simulated Bedrock Data Automation runtime (InvokeDataAutomationAsync, GetDataAutomationStatus), which moto lacks.

    simulator = BdaSimulator("us-east-1", delay_seconds=30, clock=cloud.clock, max_concurrent_jobs=5)
    register(simulator)

From then on, boto3 `bedrock-data-automation-runtime` clients in this process (and requests signed for `bedrock`
that reach the offline endpoint) are answered here, in botocore's JSON 1.1 shapes. InvokeDataAutomationAsync answers
`{"invocationArn": "arn:aws:bedrock:{region}:{account}:data-automation-invocation/{job id}"}`; the same
`clientToken` answers the same ARN (and starts nothing). A job is Created, InProgress after half of its duration, and
ends after its duration (simulated time): Success, ClientError or ServiceError.

On success it writes, as BDA does, under `{outputConfiguration.s3Uri}/{job id}/`:
- `job_metadata.json`: the job's input, its output segment and where its result is;
- `0/standard_output/0/result.json`: a small standard-output document (metadata, a summary and the input's text).
GetDataAutomationStatus then reports `outputConfiguration.s3Uri` = the job_metadata.json URI. A failed job writes
nothing and reports `errorType` / `errorMessage`.

Unless the call set `notificationConfiguration.eventBridgeConfiguration.eventBridgeEnabled` to false, it puts BDA's
events on the default bus: source `aws.bedrock`, detail-types `Bedrock Data Automation Job Created` (at the call),
`... Job Succeeded`, `... Job Failed With Client Error`, `... Job Failed With Service Error`; detail `{"job_id",
"job_status", "semantic_modality", "input_s3_object": {"s3_bucket", "name"}, "output_s3_location": {"s3_bucket",
"name"}}` (+ `job_duration_in_seconds` or `error_message`), resources `[]` — the fields of AWS's sample events.

The concurrent-job quota: at most `max_concurrent_jobs` jobs Created or InProgress at once. A call beyond it fails
with `ServiceQuotaExceededException` ("This exception will be thrown when service quota is exceeded", botocore's
model of InvokeDataAutomationAsync; ThrottlingException is its API-rate error), and starts nothing. `peak_jobs` is
the most jobs that were running at once, `rejected` how many calls the quota refused.

Knobs (constructor arguments):
    delay_seconds: simulated seconds from the call to the terminal status (default 1.0); `durations`, if given, is a
        function of the input S3 URI giving each job's own duration instead.
    clock: the offline cloud's clock (localcloud.clock), which durations and timestamps follow (default: real time).
    outcome: terminal status of every job: "Success" (default), "ClientError" or "ServiceError".
    max_concurrent_jobs: the quota (default: the Region's, 25 in us-east-1 and us-west-2, else 5).
    drop_events: finish jobs but emit no event (BDA's events are best effort); GetDataAutomationStatus still tells.
Per job, an input object whose name (after the last `/`) starts with `fail-` ends ClientError and one starting with
`error-` ends ServiceError, whatever `outcome` says. An input object that does not exist ends ClientError.

A profile of another geography than the Region's (`us.data-automation-v1` called in eu-west-1) is refused with
`ValidationException`, as BDA refuses a profile it does not offer in the Region (localcloud.regions).

Approximations: the output documents carry a subset of BDA's standard output; messages are modelled on AWS's
documentation, not copied from live responses; the project and profile ARNs are checked against botocore's patterns
and the profile's geography only (its ARN's Region and account are not); blueprints, encryption and tags are
accepted and ignored.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from botocore.exceptions import ClientError

from localcloud.account import ACCOUNT_ID
from localcloud.clock import Clock
from localcloud.regions import DATA_AUTOMATION_GEOGRAPHIES
from localcloud.simulators import ServiceError, Simulator, signed_region, split_s3_uri
from localcloud.simulators.shapes import data_automation_status

EVENT_SOURCE = "aws.bedrock"
DETAIL_TYPES = {
    "Created": "Bedrock Data Automation Job Created",
    "Success": "Bedrock Data Automation Job Succeeded",
    "ClientError": "Bedrock Data Automation Job Failed With Client Error",
    "ServiceError": "Bedrock Data Automation Job Failed With Service Error",
}
EVENT_STATUS = {
    "Created": "CREATED",
    "Success": "SUCCESS",
    "ClientError": "CLIENT_ERROR",
    "ServiceError": "SERVICE_ERROR",
}
OUTCOMES = ("Success", "ClientError", "ServiceError")
ACTIVE = ("Created", "InProgress")
HIGH_QUOTA_REGIONS = ("us-east-1", "us-west-2")
NAME_OUTCOMES = {"fail-": "ClientError", "error-": "ServiceError"}
MESSAGES = {
    "ClientError": "The input document could not be processed (simulated by localcloud).",
    "ServiceError": "An internal error occurred. Retry the request (simulated by localcloud).",
}
# botocore's patterns, which botocore itself does not check.
_S3_URI = r"s3://[a-z0-9][\.\-a-z0-9]{1,61}[a-z0-9](/[^\x00-\x1F\x7F\{^}%`\]\">\[~<#|]*)?"
PATTERNS = {
    "clientToken": r"[a-zA-Z0-9](-*[a-zA-Z0-9]){1,256}",
    "inputConfiguration.s3Uri": _S3_URI,
    "outputConfiguration.s3Uri": _S3_URI,
    "dataAutomationConfiguration.dataAutomationProjectArn": r"arn:aws(|-cn|-iso|-iso-[a-z]|-us-gov):bedrock:"
    r"[a-zA-Z0-9-]*:(aws|[0-9]{12}):data-automation-project/[a-zA-Z0-9-_]+",
    "dataAutomationProfileArn": r"arn:aws(|-cn|-iso|-iso-[a-z]|-us-gov):bedrock:[a-zA-Z0-9-]*:(aws|[0-9]{12}):"
    r"data-automation-profile/[a-zA-Z0-9-_.]+",
}
_INVOCATION_ARN = re.compile(r"arn:aws[-a-z]*:bedrock:[a-z0-9-]+:[0-9]{12}:data-automation-invocation/(?P<id>[^/]+)")


@dataclass
class _Job:
    job_id: str
    arn: str
    input_uri: str
    output_uri: str  # the job's folder: {outputConfiguration.s3Uri}/{job id}/
    outcome: str
    submitted: datetime
    duration: float
    events: bool
    status: str = "Created"
    end: datetime | None = None
    message: str | None = None

    @property
    def metadata_uri(self) -> str:
        return f"{self.output_uri}job_metadata.json"

    def description(self) -> dict[str, Any]:
        """GetDataAutomationStatus's answer."""
        return data_automation_status(
            self.status,
            self.submitted,
            self.end,
            self.metadata_uri if self.status == "Success" else None,
            self.status if self.status in MESSAGES else None,
            self.message,
        )


class BdaSimulator(Simulator):
    """Bedrock Data Automation's asynchronous runtime API under its concurrent-job quota; see the module docstring."""

    service: ClassVar[str] = "bedrock-data-automation-runtime"
    outcomes = OUTCOMES
    jobs: dict[str, _Job]

    def __init__(
        self,
        region: str,
        delay_seconds: float = 1.0,
        clock: Clock | None = None,
        *,
        outcome: str = "Success",
        max_concurrent_jobs: int | None = None,
        durations: Callable[[str], float] | None = None,
        drop_events: bool = False,
    ) -> None:
        super().__init__(region, delay_seconds, clock, outcome)
        limit = max_concurrent_jobs or (25 if region in HIGH_QUOTA_REGIONS else 5)
        if limit < 1:
            raise ValueError("max_concurrent_jobs must be at least 1")
        self.max_concurrent_jobs, self.durations, self.drop_events = limit, durations, drop_events
        self.peak_jobs = 0  # the most jobs Created or InProgress at once
        self.rejected = 0  # calls the quota refused

    @property
    def running_jobs(self) -> int:
        with self._lock:
            return sum(job.status in ACTIVE for job in self.jobs.values())

    # --- operations -------------------------------------------------------------------------------------------

    def InvokeDataAutomationAsync(self, params: dict[str, Any]) -> dict[str, Any]:
        self._validate(params)
        self._check_geography(params["dataAutomationProfileArn"])
        token = str(params.get("clientToken") or uuid.uuid4())  # botocore fills it in; raw callers may not
        input_uri = params["inputConfiguration"]["s3Uri"]
        name = input_uri.rpartition("/")[2]
        outcome = next((o for prefix, o in NAME_OUTCOMES.items() if name.startswith(prefix)), self.outcome)
        events = (params.get("notificationConfiguration") or {}).get("eventBridgeConfiguration", {})
        with self._lock:
            if token in self._by_token:  # an idempotent retry: the same invocation, nothing started
                return {"invocationArn": self.jobs[self._by_token[token]].arn}
            if self.running_jobs >= self.max_concurrent_jobs:
                self.rejected += 1
                raise ServiceQuotaExceeded(self.max_concurrent_jobs)
            job_id = str(uuid.uuid4())
            output = params["outputConfiguration"]["s3Uri"].rstrip("/")
            job = _Job(
                job_id,
                f"arn:aws:bedrock:{self.region}:{ACCOUNT_ID}:data-automation-invocation/{job_id}",
                input_uri,
                f"{output}/{job_id}/",
                outcome,
                self.now(),
                self.durations(input_uri) if self.durations else self.delay_seconds,
                bool(events.get("eventBridgeEnabled", True)) and not self.drop_events,
            )
            self.jobs[job_id] = job
            self._by_token[token] = job_id
            self.peak_jobs = max(self.peak_jobs, self.running_jobs)
        self._announce(job, "Created")
        self.later(job.duration / 2, lambda: self._begin(job))
        self.later(job.duration, lambda: self._finish(job))
        return {"invocationArn": job.arn}

    def GetDataAutomationStatus(self, params: dict[str, Any]) -> dict[str, Any]:
        match = _INVOCATION_ARN.fullmatch(str(params.get("invocationArn", "")))
        if match is None:
            raise ServiceError("ValidationException", f"Invalid invocation ARN: {params.get('invocationArn')}")
        with self._lock:
            job = self.jobs.get(match.group("id"))
            if job is None:
                raise ServiceError("ResourceNotFoundException", f"Invocation {params['invocationArn']} not found.")
            return job.description()

    # --- lifecycle (timer threads) ----------------------------------------------------------------------------

    def _begin(self, job: _Job) -> None:
        with self._lock:
            if job.status == "Created":
                job.status = "InProgress"

    def _finish(self, job: _Job) -> None:
        status, message = self._process(job)  # S3 I/O outside the lock
        with self._lock:
            job.status, job.message, job.end = status, message, self.now()
        self._announce(job, status)

    def _process(self, job: _Job) -> tuple[str, str | None]:
        """Do the job against moto S3; returns (terminal status, errorMessage)."""
        if job.outcome != "Success":
            return job.outcome, MESSAGES[job.outcome]
        s3 = self.client("s3")
        in_bucket, in_key = split_s3_uri(job.input_uri)
        try:
            body = s3.get_object(Bucket=in_bucket, Key=in_key)["Body"].read().decode(errors="replace")
        except ClientError as exc:
            return "ClientError", f"Unable to read the input document {job.input_uri}: {exc}"
        out_bucket, folder = split_s3_uri(job.output_uri)
        result_key = f"{folder}0/standard_output/0/result.json"
        result = {
            "metadata": {"asset_id": "0", "semantic_modality": "DOCUMENT", "s3_bucket": in_bucket, "s3_key": in_key},
            "document": {"summary": body[:200], "statistics": {"element_count": 1, "page_count": 1}},
            "pages": [{"page_index": 0, "representation": {"text": body}}],
        }
        metadata = {
            "job_id": job.job_id,
            "job_status": "PROCESSED",
            "semantic_modality": "DOCUMENT",
            "output_metadata": [
                {
                    "asset_id": 0,
                    "segment_metadata": [
                        {"standard_output_path": f"s3://{out_bucket}/{result_key}", "custom_output_status": "NO_MATCH"}
                    ],
                }
            ],
        }
        try:
            s3.put_object(Bucket=out_bucket, Key=result_key, Body=json.dumps(result).encode())
            s3.put_object(Bucket=out_bucket, Key=f"{folder}job_metadata.json", Body=json.dumps(metadata).encode())
        except ClientError as exc:
            return "ClientError", f"Unable to write to the output S3 location {job.output_uri}: {exc}"
        return "Success", None

    def _announce(self, job: _Job, status: str) -> None:
        if not job.events:
            return
        in_bucket, in_key = split_s3_uri(job.input_uri)
        out_bucket, folder = split_s3_uri(job.output_uri)
        detail: dict[str, Any] = {
            "job_id": job.job_id,
            "job_status": EVENT_STATUS[status],
            "semantic_modality": "Document",
            "input_s3_object": {"s3_bucket": in_bucket, "name": in_key},
            "output_s3_location": {"s3_bucket": out_bucket, "name": f"{folder}0"},
        }
        if status == "Success" and job.end is not None:
            detail["job_duration_in_seconds"] = int((job.end - job.submitted).total_seconds())
        elif job.message:
            detail["error_message"] = job.message
        self.emit(EVENT_SOURCE, DETAIL_TYPES[status], detail, [])

    # --- helpers ----------------------------------------------------------------------------------------------

    @staticmethod
    def _validate(params: dict[str, Any]) -> None:
        """What the service checks beyond botocore's client-side validation (required members are checked again
        for callers that bypass botocore)."""
        required = ("inputConfiguration", "outputConfiguration", "dataAutomationProfileArn")
        missing = [name for name in required if name not in params]
        if missing:
            raise ServiceError("ValidationException", f"Missing required parameters: {', '.join(missing)}")
        project = params.get("dataAutomationConfiguration") or {}
        values = {
            "clientToken": params.get("clientToken"),
            "inputConfiguration.s3Uri": params["inputConfiguration"].get("s3Uri", ""),
            "outputConfiguration.s3Uri": params["outputConfiguration"].get("s3Uri", ""),
            "dataAutomationConfiguration.dataAutomationProjectArn": project.get("dataAutomationProjectArn"),
            "dataAutomationProfileArn": params["dataAutomationProfileArn"],
        }
        for member, value in values.items():
            if value is not None and not re.fullmatch(PATTERNS[member], str(value)):
                raise ServiceError(
                    "ValidationException",
                    f"1 validation error detected: Value '{value}' at '{member}' failed to satisfy constraint: "
                    f"Member must satisfy regular expression pattern: {PATTERNS[member]}",
                )

    def _check_geography(self, profile_arn: str) -> None:
        """A job runs on the profile of its Region's geography (localcloud.regions): another's is refused, as BDA
        refuses a profile it does not offer there (ValidationException; BDA's words are not documented, these are
        ours)."""
        region = signed_region() or self.region
        geography = DATA_AUTOMATION_GEOGRAPHIES.get(region)
        if geography is not None and profile_arn.rpartition("/")[2].partition(".")[0] != geography:
            raise ServiceError(
                "ValidationException",
                f"The data automation profile {profile_arn} is not of {region}'s geography: use its "
                f"{geography}.data-automation-v1 profile.",
            )


class ServiceQuotaExceeded(ServiceError):
    def __init__(self, limit: int) -> None:
        super().__init__(
            "ServiceQuotaExceededException",
            f"The number of concurrent data automation jobs in this account and Region has reached its quota of "
            f"{limit}. Try again after a running job ends.",
        )


__all__ = ["DETAIL_TYPES", "EVENT_SOURCE", "BdaSimulator"]
