"""The async request/reply HTTP API (HttpApi, IAM auth on every route): POST /task and the task's resources.

The routes, on the resolver of shared.tasks.resolver: that module checks and parses a body and answers every error
(each with the one ErrorMessage body); the routes call the task service (shared.tasks.service).
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Body, Header, Path
from aws_lambda_powertools.utilities.typing import LambdaContext

from shared.observability import instrumented
from shared.tasks.resolver import BY_ID, FORBIDDEN, app, json_response, owner, retry_after, status_response
from shared.tasks.responses import Accepted, History, HistoryEntry, TaskStatus
from shared.tasks.service import task_api
from shared.tasks.types import TaskRequest

TITLE, VERSION = "callback-kit tasks", "1.0.0"
DESCRIPTION = (
    "Asynchronous request/reply: POST /task answers 202 with the task's status URL; follow it until the result is "
    "linked. Every route needs a SigV4 signature (service execute-api); a task is visible only to the identity "
    "that submitted it."
)
TaskId = Annotated[str, Path(min_length=1, max_length=80, description="The id POST /task returned")]


@app.post(
    "/task",
    summary="Submit a task",
    responses={
        202: json_response("Accepted: follow Location", Accepted),
        400: json_response("The body is not JSON (malformed, not UTF-8, or nested too deeply)"),
        **FORBIDDEN,
        413: json_response("The body is too large (checked before it is read)"),
        415: json_response(
            "The body is not declared JSON: Content-Type must be application/json (or application/*+json)"
        ),
        422: json_response(
            "Invalid request (the body is not a JSON object, a field is missing or invalid), unknown type, or an"
            " Idempotency-Key reused for another request"
        ),
    },
)
def submit(
    request: Annotated[TaskRequest, Body(description='{"type": "<task type>", "input": {...}}')],
    idempotency_key: Annotated[
        str | None,
        Header(min_length=1, max_length=256, description="Repeat a request safely: same key + same body = same task"),
    ] = None,
) -> Response[Accepted]:
    task = task_api().submit(owner(), request, idempotency_key)
    headers = {"Location": f"/task/{task.id}", **retry_after()}
    return Response(
        HTTPStatus.ACCEPTED, content_types.APPLICATION_JSON, Accepted(id=task.id, status=task.status), headers
    )


@app.get(
    "/task/<task_id>",
    summary="The task's status",
    responses={
        200: json_response("The task", TaskStatus),
        404: json_response("No such task of yours"),
        **BY_ID,
    },
)
def get_task(task_id: TaskId) -> Response[TaskStatus]:
    return status_response(task_api().get(owner(), task_id))


@app.get(
    "/task/<task_id>/result",
    summary="The task's result",
    responses={
        200: {"description": "The workflow's output", "content": {"application/json": {}}},
        404: json_response("Not ready yet (Retry-After; `status` is the task's), or no such task of yours"),
        409: json_response("The task ended without a result"),
        **BY_ID,
    },
)
def get_result(task_id: TaskId) -> Response[Any]:
    return Response(HTTPStatus.OK, content_types.APPLICATION_JSON, task_api().result(owner(), task_id))


@app.get(
    "/task/<task_id>/history",
    summary="Every status log entry, oldest first",
    responses={
        200: json_response("The log", History),
        404: json_response("No such task of yours"),
        **BY_ID,
    },
)
def get_history(task_id: TaskId) -> History:
    entries = task_api().entries(owner(), task_id)
    return History(id=task_id, entries=[HistoryEntry(status=e.status, at=e.at, detail=e.detail) for e in entries])


@app.delete(
    "/task/<task_id>",
    summary="Cancel the task",
    responses={
        200: json_response("Cancelled (again)", TaskStatus),
        404: json_response("No such task of yours"),
        409: json_response("The task already ended"),
        **BY_ID,
    },
)
def cancel_task(task_id: TaskId) -> Response[TaskStatus]:
    return status_response(task_api().cancel(owner(), task_id))


@app.get("/openapi.json", summary="This document", include_in_schema=False)
def openapi() -> Response[str]:
    return Response(HTTPStatus.OK, content_types.APPLICATION_JSON, openapi_document())


def openapi_document() -> str:
    """The OpenAPI document of this API, generated from the routes above and the models of shared.tasks."""
    return app.get_openapi_json_schema(title=TITLE, version=VERSION, description=DESCRIPTION)


@instrumented
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)
