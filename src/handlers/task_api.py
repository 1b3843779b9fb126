"""The async request/reply HTTP API (HttpApi, IAM auth on every route): POST /task and the task's resources.

A body is checked on its raw bytes first (size, JSON Content-Type, UTF-8), then parsed as one JSON object and
validated from the models (Powertools' validation) before anything is written or started; errors become HTTP
statuses, each with the one ErrorMessage body, in one place: the exception handlers at the end of this module.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from http import HTTPStatus
from typing import Annotated, Any, cast

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.middlewares.openapi_validation import (
    OpenAPIRequestValidationMiddleware,
    OpenAPIResponseValidationMiddleware,
)
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.openapi.params import Body, Header, Path
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse
from aws_lambda_powertools.event_handler.types import EventHandlerInstance
from aws_lambda_powertools.utilities.data_classes.common import BaseProxyEvent
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, Field

from shared.exceptions import (
    IdempotencyKeyReusedError,
    NoResultError,
    RequestNotJsonError,
    RequestTooLargeError,
    ResultNotReadyError,
    TaskAlreadyEndedError,
    TaskNotFoundError,
    UnknownTaskTypeError,
    UnsupportedMediaTypeError,
)
from shared.observability import instrumented
from shared.settings import task_api_settings
from shared.tasks.service import Task, task_api
from shared.tasks.types import TaskRequest, task_type_names

TITLE, VERSION = "callback-kit tasks", "1.0.0"
DESCRIPTION = (
    "Asynchronous request/reply: POST /task answers 202 with the task's status URL; follow it until the result is "
    "linked. Every route needs a SigV4 signature (service execute-api); a task is visible only to the identity "
    "that submitted it."
)
TaskId = Annotated[str, Path(min_length=1, max_length=80, description="The id POST /task returned")]


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


def _checked_body(event: BaseProxyEvent) -> None:
    """Refuse a body on its raw bytes, before anything parses it: over the limit (413), not declared JSON (415),
    not UTF-8 (400). API Gateway base64-encodes a body that is not text; the limit is on the decoded bytes."""
    body = event.body or ""
    try:
        raw = (
            base64.b64decode(body, validate=True) if event.is_base64_encoded else body.encode("utf-8", "surrogatepass")
        )
    except binascii.Error as exc:
        raise RequestNotJsonError("the request body is not valid base64") from exc
    limit = task_api_settings().max_request_bytes
    if len(raw) > limit:
        raise RequestTooLargeError(f"the request body exceeds {limit} bytes")
    content_type = event.headers.get("content-type", "")
    media_type = content_type.split(";", 1)[0].strip().lower()
    if media_type != "application/json" and not (
        media_type.startswith("application/") and media_type.endswith("+json")
    ):
        raise UnsupportedMediaTypeError(
            f"the request body must be JSON (Content-Type: application/json), not {content_type!r}"
        )
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RequestNotJsonError(f"the request body is not valid UTF-8: {exc.reason} at byte {exc.start}") from exc


def _json_object(body: str) -> dict[str, Any]:
    """The body parsed as JSON; it must be an object (a task in an array, or bare, is not a request)."""
    try:
        parsed = json.loads(body)
    except RecursionError as exc:
        raise RequestNotJsonError("the request body is not valid JSON: nested too deeply") from exc
    except ValueError as exc:
        raise RequestNotJsonError(f"the request body is not valid JSON: {exc}") from exc
    if not isinstance(parsed, dict):
        error = {"type": "dict_type", "loc": ("body",), "msg": "must be a JSON object", "input": parsed}
        raise RequestValidationError([error])
    return parsed


class _JsonBodyValidation(OpenAPIRequestValidationMiddleware):
    """Powertools' request validation, reading a body only once `_checked_body` passed it, and only as JSON
    (Powertools would read a form or multipart body as the model too)."""

    def _get_body(self, app: EventHandlerInstance) -> dict[str, Any]:
        _checked_body(app.current_event)
        return self._parse_json_data(app)


# Validation is added as middlewares rather than with enable_validation, so that the request's is the one above.
app = APIGatewayHttpResolver(json_body_deserializer=_json_object)
app.use([_JsonBodyValidation(), OpenAPIResponseValidationMiddleware()])  # type: ignore[no-untyped-call]


def _owner() -> str:
    """The caller as API Gateway's IAM authorizer reports it (every route requires AWS_IAM)."""
    iam = app.current_event.request_context.authorizer.iam
    owner = iam.user_arn if iam else None
    if not owner:
        raise PermissionError("no IAM caller identity in the request")
    return owner


