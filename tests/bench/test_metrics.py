"""The benchmark arithmetic on hand-made cases, so a benchmark cannot silently measure the wrong thing."""

from __future__ import annotations

import dataclasses
import math

import pytest

from adamem.events import ChatMessage, Speaker
from adamem.projections.folds.rows import EpisodicRow, MessageRow
from adamem.projections.store.base import OwnerChanges
from adamem.retrieval.answer import Answer, Item, Provenance, Timing
from adamem.retrieval.config import Layer, Route, Subject
from adamem.retrieval.fusion import Breakdown
from adamem.retrieval.route import RoutePlan
from adamem.retrieval.whose import WhoseDecision
from bench.common import spread
from bench.latency import plan, sweep_table
from bench.loadgen import _split, wrk_plan, wrk_script
from bench.locomo import MessagesOnly, lco_folds, reference_texts, render, system_configs
from bench.metrics import (
    answer_tokens,
    coverage,
    flatten,
    mean,
    ndcg_at,
    parse_evidence,
    percentile,
    recall_at,
    reciprocal_rank,
    summary_ms,
)

TURNS = {"D1:1", "D1:2", "D1:3", "D8:6", "D9:17"}


# ---- evidence ids -------------------------------------------------------------------------------


def test_malformed_evidence_ids_split_and_dropped() -> None:
    assert parse_evidence(["D8:6; D9:17"], TURNS) == ["D8:6", "D9:17"]
    assert parse_evidence(["D"], TURNS) == []
    assert parse_evidence(["D:11:26", "D1:2"], TURNS) == ["D1:2"]
    assert parse_evidence(["D1:1", "D1:1; D1:3"], TURNS) == ["D1:1", "D1:3"]  # duplicates once
    assert parse_evidence(["D30:5"], TURNS) == []  # points to no turn
    assert parse_evidence(None, TURNS) == []
    assert parse_evidence([], TURNS) == []
    assert parse_evidence("D1:1,D1:2", TURNS) == ["D1:1", "D1:2"]


def test_evidence_without_known_turns_keeps_well_formed_ids_only() -> None:
    assert parse_evidence(["D8:6; D9:17", "D", "x"]) == ["D8:6", "D9:17"]


# ---- flattening and recall ----------------------------------------------------------------------


def test_flatten_keeps_rank_order_and_counts_duplicates_once() -> None:
    items = [["m3"], ["m1", "m2"], ["m2", "m4"], [], ["m3", "m5"]]
    assert flatten(items) == ["m3", "m1", "m2", "m4", "m5"]


def test_recall_on_a_hand_made_case() -> None:
    ranked = flatten([["a"], ["b", "c"], ["c", "d"], ["e"]])  # a b c d e
    gold = ["c", "e", "z"]
    assert recall_at(ranked, gold, 1) == 0
    assert recall_at(ranked, gold, 3) == pytest.approx(1 / 3)
    assert recall_at(ranked, gold, 5) == pytest.approx(2 / 3)
    assert recall_at(ranked, gold, 25) == pytest.approx(2 / 3)
    assert recall_at(["c", "c", "e"], ["c", "e"], 2) == 1.0  # the first k *distinct* ids
    with pytest.raises(ValueError):
        recall_at(ranked, [], 10)


def _message(mid: str) -> MessageRow:
    return MessageRow(
        id=f"ev-{mid}",
        owner_id="default:u",
        tenant="default",
        conversation_id="c",
        message_id=mid,
        speaker="A",
        role="user",
        text=mid,
        occurred_at=0,
        topics=[],
        entities=[],
        summary="",
        sentiment=0.0,
        dialog_act="statement",
        certainty="certain",
        vector=(),
        embedding_model="",
        analysis_event_id="",
        analyzer="",
        generation="g1",
        source_topic="t",
        source_partition=0,
        source_offset=0,
        seq=0,
        in_working=False,
        working_seq=-1,
        consolidated=True,
        extraction_json="{}",
    )


