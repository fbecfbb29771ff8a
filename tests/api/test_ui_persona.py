"""The persona panel at a past point is the persona fold replayed from the log to that point.

A real embedded log and LanceDB store in a temporary folder: one owner who likes spicy food and
then says she hates it (English), likes jazz and then hates it (Chinese), mentions an allergy whose
message is then forgotten. Each message opens a conversation of its own, so each next message
consolidates the one before (the session-end trigger): a message is persona evidence from the
arrival of the next one folded (a forgotten message is not folded, and consolidates nothing). The
panel's rows are compared with a replay to the same point of a copy of the store
(``rebuild_view(..., until_time=...)``, what ``adamem replay --until`` runs).
"""

from __future__ import annotations

import asyncio
import html
import json
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import httpx
import pytest

from adamem.analysis.agent import MemoryAgent
from adamem.analysis.rules import RuleExtractor
from adamem.api.app import create_app
from adamem.api.ui.replay import Frontier, PersonaAt, PersonaReplays, fold_persona
from adamem.errors import LogError
from adamem.events import (
    Analyzer,
    ChatMessage,
    Embedding,
    ExtractedAttribute,
    MemoryForgotten,
    MessageAnalyzed,
    Speaker,
    analysis_event_id,
    message_event_id,
)
from adamem.ingest import load_messages, parse_time
from adamem.projections.folds.apply import Positioned
from adamem.projections.folds.params import SEED_DEFAULT  # the retriever's and the projector's parameters
from adamem.projections.folds.persona import strength_at
from adamem.projections.folds.rows import MessageRow, PersonaRow
from adamem.projections.projector import Projector
from adamem.projections.store.factory import open_store
from adamem.projections.store.lance import LanceStore
from adamem.retrieval.service import Retriever
from adamem.retrieval.snapshot import AsOf
from adamem.schemas.serde import encode_event
from adamem.settings import Settings
from adamem.streams.factory import open_log
from adamem.streams.log import OutgoingRecord
from adamem.streams.pipeline import run_pipeline
from adamem.streams.publish import publish_messages
from adamem.streams.replay import rebuild_view
from tests.api.conftest import embedder
from tests.conftest import serving

USER, OWNER = "mia", "default:mia"
LINES = [
    ("2024-05-01T10:00:00Z", "I love spicy food."),
    ("2024-05-02T10:00:00Z", "我喜欢爵士乐。"),
    ("2024-05-03T10:00:00Z", "I hate spicy food."),
    ("2024-05-04T10:00:00Z", "我讨厌爵士乐。"),
    ("2024-05-05T10:00:00Z", "I am allergic to peanuts."),
    ("2024-05-06T10:00:00Z", "The weather is nice today."),
    ("2024-05-07T10:00:00Z", "我们周末去公园散步吧。"),
]
FORGOTTEN_AT = "2024-05-20T10:00:00Z"
POINTS = [
    "2024-05-01T12:00:00Z",  # nothing consolidated yet
    "2024-05-02T10:00:00Z",  # the first message consolidated by the second's arrival
    "2024-05-03T12:00:00Z",  # "I hate spicy food." said, not yet consolidated
    "2024-05-04T12:00:00Z",  # ... consolidated: a tie, both spicy-food traits disputed
    "2024-05-05T12:00:00Z",  # the allergy's message said (forgotten later: it is not folded, consolidates nothing)
    "2024-05-06T12:00:00Z",  # the Chinese contradiction consolidated: both jazz traits disputed
    "2024-06-01T00:00:00Z",  # after everything, the forget included
]


