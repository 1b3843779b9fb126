"""Simulated AWS HealthLake: FHIR data stores, their SigV4-signed FHIR endpoint and FHIR bulk-data exports.

    simulator = HealthLakeSimulator("us-east-1", delay_seconds=60, clock=Clock(speedup=60))
    register(simulator)
    datastore_id = simulator.create_datastore()

From then on, boto3 `healthlake` clients in this process are answered here (botocore's JSON 1.0 shapes), and each data
store's FHIR endpoint is served over real HTTP by this simulator on 127.0.0.1 (one port per simulator, chosen by the
OS; `stop()` closes it). DescribeFHIRDatastore gives it as `DatastoreEndpoint`:
`http://127.0.0.1:{port}/datastore/{DatastoreId}/r4/` (on AWS: `https://healthlake.{region}.amazonaws.com/...`).

Operations (boto3): CreateFHIRDatastore, DescribeFHIRDatastore, ListFHIRDatastores, StartFHIRExportJob,
DescribeFHIRExportJob, ListFHIRExportJobs. Data stores are ACTIVE as soon as they are created.

FHIR REST (every request must be SigV4-signed for service `healthlake` and the simulator's region, by one of the
credentials the simulator knows: those boto3 resolves in this process at request time, plus `credentials`; anything
else answers 403 with a FHIR OperationOutcome):

- `POST {endpoint}$export[?_since=<instant>&_type=<types>&_outputFormat=application/fhir+ndjson]` starts a
  system-level export, as HealthLake documents it: headers `Prefer: respond-async` (required) and
  `Content-Type: application/fhir+json`; JSON body `{"JobName"?, "OutputDataConfig": {"S3Configuration":
  {"S3Uri", "KmsKeyId"}}, "DataAccessRoleArn"}` (HealthLake takes the S3 location, KMS key and role from the body,
  not from FHIR parameters). Answer: 202 Accepted, `Content-Location: {endpoint}export/{JobId}`, body
  `{"datastoreId", "jobStatus": "SUBMITTED", "jobId"}`. `_since` must be a FHIR instant with a time zone; only
  resources with `_since < meta.lastUpdated <= transactionTime` (the kick-off time) are exported.
- `GET {endpoint}export/{JobId}` answers 200 with HealthLake's status body: `exportJobProperties` (camelCase, times
  written like `Aug 26, 2023 1:46:56 PM`), `transactionTime`, `request`, `requiresAccessToken`, `output` and
  `error` (lists of `{"type", "url"}`).
- `GET {endpoint}$export` answers 405: HealthLake documents only POST for system-level exports. Patient- and
  Group-level exports, cancelling (DELETE) and FHIR reads/searches answer 400 `not-supported`.

A job goes SUBMITTED -> IN_PROGRESS (after half of `delay_seconds`) -> terminal (after `delay_seconds`), in simulated
time. It writes NDJSON files to moto S3 (SSE-KMS with the given key id) under
`{S3Uri}/{DatastoreId}-FHIR_EXPORT-{JobId}/{ResourceType}/{ResourceType}-{token}-{n}-0.ndjson`, one resource type
per file, at most `records_per_file` resources per file (n counts from 1 per type; token is one 19-digit number per
job). DescribeFHIRExportJob then reports that job folder as `OutputDataConfig.S3Configuration.S3Uri`, as AWS's
early examples and a live status response show (a 2024 CLI example shows the requested prefix instead: read
either). It puts HealthLake's events on the default bus: source `aws.healthlake`, detail-types
`Export Job Submitted`, `Export Job In Progress`, `Export Job Completed`, `Export Job Completed With Errors`,
`Export Job Failed`; detail `{"datastoreId", "jobId", "submitTime", "outputDataConfig": {"s3Uri"}}` (the fields
AWS's event schema lists); resources `[DatastoreArn]`.

Data: every new data store is seeded with `file_count` resource types (Patient, Observation, Encounter, ... at most
10), `records_per_file` resources each; resource j (from 0) of each type was last updated `records_per_file - j`
days before the data store was created. `add_resources(datastore_id, resources)` adds FHIR-like resources with the
`meta.lastUpdated` they carry (or now). A full export of the seed data thus writes `file_count` files of
`records_per_file` lines.

Knobs (constructor arguments):
    delay_seconds: simulated seconds from kick-off to the terminal status (default 1.0).
    clock: the offline cloud's clock (localcloud.clock), which delays follow (default: real time); the stamps are
        the wall clock's (`now`).
    outcome: terminal status of every job: "COMPLETED" (default), "COMPLETED_WITH_ERRORS" (the resources of the
        resource type that sorts last, or the last resource if only one type is exported, fail: they are listed as
        OperationOutcome lines in `{job folder}/OperationOutcome/OperationOutcome-{token}-1-0.ndjson` and in
        Message), "FAILED" (nothing is written; Message says why) or "STUCK" (stays IN_PROGRESS forever).
    file_count, records_per_file: the seed data, and the per-file cap (AWS's cap is 5,000 resources per file).
    record_bytes: if set, every exported NDJSON line is padded (through the resource's `text.div`) to exactly this
        many bytes, newline excluded, so tests can make large files.
    one_running_export: at most one export in SUBMITTED or IN_PROGRESS per simulator (AWS: one concurrent export
        job per account and region, not adjustable). A second kick-off answers 429 with an OperationOutcome
        (`code: throttled`, `Retry-After`); StartFHIRExportJob raises ThrottlingException (which botocore retries
        with backoff before raising it).
    credentials: extra `localcloud.account.Credential`s the FHIR endpoint accepts.
Per job, a JobName starting with `fail-`, `partial-` or `stuck-` ends FAILED, COMPLETED_WITH_ERRORS or STUCK whatever
`outcome` says. A missing output bucket ends FAILED.

Approximations: AWS may queue a second export (status QUEUED, event `Export Job Queued`) where this simulator refuses
it, and the exact error code AWS gives is not documented. CreateFHIRDatastore answers ACTIVE at once (AWS: CREATING,
ACTIVE minutes later). The `_since` boundary is strict, as the FHIR bulk-data specification words it ("changed
after"); one user report of HealthLake says `>=`. Error texts, the error-file location, the file-name token
and the status codes of the FHIR endpoint's errors are modelled on the FHIR bulk-data specification and AWS's
documentation, not copied from live responses. The KMS key and the data access role are checked against botocore's
patterns only (never against moto KMS or IAM). 403 bodies are OperationOutcomes carrying AWS's SigV4 messages.
Session tokens are not validated; presigned (query-string) SigV4 is not accepted.
"""

