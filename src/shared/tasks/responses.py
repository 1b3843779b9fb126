"""The task API's response bodies, as its OpenAPI document names them (the request models are in
shared.tasks.types). Imported by the API function only."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class Accepted(BaseModel):
    id: str = Field(description="The task id; the task is at /task/{id}")
    status: str = Field(description="SUBMITTED for a new task; the task's current status for a repeated request")


class TaskStatus(BaseModel):
    id: str
    type: str
    status: str = Field(
        description="SUBMITTED, RUNNING, a workflow's progress (e.g. WAITING_FOR_TRANSLATION), or a terminal status:"
        " SUCCEEDED, FAILED, TIMED_OUT, ABORTED, CANCELLED"
    )
    createdAt: str  # the API's JSON field names
    updatedAt: str
    detail: dict[str, Any] = Field(default_factory=dict, description="What the newest log entry recorded")
    resultUrl: str | None = Field(default=None, description="Where the result is, once the task succeeded")
    error: str | None = Field(default=None, description="Why the task failed, timed out or was cancelled")
    cause: str | None = None


class HistoryEntry(BaseModel):
    status: str
    at: str
    detail: dict[str, Any] = Field(default_factory=dict)


class History(BaseModel):
    id: str
    entries: list[HistoryEntry]


class ErrorMessage(BaseModel):
    """The body of every 4xx answer (API Gateway's own 403 has the same `message`)."""

    message: str = Field(description="What was wrong, for a person to read")
    errors: list[dict[str, Any]] | None = Field(
        default=None, description="422: one `{field, message, type}` per invalid field (e.g. `input.targetLanguages`)"
    )
    status: str | None = Field(default=None, description="404 of a pending result, 409: the task's status")