@dataclass(frozen=True)
class Built:
    settings: Settings
    root: Path


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    root = tmp_path_factory.mktemp("persona-replay")
    settings = Settings(log_url=str(root / "log"), store_url=str(root / "store"), fsync=False)
    lines = [
        {"user_id": USER, "speaker": "Mia", "text": text, "occurred_at": at, "conversation_id": f"c{i}"}
        for i, (at, text) in enumerate(LINES)
    ]

    async def build() -> None:
        log = open_log(settings.log_url, settings)
        await log.start()
        await publish_messages(log, load_messages("\n".join(json.dumps(r) for r in lines).encode(), settings), settings)
        agent = MemoryAgent(RuleExtractor(), embedder())
        await run_pipeline(log, Projector(open_store(settings.store)), agent, settings)
        store = LanceStore(settings.store_url)
        peanuts = next(m for m in store.rows("messages", OWNER) if isinstance(m, MessageRow) and "peanuts" in m.text)
        forget = MemoryForgotten(
            "0d5e0d11-2222-4222-8222-000000000001", USER, "message", parse_time(FORGOTTEN_AT), peanuts.id
        )
        await log.append(settings.topic("control"), [OutgoingRecord(USER, encode_event(forget))])
        await run_pipeline(log, Projector(store), agent, settings)
        await log.stop()

    asyncio.run(build())
    return Built(settings, root)


def _serve(built: Built, with_log: bool) -> Iterator[httpx.Client]:
    settings = built.settings
    retriever = Retriever(open_store(settings.store_url, read_only=True), embedder())
    log = open_log(settings.log_url, settings) if with_log else None
    with serving(create_app(settings, retriever, log)) as client:
        yield client


@pytest.fixture(scope="module")
def ui(built: Built) -> Iterator[httpx.Client]:
    """The service over the store and its log."""
    yield from _serve(built, True)


@pytest.fixture(scope="module")
def logless_ui(built: Built) -> Iterator[httpx.Client]:
    """The service over the store alone (``adamem serve --read-only`` without ``--log``)."""
    yield from _serve(built, False)


def _traits(page: str) -> dict[tuple[str, str], list[str]]:
    """The persona panel's rows (the disputed table's repeat left out), as text cells, by (key, value)."""
    page = re.sub(r'<table class="disputed.*?</table>', "", page, flags=re.S)
    out: dict[tuple[str, str], list[str]] = {}
    for row in re.findall(r'<tr class="trait[^"]*">(.*?)</tr>', page, re.S):
        cells = [
            html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
        ]
        out[(cells[1], cells[2].split(" (")[0])] = cells
    return out


def _replayed(built: Built, at: str, copy: Path) -> list[PersonaRow]:
    """The persona rows of a replay of a copy of the store to event time ``at``."""
    shutil.copytree(built.root / "store", copy)

    async def run() -> list[PersonaRow]:
        log = open_log(built.settings.log_url, built.settings)
        await log.start()
        try:
            report = await rebuild_view(log, str(copy), built.settings, until_time=parse_time(at), switch=False)
        finally:
            await log.stop()
        view = LanceStore(str(copy), read_only=True, view=report.view)
        return [r for r in view.rows("persona", OWNER) if isinstance(r, PersonaRow)]

    return asyncio.run(run())


def test_a_contradiction_shows_disputed_from_its_consolidation_on_and_not_before(ui: httpx.Client) -> None:
    before = _traits(ui.get(f"/ui/owners/{USER}/persona", params={"as_of": "2024-05-03T12:00:00Z"}).text)
    assert before[("likes", "spicy food")][5] == "not stable"  # alone in its slot: no dispute
    assert ("dislikes", "spicy food") not in before  # said, but still in working memory
    after_page = ui.get(f"/ui/owners/{USER}/persona", params={"as_of": "2024-05-04T12:00:00Z"}).text
    after = _traits(after_page)
    assert after[("likes", "spicy food")][5] == "not stable disputed"
    assert after[("dislikes", "spicy food")][5] == "not stable disputed"
    assert '<h2 id="disputed">Disputed (2)</h2>' in after_page
    assert "dispute flag not known" not in after_page and "</span>*" not in after_page  # nothing approximate
    # in Chinese: liking jazz, then hating it
    assert before[("likes", "爵士乐")][5] == "not stable"
    # consolidated by the arrival of the message after next: the allergy's, between them, is forgotten
    unchanged = _traits(ui.get(f"/ui/owners/{USER}/persona", params={"as_of": "2024-05-05T12:00:00Z"}).text)
    assert ("dislikes", "爵士乐") not in unchanged and unchanged[("likes", "爵士乐")][5] == "not stable"
    later = _traits(ui.get(f"/ui/owners/{USER}/persona", params={"as_of": "2024-05-06T12:00:00Z"}).text)
    assert "disputed" in later[("dislikes", "爵士乐")][5] and "disputed" in later[("likes", "爵士乐")][5]


