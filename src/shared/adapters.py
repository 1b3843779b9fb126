"""Service adapters: how each asynchronous service reports a finished job.

An adapter is a small declarative description (event source, detail-type, where the job id and status are, which
statuses end a job and which of those are successes) plus the code that turns one of its events into an Outcome.
To support another service, add an Adapter to ADAPTERS and an EventBridge rule for its terminal events.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shared.exceptions import UnknownJobEventError


@dataclass(frozen=True)
class Outcome:
    service: str
    job_id: str
    status: str
    succeeded: bool
    detail: dict[str, Any]

    @property
    def error(self) -> str:
        """The error name a waiting task's Catch can match, e.g. `Translate.FAILED`."""
        return f"{self.service.capitalize()}.{self.status}"

    @property
    def cause(self) -> str:
        message = self.detail.get("message") or self.detail.get("errorMessage")
        return f"{self.service} job {self.job_id} ended {self.status}" + (f": {message}" if message else "")

    def output(self) -> dict[str, Any]:
        """What SendTaskSuccess returns to the workflow: the event detail plus normalised fields."""
        return {**self.detail, "service": self.service, "jobId": self.job_id, "status": self.status}

    def to_item(self) -> dict[str, Any]:
        return {
            "service": self.service,
            "jobId": self.job_id,
            "status": self.status,
            "succeeded": self.succeeded,
            "detail": self.detail,
        }

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> Outcome:
        return cls(item["service"], item["jobId"], item["status"], bool(item["succeeded"]), dict(item["detail"]))


@dataclass(frozen=True)
class Adapter:
    service: str
    source: str
    detail_type: str
    job_id_field: str
    status_field: str
    successes: frozenset[str]
    failures: frozenset[str]

    def matches(self, event: dict[str, Any]) -> bool:
        return event.get("source") == self.source and event.get("detail-type") == self.detail_type

    def outcome(self, event: dict[str, Any]) -> Outcome | None:
        """The job's outcome, or None when the status is not terminal (never treated as completion)."""
        detail = event.get("detail") or {}
        job_id, status = detail.get(self.job_id_field), detail.get(self.status_field)
        if not job_id or status not in self.successes | self.failures:
            return None
        return Outcome(self.service, str(job_id), str(status), status in self.successes, detail)


TRANSLATE = Adapter(
    service="translate",
    source="aws.translate",
    detail_type="Translate TextTranslationJob State Change",
    job_id_field="jobId",
    status_field="jobStatus",
    successes=frozenset({"COMPLETED"}),
    failures=frozenset({"COMPLETED_WITH_ERROR", "FAILED", "STOPPED"}),
)

ADAPTERS = (TRANSLATE,)


def outcome_of(event: dict[str, Any]) -> Outcome | None:
    """Turn a completion event into an Outcome through the adapter that recognises it."""
    for adapter in ADAPTERS:
        if adapter.matches(event):
            return adapter.outcome(event)
    raise UnknownJobEventError(
        f"no adapter for source={event.get('source')!r} detail-type={event.get('detail-type')!r}"
    )