from __future__ import annotations

import json
import logging
import math
import re
import secrets
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, cast
from urllib.parse import parse_qsl, unquote

import boto3
from botocore.exceptions import ClientError

from localcloud.account import ACCOUNT_ID, EXECUTION_ROLE, Credential
from localcloud.clock import Clock
from localcloud.httpapi import LocalHandler, LocalServer, Request, verify_sigv4
from localcloud.simulators import ServiceError, Simulator, split_s3_uri
from localcloud.simulators.shapes import fhir_export_job

LOG = logging.getLogger("localcloud.simulators.healthlake")

SIGNING_SERVICE = "healthlake"
EVENT_SOURCE = "aws.healthlake"
DETAIL_TYPES = {
    "SUBMITTED": "Export Job Submitted",
    "IN_PROGRESS": "Export Job In Progress",
    "COMPLETED": "Export Job Completed",
    "COMPLETED_WITH_ERRORS": "Export Job Completed With Errors",
    "FAILED": "Export Job Failed",
}
OUTCOMES = ("COMPLETED", "COMPLETED_WITH_ERRORS", "FAILED", "STUCK")
ACTIVE = ("SUBMITTED", "IN_PROGRESS")
NAME_OUTCOMES = {"fail-": "FAILED", "partial-": "COMPLETED_WITH_ERRORS", "stuck-": "STUCK"}
OUTPUT_FORMATS = ("application/fhir+ndjson", "application/ndjson", "ndjson")
SEED_TYPES = (
    "Patient",
    "Observation",
    "Encounter",
    "Condition",
    "Procedure",
    "MedicationRequest",
    "AllergyIntolerance",
    "Immunization",
    "DiagnosticReport",
    "DocumentReference",
)
# botocore's patterns, which botocore itself does not check (\p{L}\p{Z}\p{N} approximated by \w\s).
_NAME = r"[\w\s.:/=+\-%@]*"
PATTERNS = {
    "DatastoreId": _NAME,
    "JobName": _NAME,
    "S3Uri": r"s3://[a-z0-9][\.\-a-z0-9]{1,61}[a-z0-9](/.*)?",
    "KmsKeyId": r"(arn:aws((-us-gov)|(-iso)|(-iso-b)|(-cn))?:kms:)?([a-z]{2}-[a-z]+(-[a-z]+)?-\d:)?(\d{12}:)?"
    r"(((key/)?[a-zA-Z0-9-_]+)|(alias/[a-zA-Z0-9:/_-]+))",
    "DataAccessRoleArn": r"arn:aws(-[^:]+)?:iam::[0-9]{12}:role/.+",
    "ClientToken": r"[a-zA-Z0-9-]+",
}
_INSTANT = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})")
_RESOURCE_TYPE = re.compile(r"[A-Z][A-Za-z]+")
_PATH = re.compile(r"/datastore/(?P<datastore>[^/]+)/r4/(?P<rest>.*)")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_DIV_OPEN, _DIV_CLOSE = '<div xmlns="http://www.w3.org/1999/xhtml">', "</div>"


# --- state ----------------------------------------------------------------------------------------------------


@dataclass
class _Datastore:
    datastore_id: str
    name: str | None
    arn: str
    created: datetime
    endpoint: str
    extra: dict[str, Any]  # SseConfiguration, PreloadDataConfig, IdentityProviderConfiguration as described
    resources: list[dict[str, Any]] = field(default_factory=list)

    def properties(self) -> dict[str, Any]:
        props: dict[str, Any] = {"DatastoreId": self.datastore_id, "DatastoreArn": self.arn}
        if self.name is not None:
            props["DatastoreName"] = self.name
        props.update(
            {
                "DatastoreStatus": "ACTIVE",
                "CreatedAt": self.created.timestamp(),
                "DatastoreTypeVersion": "R4",
                "DatastoreEndpoint": self.endpoint,
                **self.extra,
            }
        )
        return props


