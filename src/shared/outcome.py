"""How a job ended: a plain value, the same whether a service's event or its describe call said it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

Detail = dict[str, Any]
# Where services put a human-readable reason (events and API responses spell it differently).
MESSAGE_FIELDS = ("message", "Message", "errorMessage", "error_message", "description")


@dataclass(frozen=True)
class Outcome:
    """How a job ended, in the service's own status vocabulary."""

    service: str  # e.g. "translate": namespaces the job id
    job_id: str
    status: str
    succeeded: bool
    detail: Detail
    error_prefix: str  # e.g. "Translate": the error a failure is reported with is `<prefix>.<status>`

    @property
    def error(self) -> str:
        """The error name a waiting task's Catch can match, e.g. `Translate.FAILED`."""
        return f"{self.error_prefix}.{self.status}"

    @property
    def message(self) -> str | None:
        """The service's own reason for the outcome, if the event or the API answer carries one."""
        return reason(self.detail)

    @property
    def cause(self) -> str:
        message = self.message
        return f"{self.service} job {self.job_id} ended {self.status}" + (f": {message}" if message else "")

    def output(self) -> Detail:
        """What SendTaskSuccess returns to the workflow: the job's detail plus normalised fields."""
        return {**self.detail, "service": self.service, "jobId": self.job_id, "status": self.status}

    def to_item(self) -> Detail:
        return {
            "service": self.service,
            "jobId": self.job_id,
            "status": self.status,
            "succeeded": self.succeeded,
            "detail": self.detail,
            "errorPrefix": self.error_prefix,
        }

    @classmethod
    def from_item(cls, item: Detail) -> Outcome:
        return cls(
            item["service"],
            item["jobId"],
            item["status"],
            bool(item["succeeded"]),
            dict(item["detail"]),
            item["errorPrefix"],
        )


def reason(detail: Detail) -> str | None:
    return next((str(detail[k]) for k in MESSAGE_FIELDS if detail.get(k)), None)