def test_the_persona_at_a_point_is_what_a_replay_to_it_folds(ui: httpx.Client, built: Built, tmp_path: Path) -> None:
    for n, at in enumerate(POINTS):
        want = sorted(_replayed(built, at, tmp_path / f"copy{n}"), key=lambda r: r.id)
        shown = _traits(ui.get(f"/ui/owners/{USER}/persona", params={"as_of": at}).text)
        assert sorted(shown) == sorted((r.key, r.value) for r in want), at
        for row in want:
            cells = shown[(row.key, row.value)]
            assert cells[3].startswith(f"{strength_at(row, parse_time(at), SEED_DEFAULT):.3f} "), (at, cells)
            assert cells[4] == str(row.mention_count)
            assert cells[5].startswith("stable") == row.stable and cells[5].endswith("disputed") == row.disputed
        # the rows themselves: the replay's in every field but the vector (the inspector folds without them)
        replays = PersonaReplays(open_log(built.settings.log_url, built.settings), built.settings)
        folded = asyncio.run(
            replays.at(
                LanceStore(str(built.root / "store"), read_only=True), OWNER, AsOf(time=parse_time(at)), SEED_DEFAULT
            )
        )
        assert sorted(folded.traits.values(), key=lambda r: r.id) == [replace(r, vector=()) for r in want], at


def test_a_forgotten_messages_trait_does_not_come_back_at_an_earlier_point(ui: httpx.Client) -> None:
    for at in [*POINTS, "offset:6", "offset:7"]:
        page = ui.get(f"/ui/owners/{USER}/persona", params={"as_of": at}).text
        assert "peanuts" not in page, at
        assert "allergy" not in page, at


def test_an_offset_point_folds_the_events_below_it(ui: httpx.Client) -> None:
    # offsets 0..6 hold the seven analyses: below 4, the first four messages, three of them consolidated
    shown = _traits(ui.get(f"/ui/owners/{USER}/persona", params={"as_of": "offset:4"}).text)
    assert "disputed" in shown[("likes", "spicy food")][5] and ("likes", "爵士乐") in shown
    assert ("dislikes", "爵士乐") not in shown  # said at offset 3, consolidated by offset 4's message


def test_without_a_log_the_panel_says_it_is_approximate(logless_ui: httpx.Client, ui: httpx.Client) -> None:
    page = logless_ui.get(f"/ui/owners/{USER}/persona", params={"as_of": "2024-05-04T12:00:00Z"}).text
    assert "approximate: no log to replay" in page
    assert "recomputed with the fold's formula from the evidence dated by then" in page
    exact = ui.get(f"/ui/owners/{USER}/persona", params={"as_of": "2024-05-04T12:00:00Z"}).text
    assert "approximate: no log to replay" not in exact and "folded again from the log" in exact
    now = logless_ui.get(f"/ui/owners/{USER}/persona").text  # now is the rows themselves, log or not
    assert "approximate: no log to replay" not in now
    assert "The chart is approximate" in now and "The chart is approximate" in exact


def _analysis(n: int, text: str, at: str, attribute: tuple[str, str] | None) -> Positioned:
    """An unsealed analysis of the owner's ``n``-th message (a conversation of its own), at offset ``n``."""
    eid = message_event_id("default", USER, f"c{n}", f"m{n}")
    message = ChatMessage(eid, USER, f"c{n}", f"m{n}", Speaker("user", "Mia"), text, parse_time(at))
    attrs = (ExtractedAttribute(attribute[0], attribute[1], 0.9),) if attribute else ()
    event = MessageAnalyzed(
        analysis_event_id(eid, "test", "1", "g1"),
        message,
        Analyzer("test", "1"),
        Embedding("none", ()),
        attributes=attrs,
    )
    return Positioned(event, "adamem.analyses", 0, n)