def _item(rank: int, mids: list[str]) -> Item:
    return Item(
        rank,
        Layer.EPISODIC,
        "event",
        f"item{rank}",
        "x",
        1.0,
        Breakdown(1.0, 0.0, 0.0, 0.0),
        "A",
        "user",
        0,
        -1,
        tuple(Provenance.of(_message(m)) for m in mids),
    )


def test_flatten_agrees_with_the_answers_own_message_ids() -> None:
    items = (_item(1, ["D1:2"]), _item(2, ["D1:1", "D1:3"]), _item(3, ["D1:3", "D8:6"]))
    answer = Answer("u", "q", items, RoutePlan(Route.SEMANTIC), WhoseDecision(Subject.USER), Timing(), 0)
    ranked = flatten([[p.message_id for p in it.provenance] for it in answer.items])
    assert ranked == answer.message_ids() == ["D1:2", "D1:1", "D1:3", "D8:6"]
    assert answer.message_ids(3) == ranked[:3]
    assert recall_at(ranked, ["D1:3", "D8:6"], 3) == 0.5


# ---- answer-token coverage ----------------------------------------------------------------------


def test_answer_tokens_drop_stop_words_and_accept_ints() -> None:
    assert answer_tokens("The Sunday before 25 May 2023") == {"sunday", "25", "may", "2023"}
    assert answer_tokens(2022) == {"2022"}
    assert answer_tokens(None) == set()
    assert answer_tokens("the of and") == set()


def test_coverage_arithmetic() -> None:
    texts = ["Caroline (8 May 2023): I went to the LGBTQ support group", "Melanie: painting"]
    assert coverage("LGBTQ support group", texts) == 1.0
    assert coverage("support group on 7 May 2023", texts) == pytest.approx(4 / 5)  # 7 is missing
    assert coverage(2023, texts) == 1.0
    assert coverage("the", texts) is None  # no content words: not counted
    assert coverage("pottery", []) == 0.0


def test_render_shows_speaker_date_and_caption() -> None:
    m = ChatMessage(
        "e",
        "u",
        "c",
        "D1:1",
        Speaker("user", "Mel"),
        "look",
        1_683_550_560_000,
        metadata={"blip_caption": "a photo of a cat"},
    )
    assert render(m) == "Mel (8 May 2023): look [image: a photo of a cat]"


# ---- percentiles --------------------------------------------------------------------------------


def test_percentile_interpolates_between_closest_ranks() -> None:
    values = [15.0, 20.0, 35.0, 40.0, 50.0]
    assert percentile(values, 0) == 15
    assert percentile(values, 50) == 35
    assert percentile(values, 100) == 50
    assert percentile(values, 40) == pytest.approx(29.0)  # pos 1.6: 20 + 0.6 * 15
    assert percentile(list(range(1, 101)), 95) == pytest.approx(95.05)
    assert percentile(list(range(1, 101)), 99) == pytest.approx(99.01)
    assert percentile([7.0], 99) == 7
    assert percentile([3.0, 1.0, 2.0], 50) == 2  # order does not matter
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError):
        percentile([1.0], 101)


def test_summary_and_mean() -> None:
    s = summary_ms([1.0, 2.0, 3.0, 4.0])
    assert s["n"] == 4 and s["p50"] == 2.5 and s["max"] == 4.0 and math.isclose(s["mean"], 2.5)
    assert summary_ms([]) == {"n": 0}
    assert mean([]) is None and mean([1.0, 3.0]) == 2.0


# ---- inputs the benchmarks generate -------------------------------------------------------------


def _turns(n: int, conv: str, start: int) -> list[ChatMessage]:
    return [
        ChatMessage(
            f"{conv}{i}", conv, f"{conv}/session_1", f"D1:{i + 1}", Speaker("user", "A"), f"t{i}", start + i * 1000
        )
        for i in range(n)
    ]


def test_spread_renames_owners_keeps_time_order_and_makes_distinct_events() -> None:
    base = _turns(3, "conv-b", 5_000_000) + _turns(2, "conv-a", 0)  # the second conversation is older
    out = spread(base, 12, 4, "o-")
    assert [m.user_id for m in out] == [f"o-{i // 3:04d}" for i in range(12)]
    assert len({m.event_id for m in out}) == 12
    times = [m.occurred_at for m in out]
    assert times == sorted(times)  # every block is shifted after the previous one
    assert [m.text for m in out[:6]] == ["t0", "t1", "t2", "t0", "t1", "t0"]
    assert dataclasses.replace(out[0], user_id="x").message_id == "D1:1"
    assert spread(base, 0, 4, "o-") == []


