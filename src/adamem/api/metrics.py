"""The query service's metrics: requests, query stages, caches, lag at answer time, memory health.

``instrument(app, …)`` adds them to the FastAPI app made by ``api.app.create_app``: a plain ASGI
middleware that times every request by its route template (never by its path, which names a user),
a ``GET /metrics`` route in Prometheus' text format (left out of the OpenAPI description: it is
for Prometheus, not for API clients), and the sources read at scrape time. Nothing here blocks a
request on I/O: the projection lag and the memory-health figures are refreshed in the background
(at most once a second, and once per ``ADAMEM_HEALTH_INTERVAL`` seconds) and a query observes the
last known value.
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections import defaultdict
from typing import Any

from fastapi import FastAPI
from fastapi.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from adamem import metrics
from adamem.owners import split_owner
from adamem.partitioning import owner_partition
from adamem.projections.health import OwnerHealth, owner_health
from adamem.retrieval.answer import Answer
from adamem.retrieval.service import Retriever
from adamem.settings import Settings
from adamem.streams.log import EventLog

__all__ = ["LagProbe", "MemoryHealthSampler", "instrument", "observe_answer"]

STAGES = ("resolve", "route", "retrieve", "expand", "fuse", "total")


class _RequestMetrics:
    """Counts and times every HTTP request by route template, method and status."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = {"code": 500}

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        started = time.perf_counter()
        try:
            await self.app(scope, receive, sending)
        finally:
            route = scope.get("route")
            endpoint = getattr(route, "path", None) or "unmatched"  # the template: /v1/users/{user}/query
            method = scope.get("method", "")
            metrics.HTTP_DURATION.labels(endpoint, method).observe(time.perf_counter() - started)
            metrics.HTTP_REQUESTS.labels(endpoint, method, str(status["code"])).inc()


@functools.cache
def _series(route: str) -> tuple[tuple[tuple[str, Any], ...], Any, Any]:
    """The stage histograms and the two query counters of a route (``labels()`` costs half the observation)."""
    stages = tuple((stage, metrics.QUERY_DURATION.labels(route, stage)) for stage in STAGES)
    return stages, metrics.QUERIES.labels(route, "true"), metrics.QUERIES.labels(route, "false")


def observe_answer(answer: Answer, lag: int | None) -> None:
    """Record one answer: its stages, route, cache use, the owner's lag and the precision proxy."""
    stages, cached, computed = _series(answer.route.route.value)
    timing = answer.timing
    for stage, histogram in stages:
        histogram.observe(getattr(timing, stage) / 1000.0)
    (cached if answer.cached else computed).inc()
    if lag is not None:
        metrics.QUERY_OWNER_LAG.observe(lag)
    if answer.time_windows and answer.items:
        tenant = metrics.tenant_label(split_owner(answer.owner_id)[0])
        metrics.ANSWERS_WINDOWED.labels(tenant).inc()
        top = answer.items[0]
        times = [top.occurred_at, top.event_time, *(p.occurred_at for p in top.provenance)]
        if any(w.start <= t < w.end for w in answer.time_windows for t in times if t >= 0):
            metrics.ANSWERS_TOP_IN_WINDOW.labels(tenant).inc()