@dataclass
class _Job:
    job_id: str
    datastore: _Datastore
    name: str | None
    s3_uri: str  # as requested
    kms_key_id: str
    role_arn: str
    outcome: str
    submitted: datetime  # also the export's transactionTime
    since: datetime | None = None
    types: frozenset[str] | None = None
    request: str | None = None  # the kick-off URL, for jobs started over FHIR REST
    token: str = field(default_factory=lambda: str(secrets.randbelow(9 * 10**18) + 10**18))
    status: str = "SUBMITTED"
    end: datetime | None = None
    message: str | None = None
    output: list[tuple[str, str]] = field(default_factory=list)  # (resource type, s3 url)
    errors: list[tuple[str, str]] = field(default_factory=list)

    @property
    def folder(self) -> str:
        """The job's output folder, `s3://bucket/prefix/{DatastoreId}-FHIR_EXPORT-{JobId}/`."""
        base = self.s3_uri if self.s3_uri.endswith("/") else self.s3_uri + "/"
        return f"{base}{self.datastore.datastore_id}-FHIR_EXPORT-{self.job_id}/"

    def properties(self) -> dict[str, Any]:
        return fhir_export_job(
            self.job_id,
            self.name,
            self.status,
            self.submitted,
            self.datastore.datastore_id,
            self.folder,
            self.kms_key_id,
            self.role_arn,
            self.end,
            self.message,
        )

    def status_body(self) -> dict[str, Any]:
        """What `GET {endpoint}export/{JobId}` answers (HealthLake's spelling: camelCase, Java-style times)."""
        props: dict[str, Any] = {"jobId": self.job_id}
        if self.name is not None:
            props["jobName"] = self.name
        props.update({"jobStatus": self.status, "submitTime": _java_time(self.submitted)})
        if self.end is not None:
            props["endTime"] = _java_time(self.end)
        props.update(
            {
                "datastoreId": self.datastore.datastore_id,
                "outputDataConfig": {"s3Configuration": {"s3Uri": self.folder, "kmsKeyId": self.kms_key_id}},
                "dataAccessRoleArn": self.role_arn,
            }
        )
        if self.message is not None:
            props["message"] = self.message
        return {
            "exportJobProperties": props,
            "transactionTime": _instant(self.submitted),
            "request": self.request or f"{self.datastore.endpoint}$export",
            "requiresAccessToken": False,
            "output": [{"type": kind, "url": url} for kind, url in self.output],
            "error": [{"type": kind, "url": url} for kind, url in self.errors],
        }


