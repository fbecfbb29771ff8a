"""What a grant covers, judged on folded rows: layers, topics (English and Chinese) and the time range."""

from __future__ import annotations

from adamem.api.sharing import GrantScope
from adamem.projections.folds import (
    EpisodicRow,
    GrantRow,
    GraphEdgeRow,
    GraphNodeRow,
    MessageRow,
    OwnerMemory,
    PersonaRow,
)
from adamem.projections.folds.testing import DAY, T0, Chat, attr, fact, fold


def _state() -> tuple[OwnerMemory, Chat]:
    chat = Chat(user="alice")
    events = [
        chat.say("I like green tea", at=T0, conv="c1", topics=["health"], attributes=[attr("likes", "green tea")]),
        chat.say("我喜欢绿茶", at=T0 + DAY, conv="c2", topics=["健康"], attributes=[attr("likes", "green tea")]),
        chat.say(
            "I like green tea at work",
            at=T0 + 40 * DAY,
            conv="c3",
            topics=["work"],
            attributes=[attr("likes", "green tea")],
        ),
        chat.say(
            "My project is Zephyr", at=T0 + 2 * DAY, conv="c4", topics=["work"], facts=[fact("the project is Zephyr")]
        ),
        chat.say("I cough at night", at=T0 + 3 * DAY, conv="c5", topics=["health"], facts=[fact("coughs at night")]),
        chat.say("closing", at=T0 + 60 * DAY, conv="c6"),  # a new session consolidates the others
    ]
    state, _ = fold(events)
    return state, chat


def _scope(state: OwnerMemory, **scope: object) -> GrantScope:
    grant = GrantRow(
        id="row",
        owner_id=state.owner_id,
        grant_id="g1",
        grantee_tenant="clinic",
        layers=["archive", "episodic", "persona"],
        topics=["health", "健康"],
        scope_from=T0,
        scope_until=T0 + 10 * DAY,
        include_sensitive=False,
        expires_at=-1,
        status="active",
        granted_at=T0,
        confirmed_at=T0,
        revoked_at=-1,
        reason="",
    )
    for key, value in scope.items():
        object.__setattr__(grant, key, value)
    return GrantScope(grant, {t: list(state.tables[t].values()) for t in state.tables})


def test_messages_records_and_graph_rows_are_judged_by_topic_and_time() -> None:
    state, _ = _state()
    scope = _scope(state)
    covered = {r.text for r in state.tables["messages"].values() if isinstance(r, MessageRow) and scope.covers(r)}
    assert covered == {"I like green tea", "我喜欢绿茶", "I cough at night"}
    records = {r.content: scope.covers(r) for r in state.tables["episodic"].values() if isinstance(r, EpisodicRow)}
    assert records["coughs at night"] and not records["the project is Zephyr"]
    for node in state.tables["graph_nodes"].values():
        assert isinstance(node, GraphNodeRow)
        if node.node_type == "topic":
            assert scope.covers(node) == (node.ref_id in {"health", "健康"})
    for edge in state.tables["graph_edges"].values():
        assert isinstance(edge, GraphEdgeRow)
        ends = [state.tables["graph_nodes"][edge.src], state.tables["graph_nodes"][edge.dst]]
        assert scope.covers(edge) == all(scope.covers(n) for n in ends)  # type: ignore[arg-type]
    assert scope.covers_layer("episodic") and not scope.covers_layer("graph")


def test_a_trait_is_covered_only_when_all_its_evidence_is_in_the_range_and_its_lists_are_cut() -> None:
    state, _ = _state()
    tea = next(r for r in state.tables["persona"].values() if isinstance(r, PersonaRow) and r.value == "green tea")
    assert len(tea.evidence_message_ids) == 3
    assert not _scope(state).covers(tea)  # one mention is 40 days later, outside the range
    wide = _scope(state, scope_until=-1, topics=[])
    assert wide.covers(tea)
    narrow = _scope(state, scope_until=-1)  # health topics only: the work mention's id is cut from the lists
    cut = narrow.narrow_row(tea)
    assert isinstance(cut, PersonaRow)
    assert len(cut.evidence_message_ids) == len(cut.evidence_confidences) == len(cut.evidence_times) == 2
    assert state.tables["messages"][cut.evidence_message_ids[0]].topics in (["health"], ["健康"])  # type: ignore[union-attr]
