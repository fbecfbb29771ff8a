"""Prometheus metrics of every AdaMem process: one registry, standard names and units.

Names follow Prometheus' conventions: ``adamem_`` prefix, base units (``_seconds``), counters end
in ``_total``, ratios in ``_ratio``. Every label has a bounded set of values — endpoints are route
templates, stages and routes are enums, dead-letter reasons are classes (``dead_letter_reason``),
partitions are the log's, and tenants are capped (``tenant_label``): no label ever carries a user id.

The metrics live in ``REGISTRY`` (not ``prometheus_client``'s global one), so ``exposition()`` shows
exactly what AdaMem defines and ``metric_names()`` is the list the Grafana dashboard is checked
against. A process exposes them on ``/metrics`` (``adamem serve``) or on ``--metrics-port``
(``adamem worker``, ``adamem project --follow``, ``adamem replay``; ``serve_metrics``).

Observing reads the wall clock (latencies, the time of a checkpoint); that is the runners' and the
service's business — the folds themselves never read a clock and never see these objects.

| metric | type | labels | meaning |
|---|---|---|---|
| ``adamem_http_requests_total`` | counter | endpoint, method, status | requests answered by the query service |
| ``adamem_http_request_duration_seconds`` | histogram | endpoint, method | time to answer a request |
| ``adamem_http_errors_total`` | counter | kind, status | error answers by kind of the error body |
| ``adamem_query_duration_seconds`` | histogram | route, stage | a query's stages (resolve … fuse) and total |
| ``adamem_queries_total`` | counter | route, cached | queries answered, and whether from the query cache |
| ``adamem_query_owner_lag_events`` | histogram | – | owner's partition: analyses not projected, at answer time |
| ``adamem_cache_lookups_total`` | counter | cache, result | lookups of the retriever's caches (hit / miss) |
| ``adamem_cache_entries`` | gauge | cache | entries held by each cache |
| ``adamem_answers_windowed_total`` | counter | tenant | answers to a question naming a time window, with items |
| ``adamem_answers_top_in_window_total`` | counter | tenant | of those, top item's evidence is in the window |
| ``adamem_events_analysed_total`` | counter | – | messages analysed by the Memory Agent |
| ``adamem_events_forwarded_total`` | counter | – | control events forwarded to the analyses topic |
| ``adamem_events_folded_total`` | counter | – | events folded into the store |
| ``adamem_events_skipped_total`` | counter | – | redelivered events below the checkpoint |
| ``adamem_fold_duration_seconds`` | histogram | – | folding one batch (no I/O but loading owner states) |
| ``adamem_commit_duration_seconds`` | histogram | – | committing one batch's rows and checkpoint |
| ``adamem_dead_letters_total`` | counter | stage, reason | records dead-lettered by the analyzer or the projection |
| ``adamem_rebalances_total`` | counter | – | partition assignments received by a worker |
| ``adamem_consumer_lag_events`` | gauge | topic, partition | records on the log not yet handled by this process |
| ``adamem_checkpoint_timestamp_seconds`` | gauge | partition | wall time of this process' last checkpoint commit |
| ``adamem_replay_events_total`` | counter | – | events folded by a replay or reanalysis |
| ``adamem_replay_progress_ratio`` | gauge | – | share of the replay's target offsets reached |
| ``adamem_memory_fragmentation_ratio`` | gauge | tenant | ``projections.health``: facts that never reached a record |
| ``adamem_memory_repeat_explanation_ratio`` | gauge | tenant | ``projections.health``: messages restating known facts |
| ``adamem_persona_stability_ratio`` | gauge | tenant | ``projections.health``: weekly change of core traits |
| ``adamem_memory_health_owners`` | gauge | tenant | owners the memory-health figures were computed over |
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterable, Iterator

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    generate_latest,
    start_http_server,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector

__all__ = [
    "CACHES",
    "CONTENT_TYPE_LATEST",
    "REGISTRY",
    "dead_letter_reason",
    "exposition",
    "metric_names",
    "serve_metrics",
    "tenant_label",
]

REGISTRY = CollectorRegistry(auto_describe=True)
"""Every AdaMem metric, and nothing else."""

_FAST = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
_SLOW = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

HTTP_REQUESTS = Counter(
    "adamem_http_requests", "Requests answered by the query service.", ("endpoint", "method", "status"),
    registry=REGISTRY,
)  # fmt: skip
HTTP_DURATION = Histogram(
    "adamem_http_request_duration_seconds", "Time to answer a request, by route template.", ("endpoint", "method"),
    buckets=_FAST, registry=REGISTRY,
)  # fmt: skip
HTTP_ERRORS = Counter(
    "adamem_http_errors", "Error answers, by the kind in the error body.", ("kind", "status"), registry=REGISTRY
)
QUERY_DURATION = Histogram(
    "adamem_query_duration_seconds", "Time of each stage of a query (resolve, route, retrieve, expand, fuse; total).",
    ("route", "stage"), buckets=_FAST, registry=REGISTRY,
)  # fmt: skip
QUERIES = Counter("adamem_queries", "Queries answered, by route and cache.", ("route", "cached"), registry=REGISTRY)
QUERY_OWNER_LAG = Histogram(
    "adamem_query_owner_lag_events", "Analyses of the owner's partition not yet projected when a query was answered.",
    buckets=(0, 1, 10, 100, 1_000, 10_000, 100_000), registry=REGISTRY,
)  # fmt: skip
ANSWERS_WINDOWED = Counter(
    "adamem_answers_windowed", "Answers with items to a question that names a time window.", ("tenant",),
    registry=REGISTRY,
)  # fmt: skip
ANSWERS_TOP_IN_WINDOW = Counter(
    "adamem_answers_top_in_window", "Windowed answers whose top item has evidence inside the window.", ("tenant",),
    registry=REGISTRY,
)  # fmt: skip

EVENTS_ANALYSED = Counter("adamem_events_analysed", "Messages analysed by the Memory Agent.", registry=REGISTRY)
EVENTS_FORWARDED = Counter("adamem_events_forwarded", "Control events forwarded to analyses.", registry=REGISTRY)
EVENTS_FOLDED = Counter("adamem_events_folded", "Events folded into the store.", registry=REGISTRY)
EVENTS_SKIPPED = Counter("adamem_events_skipped", "Redelivered events below the checkpoint.", registry=REGISTRY)
FOLD_DURATION = Histogram("adamem_fold_duration_seconds", "Time to fold one batch.", buckets=_SLOW, registry=REGISTRY)
COMMIT_DURATION = Histogram(
    "adamem_commit_duration_seconds", "Time to commit one batch and its checkpoint.", buckets=_SLOW, registry=REGISTRY
)
DEAD_LETTERS = Counter(
    "adamem_dead_letters", "Records dead-lettered, by stage (analyze, project) and reason.", ("stage", "reason"),
    registry=REGISTRY,
)  # fmt: skip
REBALANCES = Counter("adamem_rebalances", "Partition assignments received by a worker.", registry=REGISTRY)
CONSUMER_LAG = Gauge(
    "adamem_consumer_lag_events", "Records on the log not yet handled by this process.", ("topic", "partition"),
    registry=REGISTRY,
)  # fmt: skip
CHECKPOINT_TIME = Gauge(
    "adamem_checkpoint_timestamp_seconds", "Wall time of this process' last checkpoint commit, per shard.",
    ("partition",), registry=REGISTRY,
)  # fmt: skip
REPLAY_EVENTS = Counter("adamem_replay_events", "Events folded by a replay or reanalysis.", registry=REGISTRY)
REPLAY_PROGRESS = Gauge(
    "adamem_replay_progress_ratio", "Share of the replay's target offsets reached.", registry=REGISTRY
)

FRAGMENTATION = Gauge(
    "adamem_memory_fragmentation_ratio", "Consolidated messages with extracted items that no record cites.",
    ("tenant",), registry=REGISTRY,
)  # fmt: skip
REPEATS = Gauge(
    "adamem_memory_repeat_explanation_ratio", "Consolidated messages that only restated records already known.",
    ("tenant",), registry=REGISTRY,
)  # fmt: skip
STABILITY = Gauge(
    "adamem_persona_stability_ratio", "Share of core persona traits changed in each owner's last week (mean).",
    ("tenant",), registry=REGISTRY,
)  # fmt: skip
HEALTH_OWNERS = Gauge(
    "adamem_memory_health_owners", "Owners the memory-health figures were computed over.", ("tenant",),
    registry=REGISTRY,
)  # fmt: skip


class _Caches(Collector):
    """``adamem_cache_lookups_total``, ``adamem_cache_entries`` and the loaded snapshots' memory of every watched
    source, read at scrape time.

    A source returns ``(cache, hits, misses, entries, bytes, budget)`` per cache (bytes and budget -1 where
    the cache is not sized by memory); the caches count their own lookups (plain integers), so a query
    pays nothing for these metrics.
    """

    def __init__(self) -> None:
        self._sources: list[weakref.WeakMethod[Callable[[], Iterable[tuple[str, int, int, int, int, int]]]]] = []

    def watch(self, source: Callable[[], Iterable[tuple[str, int, int, int, int, int]]]) -> None:
        """Add a source of cache figures, a bound method (held weakly: a closed service's retriever goes away)."""
        self._sources = [s for s in self._sources if s() is not None]
        self._sources.append(weakref.WeakMethod(source))

    def collect(self) -> Iterator[Metric]:
        """The families, with one sample per cache and result."""
        lookups = CounterMetricFamily(
            "adamem_cache_lookups", "Lookups of the retriever's caches.", labels=("cache", "result")
        )
        entries = GaugeMetricFamily("adamem_cache_entries", "Entries held by each cache.", labels=("cache",))
        held_bytes = GaugeMetricFamily(
            "adamem_cache_bytes", "Approximate memory held by a cache sized by memory.", labels=("cache",)
        )
        budget = GaugeMetricFamily(
            "adamem_cache_budget_bytes",
            "Memory a cache sized by memory may hold (ADAMEM_QUERY_MEMORY).",
            labels=("cache",),
        )
        for ref in list(self._sources):
            source = ref()
            for cache, hits, misses, held, size, limit in source() if source is not None else ():
                lookups.add_metric((cache, "hit"), hits)
                lookups.add_metric((cache, "miss"), misses)
                entries.add_metric((cache,), held)
                if size >= 0:
                    held_bytes.add_metric((cache,), size)
                    budget.add_metric((cache,), limit)
        yield lookups
        yield entries
        yield held_bytes
        yield budget


CACHES = _Caches()
REGISTRY.register(CACHES)
ProcessCollector(registry=REGISTRY)  # process_cpu_seconds_total, process_resident_memory_bytes, ...

MAX_TENANTS = 100
"""Tenants with their own label value; later ones share ``OTHER_TENANT`` (bounded cardinality)."""
OTHER_TENANT = "_other"


class _TenantLabels:
    """The first ``MAX_TENANTS`` tenants seen keep their name; the rest are one label value."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, tenant: str) -> str:
        if tenant in self._seen:
            return tenant
        with self._lock:
            if len(self._seen) < self._limit:
                self._seen.add(tenant)
                return tenant
        return OTHER_TENANT


tenant_label = _TenantLabels(MAX_TENANTS)
"""The label value of a tenant: its name, or ``OTHER_TENANT`` past the first ``MAX_TENANTS``."""

_REASONS = (
    ("partitioner=murmur2_random", "misplaced"),
    ("is not the event's owner", "key_mismatch"),
    ("does not belong on", "wrong_topic"),
    ("not UTF-8", "bad_key"),
    ("UnknownSchemaError", "unknown_schema"),
    ("DecodeError", "undecodable"),
    ("SchemaError", "undecodable"),
)


def dead_letter_reason(error: str) -> str:
    """A bounded reason for a dead letter's error text.

    ``misplaced`` (not on its key's murmur2 partition), ``key_mismatch`` (key is not the owner),
    ``wrong_topic``, ``bad_key`` (not UTF-8), ``unknown_schema``, ``undecodable``; otherwise the
    error's class name as it leads the text (``AdaMemError: …``), or ``other``.
    """
    for needle, reason in _REASONS:
        if needle in error:
            return reason
    head = error.split(":", 1)[0].strip()
    return head if head.isidentifier() and len(head) <= 40 else "other"


def metric_names() -> set[str]:
    """Every sample name the registry can expose (``_total``, ``_bucket``, ``_sum``, ``_count``, ``_created`` too)."""
    names: set[str] = set()
    for family in REGISTRY.collect():
        names.add(family.name)
        if family.type == "counter":
            names.update({family.name + "_total", family.name + "_created"})
        elif family.type == "histogram":
            names.update(family.name + s for s in ("_bucket", "_sum", "_count", "_created"))
    return names


def exposition() -> bytes:
    """The registry in Prometheus' text format."""
    return generate_latest(REGISTRY)


def serve_metrics(port: int, host: str = "127.0.0.1") -> None:
    """Expose ``REGISTRY`` on ``http://host:port/metrics`` from a daemon thread."""
    start_http_server(port, addr=host, registry=REGISTRY)
