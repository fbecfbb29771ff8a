"""The FastAPI application: query, list memory, provenance, publish, wait for what was published, health.

In embedded mode the service also runs the write path (``streams.follow.Follower``); a publish
answers the positions it wrote, and a query (``min_position``) or ``POST /v1/visible`` waits until
the store reflects them, as read from the log (``streams.visible``), or answers 409 ``not_visible``.

Every error — a 4xx for anything the caller can fix, a 5xx otherwise — is answered as JSON
``{"error": kind, "detail": message}`` (``models.ErrorBody``), including the framework's own
validation, body-parsing, 404 and 405 answers; every route declares each status it can answer in
the OpenAPI description, and no stack trace ever reaches a client. A key of one tenant sees only
that tenant's owners: any other owner is answered as unknown (404), whether it exists or not.
"""

from __future__ import annotations

import asyncio
import dataclasses
import email.message
import http
import logging
import re
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any, Literal, cast

from fastapi import Depends, FastAPI, Header, Path, Query, Request, Security
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from adamem.api.auth import MIN_KEY_LENGTH, KeyRing, Principal
from adamem.api.changes import changes_router
from adamem.api.metrics import instrument, observe_answer
from adamem.api.models import (
    MAX_CONTEXT_CHARS,
    MAX_QUESTION_CHARS,
    AsOfBody,
    ErrorBody,
    ErrorKind,
    HealthAnswer,
    LogPosition,
    PublishAnswer,
    PublishBody,
    QueryBody,
    ResearchBody,
    WaitAnswer,
    WaitBody,
    publish_body,
    to_millis,
)
from adamem.core import wait_visible
from adamem.errors import AdaMemError, Forbidden, LogError, NotWritten
from adamem.metrics import HTTP_ERRORS
from adamem.owners import owner_key, split_owner
from adamem.retrieval.research import ResearchRequest, research
from adamem.retrieval.service import Retriever
from adamem.retrieval.snapshot import AsOf
from adamem.settings import Settings
from adamem.streams.follow import Follower
from adamem.streams.log import EventLog

__all__ = ["MAX_BODY", "create_app"]

log = logging.getLogger("adamem.api")

LAYER_TABLES = {
    "working": ("messages",),
    "episodic": ("episodic",),
    "persona": ("persona",),
    "graph": ("graph_nodes", "graph_edges"),
    "archive": ("messages",),
}
MAX_BODY = 1 << 20
_DIGITS = re.compile(rb"[0-9]{1,19}")


class _AuthError(Exception):
    def __init__(self, missing: bool) -> None:
        self.missing = missing