def test_plan_gives_distinct_pairs_per_route() -> None:
    qs = {"semantic": ["a", "b"], "graph": ["c"], "persona": []}
    pairs = plan(qs, ["u1", "u2", "u3"], 3)
    assert len(pairs["semantic"]) == 3 and len(set(pairs["semantic"])) == 3
    assert pairs["persona"] == []
    assert all(q == "c" for _, q in pairs["graph"])


def test_sweep_table_orders_levels_by_number_and_shows_both_phases() -> None:
    def s(p95: float) -> dict[str, float]:
        return {"p50": p95 / 2, "p95": p95, "p99": p95 + 1, "qps": 10.0, "errors": 0}

    entry = {"http_sweep": {"8": {"cold": s(300), "warm": s(20)}, "2": {"cold": s(90), "warm": s(5)}}}
    headers, rows = sweep_table(entry)
    assert headers[:4] == ["clients", "phase", "p50 ms", "p95 ms"]
    assert [(r[0], r[1], r[3]) for r in rows] == [
        ("2", "cold", 90),
        ("2", "warm", 5),
        ("8", "cold", 300),
        ("8", "warm", 20),
    ]
    assert sweep_table({}) == (headers, [])
    entry["http_sweep_workers_2"] = {"8": {"cold": s(150), "warm": s(12)}}  # adamem serve --workers 2
    rows = sweep_table(entry)[1]
    assert [(r[0], r[1], r[3], r[-1]) for r in rows[-2:]] == [("8", "cold", 150, "2"), ("8", "warm", 12, "2")]


def test_wrk_plan_never_runs_more_threads_than_clients() -> None:
    reqs = [("/q", str(i)) for i in range(10)]
    assert wrk_plan(reqs, 1, 2) == (1, [reqs], [10])  # one client: one thread, every request answered
    threads, slices, limits = wrk_plan(reqs, 8, 2)
    assert threads == 2 and [len(s) for s in slices] == [5, 5] and limits == [2, 2]  # 3 of 4 may be in flight


def test_wrk_script_sends_each_request_once() -> None:
    reqs = [("/v1/users/u/query", f'{{"question": "q{i}]]"}}') for i in range(5)]
    slices = _split(reqs, 2)
    assert [len(s) for s in slices] == [3, 2] and sorted(r for s in slices for r in s) == sorted(reqs)
    script = wrk_script(slices, [2, 1])
    assert "local limits = {2,1}" in script and '"q1]]"' in script and "wrk.thread:stop()" in script


def test_reference_texts_use_the_session_date_string() -> None:
    doc = {
        "conversation": {
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Mel", "dia_id": "D1:1", "text": "hi"},
                {"speaker": "Jo", "dia_id": "D1:2", "text": "look", "blip_caption": "a cat"},
            ],
            "speaker_a": "Mel",
        }
    }
    assert reference_texts(doc) == {
        "D1:1": "Mel (1:56 pm on 8 May, 2023): hi",
        "D1:2": "Jo (1:56 pm on 8 May, 2023): look [image: a cat]",
    }


class _Store:
    url = "fake://"
    view = "main"

    def rows(self, table: str, user_id: str) -> list[str]:
        return [table]

    def load_owner(self, user_id: str, messages_from_seq: int = 0) -> list[MessageRow]:
        return [_message("D1:1")]

    def vector_search(
        self, table: str, user_id: str, vector: object, k: int, below_seq: int | None = None
    ) -> list[str]:
        return [table]

    def text_search(self, table: str, user_id: str, query: str, k: int, below_seq: int | None = None) -> list[str]:
        return [table]

    def owner_changes(self, user_id: str, since: str) -> OwnerChanges | None:
        record = EpisodicRow(
            "r1", "u", "fact", "", "Ann likes tea", 0.9, ["ev-D1:2"], "Ann", "user", "c", 0, 0, -1, "", "", "active",
            "ADD", (), -1, "general", "", "", [], "",
        )  # fmt: skip
        gone = {"episodic": frozenset({"r0"}), "messages": frozenset({"m0"})}
        return OwnerChanges("t2", (_message("D1:2"), record), gone) if since == "t1" else None

    def extra(self) -> str:
        return "delegated"


