"""``GET /metrics`` of the query service: requests, stages, errors, caches, lag and memory health."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from adamem.api.app import create_app
from adamem.api.metrics import MemoryHealthSampler
from adamem.projections.health import owner_health
from adamem.projections.store.factory import open_store
from adamem.retrieval.service import Retriever
from adamem.settings import Settings
from adamem.streams.factory import open_log
from tests.api.conftest import DEFAULT, KEYS
from tests.api.conftest import embedder as _embedder
from tests.conftest import serving


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of an exposition, by name and labels."""
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(text: str, name: str, **labels: str) -> float:
    """The sample's value, 0.0 when it is absent (a counter never incremented)."""
    return samples(text).get((name, frozenset(labels.items())), 0.0)


@pytest.fixture
def client(built: tuple[Settings, str]) -> Iterator[httpx.Client]:
    settings, store = built
    retriever = Retriever(open_store(store, read_only=True), _embedder())
    app = create_app(settings, retriever, open_log(settings.log_url, settings), api_keys=KEYS)
    with serving(app) as c:
        yield c


def test_a_query_is_counted_and_timed_per_endpoint_route_and_stage(client: httpx.Client) -> None:
    before = client.get("/metrics").text
    question = {"question": "What food does Alice like?", "top_k": 5}
    r = client.post("/v1/users/alice/query", json=question, headers=DEFAULT)
    assert r.status_code == 200
    route = r.json()["route"]["route"]
    client.post("/v1/users/alice/query", json=question, headers=DEFAULT)  # the same question: the query cache
    scrape = client.get("/metrics")
    assert scrape.status_code == 200 and scrape.headers["content-type"].startswith("text/plain")
    after = scrape.text
    endpoint = {"endpoint": "/v1/users/{user}/query", "method": "POST"}  # the template, never the user
    assert (
        value(after, "adamem_http_requests_total", **endpoint, status="200")
        - value(before, "adamem_http_requests_total", **endpoint, status="200")
        == 2
    )
    assert value(after, "adamem_http_request_duration_seconds_count", **endpoint) >= 2
    for stage in ("resolve", "route", "retrieve", "expand", "fuse", "total"):
        count = "adamem_query_duration_seconds_count"
        assert value(after, count, route=route, stage=stage) - value(before, count, route=route, stage=stage) == 2
    assert value(after, "adamem_queries_total", route=route, cached="true") > value(
        before, "adamem_queries_total", route=route, cached="true"
    )
    assert value(after, "adamem_cache_lookups_total", cache="query_answers", result="hit") >= 1
    assert value(after, "adamem_cache_lookups_total", cache="question_vectors", result="hit") >= 1
    assert "alice" not in after  # no label names a user


def test_errors_are_counted_by_kind_and_metrics_are_not_in_the_api_description(client: httpx.Client) -> None:
    before = client.get("/metrics").text
    assert client.post("/v1/users/nobody-here/query", json={"question": "hi"}, headers=DEFAULT).status_code == 404
    assert client.post("/v1/users/alice/query", json={"question": "hi", "top_k": 0}, headers=DEFAULT).status_code == 422
    after = client.get("/metrics").text
    for kind, status in (("unknown_user", "404"), ("invalid_request", "422")):
        name = "adamem_http_errors_total"
        assert value(after, name, kind=kind, status=status) - value(before, name, kind=kind, status=status) == 1
    assert "/metrics" not in client.get("/openapi.json").json()["paths"]


def test_the_owner_lag_at_answer_time_is_observed_once_the_log_was_read(client: httpx.Client) -> None:
    measured = ("adamem_consumer_lag_events", frozenset({("topic", "adamem.analyses"), ("partition", "0")}))
    for _ in range(100):  # each scrape starts a background read of the log's ends when none ran this second
        text = client.get("/metrics").text
        if measured in samples(text):
            break
        time.sleep(0.1)
    else:
        pytest.fail("the projection lag was never measured")
    assert samples(text)[measured] == 0  # the store has projected everything on the log
    before = value(text, "adamem_query_owner_lag_events_count")
    client.post("/v1/users/alice/query", json={"question": "Where does Alice live?"}, headers=DEFAULT)
    after = client.get("/metrics").text
    assert value(after, "adamem_query_owner_lag_events_count") == before + 1
    assert value(after, "adamem_query_owner_lag_events_bucket", le="0.0") >= 1  # the store is caught up


def test_memory_health_is_per_tenant_and_sums_the_owners(built: tuple[Settings, str]) -> None:
    _, store_url = built
    store = open_store(store_url, read_only=True)
    retriever = Retriever(store, _embedder())
    per_owner = MemoryHealthSampler(retriever, 60).compute()
    assert set(per_owner) == set(store.owners())
    default = [h for o, h in per_owner.items() if o.startswith("default:")]
    extracted = sum(h.extracted for h in default)
    assert extracted > 0  # the sample's messages carry facts that were consolidated
    fragmented = sum(h.fragmented for h in default)
    from adamem import metrics

    text = metrics.exposition().decode()
    assert value(text, "adamem_memory_fragmentation_ratio", tenant="default") == pytest.approx(fragmented / extracted)
    assert value(text, "adamem_memory_health_owners", tenant="default") == len(default)
    assert owner_health(store.load_owner(next(iter(per_owner)))) == next(iter(per_owner.values()))
    retriever.close()
