"""The Research Agent: rounds with their cues, graded items, planted conflicts flagged in English and Chinese.

Every owner's conversation goes through the real write path (rule extractor, the default embedder, the folds,
LanceDB in a temporary folder); research runs on the ``Retriever`` the service uses.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adamem.analysis import Embedder
from adamem.errors import ConfigError
from adamem.retrieval import Retriever, UnknownOwner
from adamem.retrieval.research import MAX_DEPTH, ResearchRequest, research

FILLER_EN = (
    "The bakery on the corner sells great sourdough.",
    "I finished a novel about a lighthouse keeper.",
    "My cousin's band played a gig on Friday.",
    "The tram was late again on Tuesday.",
    "I repotted the basil on the balcony.",
    "We watched a documentary about octopuses.",
    "The gym was packed after work.",
    "I tried a new recipe with lentils and lemon.",
    "My laptop needed a battery replacement.",
    "The museum has a new exhibition on maps.",
    "I called my grandmother for her birthday.",
    "It rained the whole afternoon.",
    "I signed up for a pottery class.",
    "The neighbour's dog barked all night.",
    "I bought a second-hand bicycle.",
    "The football match ended in a draw.",
    "I cleaned out the kitchen cupboards.",
    "A friend recommended a podcast about history.",
    "The library extended its opening hours.",
    "I made pancakes on Sunday.",
    "The power went out for an hour.",
    "I started learning chess openings.",
    "Porto has steep streets and strong coffee.",
)
FILLER_ZH = (
    "楼下的面包店新出了一款酸面包。",
    "我读完了一本关于灯塔看守人的小说。",
    "表哥的乐队周五有演出。",
    "今天早上电车又晚点了。",
    "我给阳台上的罗勒换了盆。",
    "我们看了一部关于章鱼的纪录片。",
    "下班后健身房人很多。",
    "我试着用扁豆和柠檬做了一道新菜。",
    "笔记本电脑换了一块新电池。",
    "博物馆有一个关于地图的新展览。",
    "我给奶奶打电话祝她生日快乐。",
    "整个下午都在下雨。",
    "我报名了一个陶艺班。",
    "邻居家的狗叫了一整夜。",
    "我买了一辆二手自行车。",
    "昨晚的足球赛打平了。",
    "我把厨房的柜子收拾了一遍。",
    "朋友推荐了一个讲历史的播客。",
    "图书馆延长了开放时间。",
    "周日早上我做了煎饼。",
    "停电了一个小时。",
    "我开始学国际象棋的开局。",
    "厦门的海边很适合散步。",
)

CONFLICTS = {
    # language: (owner, name, earlier statement, the change, the question, earlier value, current value)
    "en": (
        "omar",
        "Omar",
        "I live in Rotterdam, right by the harbour.",
        "I moved to Porto last weekend.",
        "Where do I live?",
        "Rotterdam",
        "Porto",
    ),
    "zh": ("xiaozhou", "小周", "我住在南京，离玄武湖很近。", "我们上周搬到了厦门。", "我住在哪里？", "南京", "厦门"),
}


def _lines(owner: str, name: str, sessions: list[tuple[str, tuple[str, ...]]]) -> list[dict[str, Any]]:
    out = []
    for s, (day, texts) in enumerate(sessions):
        for n, text in enumerate(texts, start=1):
            out.append(
                {
                    "user_id": owner,
                    "message_id": f"{owner}-{s}-{n}",
                    "speaker": name,
                    "role": "user",
                    "text": text,
                    "occurred_at": f"{day}T19:{n:02d}:00Z",
                    "conversation_id": f"{owner}-{day}",
                }
            )
    return out


@pytest.fixture(scope="module")
def researched(
    tmp_path_factory: pytest.TempPathFactory, embedder: Embedder, memory_class: type[Any]
) -> Iterator[Retriever]:
    """Both owners: an old home, a move, then enough days for working memory to consolidate the move."""
    memory = memory_class(Path(tmp_path_factory.mktemp("research")), embedder)
    for lang, (owner, name, before, change, *_rest) in CONFLICTS.items():
        filler = FILLER_EN if lang == "en" else FILLER_ZH
        memory.add(_lines(owner, name, [("2024-01-08", (before,)), ("2024-03-04", (change,)), ("2024-03-05", filler)]))
        # the same move, said last: still in working memory, its records not yet made
        recent = [("2024-01-08", (before,)), ("2024-02-05", filler[:6]), ("2024-03-04", (change,))]
        memory.add(_lines(f"{owner}-recent", name, recent))
    retriever = Retriever(memory.store, embedder, partitions=memory.partitions)
    yield retriever
    retriever.close()
    memory.store.close()


@pytest.mark.parametrize("recent", [False, True], ids=["consolidated", "in-working-memory"])
@pytest.mark.parametrize("lang", sorted(CONFLICTS))
def test_a_planted_conflict_is_flagged_with_both_sides_and_their_dates(
    researched: Retriever, lang: str, recent: bool
) -> None:
    owner, _, _, _, question, earlier, current = CONFLICTS[lang]
    owner = f"{owner}-recent" if recent else owner
    found = research(researched, f"default:{owner}", ResearchRequest(question, depth=2))
    conflicts = [c for c in found.conflicts if earlier in c.earlier_text and current in c.current_text]
    assert conflicts, [c.to_dict() for c in found.conflicts]
    c = conflicts[0]
    assert c.current_at > c.earlier_at  # the newer statement is the current one
    assert "conflict on" in found.because and "replaces" in found.because
    assert found.to_dict()["conflicts"][0]["earlier"]["occurred_at"] == found.conflicts[0].earlier_at
    # the current side, where it is returned, is graded current; a returned earlier side is not
    for graded in found.items:
        if current in graded.item.content and graded.item.kind != "message":
            assert graded.grade.current
        if earlier in graded.item.content and graded.item.kind != "message":
            assert not graded.grade.current and graded.grade.score < 0.5


@pytest.mark.parametrize("lang", sorted(CONFLICTS))
def test_rounds_report_their_cues_and_what_they_added(researched: Retriever, lang: str) -> None:
    owner, _, _, _, question, *_ = CONFLICTS[lang]
    one = research(researched, f"default:{owner}", ResearchRequest(question, depth=1))
    three = research(researched, f"default:{owner}", ResearchRequest(question, depth=3))
    assert len(one.rounds) == 1 and one.rounds[0].cues == () and one.stopped == "depth reached"
    assert 2 <= len(three.rounds) <= 3
    assert three.rounds[1].cues  # a later round searches for words the first round's evidence gave
    assert not set(three.rounds[1].cues) & set(question.lower().split())
    assert three.stopped
    ranks = [g.item.rank for g in three.items]
    assert ranks == list(range(1, len(ranks) + 1)) and len(ranks) <= 10
    assert {g.found_in_round for g in three.items} <= {1, 2, 3}
    for g in three.items:
        assert 0 < g.grade.freshness <= 1 and g.grade.reliability in (1.0, 0.8, 0.7)
    assert three.confidence in ("high", "medium", "low") and three.because


def test_memory_hints_and_context_join_the_first_round(researched: Retriever) -> None:
    found = research(
        researched,
        "default:omar",
        ResearchRequest("What did I buy?", context="We talked about cycling to work.", memory_hints=("bicycle",)),
    )
    cues = found.rounds[0].cues
    assert cues[0] == "bicycle"  # the hint, shown as it was written
    assert any("bicycle" in g.item.content for g in found.items[:3])


def test_a_raw_message_outranks_a_record_made_from_it_in_reliability(researched: Retriever) -> None:
    found = research(researched, "default:omar", ResearchRequest("Where do I live?"))
    kinds = {g.item.kind: g.grade.reliability for g in found.items}
    assert kinds.get("message") == 1.0
    assert all(r < 1.0 for k, r in kinds.items() if k != "message")


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"query": "  "}, "query"),
        ({"query": "q", "depth": 0}, "depth"),
        ({"query": "q", "depth": MAX_DEPTH + 1}, "depth"),
    ],
)
def test_a_bad_request_is_refused_with_what_is_wrong(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        ResearchRequest(**kwargs)


def test_an_unknown_owner_is_refused(researched: Retriever) -> None:
    with pytest.raises(UnknownOwner):
        research(researched, "default:nobody", ResearchRequest("Where do I live?"))


@pytest.mark.parametrize("lang", sorted(CONFLICTS))
def test_as_of_before_the_change_there_is_no_conflict_yet(researched: Retriever, lang: str) -> None:
    owner, _, _, _, question, earlier, _current = CONFLICTS[lang]
    before_move = 1_706_745_600_000  # 2024-02-01, between the old statement and the move
    found = research(researched, f"default:{owner}", ResearchRequest(question), as_of=before_move)
    assert found.conflicts == ()
    assert any(earlier in g.item.content for g in found.items[:3]) and all(g.grade.current for g in found.items)


def test_a_statement_repeated_across_messages_is_graded_as_agreed(
    tmp_path: Path, embedder: Embedder, memory_class: type[Any]
) -> None:
    memory = memory_class(tmp_path, embedder)
    said = ("I love spicy food.", "Honestly, spicy food is my favourite.", "Nothing beats spicy food for me.")
    memory.add(_lines("rosa", "Rosa", [(f"2024-0{n}-03", (text,)) for n, text in enumerate(said, start=1)]))
    retriever = Retriever(memory.store, embedder, partitions=memory.partitions)
    try:
        found = research(retriever, "default:rosa", ResearchRequest("What food do I like?"))
    finally:
        retriever.close()
        memory.store.close()
    derived = [g for g in found.items if g.item.kind != "message"]
    assert derived and max(g.grade.agreement for g in derived) >= 2  # the other two messages say it too
    top = found.items[0].grade.agreement
    assert (f"{top} other statement" in found.because) if top else ("nothing else agrees" in found.because)
