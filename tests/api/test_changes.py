"""``GET /v1/owners/{user}/changes`` on the embedded default: a posted message reaches a subscriber within a second.

The real ``adamem serve`` console script, in an empty folder, with two tenants' keys; an SSE
client (httpx, streaming) subscribes, a message is posted, and the stream must carry the
``messages``/``added`` change of that message's event id, for its own tenant only.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.conftest import free_port
from tests.api.test_embedded import ADAMEM, PARTITIONS, Served, _message, _stop

ACME, GLOBEX = "acme-key-0123456789abcdef", "globex-key-0123456789abcdef"


def _start_keyed(folder: Path) -> Served:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ADAMEM_")}
    env.update(
        ADAMEM_PORT=str(port),
        ADAMEM_HOST="127.0.0.1",
        ADAMEM_FSYNC="false",
        ADAMEM_EMBEDDED_PARTITIONS=str(PARTITIONS),
        ADAMEM_API_KEYS=f"acme:{ACME},globex:{GLOBEX}",
    )
    out = folder / "serve.out"
    with out.open("wb") as fo:
        process = subprocess.Popen([ADAMEM, "serve"], cwd=folder, env=env, stdout=fo, stderr=subprocess.STDOUT)
    served = Served(f"http://127.0.0.1:{port}", process, folder, out)
    deadline = time.monotonic() + 120
    while True:
        assert process.poll() is None, f"adamem serve exited: {served.output()}"
        assert time.monotonic() < deadline, f"adamem serve did not answer: {served.output()}"
        try:
            if httpx.get(f"{served.url}/health", timeout=2).status_code == 200:
                return served
        except httpx.TransportError:
            pass
        time.sleep(0.2)


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    s = _start_keyed(tmp_path_factory.mktemp("changes"))
    try:
        yield s
    finally:
        if s.process.poll() is None:
            _stop(s)


class Subscriber:
    """An SSE client on its own thread: every event it receives, with the monotonic time it arrived."""

    def __init__(self, url: str, key: str, headers: dict[str, str] | None = None) -> None:
        self.events: queue.Queue[tuple[float, str, dict[str, Any]]] = queue.Queue()
        self.ready = threading.Event()
        self._stop = threading.Event()
        self._response: httpx.Response | None = None
        self._thread = threading.Thread(
            target=self._run, args=(url, {"X-API-Key": key, **(headers or {})}), daemon=True
        )
        self._thread.start()
        assert self.ready.wait(30), "the stream did not open"

    def _run(self, url: str, headers: dict[str, str]) -> None:
        with httpx.stream("GET", url, headers=headers, timeout=httpx.Timeout(5, read=None)) as response:
            self._response = response
            assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
            event: dict[str, str] = {}
            try:
                for line in response.iter_lines():
                    self.ready.set()  # the first comment line arrives as soon as the stream is open
                    if line.startswith(("id:", "event:", "data:")):
                        name, _, value = line.partition(":")
                        event[name] = value.strip()
                    elif line == "" and "data" in event:
                        self.events.put((time.monotonic(), event["id"], json.loads(event["data"])))
                        event = {}
            except (httpx.HTTPError, OSError, RuntimeError):
                if not self._stop.is_set():
                    raise  # only close() may end the stream

    def until(self, predicate: Any, timeout: float = 30) -> tuple[float, str, dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while True:
            got = self.events.get(timeout=max(0.01, deadline - time.monotonic()))
            if predicate(got[2]):
                return got

    def close(self) -> None:
        self._stop.set()
        if self._response is not None:
            self._response.close()  # ends the blocking read (the daemon thread dies with the process otherwise)
        self._thread.join(5)


def _added(event_id: str) -> Any:
    return lambda data: any(
        (c["layer"], c["kind"], c["item_id"]) == ("messages", "added", event_id) for c in data["changes"]
    )


def _post(served: Served, key: str, user: str, text: str, event_id: str) -> float:
    started = time.monotonic()
    body = {"messages": [{**_message(user, text), "event_id": event_id}]}
    answer = httpx.post(f"{served.url}/v1/messages", json=body, headers={"X-API-Key": key}, timeout=30)
    assert answer.status_code == 202, answer.text
    return started


def test_a_posted_message_reaches_the_subscriber_within_a_second(keyed: Served) -> None:
    sub = Subscriber(f"{keyed.url}/v1/owners/alice/changes", ACME)
    try:
        delays = []
        for i, event_id in enumerate(["0b7e6a3c-1f00-4a6e-9d8e-000000000001", "0b7e6a3c-1f00-4a6e-9d8e-000000000002"]):
            posted = _post(keyed, ACME, "alice", f"I started learning the cello, lesson {i}.", event_id)
            arrived, _, data = sub.until(_added(event_id))
            delays.append(arrived - posted)
            assert (data["tenant"], data["user_id"]) == ("acme", "alice")
            assert data["source"]["topic"] == "adamem.analyses" and data["occurred_at"] > 0
        print(f"post -> SSE event: {[round(d * 1000) for d in delays]} ms")
        assert min(delays) < 1.0, delays
    finally:
        sub.close()


def test_a_key_sees_its_own_tenants_changes_only_and_keys_are_enforced(keyed: Served) -> None:
    url = f"{keyed.url}/v1/owners/bob/changes"
    assert httpx.get(url, timeout=10).status_code == 401
    assert httpx.get(url, headers={"X-API-Key": "not-a-key-of-anyone-here"}, timeout=10).status_code == 403
    other = httpx.get(url, headers={"X-API-Key": ACME, "X-Tenant": "globex"}, timeout=10)
    assert other.status_code == 403 and other.json()["error"] == "forbidden"
    acme, globex = Subscriber(url, ACME), Subscriber(url, GLOBEX)
    try:
        ours, theirs = "0b7e6a3c-1f00-4a6e-9d8e-000000000011", "0b7e6a3c-1f00-4a6e-9d8e-000000000012"
        _post(keyed, GLOBEX, "bob", "Globex's Bob likes sailing.", theirs)  # the same user id, another tenant
        _post(keyed, ACME, "bob", "Acme's Bob likes chess.", ours)
        _, last_id, seen = acme.until(_added(ours))
        _, _, seen_globex = globex.until(_added(theirs))
        assert seen["tenant"] == "acme" and seen_globex["tenant"] == "globex"
    finally:
        acme.close()
        globex.close()
    assert all(data["tenant"] == "acme" for _, _, data in list(acme.events.queue))
    # resuming after the last id gives nothing of globex and nothing already seen
    resumed = Subscriber(url, ACME, {"Last-Event-ID": last_id})
    try:
        newer = "0b7e6a3c-1f00-4a6e-9d8e-000000000013"
        _post(keyed, ACME, "bob", "Acme's Bob also plays go.", newer)
        _, next_id, data = resumed.until(lambda d: True)
        assert int(next_id) > int(last_id) and data["tenant"] == "acme"
        assert not _added(ours)(data)
    finally:
        resumed.close()
