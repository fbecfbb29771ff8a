"""Routing: a frozen bilingual cue table sends each question to the semantic, graph or persona route."""

from __future__ import annotations

import pytest

from adamem.retrieval import Direction, Route, route_query
from adamem.retrieval.route import is_broad

G, P, S = Route.GRAPH, Route.PERSONA, Route.SEMANTIC
ANY, BACK, FWD = Direction.ANY, Direction.ANTECEDENT, Direction.CONSEQUENT

CASES: list[tuple[str, Route, Direction, tuple[str, ...]]] = [
    # English: causal and temporal cues → graph
    ("why did I start working out?", G, BACK, ("why",)),
    ("Why did Caroline choose the adoption agency?", G, BACK, ("why",)),
    ("What made me quit my job?", G, BACK, ("what made",)),
    ("When did Caroline go to the LGBTQ support group?", G, ANY, ("when",)),
    ("What did I do after the check-up?", G, FWD, ("after",)),
    ("What was I doing before I moved to Beijing?", G, BACK, ("before",)),
    ("How long have I been learning piano?", G, ANY, ("how long",)),
    ("What did I eat two weeks ago?", G, ANY, ("ago",)),
    ("Did I go to the gym since then?", G, FWD, ("since then",)),
    ("Why do I like spicy food?", G, BACK, ("why",)),  # causal beats attribute
    # English: attribute cues → persona first
    ("What food do I like?", P, ANY, ("like",)),
    ("What's my favourite band?", P, ANY, ("favourite",)),
    ("Am I allergic to anything?", P, ANY, ("allergic",)),
    ("What are my hobbies?", P, ANY, ("hobbies",)),
    ("Do I prefer tea or coffee?", P, ANY, ("prefer",)),
    # English: neither → semantic; an explicit reference's "before" is not a time
    ("Where does my sister work?", S, ANY, ()),
    ("What is the name of my cat?", S, ANY, ()),
    ("You said before that I should rest more, what else?", S, ANY, ()),
    # Chinese
    ("我为什么开始健身？", G, BACK, ("为什么",)),
    ("因为什么原因我换了工作？", G, BACK, ("因为", "原因")),
    ("我上周做了什么？", G, ANY, ("上周",)),
    ("我什么时候搬到北京的？", G, ANY, ("什么时候",)),
    ("体检之后我做了什么？", G, FWD, ("之后",)),
    ("我以前住在哪里？", G, BACK, ("以前",)),
    ("我喜欢吃什么？", P, ANY, ("喜欢",)),
    ("我的性格怎么样？", P, ANY, ("性格",)),
    ("我有什么爱好？", P, ANY, ("爱好",)),
    ("我对什么过敏？", P, ANY, ("过敏",)),
    ("我妹妹叫什么名字？", S, ANY, ()),
    ("你之前说过我应该吃什么？", S, ANY, ()),
]


@pytest.mark.parametrize(("question", "route", "direction", "cues"), CASES, ids=[c[0] for c in CASES])
def test_route_of_question(question: str, route: Route, direction: Direction, cues: tuple[str, ...]) -> None:
    plan = route_query(question)
    assert (plan.route, plan.direction, plan.cues) == (route, direction, cues)
    assert plan.reason


def test_there_are_at_least_twenty_cases_in_both_languages() -> None:
    assert len([c for c in CASES if c[0].isascii()]) >= 10
    assert len([c for c in CASES if not c[0].isascii()]) >= 10


def test_route_plan_is_json_ready() -> None:
    assert route_query("我为什么开始健身？").to_dict() == {
        "route": "graph",
        "direction": "antecedent",
        "cues": ["为什么"],
        "reason": "causal cue(s) 为什么: graph expansion",
        "causal": True,
        "broad": False,
    }


BROAD = [
    "What activities does Melanie partake in?",
    "Which books has Caroline read?",
    "What kinds of music do I listen to?",
    "How many times did I go running last month?",
    "What are my hobbies?",
    "In what ways did my sister help me?",
    "What hobbies do we both have?",
    "我喜欢哪些运动？",
    "我去过几次上海？",
    "我有多少只猫？",
    "她分别去了哪里？",
]
NARROW = [
    "What is Caroline's identity?",
    "Where does my sister work?",
    "What does Jon think of this?",
    "What was his answer?",
    "Where was she last week?",
    "What is the name of my cat?",
    "我住在哪里？",
    "我为什么开始健身？",
    "我妹妹叫什么名字？",
]


@pytest.mark.parametrize("question", BROAD)
def test_a_question_asking_for_a_set_is_broad_whatever_its_route(question: str) -> None:
    assert is_broad(question)
    assert route_query(question).broad
    assert route_query(question).to_dict()["broad"] is True


@pytest.mark.parametrize("question", NARROW)
def test_a_question_asking_for_one_thing_is_not_broad(question: str) -> None:
    assert not is_broad(question)
    assert not route_query(question).broad


def test_broadness_does_not_change_the_route() -> None:
    assert route_query("What are my hobbies?").route is P
    assert route_query("How many times did I go running last month?").route is G
