"""The task API's HTTP resolver (HttpApi, IAM auth on every route), without its routes (src/handlers/task_api.py):
how a body is checked and parsed, who the caller is, and every error's HTTP answer, in one place.

A body is checked on its raw bytes first (size, JSON Content-Type, UTF-8), then parsed as one JSON object and
validated from the models (Powertools' validation) before anything is written or started; errors become HTTP
statuses, each with the one ErrorMessage body: the exception handlers at the end of this module. Imported by the API
function only.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from http import HTTPStatus
from typing import Any, cast

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.middlewares.openapi_validation import (
    OpenAPIRequestValidationMiddleware,
    OpenAPIResponseValidationMiddleware,
)
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse
from aws_lambda_powertools.event_handler.types import EventHandlerInstance
from aws_lambda_powertools.utilities.data_classes.common import BaseProxyEvent
from pydantic import BaseModel

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
from shared.settings import task_api_settings
from shared.tasks.responses import ErrorMessage, TaskStatus
from shared.tasks.service import Task, task_api
from shared.tasks.types import task_type_names


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


def owner() -> str:
    """The caller as API Gateway's IAM authorizer reports it (every route requires AWS_IAM)."""
    iam = app.current_event.request_context.authorizer.iam
    caller = iam.user_arn if iam else None
    if not caller:
        raise PermissionError("no IAM caller identity in the request")
    return caller


def retry_after() -> dict[str, str]:
    """The header that tells a client when to ask again about a task that has not ended."""
    return {"Retry-After": str(task_api_settings().retry_after_seconds)}


def status_response(task: Task) -> Response[TaskStatus]:
    """The task's status resource: with Location once it succeeded, Retry-After while it has not ended."""
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
        headers.update(retry_after())
    return Response(HTTPStatus.OK, content_types.APPLICATION_JSON, body, headers)


def json_response(description: str, model: type[BaseModel] = ErrorMessage) -> OpenAPIResponse:
    """A route's response as the OpenAPI document lists it: what it means, and the model of its JSON body."""
    return {"description": description, "content": {"application/json": {"model": model}}}


# The errors every route can answer (each 4xx body is an ErrorMessage).
FORBIDDEN = {403: json_response("Unsigned or badly signed (API Gateway), or no IAM caller identity")}
BY_ID = {**FORBIDDEN, 422: json_response("The task id is invalid (1-80 characters)")}


# --- errors -> HTTP, in one place ---------------------------------------------------------------------------------
ErrorHandler = Callable[[Any], Response[dict[str, Any]]]


def on(exc_class: type[Exception]) -> Callable[[ErrorHandler], ErrorHandler]:
    """`app.exception_handler`, typed."""
    return cast(Callable[[ErrorHandler], ErrorHandler], app.exception_handler(exc_class))


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
            message = str(UnknownTaskTypeError(task_api().offered, "unknown or missing task type"))
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
    return _error(HTTPStatus.NOT_FOUND, str(exc), status=exc.status, headers=retry_after())


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