class LagProbe:
    """Analyses of each partition not yet projected, refreshed in the background at most once a second."""

    def __init__(self, log_: EventLog, retriever: Retriever, settings: Settings, every_s: float = 1.0) -> None:
        self._log, self._retriever, self._settings, self._every = log_, retriever, settings, every_s
        self.lag: dict[int, int] = {}
        self._at = -float("inf")
        self._task: asyncio.Task[None] | None = None

    async def refresh(self) -> None:
        """Read the analyses topic's ends and the store's checkpoints now."""
        from adamem.streams.generations import active

        settings = await asyncio.to_thread(active, self._settings, self._retriever.store)
        topic = settings.topic("analyses")
        ends = await self._log.end_offsets(topic)
        store = self._retriever.store
        done = {p: (await asyncio.to_thread(store.checkpoint, p)).get(topic, 0) for p in ends}
        self.lag = {p: max(0, ends[p] - done[p]) for p in ends}
        for p, behind in self.lag.items():
            metrics.CONSUMER_LAG.labels(topic, str(p)).set(behind)

    def poke(self) -> None:
        """Start a background refresh when the last one is older than the interval."""
        now = time.monotonic()
        if now - self._at >= self._every and (self._task is None or self._task.done()):
            self._at = now
            self._task = asyncio.get_running_loop().create_task(self._refresh_quietly())

    def owner_lag(self, owner_id: str) -> int | None:
        """The last known lag of the owner's partition (None before the first refresh); refreshes when due."""
        self.poke()
        if not self.lag:
            return None
        return self.lag.get(owner_partition(owner_id, len(self.lag)))

    async def _refresh_quietly(self) -> None:
        try:
            await self.refresh()
        except Exception:  # a broker away for a moment: keep the last figures (health says so)
            return

    async def close(self) -> None:
        """Wait for a refresh under way (at shutdown)."""
        if self._task is not None and not self._task.done():
            await asyncio.gather(self._task, return_exceptions=True)


class MemoryHealthSampler:
    """Per-tenant memory health (``projections.health``) over every owner of the store, in a background thread.

    Recomputed at most once per ``interval_s`` when ``/metrics`` is scraped; a scrape answers with
    the last figures. Reading every owner's rows costs about as much as loading them for queries,
    so keep the interval long on a large store.
    """

    def __init__(self, retriever: Retriever, interval_s: float) -> None:
        self._retriever, self._interval = retriever, interval_s
        self._at = -float("inf")
        self._lock = threading.Lock()
        self._running = False

    def due(self) -> bool:
        """Start a recomputation in a daemon thread when the last one is older than the interval."""
        if self._interval <= 0 or self._running or time.monotonic() - self._at < self._interval:
            return False
        self._running = True
        self._at = time.monotonic()
        threading.Thread(target=self.compute, name="memory-health", daemon=True).start()
        return True

    def compute(self) -> dict[str, OwnerHealth]:
        """Compute the figures now and set the gauges; per tenant, the owners' counts summed."""
        try:
            store = self._retriever.store
            totals: dict[str, list[float]] = defaultdict(lambda: [0, 0, 0, 0.0, 0, 0])
            out: dict[str, OwnerHealth] = {}
            for owner in store.owners():
                health = owner_health(store.load_owner(owner))
                out[owner] = health
                t = totals[metrics.tenant_label(split_owner(owner)[0])]
                t[0] += health.extracted
                t[1] += health.fragmented
                t[2] += health.repeated
                if health.has_persona:
                    t[3] += health.stability
                    t[4] += 1
                t[5] += 1
            for tenant, (extracted, fragmented, repeated, stability, personas, owners) in totals.items():
                metrics.FRAGMENTATION.labels(tenant).set(fragmented / extracted if extracted else 0.0)
                metrics.REPEATS.labels(tenant).set(repeated / extracted if extracted else 0.0)
                metrics.STABILITY.labels(tenant).set(stability / personas if personas else 0.0)
                metrics.HEALTH_OWNERS.labels(tenant).set(owners)
            return out
        finally:
            self._running = False


def instrument(app: FastAPI, settings: Settings, retriever: Retriever, log_: EventLog | None) -> dict[str, Any]:
    """Add the request middleware, ``GET /metrics`` and the scrape-time sources; returns the probes."""
    app.add_middleware(_RequestMetrics)
    metrics.CACHES.watch(retriever.cache_stats)
    health = MemoryHealthSampler(retriever, settings.health_interval_s)
    probe = LagProbe(log_, retriever, settings) if log_ is not None else None

    @app.get("/metrics", include_in_schema=False)
    async def scrape() -> Response:
        health.due()
        if probe is not None:
            probe.poke()  # keeps the per-partition lag gauges fresh between queries
        return Response(metrics.exposition(), media_type=metrics.CONTENT_TYPE_LATEST)

    return {"health": health, "lag": probe}
