"""The embedded default as one process: ``adamem serve`` on a local log ingests, analyses and projects.

Each test starts the real ``adamem serve`` console script in an empty folder with nothing but its
defaults (``./data/log``, ``./data/store``) and no other process: what is posted over HTTP must be
in the answer of a query, through the API, ``MemoryClient.add`` and ``AsyncMemoryClient.add``;
``min_position`` must wait for it; and a stop in the middle of the work must leave a log and a
store that a restart continues without losing or repeating a message.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from adamem.api.app import create_app
from adamem.api.client import AsyncMemoryClient, MemoryClient, ServiceError
from adamem.partitioning import partition_for
from adamem.projections.store.factory import open_store
from adamem.retrieval.service import Retriever
from adamem.settings import Settings
from adamem.streams.factory import open_log
from tests.api.conftest import embedder, free_port
from tests.conftest import serving

ADAMEM = str(Path(sys.executable).with_name("adamem"))
PARTITIONS = 2


@dataclass
class Served:
    """A running ``adamem serve`` in ``folder``, and its output so far."""

    url: str
    process: subprocess.Popen[bytes]
    folder: Path
    out: Path

    def output(self) -> str:
        return self.out.read_text(errors="replace")


def _env(port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ADAMEM_")}
    env.update(
        ADAMEM_PORT=str(port),
        ADAMEM_HOST="127.0.0.1",
        ADAMEM_FSYNC="false",
        ADAMEM_EMBEDDED_PARTITIONS=str(PARTITIONS),
    )
    return env


def _start(folder: Path, name: str = "serve") -> Served:
    port = free_port()
    out = folder / f"{name}.out"
    with out.open("wb") as fo:
        process = subprocess.Popen([ADAMEM, "serve"], cwd=folder, env=_env(port), stdout=fo, stderr=subprocess.STDOUT)
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


def _stop(served: Served) -> None:
    """SIGTERM, and a clean shutdown (uvicorn finishes the lifespan, then dies of the signal it caught)."""
    served.process.send_signal(signal.SIGTERM)
    try:
        code = served.process.wait(60)
    except subprocess.TimeoutExpired:
        served.process.kill()
        served.process.wait(30)
        raise AssertionError(f"adamem serve did not stop on SIGTERM: {served.output()}") from None
    assert code in (0, -signal.SIGTERM) and "Application shutdown complete" in served.output(), served.output()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    s = _start(tmp_path_factory.mktemp("embedded"))
    try:
        yield s
    finally:
        if s.process.poll() is None:
            _stop(s)


def _message(user: str, text: str, at: str = "2024-03-01T09:00:00Z") -> dict[str, Any]:
    return {"user_id": user, "speaker": user.title(), "text": text, "occurred_at": at}


def _texts(answer: dict[str, Any]) -> list[str]:
    return [item["content"] for item in answer["items"]]


def test_serve_says_where_it_listens_its_mode_store_and_log_and_logs_each_request(served: Served) -> None:
    health = httpx.get(f"{served.url}/health").json()
    assert (health["mode"], health["writer"]) == ("embedded", {"running": True, "last_error": None})
    assert (health["store"], health["log"]) == ("data/store", "data/log")
    out = served.output()
    assert f"listening on {served.url}" in out and "mode  embedded" in out
    assert "store ./data/store" in out and "log   data/log" in out
    assert '"GET /health HTTP/1.1" 200' in out  # the access log
    assert (served.folder / "data" / "log" / ".writer.lock").exists()


def test_a_message_posted_over_http_is_in_the_next_query_with_no_other_process(served: Served) -> None:
    posted = httpx.post(
        f"{served.url}/v1/messages", json={"messages": [_message("nora", "I keep bees on my rooftop in Porto.")]}
    )
    assert posted.status_code == 202, posted.text
    positions = posted.json()["positions"]
    assert positions == [{"partition": partition_for("nora", PARTITIONS), "offset": positions[0]["offset"]}]
    body = {"question": "What does Nora keep on her rooftop?", "min_position": positions}
    answer = httpx.post(f"{served.url}/v1/users/nora/query", json=body, timeout=30)
    assert answer.status_code == 200, answer.text
    assert any("bees" in t for t in _texts(answer.json()))
    # and without asking for the position: a poll a second at most, as a user who just waits would
    deadline = time.monotonic() + 10
    while True:
        plain = httpx.post(f"{served.url}/v1/users/nora/query", json={"question": "Where are the bees?"})
        if plain.status_code == 200 and any("bees" in t for t in _texts(plain.json())):
            break
        assert time.monotonic() < deadline, plain.text
        time.sleep(0.2)


def test_memory_client_add_then_query_sees_the_message(served: Served) -> None:
    with MemoryClient(served.url) as m:
        added = m.add("olga", "My daughter's name is Ilse.", occurred_at="2024-03-02T10:00:00Z")
        assert added["positions"] and added["event_id"]
        answer = m.query("olga", "What is my daughter's name?")  # no min_position: add waited already
    assert any("Ilse" in t for t in _texts(answer)), answer


def test_an_answer_over_http_shows_when_each_speaker_said_it_on_their_own_clock(served: Served) -> None:
    """Said just after local midnight at +08:00 and just before it at -05:00: the UTC days are others."""
    posted = httpx.post(
        f"{served.url}/v1/messages",
        json={
            "messages": [
                _message("wen", "昨天我在杭州买了一把油纸伞。", "2024-03-02T00:30:00+08:00"),
                _message("wen", "Yesterday I bought a red umbrella in Toronto.", "2024-03-01T21:00:00-05:00"),
                _message("wen", "I like umbrellas, whatever the weather.", "2024-03-01T12:00:00-00:00"),  # unknown
            ]
        },
    )
    assert posted.status_code == 202, posted.text
    items: dict[str, dict[str, Any]] = {}
    for question in ("When did I buy an umbrella?", "我什么时候买的伞？"):
        body = {"question": question, "min_position": posted.json()["positions"]}
        answer = httpx.post(f"{served.url}/v1/users/wen/query", json=body, timeout=30)
        assert answer.status_code == 200, answer.text
        items.update({i["content"]: i for i in answer.json()["items"]})
    # the Chinese message may be shown as the event recorded from it ("昨天Wen在杭州…"): its time is the message's
    zh, en, unknown = (next(i for c, i in items.items() if word in c) for word in ("杭州", "Toronto", "weather"))
    assert (zh["occurred_at"], zh["utc_offset_minutes"]) == (1_709_310_600_000, 480)  # ms: as before
    assert zh["occurred_at_local"] == "2024-03-02T00:30:00+08:00"
    assert (en["utc_offset_minutes"], en["occurred_at_local"]) == (-300, "2024-03-01T21:00:00-05:00")
    assert (unknown["utc_offset_minutes"], unknown["occurred_at_local"]) == (None, "2024-03-01T12:00:00Z")
    # "yesterday" is the day before the speaker's day (the events' days are the speaker's calendar days)
    assert zh["event_time"] == 1_709_251_200_000  # 2024-03-01
    assert en["event_time"] == 1_709_164_800_000  # 2024-02-29
    traced = httpx.get(f"{served.url}/v1/users/wen/memory/{zh['id']}/provenance").json()
    assert [(s["utc_offset_minutes"], s["occurred_at_local"]) for s in traced["messages"]] == [
        (480, "2024-03-02T00:30:00+08:00")
    ]
    with MemoryClient(served.url) as m:  # the Python client passes the offset on as given
        m.add("wen", "今天我把伞借给了同事。", occurred_at="2024-03-03T07:15:00+08:00")
        lent = m.query("wen", "我把伞借给谁了？")
    shown = next(i for i in lent["items"] if i["content"] == "今天我把伞借给了同事。")
    assert (shown["utc_offset_minutes"], shown["occurred_at_local"]) == (480, "2024-03-03T07:15:00+08:00")


def test_memory_client_add_with_a_message_id_twice_keeps_the_message_once(served: Served) -> None:
    """Running a script that adds the same message again (a retry, a second run) does not store it twice."""
    with MemoryClient(served.url) as m:
        first = m.add("petra", "I keep a tortoise called Sheldon.", message_id="tortoise-1")
        again = m.add("petra", "I keep a tortoise called Sheldon.", message_id="tortoise-1")
        rows = m.memory("petra", layer="archive", limit=10_000)["rows"]
    assert first["event_id"] == again["event_id"]
    assert [r["text"] for r in rows].count("I keep a tortoise called Sheldon.") == 1, rows


def test_async_memory_client_add_then_query_sees_the_message(served: Served) -> None:
    async def run() -> dict[str, Any]:
        async with AsyncMemoryClient(served.url) as m:
            await m.add("piet", "I switched from tea to coffee in March.", speaker="Piet")
            return await m.query("piet", "What do I drink now?")  # type: ignore[no-any-return]

    assert any("coffee" in t for t in _texts(asyncio.run(run())))


def test_a_forget_over_http_takes_effect_before_it_answers(served: Served) -> None:
    """On the embedded default the service forgets at once: the next query no longer holds the message."""
    with MemoryClient(served.url) as m:
        added = m.add("quinn", "My locker code is zebra-4471.", occurred_at="2024-03-03T10:00:00Z")
        m.add("quinn", "I swim on Thursdays.", occurred_at="2024-03-03T10:01:00Z")
        assert any("zebra" in t for t in _texts(m.query("quinn", "What is my locker code?")))
    url = f"{served.url}/v1/users/quinn/forget"
    gone = httpx.post(url, json={"message": added["event_id"], "reason": "asked by the user"}, timeout=30)
    assert gone.status_code == 200, gone.text
    assert gone.json()["visible"] is True and gone.json()["scope"] == "message"
    after = httpx.post(f"{served.url}/v1/users/quinn/query", json={"question": "What is my locker code?"}).json()
    assert not any("zebra" in t for t in _texts(after)), after  # at once, not eventually
    swim = httpx.post(f"{served.url}/v1/users/quinn/query", json={"question": "When do I swim?"}).json()
    assert any("Thursdays" in t for t in _texts(swim))  # only that message
    again = httpx.post(url, json={"message": added["event_id"]})
    assert again.status_code == 404 and again.json()["error"] == "unknown_item", again.text
    both = httpx.post(url, json={"message": added["event_id"], "everything": True})
    assert both.status_code == 422 and both.json()["error"] == "invalid_request", both.text
    nobody = httpx.post(f"{served.url}/v1/users/nobody-here/forget", json={"everything": True})
    assert nobody.status_code == 404 and nobody.json()["error"] == "unknown_user", nobody.text
    with MemoryClient(served.url) as m:  # the client's forget: the whole owner
        assert m.forget("quinn", everything=True, reason="account closed")["scope"] == "user"
        with pytest.raises(ServiceError) as info:
            m.query("quinn", "When do I swim?")
    assert info.value.status == 404


def test_feedback_over_http_is_folded_before_it_answers_and_ranks_the_next_answers(served: Served) -> None:
    with MemoryClient(served.url) as m:
        for i, (text, at) in enumerate(
            [
                ("I like jasmine tea.", "2024-03-04T08:00:00Z"),
                ("I went climbing at the gym on Monday.", "2024-03-05T18:00:00Z"),
                ("我喜欢喝龙井茶。", "2024-03-07T08:00:00Z"),
                ("I like mint tea after dinner.", "2024-03-08T20:00:00Z"),
            ]
        ):
            m.add("rhea", text, occurred_at=at, message_id=f"rhea-{i}")
        first = m.query("rhea", "What tea do I like?", top_k=6)["items"]
    url = f"{served.url}/v1/users/rhea/feedback"
    judged = {
        "helped": [i["id"] for i in first if i["kind"] != "message"][:2],
        "unhelpful": [i["id"] for i in first if i["kind"] == "message"][:2],
    }
    assert judged["helped"] and judged["unhelpful"], first
    once = httpx.post(url, json=judged, timeout=30)
    assert once.status_code == 200, once.text
    assert once.json()["answer_style"] == "summaries" and once.json()["feedback"] == 1
    assert once.json()["ranks_answers"] is False  # one judged answer does not rank yet
    twice = httpx.post(url, json=judged, timeout=30).json()
    assert (twice["feedback"], twice["ranks_answers"]) == (2, True)
    answer = httpx.post(f"{served.url}/v1/users/rhea/query", json={"question": "我喜欢什么茶？", "top_k": 6}).json()
    assert any("answer style" in n for n in answer["notices"]), answer["notices"]
    for body, status, error in (
        ({"helped": ["no-such-item"]}, 404, "unknown_item"),
        ({}, 422, "invalid_request"),
        ({"helped": judged["helped"], "unhelpful": judged["helped"]}, 422, "invalid_request"),
        ({"helped": "one"}, 422, "invalid_request"),
    ):
        r = httpx.post(url, json=body)
        assert (r.status_code, r.json()["error"]) == (status, error), r.text
    nobody = httpx.post(f"{served.url}/v1/users/nobody-here/feedback", json={"helped": ["x"]})
    assert nobody.status_code == 404 and nobody.json()["error"] == "unknown_user", nobody.text


def test_each_add_is_visible_when_it_returns_and_positions_rise_per_partition(served: Served) -> None:
    texts = [f"Reminder {i}: the code for locker {i} is {1000 + i}." for i in range(6)]
    with MemoryClient(served.url) as m:
        seen: dict[int, int] = {}
        for i, text in enumerate(texts):
            user = ("quinn", "rosa")[i % 2]  # two owners, on either partition or the same one
            [pos] = m.add(user, text, occurred_at=f"2024-03-03T10:0{i}:00Z")["positions"]
            assert pos["offset"] > seen.get(pos["partition"], -1)  # read-your-writes order: one after another
            seen[pos["partition"]] = pos["offset"]
            rows = m.memory(user, layer="archive", limit=10_000)["rows"]
            assert text in {r["text"] for r in rows}  # in memory the moment add returned
        assert sorted(seen) == sorted({partition_for(u, PARTITIONS) for u in ("quinn", "rosa")})


def test_a_position_never_written_is_refused_at_once(served: Served) -> None:
    started = time.monotonic()
    for position, needle in [
        ({"partition": 0, "offset": 10**9}, "no message was written at"),
        ({"partition": PARTITIONS, "offset": 0}, f"has {PARTITIONS} partition(s)"),
    ]:
        r = httpx.post(f"{served.url}/v1/visible", json={"positions": [position], "wait_ms": 5_000})
        assert r.status_code == 409, r.text
        assert r.json()["error"] == "not_written" and needle in r.json()["detail"], r.text
    assert time.monotonic() - started < 9.5  # it did not wait the 2 × 5 s it was allowed


def test_a_second_writer_is_refused_while_serve_runs_and_add_goes_through_it(served: Served) -> None:
    line = _message("nora", "I also keep goats.", "2024-04-01T10:00:00Z")
    (served.folder / "more.jsonl").write_text(json.dumps(line) + "\n", encoding="utf-8")
    done = subprocess.run(
        [ADAMEM, "publish", "more.jsonl", "--quiet"],
        cwd=served.folder,
        env=_env(int(served.url.rsplit(":", 1)[1])),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 5, done.stdout + done.stderr
    assert "another process is writing to the log" in done.stderr
    by_itself = subprocess.run(
        [ADAMEM, "add", "nora", "I also keep goats."],
        cwd=served.folder,
        env=_env(0),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert by_itself.returncode == 0 and f"adding through it at {served.url}" in by_itself.stderr, by_itself.stderr
    through = subprocess.run(
        [ADAMEM, "add", "nora", "I also keep sheep.", "--url", served.url, "--json"],
        cwd=served.folder,
        env=_env(0),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert through.returncode == 0, through.stderr
    answer = httpx.post(f"{served.url}/v1/users/nora/query", json={"question": "What animals do I keep?"}).json()
    assert any("goats" in t for t in _texts(answer)) and any("sheep" in t for t in _texts(answer))


def test_adamem_forget_on_a_folder_a_serve_writes_goes_through_it_and_takes_effect_at_once(served: Served) -> None:
    with MemoryClient(served.url) as m:
        added = m.add("rosa", "My bank PIN hint is lighthouse.", occurred_at="2024-04-02T10:00:00Z")
    done = subprocess.run(
        [ADAMEM, "forget", "rosa", "--message", added["event_id"]],
        cwd=served.folder,
        env=_env(0),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and f"forgetting through it at {served.url}" in done.stderr, done.stderr
    assert "memory no longer holds it" in done.stdout, done.stdout
    answer = httpx.post(f"{served.url}/v1/users/rosa/query", json={"question": "What is my PIN hint?"})
    assert answer.status_code == 404 or not any("lighthouse" in t for t in _texts(answer.json())), answer.text


def test_a_stop_mid_work_loses_nothing_and_a_restart_repeats_nothing(tmp_path: Path) -> None:
    first = _start(tmp_path, "first")
    batch = [
        _message(f"user{i % 5}", f"Note {i}: I planted {i} tulips today.", f"2024-04-01T10:{i:02d}:00Z")
        for i in range(40)
    ]
    posted = httpx.post(f"{first.url}/v1/messages", json={"messages": batch}, timeout=60)
    assert posted.status_code == 202, posted.text
    _stop(first)  # SIGTERM at once: the write path is mid-work or not started
    second = _start(tmp_path, "second")
    try:
        with MemoryClient(second.url) as m:
            m.wait(posted.json()["positions"], wait_ms=120_000)  # asks again every 5 s while the restart catches up
            texts = [r["text"] for u in range(5) for r in m.memory(f"user{u}", layer="archive", limit=10_000)["rows"]]
        assert sorted(texts) == sorted(m["text"] for m in batch)  # every message once: none lost, none twice
        lag = httpx.get(f"{second.url}/health").json()["lag"]
        assert (lag["analysis"], lag["projection"]) == (0, 0)
    finally:
        _stop(second)
    checked = subprocess.run(
        [ADAMEM, "log", "check", "--log", "data/log", "--store", "data/store"],
        cwd=tmp_path,
        env=_env(0),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert checked.returncode == 0 and "all verified" in checked.stdout, checked.stdout + checked.stderr
    analyses = subprocess.run(
        [ADAMEM, "log", "dump", "--log", "data/log", "--topic", "analyses"],
        cwd=tmp_path,
        env=_env(0),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert analyses.stdout.count("\n") == len(batch), analyses.stderr  # one analysis per message, not two


def test_read_only_mode_publishes_but_a_query_for_an_unprojected_position_answers_409(tmp_path: Path) -> None:
    settings = Settings(log_url=str(tmp_path / "log"), store_url=str(tmp_path / "store"), fsync=False)
    retriever = Retriever(open_store(settings.store, read_only=True), embedder())
    app = create_app(settings, retriever, open_log(settings.log_url, settings))
    with serving(app) as c:
        assert c.get("/health").json()["mode"] == "read-only"
        positions = c.post("/v1/messages", json={"messages": [_message("sam", "I like kites.")]}).json()["positions"]
        r = c.post("/v1/users/sam/query", json={"question": "kites?", "min_position": positions, "wait_ms": 300})
        assert r.status_code == 409 and r.json()["error"] == "not_visible", r.text
        assert "did not reach partition 0 offset 0" in r.json()["detail"]  # nobody projects in this mode
        with pytest.raises(ServiceError) as info, MemoryClient(str(c.base_url)) as m:
            m.add("sam", "I like kites a lot.", wait_ms=200)
        assert info.value.status == 409


def test_a_service_without_a_log_cannot_wait_for_positions(tmp_path: Path) -> None:
    settings = Settings(log_url=str(tmp_path / "log"), store_url=str(tmp_path / "store"), fsync=False)
    app = create_app(settings, Retriever(open_store(settings.store, read_only=True), embedder()))
    with serving(app) as c:
        health = c.get("/health").json()
        assert health["mode"] == "read-only" and "log" not in health
        r = c.post("/v1/visible", json={"positions": [{"partition": 0, "offset": 0}]})
        assert r.status_code == 503 and r.json()["error"] == "log_unavailable", r.text


def test_adamem_add_without_a_service_analyses_and_projects_in_process(tmp_path: Path) -> None:
    run = {"cwd": tmp_path, "env": _env(0), "capture_output": True, "text": True, "timeout": 300}
    added = subprocess.run([ADAMEM, "add", "tess", "I am allergic to walnuts.", "--at", "2024-05-01T08:00:00Z"], **run)
    assert added.returncode == 0, added.stderr
    assert "added " in added.stdout and f"adamem.messages p{partition_for('tess', PARTITIONS)}:0;" in added.stdout
    asked = subprocess.run([ADAMEM, "query", "tess", "What am I allergic to?", "--json"], **run)
    assert asked.returncode == 0 and "walnuts" in asked.stdout, asked.stderr


@pytest.mark.kafka
def test_on_kafka_the_service_only_reads_and_min_position_waits_for_the_workers(
    settings: Settings, kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Read-your-writes from the log's headers works whoever projects: here a pipeline run stands in for a worker."""
    from adamem.analysis.agent import MemoryAgent
    from adamem.analysis.rules import RuleExtractor
    from adamem.projections.projector import Projector
    from adamem.streams.pipeline import run_pipeline

    settings = Settings(
        log_url=f"kafka://{kafka_bootstrap}",
        store_url=str(tmp_path / "store"),
        topic_prefix=settings.topic_prefix,
        partitions=2,
        home=settings.home,  # the session's temporary keystores
    )

    async def work() -> None:
        log = open_log(settings.log_url, settings)
        await log.start()
        try:
            store = open_store(settings.store)
            await run_pipeline(log, Projector(store), MemoryAgent(RuleExtractor(), embedder()), settings)
            store.close()
        finally:
            await log.stop()

    retriever = Retriever(open_store(settings.store, read_only=True), embedder())
    with serving(create_app(settings, retriever, open_log(settings.log_url, settings))) as c:
        assert c.get("/health").json()["mode"] == "read-only"
        posted = c.post("/v1/messages", json={"messages": [_message("uma", "I collect antique maps.")]}).json()
        early = c.post("/v1/visible", json={"positions": posted["positions"], "wait_ms": 300})
        assert early.status_code == 409 and early.json()["error"] == "not_visible", early.text
        asyncio.run(work())
        body = {"question": "What do I collect?", "min_position": posted["positions"], "wait_ms": 5_000}
        answer = c.post("/v1/users/uma/query", json=body)
        assert answer.status_code == 200 and any("maps" in t for t in _texts(answer.json())), answer.text


def test_a_store_named_without_a_log_is_served_read_only_as_before(served: Served, tmp_path: Path) -> None:
    with MemoryClient(served.url) as m:
        m.add("vera", "I keep bees on my balcony.")
    port = free_port()
    out = tmp_path / "store-only.out"
    store = str(served.folder / "data" / "store")
    with out.open("wb") as fo:
        process = subprocess.Popen(
            [ADAMEM, "serve", "--store", store], cwd=tmp_path, env=_env(port), stdout=fo, stderr=subprocess.STDOUT
        )
    s = Served(f"http://127.0.0.1:{port}", process, tmp_path, out)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None and time.monotonic() < deadline, s.output()
            try:
                health = httpx.get(f"{s.url}/health", timeout=2).json()
                break
            except httpx.TransportError:
                time.sleep(0.2)
        assert health["mode"] == "read-only" and "log" not in health and "writer" not in health, health
        assert not (tmp_path / "data").exists()  # no log made in the folder it was started from
        answer = httpx.post(f"{s.url}/v1/users/vera/query", json={"question": "What do I keep?"}).json()
        assert any("bees" in t for t in _texts(answer))  # the embedded service's store, read beside it
    finally:
        _stop(s)
