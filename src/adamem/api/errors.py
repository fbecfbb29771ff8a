"""The service's error answers: one JSON shape for every 4xx and 5xx, and the handlers that give it.

Every error is ``{"error": kind, "detail": message}`` (``models.ErrorBody``): the project's own
errors with the status and kind their class carries (``adamem.errors``), the framework's
validation, body-parsing, 404 and 405 answers in the same shape, and anything unexpected as a 500
whose trace goes to the service's log, never to the client.
"""

from __future__ import annotations

import email.message
import http
import logging
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, cast

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import BaseRoute, Match

from adamem.api.models import MAX_BODY, ErrorBody, ErrorKind
from adamem.errors import AdaMemError
from adamem.metrics import HTTP_ERRORS

__all__ = ["AuthError", "error_answer", "install_handlers", "json_type", "responses"]

log = logging.getLogger("adamem.api")


class AuthError(Exception):
    """No API key was sent (``missing``), or the one sent is not valid."""

    def __init__(self, missing: bool) -> None:
        self.missing = missing


def error_answer(status: int, kind: ErrorKind, detail: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
    """The one shape of an error answer, counted in ``/metrics``."""
    HTTP_ERRORS.labels(kind, str(status)).inc()
    return JSONResponse({"error": kind, "detail": detail}, status_code=status, headers=headers)


def json_type(request: Request) -> bool:
    """Whether the request declares a JSON body (``application/json``, ``application/*+json``), as FastAPI reads it."""
    declared = email.message.Message()
    declared["content-type"] = request.headers.get("content-type", "")
    subtype = declared.get_content_subtype()
    return declared.get_content_maintype() == "application" and (subtype == "json" or subtype.endswith("+json"))


def responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI responses: each status with the error body and what it means here."""
    meaning = {
        400: "The body is not JSON, or a message breaks a rule the schema cannot state (see detail).",
        401: "No API key was sent.",
        403: "The API key is not valid, or may not act for that tenant.",
        404: "No such owner or item for this key, or no such path.",
        409: "The positions asked for (min_position, or the positions to wait for) are not in memory: "
        "not_visible: the projections did not reach them within wait_ms (ask again to wait longer); "
        "not_written: no message was written there.",
        413: f"The request body is over {MAX_BODY} bytes (detail says what may be sent).",
        415: "The body is not declared as JSON: send it with content-type: application/json.",
        422: "The request does not match this description (types, bounds, required or unknown fields).",
        500: "An unexpected error; it has been logged.",
        503: "The log or the store cannot answer now; retry later.",
    }
    return {s: {"model": ErrorBody, "description": meaning[s]} for s in statuses}


def _leaves(routes: Iterable[Any]) -> Iterator[BaseRoute]:
    """The routes of an app, those of included routers too (the service includes them without a prefix)."""
    for route in routes:
        included = getattr(route, "original_router", None)
        if included is not None:
            yield from _leaves(included.routes)
        elif isinstance(route, BaseRoute):
            yield route


def install_handlers(app: FastAPI) -> None:
    """Answer every error raised in ``app`` in the one shape."""

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        sent = [e for e in errors if tuple(e.get("loc", ())) == ("body",) and e.get("type") != "missing"]
        if sent and not json_type(request):
            # FastAPI reads a body as JSON only when it is declared so; any other is left as bytes.
            given = request.headers.get("content-type") or "none"
            return error_answer(
                415,
                "unsupported_media_type",
                f"send the body as JSON with the header content-type: application/json (this request's content "
                f"type: {given})",
            )
        broken = next((e for e in errors if e.get("type") == "json_invalid"), None)
        if broken is not None:
            where = broken["loc"][-1] if broken.get("loc") else "?"
            reason = (broken.get("ctx") or {}).get("error", broken.get("msg", ""))
            return error_answer(400, "invalid_json", f"the body is not valid JSON: {reason} (at character {where})")
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in errors[:10])
        return error_answer(422, "invalid_request", problems)

    @app.exception_handler(StarletteHTTPException)
    async def framework(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        status = exc.status_code
        if status == 400:  # FastAPI could not read the body as JSON (e.g. it is not UTF-8)
            cause = f": {exc.__cause__}" if exc.__cause__ is not None else ""
            return error_answer(400, "invalid_json", f"the body is not valid JSON{cause}", exc.headers)
        kinds: dict[int, ErrorKind] = {
            404: "not_found",
            405: "method_not_allowed",
            413: "too_large",
            401: "unauthenticated",
            403: "forbidden",
        }
        kind: ErrorKind = kinds.get(status, "bad_request" if status < 500 else "unavailable")
        detail = exc.detail if isinstance(exc.detail, str) else http.HTTPStatus(status).phrase
        if status == 404:
            detail = f"no such path: {request.url.path}"
        elif status == 405:
            # The router names the methods of the first route on the path only; a path served by
            # several routes (GET and POST of /v1/users/{user}/grants) allows the methods of them all.
            methods = {
                method
                for route in _leaves(request.app.router.routes)
                if route.matches(request.scope)[0] is not Match.NONE
                for method in getattr(route, "methods", None) or ()
            }
            headers = {**(exc.headers or {}), "Allow": ", ".join(sorted(methods))} if methods else exc.headers
            detail = f"{request.method} is not allowed here; allowed: {(headers or {}).get('Allow', '')}"
            return error_answer(status, kind, detail, headers)
        return error_answer(status, kind, detail, exc.headers)

    @app.exception_handler(AdaMemError)
    async def failed(request: Request, exc: AdaMemError) -> JSONResponse:
        """Every error of the project: its class carries the status and kind (``adamem.errors``)."""
        if exc.http_status >= 500:
            log.warning("request failed: %s", exc)
        return error_answer(exc.http_status, cast(ErrorKind, exc.kind), exc.public_detail())

    @app.exception_handler(Exception)
    async def bug(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error")  # the trace goes to the log, never to the client
        return error_answer(500, "internal", "unexpected error; it has been logged")

    @app.exception_handler(AuthError)
    async def auth_failed(request: Request, exc: AuthError) -> JSONResponse:
        if exc.missing:
            return error_answer(401, "unauthenticated", "send your tenant's API key in the X-API-Key header")
        return error_answer(403, "forbidden", "this API key is not valid")
