"""The FastAPI application: query, list memory, provenance, publish, health.

Errors are answered as JSON ``{"error": kind, "detail": message}`` with a 4xx status for
anything the caller can fix; no stack trace ever reaches a client. A key of one tenant sees
only that tenant's owners: any other owner is answered as unknown (404), whether it exists or not.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Depends, FastAPI, Header, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from adamem.api.auth import KeyRing, Principal
from adamem.api.models import AsOfBody, PublishBody, QueryBody
from adamem.errors import AdaMemError, BrokerUnavailable, ConfigError, InputError, LogError
from adamem.ingest import parse_time
from adamem.owners import owner_key, split_owner
from adamem.retrieval.errors import UnknownOwner
from adamem.retrieval.service import Retriever
from adamem.retrieval.snapshot import AsOf
from adamem.settings import Settings
from adamem.streams.log import EventLog

__all__ = ["create_app"]

log = logging.getLogger("adamem.api")

LAYER_TABLES = {
    "working": ("messages",),
    "episodic": ("episodic",),
    "persona": ("persona",),
    "graph": ("graph_nodes", "graph_edges"),
    "archive": ("messages",),
}
MAX_BODY = 1 << 20


class Forbidden(AdaMemError):
    """The key may not do this."""


def _error(status: int, kind: str, detail: str) -> JSONResponse:
    return JSONResponse({"error": kind, "detail": detail}, status_code=status)


def _row_json(row: Any) -> dict[str, Any]:
    data = dataclasses.asdict(row)
    data.pop("vector", None)
    data.pop("extraction_json", None)
    return {"table": row.TABLE, **data}


class _BodyLimit:
    """Answers 413 to a request declaring a body over ``MAX_BODY`` bytes.

    A plain ASGI middleware: Starlette's ``BaseHTTPMiddleware`` (``@app.middleware``) runs each
    request in a task group whose cancellation is re-delivered on every turn of the event loop
    while the request waits for its worker thread — a sixth of the service's CPU under load.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            size = next((v for k, v in scope["headers"] if k == b"content-length"), None)
            if size is not None and (not size.isdigit() or int(size) > MAX_BODY):
                detail = f"request body over {MAX_BODY} bytes; send fewer messages per call"
                await _error(413, "too_large", detail)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def create_app(
    settings: Settings, retriever: Retriever, log_: EventLog | None = None, *, api_keys: str = ""
) -> FastAPI:
    """The query service over ``retriever``'s store; ``log_`` (optional) enables publishing and lag."""
    keys = KeyRing(api_keys)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if keys.open:
            log.warning("no ADAMEM_API_KEYS configured: the service answers every request for every tenant")
        if log_ is not None:
            await log_.start()
        try:
            yield
        finally:
            if log_ is not None:
                await log_.stop()
            retriever.close()

    app = FastAPI(
        title="AdaMem Stream query service",
        version="0.1.0",
        lifespan=lifespan,
        description="Evidence from a user's four-layer memory, with provenance back to the log.",
    )

    app.add_middleware(_BodyLimit)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:10])
        return _error(422, "invalid_request", problems)

    @app.exception_handler(UnknownOwner)
    async def unknown(request: Request, exc: UnknownOwner) -> JSONResponse:
        return _error(404, "unknown_user", f"no memory for user {exc.user_id!r}")  # nothing of other owners

    @app.exception_handler(InputError)
    async def bad_input(request: Request, exc: InputError) -> JSONResponse:
        return _error(400, "invalid_messages", str(exc))

    @app.exception_handler(ConfigError)
    async def bad_value(request: Request, exc: ConfigError) -> JSONResponse:
        return _error(400, "invalid_value", str(exc))

    @app.exception_handler(Forbidden)
    async def forbidden(request: Request, exc: Forbidden) -> JSONResponse:
        return _error(403, "forbidden", str(exc))

    @app.exception_handler(BrokerUnavailable)
    async def no_broker(request: Request, exc: BrokerUnavailable) -> JSONResponse:
        return _error(503, "log_unavailable", str(exc))

    @app.exception_handler(AdaMemError)
    async def failed(request: Request, exc: AdaMemError) -> JSONResponse:
        log.warning("request failed: %s", exc)
        return _error(503, "unavailable", f"{type(exc).__name__}: {exc}")

    @app.exception_handler(Exception)
    async def bug(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error")  # the trace goes to the log, never to the client
        return _error(500, "internal", "unexpected error; it has been logged")

    def principal(
        x_api_key: str | None = Header(None, description="Your tenant's API key."),
        authorization: str | None = Header(None, include_in_schema=False),
    ) -> Principal:
        presented = x_api_key or (authorization[7:] if authorization and authorization.startswith("Bearer ") else None)
        who = keys.principal(presented)
        if who is None:
            raise _AuthError(presented is None)
        return who

    class _AuthError(Exception):
        def __init__(self, missing: bool) -> None:
            self.missing = missing

    @app.exception_handler(_AuthError)
    async def auth_failed(request: Request, exc: _AuthError) -> JSONResponse:
        if exc.missing:
            return _error(401, "unauthenticated", "send your tenant's API key in the X-API-Key header")
        return _error(403, "forbidden", "this API key is not valid")

    def owner(
        user: str,
        who: Principal = Depends(principal),
        x_tenant: str | None = Header(
            None,
            description="The tenant whose user this is, for a service without keys (default: the service's tenant). "
            "A key acts for its own tenant; naming another is refused (403).",
        ),
    ) -> str:
        """The owner key of ``user`` for this caller: a key's tenant, never the tenant of someone else."""
        if who.tenant is not None and x_tenant is not None and x_tenant != who.tenant:
            raise Forbidden(f"this API key acts for its own tenant, not for {x_tenant!r}")
        return owner_key(who.tenant or x_tenant or settings.default_tenant, user)

    async def owner_known(owner_id: str) -> None:
        await asyncio.to_thread(retriever.require, owner_id)  # the owner's facts: no rows loaded for this

    def as_of_point(value: str | int | AsOfBody | None) -> AsOf | None:
        if value is None:
            return None
        if isinstance(value, AsOfBody):
            if (value.time is None) == (value.offset is None):
                raise ConfigError("as_of needs exactly one of time or offset")
            if value.offset is not None:
                return AsOf(offset=value.offset)
            value = value.time
        try:
            return AsOf(time=parse_time(value))
        except ValueError as exc:
            raise ConfigError(f"as_of: {exc}") from exc

    @app.post(
        "/v1/users/{user}/query",
        summary="Ranked evidence for a question, with provenance",
        response_model=dict[str, Any],
        response_class=JSONResponse,
    )
    async def query(body: QueryBody, owner_id: str = Depends(owner)) -> Response:
        point = as_of_point(body.as_of)
        answer = await retriever.aquery(owner_id, body.question, body.top_k, point)
        return JSONResponse(answer.to_dict())  # serialised once by json, not validated by a model again

    @app.get("/v1/users/{user}/memory", summary="One layer of a user's memory")
    async def memory(
        user: str,
        layer: str = Query("episodic", pattern="^(working|episodic|persona|graph|archive)$"),
        limit: int = Query(500, ge=1, le=10_000),
        owner_id: str = Depends(owner),
    ) -> dict[str, Any]:
        await owner_known(owner_id)
        rows = [r for t in LAYER_TABLES[layer] for r in await asyncio.to_thread(retriever.store.rows, t, owner_id)]
        if layer == "working":
            rows = sorted((r for r in rows if r.in_working), key=lambda r: r.working_seq)  # type: ignore[union-attr]
        tenant = split_owner(owner_id)[0]
        return {
            "user_id": user,
            "tenant": tenant,
            "layer": layer,
            "count": len(rows),
            "rows": [_row_json(r) for r in rows[:limit]],
        }

    @app.get("/v1/users/{user}/memory/{item}/provenance", summary="From a memory item back to its messages")
    async def provenance(item: str, owner_id: str = Depends(owner)) -> dict[str, Any]:
        await owner_known(owner_id)
        from adamem.api.provenance import trace

        return await trace(retriever, log_, settings, owner_id, item)

    @app.post("/v1/messages", status_code=202, summary="Publish messages to the log")
    async def publish(body: PublishBody, who: Principal = Depends(principal)) -> dict[str, Any]:
        if log_ is None:
            raise ConfigError("this service was started without --log; it cannot publish")
        import json

        from adamem.ingest import load_messages
        from adamem.streams.publish import publish_messages

        for record in body.messages:
            tenant = str(record.get("tenant") or (who.tenant or settings.default_tenant))
            if not who.may_see(tenant):
                raise Forbidden(f"this key may not publish for tenant {tenant!r}")
            record["tenant"] = tenant
        data = "\n".join(json.dumps(m, ensure_ascii=False) for m in body.messages).encode()
        messages = load_messages(data, settings, "body.messages", "jsonl")
        report = await publish_messages(log_, messages, settings)
        return {
            "published": report.messages,
            "owners": report.owners,
            "topic": report.topic,
            "event_ids": [m.event_id for m in messages],
        }

    @app.get("/health", summary="Readiness, and how far the projections are behind the log")
    async def health() -> dict[str, Any]:
        out: dict[str, Any] = {"status": "ok", "store": retriever.store.url, "auth": "open" if keys.open else "keys"}
        if log_ is not None:
            try:
                out["lag"] = await _lag(log_, retriever, settings)
            except LogError as exc:
                return {"status": "degraded", "store": retriever.store.url, "detail": str(exc)}
        return out

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