def test_a_forget_asked_after_the_point_is_folded_at_the_point_too() -> None:
    # unsealed analyses: the forget itself, folded at a point before it was asked, takes the trait away
    events = [
        _analysis(0, "I love cats.", "2024-05-01T10:00:00Z", ("likes", "cats")),
        _analysis(1, "我喜欢猫。", "2024-05-02T10:00:00Z", ("likes", "猫")),
        _analysis(2, "Nice weather.", "2024-05-03T10:00:00Z", None),
    ]
    cats = events[0].event.message.event_id  # type: ignore[union-attr]
    forget = MemoryForgotten("0d5e0d11-3333-4333-8333-000000000001", USER, "message", parse_time(FORGOTTEN_AT), cats)
    folded = [*events, Positioned(forget, "adamem.analyses", 0, 3)]

    def values(point: AsOf, which: list[Positioned]) -> set[str]:
        return {t.value for t in fold_persona(OWNER, which, point, SEED_DEFAULT).traits.values()}

    point = AsOf(time=parse_time("2024-05-03T12:00:00Z"))
    assert values(point, events) == {"cats", "猫"}  # without the forget, both traits
    assert values(point, folded) == {"猫"}  # the forget, asked later, wins at the earlier point
    assert values(AsOf(offset=3), folded) == {"猫"}  # and below its offset
    assert fold_persona(OWNER, folded, AsOf(offset=3), SEED_DEFAULT).events == 4


def test_a_resumed_fold_equals_a_fold_from_the_first_event_at_every_point() -> None:
    from bench.fold_speed import synthetic

    events = synthetic(1, 400, 8, 7)
    owner = events[0].event.owner_id
    said = [p.event for p in events if isinstance(p.event, MessageAnalyzed) and p.event.attributes]
    forgets = [  # forget two messages with attributes, one early and one late on the log
        MemoryForgotten(f"0d5e0d11-4444-4444-8444-00000000000{i}", m.message.user_id, "message", t, m.message.event_id)
        for i, (m, t) in enumerate([(said[3], said[40].message.occurred_at), (said[60], 2_000_000_000_000)])
    ]
    log = [*events[:150], Positioned(forgets[0]), *events[150:], Positioned(forgets[1])]
    log = [Positioned(p.event, "adamem.analyses", 0, n) for n, p in enumerate(log)]
    times = [p.event.message.occurred_at for p in log if isinstance(p.event, MessageAnalyzed)]
    points = [AsOf(offset=o) for o in (300, 120, 151, 402, 0, 250)]
    points += [AsOf(time=times[i]) for i in (390, 10, 200, 199, 399)] + [AsOf(time=times[120] + 1)]
    frontier = Frontier(owner, log, lambda p: p, SEED_DEFAULT, every=50)
    for point in points:
        want = fold_persona(owner, log, point, SEED_DEFAULT)
        got = frontier.at(point)
        assert (got.traits, got.events) == (want.traits, want.events), point
    assert frontier.at(AsOf(offset=402)).traits and said[60].message.event_id not in {
        m for t in frontier.at(AsOf(offset=300)).traits.values() for m in t.evidence_message_ids
    }  # the late forget is folded at the earlier offset


def test_a_log_that_cannot_be_replayed_leaves_the_recomputation_said_so(
    ui: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def unreachable(*args: object) -> PersonaAt:
        raise LogError("log /nowhere is not reachable")

    monkeypatch.setattr(PersonaReplays, "at", unreachable)
    r = ui.get(f"/ui/owners/{USER}/persona", params={"as_of": "2024-05-04T12:00:00Z"})
    assert r.status_code == 200
    assert "approximate: the log could not be replayed (log /nowhere is not reachable)" in r.text
    assert "recomputed with the fold's formula from the evidence dated by then" in r.text