def _instant(moment: datetime) -> str:
    """A FHIR instant in UTC with milliseconds, e.g. 2026-11-21T22:30:14.123Z."""
    moment = moment.astimezone(UTC)
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{moment.microsecond // 1000:03d}Z"


def _java_time(moment: datetime) -> str:
    """`Aug 26, 2023 1:46:56 PM`, as HealthLake's export status endpoint writes times (UTC here)."""
    moment = moment.astimezone(UTC)
    hour = moment.hour % 12 or 12
    suffix = "AM" if moment.hour < 12 else "PM"
    return f"{_MONTHS[moment.month - 1]} {moment.day}, {moment.year} {hour}:{moment:%M:%S} {suffix}"


def _parse_instant(value: str) -> datetime:
    if not _INSTANT.fullmatch(value):
        raise ValueError(f"{value!r} is not a FHIR instant (YYYY-MM-DDThh:mm:ss[.sss] with Z or an offset)")
    return datetime.fromisoformat(value).astimezone(UTC)


# How the FHIR endpoint answers the errors the API operations raise: (HTTP status, OperationOutcome issue code).
_FHIR_ERRORS = {
    "ValidationException": (400, "invalid"),
    "ResourceNotFoundException": (404, "not-found"),
    "ThrottlingException": (429, "throttled"),
}


def _outcome(code: str, diagnostics: str) -> dict[str, Any]:
    return {
        "resourceType": "OperationOutcome",
        "issue": [{"severity": "error", "code": code, "diagnostics": diagnostics}],
    }


class _FhirError(Exception):
    """Answer the FHIR request with `status` and an OperationOutcome."""

    def __init__(self, status: int, code: str, diagnostics: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(diagnostics)
        self.status, self.code, self.diagnostics, self.headers = status, code, diagnostics, headers or {}


# --- the simulator --------------------------------------------------------------------------------------------


class HealthLakeSimulator(Simulator):
    """AWS HealthLake's data stores, FHIR endpoint and bulk-data exports; see the module docstring."""

    service: ClassVar[str] = "healthlake"
    outcomes = OUTCOMES
    jobs: dict[str, _Job]

    def __init__(
        self,
        region: str,
        delay_seconds: float = 1.0,
        clock: Clock | None = None,
        *,
        outcome: str = "COMPLETED",
        file_count: int = 2,
        records_per_file: int = 5,
        record_bytes: int | None = None,
        one_running_export: bool = True,
        credentials: Iterable[Credential] = (),
    ) -> None:
        super().__init__(region, delay_seconds, clock, outcome)
        if not 0 <= file_count <= len(SEED_TYPES):
            raise ValueError(f"file_count must be between 0 and {len(SEED_TYPES)}")
        if records_per_file < 1:
            raise ValueError("records_per_file must be at least 1")
        self.file_count, self.records_per_file = file_count, records_per_file
        self.record_bytes, self.one_running_export = record_bytes, one_running_export
        self.datastores: dict[str, _Datastore] = {}
        self.credentials: dict[str, Credential] = {c.access_key_id: c for c in credentials}
        self._server: _FhirServer | None = _FhirServer(("127.0.0.1", 0), _FhirHandler)
        self._server.simulator = self
        self.port = self._server.port
        self._server.start("healthlake")
        LOG.info("HealthLake FHIR endpoint listening on http://127.0.0.1:%s", self.port)

    def now(self) -> datetime:
        """The wall clock, for HealthLake's stamps (a resource's meta.lastUpdated, a data store's and an export's
        times, hence its transactionTime): the export workflow compares them with its own trigger time, the previous
        run's `$$.Execution.StartTime`, and executions and functions run on the wall clock. On the cloud's clock,
        which runs ahead at a speed-up, every resource looked changed since every run, and each run exported it all
        again. The job's delay still runs on the cloud's clock (`later`)."""
        return datetime.now(UTC)

    def stop(self) -> None:
        super().stop()
        server, self._server = self._server, None
        if server is not None:
            server.stop()

    # --- conveniences for tests and the offline cloud ---------------------------------------------------------

    def create_datastore(self, name: str | None = "callback-kit", *, seed: bool = True) -> str:
        """Create an ACTIVE data store (seeded with the default data unless `seed` is false); returns its id."""
        return self._create(name, {}, seed=seed).datastore_id

    def endpoint(self, datastore_id: str) -> str:
        return self._datastore(datastore_id).endpoint

    def add_resources(self, datastore_id: str, resources: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        """Store copies of FHIR-like resources and return them: `resourceType` is required; `id` and
        `meta.lastUpdated` (a FHIR instant, rewritten in UTC with milliseconds) are filled in when missing."""
        stored = []
        with self._lock:
            datastore = self._datastore(datastore_id)
            for resource in resources:
                copy = json.loads(json.dumps(resource))
                if not _RESOURCE_TYPE.fullmatch(str(copy.get("resourceType", ""))):
                    raise ValueError(f"not a FHIR resource type: {copy.get('resourceType')!r}")
                copy.setdefault("id", str(uuid.uuid4()))
                meta = copy.setdefault("meta", {})
                meta.setdefault("versionId", "1")
                meta["lastUpdated"] = _instant(
                    _parse_instant(meta["lastUpdated"]) if "lastUpdated" in meta else self.now()
                )
                stored.append(copy)
            datastore.resources.extend(stored)
        return stored

    # --- operations (boto3) -----------------------------------------------------------------------------------

    def CreateFHIRDatastore(self, params: dict[str, Any]) -> dict[str, Any]:
        if params.get("DatastoreTypeVersion") != "R4":
            raise ServiceError("ValidationException", "DatastoreTypeVersion must be R4.")
        name = params.get("DatastoreName")
        if name is not None:
            self._check("DatastoreName", str(name), _NAME)
        with self._lock:
            token = params.get("ClientToken")
            if token and f"datastore:{token}" in self._by_token:
                datastore = self.datastores[self._by_token[f"datastore:{token}"]]
            else:
                extra: dict[str, Any] = {
                    k: params[k]
                    for k in ("SseConfiguration", "PreloadDataConfig", "IdentityProviderConfiguration")
                    if k in params
                }
                datastore = self._create(name, extra, seed=True)
                if token:
                    self._by_token[f"datastore:{token}"] = datastore.datastore_id
        return {
            "DatastoreId": datastore.datastore_id,
            "DatastoreArn": datastore.arn,
            "DatastoreStatus": "ACTIVE",
            "DatastoreEndpoint": datastore.endpoint,
        }

    def DescribeFHIRDatastore(self, params: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            return {"DatastoreProperties": self._datastore(self._datastore_id(params)).properties()}

    def ListFHIRDatastores(self, params: dict[str, Any]) -> dict[str, Any]:
        wanted = params.get("Filter", {})
        with self._lock:
            found = [
                d.properties()
                for d in self.datastores.values()
                if wanted.get("DatastoreName", d.name) == d.name
                and wanted.get("DatastoreStatus", "ACTIVE") == "ACTIVE"
                and d.created.timestamp() < float(wanted.get("CreatedBefore", math.inf))
                and d.created.timestamp() > float(wanted.get("CreatedAfter", -math.inf))
            ]
        return self._page(found, "DatastorePropertiesList", params)

    def StartFHIRExportJob(self, params: dict[str, Any]) -> dict[str, Any]:
        datastore_id = self._datastore_id(params)
        token = params.get("ClientToken")
        if token is not None:
            self._check("ClientToken", str(token), PATTERNS["ClientToken"])
        config = self._output_config(params)
        with self._lock:
            if token and token in self._by_token:  # idempotent retry: the same job
                job = self.jobs[self._by_token[token]]
                return {"JobId": job.job_id, "JobStatus": job.status, "DatastoreId": job.datastore.datastore_id}
            datastore = self._datastore(datastore_id)
            self._check_quota()
            job = self._submit(datastore, config)
            if token:
                self._by_token[token] = job.job_id
        return {"JobId": job.job_id, "JobStatus": job.status, "DatastoreId": datastore.datastore_id}

    def DescribeFHIRExportJob(self, params: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            return {"ExportJobProperties": self._job(self._datastore_id(params), str(params.get("JobId"))).properties()}

    def ListFHIRExportJobs(self, params: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            datastore = self._datastore(self._datastore_id(params))
            found = [
                job.properties()
                for job in self.jobs.values()
                if job.datastore is datastore
                and params.get("JobName", job.name) == job.name
                and params.get("JobStatus", job.status) == job.status
                and job.submitted.timestamp() < float(params.get("SubmittedBefore", math.inf))
                and job.submitted.timestamp() > float(params.get("SubmittedAfter", -math.inf))
            ]
        return self._page(found, "ExportJobPropertiesList", params)

    # --- FHIR REST (server threads) ---------------------------------------------------------------------------

    def _serve(self, request: Request) -> tuple[int, dict[str, str], dict[str, Any]]:
        """Answer one FHIR request: (status, headers, JSON body)."""
        try:
            problem = self._authenticate(request)
            if problem is not None:
                raise _FhirError(403, "security", problem)
            match = _PATH.fullmatch(request.path)
            if match is None:
                raise _FhirError(404, "not-found", f"No HealthLake resource at {request.path}.")
            datastore_id, rest = match.group("datastore"), unquote(match.group("rest"))
            with self._lock:
                if datastore_id not in self.datastores:
                    raise _FhirError(404, "not-found", f"Data store {datastore_id} was not found.")
                datastore = self.datastores[datastore_id]
            if rest == "$export":
                if request.method != "POST":
                    raise _FhirError(
                        405,
                        "not-supported",
                        "A system-level $export must be a POST whose body gives OutputDataConfig and "
                        "DataAccessRoleArn.",
                        {"Allow": "POST"},
                    )
                return self._kick_off(datastore, request)
            if rest.startswith("export/") and request.method == "GET":
                with self._lock:
                    job = self._job(datastore_id, rest.removeprefix("export/"))
                    return 200, {"Content-Type": "application/json"}, job.status_body()
            if rest.startswith("export/"):
                raise _FhirError(400, "not-supported", f"{request.method} on an export job is not simulated offline.")
            raise _FhirError(400, "not-supported", f"{request.method} {rest} is not simulated offline.")
        except ServiceError as exc:
            status, code = _FHIR_ERRORS.get(exc.code, (500, "exception"))
            error = _FhirError(status, code, exc.message, {"Retry-After": "60"} if status == 429 else None)
        except _FhirError as exc:
            error = exc
        LOG.info("FHIR %s %s -> %s %s", request.method, request.path, error.status, error.diagnostics)
        headers = {"Content-Type": "application/fhir+json", **error.headers}
        return error.status, headers, _outcome(error.code, error.diagnostics)

    def _kick_off(self, datastore: _Datastore, request: Request) -> tuple[int, dict[str, str], dict[str, Any]]:
        if "respond-async" not in (request.headers.get("prefer") or ""):
            raise _FhirError(400, "invalid", "The Prefer header must be respond-async for $export.")
        query: dict[str, str] = {}
        for key, value in parse_qsl(request.query, keep_blank_values=True):
            if key not in ("_since", "_type", "_outputFormat"):
                raise _FhirError(400, "not-supported", f"The $export parameter {key} is not supported offline.")
            query[key] = value
        if query.get("_outputFormat", OUTPUT_FORMATS[0]) not in OUTPUT_FORMATS:
            raise _FhirError(400, "invalid", f"_outputFormat must be one of {', '.join(OUTPUT_FORMATS)}.")
        try:
            since = _parse_instant(query["_since"]) if query.get("_since") else None
        except ValueError as exc:
            raise _FhirError(400, "invalid", f"_since: {exc}") from None
        types = frozenset(t for t in query.get("_type", "").split(",") if t) or None
        try:
            body = json.loads(request.body or b"null")
        except ValueError:
            raise _FhirError(400, "invalid", "The request body is not JSON.") from None
        if not isinstance(body, dict):
            raise _FhirError(
                400, "required", "The body must be a JSON object with OutputDataConfig and DataAccessRoleArn."
            )
        config = self._output_config(body)
        with self._lock:
            self._check_quota()
            job = self._submit(datastore, config, since=since, types=types)
            job.request = f"{datastore.endpoint}$export" + (f"?{request.query}" if request.query else "")
        headers = {"Content-Type": "application/json", "Content-Location": f"{datastore.endpoint}export/{job.job_id}"}
        return 202, headers, {"datastoreId": datastore.datastore_id, "jobStatus": job.status, "jobId": job.job_id}

    def _authenticate(self, request: Request) -> str | None:
        """None if the request carries a valid SigV4 signature by a known key, else AWS's reason."""
        if not request.headers.get("authorization"):
            return "Missing Authentication Token"
        # The process's own credentials are resolved per request: the offline cloud may set them after construction.
        known = {c.access_key_id: c for c in [*_resolved_credentials(), EXECUTION_ROLE, *self.credentials.values()]}
        verdict = verify_sigv4(request, known, self.region, SIGNING_SERVICE)
        return verdict if isinstance(verdict, str) else None

    # --- jobs -------------------------------------------------------------------------------------------------

    def _submit(
        self,
        datastore: _Datastore,
        config: tuple[str | None, str, str, str],
        *,
        since: datetime | None = None,
        types: frozenset[str] | None = None,
    ) -> _Job:
        """Create a SUBMITTED job and schedule its life (caller holds the lock)."""
        name, s3_uri, kms_key_id, role_arn = config
        outcome = next((o for prefix, o in NAME_OUTCOMES.items() if (name or "").startswith(prefix)), self.outcome)
        job = _Job(uuid.uuid4().hex, datastore, name, s3_uri, kms_key_id, role_arn, outcome, self.now(), since, types)
        self.jobs[job.job_id] = job
        self.later(0, lambda: self._submitted(job))
        return job

    # Each step schedules the next, so the job's events go out in order however late a step's thread runs.
    def _submitted(self, job: _Job) -> None:
        self._announce(job, "SUBMITTED")
        self.later(self.delay_seconds / 2, lambda: self._begin(job))

    def _begin(self, job: _Job) -> None:
        with self._lock:
            if job.status != "SUBMITTED":
                return
            job.status = "IN_PROGRESS"
        self._announce(job, "IN_PROGRESS")
        if job.outcome != "STUCK":
            self.later(self.delay_seconds / 2, lambda: self._finish(job))

    def _finish(self, job: _Job) -> None:
        with self._lock:
            if job.status not in ACTIVE:
                return
            job.status = "IN_PROGRESS"
            selected = self._select(job)
        status, message, output, errors = self._export(job, selected)  # S3 I/O outside the lock
        with self._lock:
            job.status, job.message, job.output, job.errors, job.end = status, message, output, errors, self.now()
        self._announce(job, status)

    def _announce(self, job: _Job, status: str) -> None:
        detail = {
            "datastoreId": job.datastore.datastore_id,
            "jobId": job.job_id,
            "submitTime": _instant(job.submitted),
            "outputDataConfig": {"s3Uri": job.folder},
        }
        self.emit(EVENT_SOURCE, DETAIL_TYPES[status], detail, [job.datastore.arn])

    def _select(self, job: _Job) -> list[dict[str, Any]]:
        """The resources the job exports: `_since < lastUpdated <= transactionTime`, of the requested types."""
        chosen = []
        for resource in job.datastore.resources:
            updated = _parse_instant(resource["meta"]["lastUpdated"])
            if job.since is not None and updated <= job.since:
                continue
            if updated > job.submitted or (job.types is not None and resource["resourceType"] not in job.types):
                continue
            chosen.append(resource)
        return sorted(chosen, key=lambda r: (r["resourceType"], r["meta"]["lastUpdated"], r["id"]))

    def _export(
        self, job: _Job, selected: list[dict[str, Any]]
    ) -> tuple[str, str | None, list[tuple[str, str]], list[tuple[str, str]]]:
        """Write the job's files to moto S3; returns (terminal status, Message, output files, error files)."""
        if job.outcome == "FAILED":
            return "FAILED", "The export job failed. Simulated by localcloud.", [], []
        by_type: dict[str, list[dict[str, Any]]] = {}
        for resource in selected:
            by_type.setdefault(resource["resourceType"], []).append(resource)
        failing: list[dict[str, Any]] = []
        if job.outcome == "COMPLETED_WITH_ERRORS" and by_type:
            last = max(by_type)
            failing = by_type.pop(last) if len(by_type) > 1 else [by_type[last].pop()]
        s3 = self.client("s3")
        bucket, _ = split_s3_uri(job.folder)
        _, folder = split_s3_uri(job.folder)
        output: list[tuple[str, str]] = []
        errors: list[tuple[str, str]] = []
        try:
            for kind, resources in sorted(by_type.items()):
                for number, start in enumerate(range(0, len(resources), self.records_per_file), start=1):
                    key = f"{folder}{kind}/{kind}-{job.token}-{number}-0.ndjson"
                    lines = [self._line(r) for r in resources[start : start + self.records_per_file]]
                    self._put(s3, job, bucket, key, lines)
                    output.append((kind, f"s3://{bucket}/{key}"))
            if failing:
                key = f"{folder}OperationOutcome/OperationOutcome-{job.token}-1-0.ndjson"
                lines = [
                    json.dumps(
                        _outcome(
                            "exception",
                            f"{r['resourceType']}/{r['id']} could not be exported (simulated by localcloud).",
                        ),
                        separators=(",", ":"),
                    )
                    for r in failing
                ]
                self._put(s3, job, bucket, key, lines)
                errors.append(("OperationOutcome", f"s3://{bucket}/{key}"))
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "error")
            return "FAILED", f"Unable to write to the output S3 location {job.s3_uri}. {code}", [], []
        if failing:
            total = len(selected)
            message = (
                f"{len(failing)} of {total} resources could not be exported. "
                f"The errors are in s3://{bucket}/{folder}OperationOutcome/"
            )
            return "COMPLETED_WITH_ERRORS", message, output, errors
        if job.outcome == "COMPLETED_WITH_ERRORS":  # nothing was selected, so nothing could fail
            return "COMPLETED_WITH_ERRORS", "0 of 0 resources could not be exported.", output, errors
        return "COMPLETED", None, output, errors

    @staticmethod
    def _put(s3: Any, job: _Job, bucket: str, key: str, lines: list[str]) -> None:
        s3.put_object(
            Bucket=bucket,
            Key=key,
            Body=("\n".join(lines) + "\n").encode(),
            ContentType="application/fhir+ndjson",
            ServerSideEncryption="aws:kms",
            SSEKMSKeyId=job.kms_key_id,
        )

    def _line(self, resource: dict[str, Any]) -> str:
        line = json.dumps(resource, separators=(",", ":"))
        if self.record_bytes is None or len(line.encode()) >= self.record_bytes:
            return line
        padded = {**resource, "text": {"status": "generated", "div": _DIV_OPEN + _DIV_CLOSE}}
        room = self.record_bytes - len(json.dumps(padded, separators=(",", ":")).encode())
        if room < 0:
            return line
        padded["text"]["div"] = _DIV_OPEN + "x" * room + _DIV_CLOSE
        return json.dumps(padded, separators=(",", ":"))

    # --- helpers ----------------------------------------------------------------------------------------------

    def _create(self, name: str | None, extra: dict[str, Any], *, seed: bool) -> _Datastore:
        datastore_id = uuid.uuid4().hex
        extra = {
            "SseConfiguration": {"KmsEncryptionConfig": {"CmkType": "AWS_OWNED_KMS_KEY"}},
            "IdentityProviderConfiguration": {
                "AuthorizationStrategy": "AWS_AUTH",
                "FineGrainedAuthorizationEnabled": False,
            },
            **extra,
        }
        datastore = _Datastore(
            datastore_id,
            name,
            f"arn:aws:healthlake:{self.region}:{ACCOUNT_ID}:datastore/fhir/{datastore_id}",
            self.now(),
            f"http://127.0.0.1:{self.port}/datastore/{datastore_id}/r4/",
            extra,
        )
        with self._lock:
            self.datastores[datastore_id] = datastore
        if seed:
            self.add_resources(datastore_id, _seed(self.file_count, self.records_per_file, datastore.created))
        return datastore

    def _check_quota(self) -> None:
        """Refuse a second running export (caller holds the lock)."""
        if self.one_running_export and any(job.status in ACTIVE for job in self.jobs.values()):
            raise ServiceError(
                "ThrottlingException",
                "Only one export job can run at a time in this account and Region. Try again after the running "
                "export job ends.",
            )

    def _output_config(self, params: dict[str, Any]) -> tuple[str | None, str, str, str]:
        """(JobName, S3Uri, KmsKeyId, DataAccessRoleArn) from a StartFHIRExportJob-shaped request."""

        def fail(message: str) -> ServiceError:
            return ServiceError("ValidationException", message)

        s3 = (params.get("OutputDataConfig") or {}).get("S3Configuration")
        if not isinstance(s3, dict) or "S3Uri" not in s3 or "KmsKeyId" not in s3:
            raise fail("OutputDataConfig.S3Configuration with S3Uri and KmsKeyId is required.")
        if "DataAccessRoleArn" not in params:
            raise fail("DataAccessRoleArn is required.")
        name = params.get("JobName")
        values = {
            "JobName": name,
            "S3Uri": s3["S3Uri"],
            "KmsKeyId": s3["KmsKeyId"],
            "DataAccessRoleArn": params["DataAccessRoleArn"],
        }
        for member, value in values.items():
            if value is not None and (not isinstance(value, str) or not re.fullmatch(PATTERNS[member], value)):
                raise fail(
                    f"1 validation error detected: Value '{value}' at '{member}' failed to satisfy constraint: "
                    f"Member must satisfy regular expression pattern: {PATTERNS[member]}"
                )
        if name is not None and not 1 <= len(name) <= 64:
            raise fail("JobName must be 1 to 64 characters long.")
        return name, str(s3["S3Uri"]), str(s3["KmsKeyId"]), str(params["DataAccessRoleArn"])

    def _datastore_id(self, params: dict[str, Any]) -> str:
        datastore_id = str(params.get("DatastoreId", ""))
        self._check("DatastoreId", datastore_id, _NAME)
        if not 1 <= len(datastore_id) <= 32:
            raise ServiceError("ValidationException", "DatastoreId must be 1 to 32 characters long.")
        return datastore_id

    @staticmethod
    def _check(member: str, value: str, pattern: str) -> None:
        if not re.fullmatch(pattern, value):
            raise ServiceError(
                "ValidationException",
                f"1 validation error detected: Value '{value}' at '{member}' failed to satisfy constraint: "
                f"Member must satisfy regular expression pattern: {pattern}",
            )

    def _datastore(self, datastore_id: str) -> _Datastore:
        if datastore_id not in self.datastores:
            raise ServiceError("ResourceNotFoundException", f"Data store {datastore_id} was not found.")
        return self.datastores[datastore_id]

    def _job(self, datastore_id: str, job_id: str) -> _Job:
        job = self.jobs.get(job_id)
        if job is None or job.datastore.datastore_id != datastore_id:
            raise ServiceError(
                "ResourceNotFoundException", f"Export job {job_id} was not found in data store {datastore_id}."
            )
        return job

    @staticmethod
    def _page(items: list[dict[str, Any]], key: str, params: dict[str, Any]) -> dict[str, Any]:
        token = str(params.get("NextToken", "0"))
        if not token.isdigit():
            raise ServiceError("ValidationException", "The NextToken is not valid.")
        start, size = int(token), int(params.get("MaxResults", 500))
        response: dict[str, Any] = {key: items[start : start + size]}
        if start + size < len(items):
            response["NextToken"] = str(start + size)
        return response


# --- seed data ------------------------------------------------------------------------------------------------

_BODIES: dict[str, dict[str, Any]] = {
    "Observation": {
        "status": "final",
        "code": {"coding": [{"system": "http://loinc.org", "code": "8867-4", "display": "Heart rate"}]},
        "valueQuantity": {"value": 72, "unit": "beats/minute", "system": "http://unitsofmeasure.org", "code": "/min"},
    },
    "Encounter": {
        "status": "finished",
        "class": {"system": "http://terminology.hl7.org/CodeSystem/v3-ActCode", "code": "AMB"},
    },
    "Condition": {"code": {"coding": [{"system": "http://snomed.info/sct", "code": "38341003"}]}},
    "Procedure": {
        "status": "completed",
        "code": {"coding": [{"system": "http://snomed.info/sct", "code": "80146002"}]},
    },
    "MedicationRequest": {"status": "active", "intent": "order"},
    "AllergyIntolerance": {"code": {"coding": [{"system": "http://snomed.info/sct", "code": "91936005"}]}},
    "Immunization": {"status": "completed", "vaccineCode": {"coding": [{"system": "http://hl7.org/fhir/sid/cvx"}]}},
    "DiagnosticReport": {"status": "final", "code": {"coding": [{"system": "http://loinc.org", "code": "58410-2"}]}},
    "DocumentReference": {"status": "current"},
}
_SUBJECT = {"Immunization": "patient", "AllergyIntolerance": "patient"}  # the others name theirs "subject"


def _seed(file_count: int, records_per_file: int, created: datetime) -> list[dict[str, Any]]:
    """`records_per_file` resources of each of the first `file_count` seed types; resource j was last updated
    `records_per_file - j` days before `created`."""
    patients = [str(uuid.uuid4()) for _ in range(records_per_file)]
    resources = []
    for kind in SEED_TYPES[:file_count]:
        for j in range(records_per_file):
            updated = _instant(created - timedelta(days=records_per_file - j))
            resource: dict[str, Any] = {
                "resourceType": kind,
                "id": patients[j] if kind == "Patient" else str(uuid.uuid4()),
                "meta": {"versionId": "1", "lastUpdated": updated},
            }
            if kind == "Patient":
                resource.update(
                    {"name": [{"family": f"Doe{j}", "given": ["Sam"]}], "gender": "unknown", "birthDate": "1980-01-01"}
                )
            else:
                resource.update(json.loads(json.dumps(_BODIES[kind])))
                resource[_SUBJECT.get(kind, "subject")] = {"reference": f"Patient/{patients[j]}"}
            resources.append(resource)
    return resources


# --- SigV4 and the HTTP server --------------------------------------------------------------------------------


def _resolved_credentials() -> list[Credential]:
    """The credentials boto3 resolves in this process now (moto's test keys under mock_aws), if any."""
    resolved = boto3.Session().get_credentials()
    if resolved is None:
        return []
    frozen = resolved.get_frozen_credentials()
    return [
        Credential(
            access_key_id=frozen.access_key,
            secret_access_key=frozen.secret_key,
            user_arn=f"arn:aws:iam::{ACCOUNT_ID}:user/localcloud",
            user_id="AIDALOCALCLOUD",
            account_id=ACCOUNT_ID,
        )
    ]


class _FhirServer(LocalServer):
    simulator: HealthLakeSimulator


class _FhirHandler(LocalHandler):
    server_version = "localcloud-healthlake"
    log = LOG

    def answer(self, request: Request) -> tuple[int, list[tuple[str, str]], bytes]:
        try:
            status, headers, payload = cast(_FhirServer, self.server).simulator._serve(request)
        except Exception:  # answer like a server error rather than dropping the connection
            LOG.exception("FHIR %s %s failed", self.command, self.path)
            status, headers = 500, {"Content-Type": "application/fhir+json"}
            payload = _outcome("exception", "An internal error occurred (simulated HealthLake).")
        return status, [*headers.items(), ("x-amzn-RequestId", str(uuid.uuid4()))], json.dumps(payload).encode()


__all__ = ["DETAIL_TYPES", "EVENT_SOURCE", "SIGNING_SERVICE", "HealthLakeSimulator"]
