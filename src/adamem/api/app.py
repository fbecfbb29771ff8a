"""The FastAPI application of the query service: its routers, error answers, body limit and lifespan.

Routes (``api.routes``): query, research, list memory, provenance (``reads``); publish, and wait
for what was published (``writes``); grants of read access to another tenant, their audit trail
(``grants``; reads under a grant: ``api.sharing``); health; the owner's change feed (``api.changes``); the memory
inspector's HTML pages under ``/ui`` (``ui``). They share one ``api.service.Service``: settings,
retriever, log, tenant keys and the write path.

In embedded mode the service also runs the write path (``streams.follow.Follower``); a publish
answers the positions it wrote, and a query (``min_position``) or ``POST /v1/visible`` waits until
the store reflects them, as read from the log (``streams.visible``), or answers 409 ``not_visible``.

Every error — a 4xx for anything the caller can fix, a 5xx otherwise — is answered as JSON
``{"error": kind, "detail": message}`` (``api.errors``), including the framework's own validation,
body-parsing, 404 and 405 answers; every route declares each status it can answer in the OpenAPI
description, and no stack trace ever reaches a client. A key of one tenant sees only that
tenant's owners: any other owner is answered as unknown (404), whether it exists or not.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from adamem.api.auth import MIN_KEY_LENGTH, KeyRing
from adamem.api.body import BodyLimit
from adamem.api.changes import changes_router
from adamem.api.errors import install_handlers, responses
from adamem.api.metrics import instrument
from adamem.api.models import MAX_BODY
from adamem.api.routes.grants import grants_router
from adamem.api.routes.health import health_router
from adamem.api.routes.reads import reads_router
from adamem.api.routes.ui import ui_router
from adamem.api.routes.writes import writes_router
from adamem.api.service import Service
from adamem.retrieval.service import Retriever
from adamem.settings import Settings
from adamem.streams.follow import Follower
from adamem.streams.log import EventLog

__all__ = ["MAX_BODY", "BodyLimit", "create_app"]

log = logging.getLogger("adamem.api")


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
    service = Service(settings, retriever, log_, KeyRing(api_keys), writer)
    keys, probes = service.keys, service.probes

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

    app.add_middleware(BodyLimit, text_bytes=settings.max_text_bytes)
    if settings.metrics:
        probes.update(instrument(app, settings, retriever, log_))
    install_handlers(app)
    app.include_router(reads_router(service))
    app.include_router(writes_router(service))
    app.include_router(grants_router(service))
    app.include_router(health_router(service))
    app.include_router(
        changes_router(settings, log_, service.owner_of, responses(*service.keyed_errors, 403, 422, 500, 503))
    )
    app.include_router(ui_router(service))  # the memory inspector's HTML pages, /ui (not in the OpenAPI description)
    return app