def test_messages_only_hides_persona_and_episodic() -> None:
    view = MessagesOnly(_Store())  # type: ignore[arg-type]
    for table in ("persona", "episodic"):
        assert view.rows(table, "u") == [] and view.vector_search(table, "u", [], 5) == []
        assert view.text_search(table, "u", "q", 5) == []
    assert view.rows("messages", "u") == ["messages"]  # type: ignore[comparison-overlap]
    assert [r.TABLE for r in view.load_owner("default:u")] == ["messages"]
    assert view.view == "main" and view.extra() == "delegated"
    changes = view.owner_changes("u", "t1")  # what changed, without the hidden layers either
    assert changes is not None and changes.token == "t2" and [r.TABLE for r in changes.rows] == ["messages"]
    assert changes.gone == {"messages": frozenset({"m0"})} and view.owner_changes("u", "t0") is None


def test_ablations_switch_one_thing_each() -> None:
    configs = system_configs()
    full = configs["full"][0]
    assert configs["no-graph"][0].graph_seeds == 0 and full.graph_seeds > 0
    fusion = configs["no-fusion"][0].fusion
    assert (fusion.semantic, fusion.graph, fusion.temporal, fusion.fact) == (1.0, 0.0, 0.0, 0.0)
    assert configs["messages-only"][1] is True and not configs["full"][1]
    assert configs["messages-only"][0].graph_seeds == 0  # no layer at all: no persona, episodic or graph
    assert configs["no-persona-episodic"][1] is True and configs["no-persona-episodic"][0].graph_seeds > 0


def test_reciprocal_rank_and_ndcg_on_hand_made_cases() -> None:
    ranked = ["a", "b", "a", "c", "d"]  # "a" repeated counts once: distinct ids a b c d
    assert reciprocal_rank(ranked, ["c"], 10) == pytest.approx(1 / 3)
    assert reciprocal_rank(ranked, ["d"], 3) == 0.0  # d is 4th, outside k
    assert ndcg_at(ranked, ["a", "b"], 10) == pytest.approx(1.0)
    # gold c at rank 3 alone: (1/log2(4)) / (1/log2(2)) = 0.5
    assert ndcg_at(ranked, ["c"], 10) == pytest.approx(0.5)
    assert ndcg_at(ranked, ["z", "b"], 10) == pytest.approx((1 / math.log2(3)) / (1 + 1 / math.log2(3)))
    with pytest.raises(ValueError):
        ndcg_at(ranked, [], 10)


def test_leave_conversations_out_chooses_on_training_folds_only() -> None:
    # held out c1: train a 0.5, b 0.75 -> b; c2: 0.5 each, a tie keeps grid order -> a; c3: a 1.0, b 0.25 -> a
    rows = {
        "a": [("c1", 1, 1.0, 1.0, 1.0), ("c2", 1, 1.0, 1.0, 1.0), ("c3", 1, 0.0, 0.0, 0.0)],
        "b": [("c1", 1, 0.0, 0.0, 0.0), ("c2", 1, 0.5, 0.5, 0.5), ("c3", 1, 1.0, 1.0, 1.0)],
    }
    result = lco_folds({"full": rows}, ["c1", "c2", "c3"])
    chosen = {f["held_out"]: f["systems"]["full"]["variant"] for f in result["folds"]}
    assert chosen == {"c1": "b", "c2": "a", "c3": "a"}
    assert result["folds"][2]["systems"]["full"]["recall@10"]["1"] == 0.0  # a's c3 score, though b is 1.0 there
    # pooled: every question once, each scored with its fold's choice (b on c1: 0, a on c2: 1, a on c3: 0)
    assert result["pooled"]["full"]["recall@10"]["1"] == pytest.approx(100 / 3, abs=0.01)
