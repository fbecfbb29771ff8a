"""``GET /health``: readiness, the mode, and how far the projections are behind the log."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter

from adamem.api.errors import responses
from adamem.api.models import HealthAnswer
from adamem.api.service import Service
from adamem.errors import LogError
from adamem.retrieval.service import Retriever
from adamem.settings import Settings
from adamem.streams.log import EventLog

__all__ = ["health_router", "lag"]


def health_router(service: Service) -> APIRouter:
    """The health route of ``service``."""
    router = APIRouter()

    @router.get(
        "/health",
        summary="Readiness, the mode, and how far the projections are behind the log",
        response_model=HealthAnswer,
        response_model_exclude_none=True,
        responses=responses(500),
    )
    async def health() -> HealthAnswer:
        out = HealthAnswer(
            status="ok",
            mode=service.mode,
            store=service.retriever.store.url,
            log=service.log.url if service.log is not None else None,
            auth="open" if service.keys.open else "keys",
            writer=None,
            lag=None,
            detail=None,
        )
        if service.writer is not None:
            state = service.writer.status()
            out.writer = {"running": state.running, "last_error": state.last_error}
            if not state.running:
                out.status, out.detail = "degraded", "the write path has stopped; see the service's log"
            elif state.last_error is not None:
                out.status, out.detail = "degraded", f"the write path's last pass failed: {state.last_error}"
        if service.log is not None:
            try:
                out.lag = await lag(service.log, service.retriever, service.settings)
            except LogError as exc:
                out.status, out.detail = "degraded", str(exc)
        return out

    return router


async def lag(log_: EventLog, retriever: Retriever, settings: Settings) -> dict[str, Any]:
    """Events the projections have not applied yet, and messages not analysed yet (approximate).

    Measured on the analyses topic of the active view's generation.
    """
    from adamem.streams.generations import active

    settings = await asyncio.to_thread(active, settings, retriever.store)
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