def _error(status: int, kind: ErrorKind, detail: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
    HTTP_ERRORS.labels(kind, str(status)).inc()
    return JSONResponse({"error": kind, "detail": detail}, status_code=status, headers=headers)


def _json_type(request: Request) -> bool:
    """Whether the request declares a JSON body (``application/json``, ``application/*+json``), as FastAPI reads it."""
    declared = email.message.Message()
    declared["content-type"] = request.headers.get("content-type", "")
    subtype = declared.get_content_subtype()
    return declared.get_content_maintype() == "application" and (subtype == "json" or subtype.endswith("+json"))


def _row_json(row: Any) -> dict[str, Any]:
    data = dataclasses.asdict(row)
    data.pop("vector", None)
    data.pop("extraction_json", None)
    return {"table": row.TABLE, **data}


class _BodyLimit:
    """Refuses a request body over ``MAX_BODY`` bytes while it streams in, chunked or not.

    The body is counted as each ASGI ``http.request`` message arrives, and the request is answered
    413 as soon as the count passes the limit — before the rest is read, so a chunked upload of any
    size costs at most ``MAX_BODY`` bytes of memory. A declared ``Content-Length`` over the limit is
    refused before any of the body is read; one that is not a decimal number (or two that differ) is
    a 400, and the connection is closed (its framing is unknown). The bytes read are then handed to
    the application as one message. After a 413 the server reads the rest of the body and drops it,
    so that the client, still sending, gets the answer rather than a reset connection.

    A plain ASGI middleware: Starlette's ``BaseHTTPMiddleware`` (``@app.middleware``) runs each
    request in a task group whose cancellation is re-delivered on every turn of the event loop
    while the request waits for its worker thread — a sixth of the service's CPU under load.
    """

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY, text_bytes: int = 32_768) -> None:
        self.app = app
        self.limit = limit
        self.text_bytes = text_bytes

    def too_large(self, path: str) -> str:
        """What is over the limit, said for the endpoint: a question, or messages and their texts."""
        over = f"the request body is over {self.limit} bytes, the most one request may send"
        if path == "/v1/messages":
            return (
                f"{over}: a message's text holds at most {self.text_bytes} bytes of UTF-8 (ADAMEM_MAX_TEXT_BYTES); "
                "send shorter texts, or fewer messages per call"
            )
        if path.endswith("/query"):
            return f"{over}: a question holds at most {MAX_QUESTION_CHARS} characters"
        if path.endswith("/research"):
            return f"{over}: a question holds at most {MAX_QUESTION_CHARS} characters, its context {MAX_CONTEXT_CHARS}"
        return over

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_large = self.too_large(scope["path"])
        declared = {v.strip() for k, v in scope["headers"] if k == b"content-length"}
        if declared:
            if len(declared) > 1 or not all(_DIGITS.fullmatch(v) for v in declared):
                detail = "Content-Length is not one decimal number of bytes"
                await _error(400, "bad_request", detail, {"Connection": "close"})(scope, receive, send)
                return
            if int(next(iter(declared))) > self.limit:
                await _error(413, "too_large", too_large)(scope, receive, send)
                return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                await _error(413, "too_large", too_large)(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body: Message | None = {"type": "http.request", "body": b"".join(chunks), "more_body": False}

        async def replay() -> Message:
            nonlocal body
            if body is not None:
                message, body = body, None
                return message
            return await receive()  # after the body: wait for the disconnect

        await self.app(scope, replay, send)


def _errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
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


def create_app(
    settings: Settings,
    retriever: Retriever,
    log_: EventLog | None = None,
    *,
    api_keys: str = "",
    writer: Follower | None = None,
) -> FastAPI:
    """The query service over ``retriever``'s store; ``log_`` (optional) enables publishing, lag and min_position.

    With ``writer`` (a ``Follower`` over the same ``log_``) the service is the embedded default's one
    process: it runs the write path from start-up to shutdown, and a publish wakes it. Without,
    it only reads the store (mode ``read-only``), which other processes project.
    Raises ``ConfigError`` when ``api_keys`` is malformed or a key is shorter than ``MIN_KEY_LENGTH``.
    """
    keys = KeyRing(api_keys)
    probes: dict[str, Any] = {}  # api.metrics.instrument's, when settings.metrics
    if writer is not None and (log_ is None or writer.log is not log_):
        raise ValueError("the writer must follow the service's own log")
    mode: Literal["embedded", "read-only"] = "embedded" if writer is not None else "read-only"

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if keys.open:
            log.warning("no ADAMEM_API_KEYS configured: the service answers every request for every tenant")
        if log_ is not None:
            await log_.start()
        try:
            if writer is not None:
                await asyncio.to_thread(writer.start)
            yield
        finally:
            if writer is not None:
                await asyncio.to_thread(writer.stop)
            if probes.get("lag") is not None:
                await probes["lag"].close()
            if log_ is not None:
                await log_.stop()
            retriever.close()

    app = FastAPI(
        title="AdaMem Stream query service",
        version="0.1.0",
        lifespan=lifespan,
        description=(
            "Evidence from a user's four-layer memory, with provenance back to the log. "
            'Every error is `{"error": kind, "detail": message}`. '
            + (
                "This service runs open: no API key is needed."
                if keys.open
                else f"Send your tenant's API key (at least {MIN_KEY_LENGTH} characters) as `X-API-Key` "
                "or as `Authorization: Bearer <key>`."
            )
        ),
    )

    app.add_middleware(_BodyLimit, text_bytes=settings.max_text_bytes)
    if settings.metrics:
        probes.update(instrument(app, settings, retriever, log_))

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        sent = [e for e in errors if tuple(e.get("loc", ())) == ("body",) and e.get("type") != "missing"]
        if sent and not _json_type(request):
            # FastAPI reads a body as JSON only when it is declared so; any other is left as bytes.
            given = request.headers.get("content-type") or "none"
            return _error(
                415,
                "unsupported_media_type",
                f"send the body as JSON with the header content-type: application/json (this request's content "
                f"type: {given})",
            )
        broken = next((e for e in errors if e.get("type") == "json_invalid"), None)
        if broken is not None:
            where = broken["loc"][-1] if broken.get("loc") else "?"
            reason = (broken.get("ctx") or {}).get("error", broken.get("msg", ""))
            return _error(400, "invalid_json", f"the body is not valid JSON: {reason} (at character {where})")
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in errors[:10])
        return _error(422, "invalid_request", problems)

    @app.exception_handler(StarletteHTTPException)
    async def framework(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        status = exc.status_code
        if status == 400:  # FastAPI could not read the body as JSON (e.g. it is not UTF-8)
            cause = f": {exc.__cause__}" if exc.__cause__ is not None else ""
            return _error(400, "invalid_json", f"the body is not valid JSON{cause}", exc.headers)
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
            detail = f"{request.method} is not allowed here; allowed: {(exc.headers or {}).get('Allow', '')}"
        return _error(status, kind, detail, exc.headers)

    @app.exception_handler(AdaMemError)
    async def failed(request: Request, exc: AdaMemError) -> JSONResponse:
        """Every error of the project: its class carries the status and kind (``adamem.errors``)."""
        if exc.http_status >= 500:
            log.warning("request failed: %s", exc)
        return _error(exc.http_status, cast(ErrorKind, exc.kind), exc.public_detail())

    @app.exception_handler(Exception)
    async def bug(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error")  # the trace goes to the log, never to the client
        return _error(500, "internal", "unexpected error; it has been logged")

    @app.exception_handler(_AuthError)
    async def auth_failed(request: Request, exc: _AuthError) -> JSONResponse:
        if exc.missing:
            return _error(401, "unauthenticated", "send your tenant's API key in the X-API-Key header")
        return _error(403, "forbidden", "this API key is not valid")

    api_key = APIKeyHeader(name="X-API-Key", auto_error=False, description="Your tenant's API key.")
    bearer = HTTPBearer(auto_error=False, description="Your tenant's API key as a bearer token.")

    def keyed(
        key: str | None = Security(api_key), token: HTTPAuthorizationCredentials | None = Security(bearer)
    ) -> Principal:
        presented = key or (token.credentials if token is not None else None)
        who = keys.principal(presented)
        if who is None:
            raise _AuthError(presented is None)
        return who

    def everyone() -> Principal:
        return Principal(None)

    # The description declares the keys only when the service checks them.
    principal: Callable[..., Principal] = everyone if keys.open else keyed

    def as_of_point(value: str | int | AsOfBody | None) -> AsOf | None:
        if value is None:
            return None
        if isinstance(value, AsOfBody):
            if value.offset is not None:
                return AsOf(offset=value.offset)
            assert value.time is not None  # the model holds exactly one
            value = value.time
        return AsOf(time=to_millis(value))

    keyed_errors = (401, 403) if not keys.open else ()
    owner = Path(description="The memory owner's user_id, within the caller's tenant.", examples=["alice"])

    def owner_of(
        user: str = owner,
        who: Principal = Depends(principal),
        x_tenant: str | None = Header(
            None,
            description="The tenant whose user this is, for a service without keys (default: the service's "
            "tenant). A key acts for its own tenant; naming another is refused (403).",
        ),
    ) -> str:
        """The owner key of ``user`` for this caller: a key's own tenant, never someone else's."""
        if who.tenant is not None and x_tenant is not None and x_tenant != who.tenant:
            raise Forbidden(f"this API key acts for its own tenant, not for {x_tenant!r}")
        return owner_key(who.tenant or x_tenant or settings.default_tenant, user)

    async def owner_known(owner_id: str) -> None:
        await asyncio.to_thread(retriever.require, owner_id)  # the owner's facts: no rows loaded for this

    async def reached(positions: list[LogPosition], wait_ms: int) -> None:
        """Return once every message at ``positions`` is in memory; ``NotVisible`` when not within ``wait_ms``.

        ``NotWritten`` at once for a position that holds no message. One request waits at most
        ``MAX_WAIT_MS``: a client that wants to wait longer asks again (``MemoryClient.wait`` does).
        """
        if log_ is None:
            raise LogError("this service was started without a log; it cannot tell where the projections are")
        from adamem.streams.generations import settings_for

        record = await asyncio.to_thread(retriever.store.generation)
        active = settings_for(settings, record) if record else settings
        topic = active.topic("messages")
        count = log_.partitions(topic)
        want: dict[int, int] = {}
        for pos in positions:
            if pos.partition >= count:
                raise NotWritten(f"{topic} has {count} partition(s); there is no partition {pos.partition}")
            want[pos.partition] = max(want.get(pos.partition, 0), pos.offset)
        ends = await log_.end_offsets(topic)
        for p, offset in sorted(want.items()):
            if offset >= ends.get(p, 0):
                raise NotWritten(
                    f"no message was written at {topic} partition {p} offset {offset}: the partition ends at "
                    f"offset {ends.get(p, 0)}"
                )
        await wait_visible(
            log_,
            retriever.store,
            active,
            {topic: want},
            wait_ms / 1000,
            poll_s=0.02,
            advice="ask again to wait longer",
        )

    @app.post(
        "/v1/users/{user}/query",
        summary="Ranked evidence for a question, with provenance",
        response_model=dict[str, Any],
        response_class=JSONResponse,
        responses=_errors(*keyed_errors, 400, 404, 409, 413, 415, 422, 500, 503),
    )
    async def query(body: QueryBody, owner_id: str = Depends(owner_of)) -> Response:
        if body.min_position:
            await reached(body.min_position, body.wait_ms)
        point = as_of_point(body.as_of)
        answer = await retriever.aquery(owner_id, body.question, body.top_k, point)
        if probes:
            observe_answer(answer, probes["lag"].owner_lag(owner_id) if probes["lag"] is not None else None)
        return JSONResponse(answer.to_dict())  # serialised once by json, not validated by a model again

    @app.post(
        "/v1/users/{user}/research",
        summary="Evidence gathered in rounds, graded, with conflicts and how sure the answer is",
        response_model=dict[str, Any],
        response_class=JSONResponse,
        responses=_errors(*keyed_errors, 400, 404, 413, 415, 422, 500, 503),
    )
    async def research_request(body: ResearchBody, owner_id: str = Depends(owner_of)) -> Response:
        request = ResearchRequest(body.query, body.context, tuple(body.memory_hints), body.depth, body.top_k)
        point = as_of_point(body.as_of)
        found = await asyncio.to_thread(research, retriever, owner_id, request, as_of=point)
        return JSONResponse(found.to_dict())

    @app.get(
        "/v1/users/{user}/memory",
        summary="One layer of a user's memory",
        responses=_errors(*keyed_errors, 404, 422, 500, 503),
    )
    async def memory(
        user: str = owner,
        layer: Literal["working", "episodic", "persona", "graph", "archive"] = Query("episodic"),
        limit: int = Query(500, ge=1, le=10_000),
        owner_id: str = Depends(owner_of),
    ) -> dict[str, Any]:
        await owner_known(owner_id)
        rows = [r for t in LAYER_TABLES[layer] for r in await asyncio.to_thread(retriever.store.rows, t, owner_id)]
        if layer == "working":
            rows = sorted((r for r in rows if r.in_working), key=lambda r: r.working_seq)  # type: ignore[union-attr]
        return {
            "user_id": user,
            "tenant": split_owner(owner_id)[0],
            "layer": layer,
            "count": len(rows),
            "rows": [_row_json(r) for r in rows[:limit]],
        }

    @app.get(
        "/v1/users/{user}/memory/{item}/provenance",
        summary="From a memory item back to its messages",
        responses=_errors(*keyed_errors, 404, 422, 500, 503),
    )
    async def provenance(
        item: str = Path(description="A memory item's id."), owner_id: str = Depends(owner_of)
    ) -> dict[str, Any]:
        await owner_known(owner_id)
        from adamem.api.provenance import trace

        return await trace(retriever, log_, settings, owner_id, item)

    async def publish(body: PublishBody, who: Principal = Depends(principal)) -> PublishAnswer:
        if log_ is None:
            raise LogError("this service was started without --log; it cannot publish")
        from adamem.ingest import messages_from_records
        from adamem.streams.publish import publish_messages

        # Stamped here, at the edge, as the CLI and the clients do (the folds never read a clock); one
        # millisecond apart, so that the batch keeps its order and two equal texts stay two messages.
        received = int(time.time() * 1000)
        records = []
        for i, message in enumerate(body.messages):
            record = message.model_dump(mode="json", exclude_none=True)
            tenant = message.tenant or who.tenant or settings.default_tenant
            if not who.may_see(tenant):
                raise Forbidden(f"this key may not publish for tenant {tenant!r}")
            when = received + i if message.occurred_at is None else to_millis(message.occurred_at)
            records.append({**record, "tenant": tenant, "occurred_at": when})
        messages = messages_from_records(records, settings, "body.messages")
        report = await publish_messages(log_, messages, settings)
        if writer is not None:
            writer.wake()
        return PublishAnswer(
            published=report.messages,
            owners=report.owners,
            topic=report.topic,
            event_ids=[m.event_id for m in messages],
            positions=[LogPosition(partition=p, offset=o) for p, o in sorted(report.last.items())],
        )

    # This service's own text limit (ADAMEM_MAX_TEXT_BYTES) is part of its description.
    publish.__annotations__["body"] = publish_body(settings.max_text_bytes)
    app.post(
        "/v1/messages",
        status_code=202,
        summary="Publish messages to the log",
        response_model=PublishAnswer,
        responses=_errors(*keyed_errors, 400, 413, 415, 422, 500, 503),
    )(publish)

    @app.post(
        "/v1/visible",
        summary="Wait until messages just published are in memory (read your writes)",
        response_model=WaitAnswer,
        responses=_errors(*keyed_errors, 400, 409, 413, 415, 422, 500, 503),
    )
    async def visible(body: WaitBody, who: Principal = Depends(principal)) -> WaitAnswer:
        loop = asyncio.get_running_loop()
        started = loop.time()
        await reached(body.positions, body.wait_ms)
        return WaitAnswer(visible=True, waited_ms=round((loop.time() - started) * 1000, 1))

    @app.get(
        "/health",
        summary="Readiness, the mode, and how far the projections are behind the log",
        response_model=HealthAnswer,
        response_model_exclude_none=True,
        responses=_errors(500),
    )
    async def health() -> HealthAnswer:
        out = HealthAnswer(
            status="ok",
            mode=mode,
            store=retriever.store.url,
            log=log_.url if log_ is not None else None,
            auth="open" if keys.open else "keys",
            writer=None,
            lag=None,
            detail=None,
        )
        if writer is not None:
            state = writer.status()
            out.writer = {"running": state.running, "last_error": state.last_error}
            if not state.running:
                out.status, out.detail = "degraded", "the write path has stopped; see the service's log"
            elif state.last_error is not None:
                out.status, out.detail = "degraded", f"the write path's last pass failed: {state.last_error}"
        if log_ is not None:
            try:
                out.lag = await _lag(log_, retriever, settings)
            except LogError as exc:
                out.status, out.detail = "degraded", str(exc)
        return out

    app.include_router(changes_router(settings, log_, owner_of, _errors(*keyed_errors, 403, 422, 500, 503)))
    return app


async def _lag(log_: EventLog, retriever: Retriever, settings: Settings) -> dict[str, Any]:
    """Events the projections have not applied yet, and messages not analysed yet (approximate).

    Measured on the analyses topic of the active view's generation.
    """
    from adamem.streams.generations import settings_for

    record = await asyncio.to_thread(retriever.store.generation)
    if record:
        settings = settings_for(settings, record)
    analyses = await log_.end_offsets(settings.topic("analyses"))
    messages = await log_.end_offsets(settings.topic("messages"))
    control = await log_.end_offsets(settings.topic("control"))
    projected = {p: retriever.store.checkpoint(p).get(settings.topic("analyses"), 0) for p in analyses}
    return {
        "generation": settings.generation,
        "projection": sum(max(0, analyses[p] - projected[p]) for p in analyses),
        "analysis": max(0, sum(messages.values()) + sum(control.values()) - sum(analyses.values())),
        "per_partition": {p: {"analyses_end": analyses[p], "projected": projected[p]} for p in sorted(analyses)},
    }