def _status(task: Task) -> Response[TaskStatus]:
    headers: dict[str, str] = {}
    body = TaskStatus(
        id=task.id,
        type=task.type,
        status=task.status,
        createdAt=task.created_at,
        updatedAt=task.updated_at,
        detail=task.detail,
        error=task.error,
        cause=task.cause,
    )
    if task.succeeded:
        body.resultUrl = headers["Location"] = f"/task/{task.id}/result"
    elif not task.ended:
        headers["Retry-After"] = str(task_api_settings().retry_after_seconds)
    return Response(HTTPStatus.OK, content_types.APPLICATION_JSON, body, headers)


def _json(description: str, model: type[BaseModel] = ErrorMessage) -> OpenAPIResponse:
    """A route's response as the OpenAPI document lists it: what it means, and the model of its JSON body."""
    return {"description": description, "content": {"application/json": {"model": model}}}


# The errors every route can answer (each 4xx body is an ErrorMessage).
FORBIDDEN = {403: _json("Unsigned or badly signed (API Gateway), or no IAM caller identity")}
BY_ID = {**FORBIDDEN, 422: _json("The task id is invalid (1-80 characters)")}


def _error(
    code: HTTPStatus,
    message: str,
    *,
    status: str | None = None,
    errors: list[dict[str, Any]] | None = None,
    headers: dict[str, str] | None = None,
) -> Response[dict[str, Any]]:
    body = ErrorMessage(message=message, errors=errors, status=status)
    return Response(code, content_types.APPLICATION_JSON, body.model_dump(exclude_none=True), headers)


@app.post(
    "/task",
    summary="Submit a task",
    responses={
        202: _json("Accepted: follow Location", Accepted),
        400: _json("The body is not JSON (malformed, not UTF-8, or nested too deeply)"),
        **FORBIDDEN,
        413: _json("The body is too large (checked before it is read)"),
        415: _json("The body is not declared JSON: Content-Type must be application/json (or application/*+json)"),
        422: _json(
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
    task = task_api().submit(_owner(), request, idempotency_key)
    headers = {"Location": f"/task/{task.id}", "Retry-After": str(task_api_settings().retry_after_seconds)}
    return Response(
        HTTPStatus.ACCEPTED, content_types.APPLICATION_JSON, Accepted(id=task.id, status=task.status), headers
    )


@app.get(
    "/task/<task_id>",
    summary="The task's status",
    responses={
        200: _json("The task", TaskStatus),
        404: _json("No such task of yours"),
        **BY_ID,
    },
)
def get_task(task_id: TaskId) -> Response[TaskStatus]:
    return _status(task_api().get(_owner(), task_id))


@app.get(
    "/task/<task_id>/result",
    summary="The task's result",
    responses={
        200: {"description": "The workflow's output", "content": {"application/json": {}}},
        404: _json("Not ready yet (Retry-After; `status` is the task's), or no such task of yours"),
        409: _json("The task ended without a result"),
        **BY_ID,
    },
)
def get_result(task_id: TaskId) -> Response[Any]:
    return Response(HTTPStatus.OK, content_types.APPLICATION_JSON, task_api().result(_owner(), task_id))


@app.get(
    "/task/<task_id>/history",
    summary="Every status log entry, oldest first",
    responses={
        200: _json("The log", History),
        404: _json("No such task of yours"),
        **BY_ID,
    },
)
def get_history(task_id: TaskId) -> History:
    entries = task_api().entries(_owner(), task_id)
    return History(id=task_id, entries=[HistoryEntry(status=e.status, at=e.at, detail=e.detail) for e in entries])


@app.delete(
    "/task/<task_id>",
    summary="Cancel the task",
    responses={
        200: _json("Cancelled (again)", TaskStatus),
        404: _json("No such task of yours"),
        409: _json("The task already ended"),
        **BY_ID,
    },
)
def cancel_task(task_id: TaskId) -> Response[TaskStatus]:
    return _status(task_api().cancel(_owner(), task_id))


@app.get("/openapi.json", summary="This document", include_in_schema=False)
def openapi() -> Response[str]:
    return Response(HTTPStatus.OK, content_types.APPLICATION_JSON, openapi_document())


def openapi_document() -> str:
    """The OpenAPI document of this API, generated from the routes and models above."""
    return app.get_openapi_json_schema(title=TITLE, version=VERSION, description=DESCRIPTION)


# --- errors -> HTTP, in one place ---------------------------------------------------------------------------------
ErrorHandler = Callable[[Any], Response[dict[str, Any]]]


def on(exc_class: type[Exception]) -> Callable[[ErrorHandler], ErrorHandler]:
    """`app.exception_handler`, typed."""
    return cast(Callable[[ErrorHandler], ErrorHandler], app.exception_handler(exc_class))


def _field(loc: tuple[Any, ...]) -> str:
    """`("body", "documents", "input", "inputPrefix")` -> `input.inputPrefix` (the tag of the union is dropped)."""
    tagged = len(loc) > 1 and loc[0] == "body" and str(loc[1]) in task_type_names()
    return ".".join(str(p) for p in loc[2 if tagged else 1 :]) or "body"


@on(RequestNotJsonError)
def not_json(exc: RequestNotJsonError) -> Response[dict[str, Any]]:
    return _error(HTTPStatus.BAD_REQUEST, str(exc))


@on(UnsupportedMediaTypeError)
def not_declared_json(exc: UnsupportedMediaTypeError) -> Response[dict[str, Any]]:
    return _error(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, str(exc))


@on(RequestValidationError)
def invalid_request(exc: RequestValidationError) -> Response[dict[str, Any]]:
    errors = []
    for error in exc.errors():
        field = _field(tuple(error["loc"]))
        if error["type"] in {"union_tag_invalid", "union_tag_not_found"}:
            field = "type"
            message = str(UnknownTaskTypeError(sorted(task_api().state_machines), "unknown or missing task type"))
        else:
            message = str(error["msg"])
        errors.append({"field": field, "message": message, "type": error["type"]})
    summary = "; ".join(f"{e['field']}: {e['message']}" for e in errors)
    return _error(HTTPStatus.UNPROCESSABLE_ENTITY, f"invalid request: {summary}", errors=errors)


@on(RequestTooLargeError)
def too_large(exc: RequestTooLargeError) -> Response[dict[str, Any]]:
    return _error(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, str(exc))


@on(IdempotencyKeyReusedError)
def key_reused(exc: IdempotencyKeyReusedError) -> Response[dict[str, Any]]:
    return _error(HTTPStatus.UNPROCESSABLE_ENTITY, str(exc))


@on(UnknownTaskTypeError)
def unknown_type(exc: UnknownTaskTypeError) -> Response[dict[str, Any]]:
    errors = [{"field": "type", "message": str(exc), "type": "unknown_task_type"}]
    return _error(HTTPStatus.UNPROCESSABLE_ENTITY, f"invalid request: type: {exc}", errors=errors)


@on(TaskNotFoundError)
def not_found(exc: TaskNotFoundError) -> Response[dict[str, Any]]:
    return _error(HTTPStatus.NOT_FOUND, f"no task {exc}")


@on(ResultNotReadyError)
def not_ready(exc: ResultNotReadyError) -> Response[dict[str, Any]]:
    retry_after = {"Retry-After": str(task_api_settings().retry_after_seconds)}
    return _error(HTTPStatus.NOT_FOUND, str(exc), status=exc.status, headers=retry_after)


@on(NoResultError)
def no_result(exc: NoResultError) -> Response[dict[str, Any]]:
    return _error(HTTPStatus.CONFLICT, str(exc), status=exc.status)


@on(TaskAlreadyEndedError)
def already_ended(exc: TaskAlreadyEndedError) -> Response[dict[str, Any]]:
    return _error(HTTPStatus.CONFLICT, str(exc), status=exc.status)


@on(PermissionError)
def forbidden(exc: PermissionError) -> Response[dict[str, Any]]:
    return _error(HTTPStatus.FORBIDDEN, str(exc))


@on(NotFoundError)
def no_route(exc: NotFoundError) -> Response[dict[str, Any]]:
    event = app.current_event
    return _error(HTTPStatus.NOT_FOUND, f"no route {event.http_method} {event.path}")


@instrumented
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)
