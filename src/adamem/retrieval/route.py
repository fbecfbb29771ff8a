"""Routing: which retrieval path a question takes, from a frozen bilingual table of cues.

- temporal or causal cues (when, ago, before, after, why, because, 什么时候, 上周, 之前, 为什么,
  因为, 原因 …) → ``Route.GRAPH``; causal and "before" cues walk to antecedents, "after" cues to
  consequents, the others either way (``Direction``);
- user-attribute cues (prefer, like, favourite, hobby, personality, allergic, 喜欢, 偏好, 性格,
  爱好 …) → ``Route.PERSONA`` (persona traits first);
- otherwise ``Route.SEMANTIC``.

Temporal/causal cues win over attribute cues ("why do I like spicy food?" is causal). Explicit
references such as "you said before" / 你之前说过 are removed first: their "before" is not a time.
English cues match whole words, case-insensitively; Chinese cues match as substrings.

Whatever the route, a question may ask for a set of things rather than one ("what activities does
she do?", "which books ...", "how many times ...", "what kinds of ...", 哪些, 几次, 多少): it is
``broad``. Its evidence is spread over several sessions, so base retrieval fuses its two rankings
more flatly for it (``RetrievalConfig.broad_rrf_k``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from adamem.retrieval.config import Direction, Route
from adamem.retrieval.whose import strip_references

__all__ = ["CUES", "Cue", "RoutePlan", "is_broad", "route_query"]


@dataclass(frozen=True, slots=True)
class Cue:
    """One cue: its words (``|``-separated), the route it votes for, and the walking direction."""

    words: str
    route: Route
    direction: Direction = Direction.ANY
    kind: str = "temporal"  # temporal | causal | attribute


@dataclass(frozen=True, slots=True)
class RoutePlan:
    """The route a question takes, the direction graph expansion walks, the cues that fired and why."""

    route: Route
    direction: Direction = Direction.ANY
    cues: tuple[str, ...] = ()
    reason: str = ""
    causal: bool = False  # a "why" question: its answer lies before the event it names
    broad: bool = False  # the question asks for a set of things (``is_broad``), not one

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form."""
        return {
            "route": self.route.value,
            "direction": self.direction.value,
            "cues": list(self.cues),
            "reason": self.reason,
            "causal": self.causal,
            "broad": self.broad,
        }


_G, _P = Route.GRAPH, Route.PERSONA
_BACK, _FWD = Direction.ANTECEDENT, Direction.CONSEQUENT
CUES: tuple[Cue, ...] = (
    # causal → antecedents
    Cue(
        "why|because|cause|caused|causes|reason|reasons|how come|what made|what led|led me to|led you to"
        "|motivated|motivation|due to|so that",
        _G,
        _BACK,
        "causal",
    ),
    Cue("为什么|为啥|为何|因为|原因|由于|怎么会|起因|导致|动机|是什么让|什么让", _G, _BACK, "causal"),
    # temporal, looking back
    Cue("before|previously|earlier|used to|formerly|prior to|originally", _G, _BACK),
    Cue("之前|以前|从前|此前|原来|曾经|当初|起初", _G, _BACK),
    # temporal, looking forward
    Cue("after|afterwards|afterward|later|then|since then|next|consequence|consequences", _G, _FWD),
    Cue("之后|以后|后来|然后|接着|此后", _G, _FWD),
    # temporal, either way
    Cue(
        "when|what time|what date|which day|what day|what year|which year|what month|which month|how long|ago"
        "|since|until|yesterday|today|tonight|tomorrow|last week|last month|last year|this week|this month"
        "|first time|last time|how often|date|during",
        _G,
    ),
    Cue(
        "什么时候|何时|哪天|哪一天|几号|几月|哪年|哪一年|多久|多长时间|多少天|几天|上周|上个月|上礼拜|去年|前年"
        "|昨天|前天|今天|刚才|那时|当时|第一次|上次|这周|本周|这个月|期间|几点",
        _G,
    ),
    # user attributes → persona first
    Cue(
        "prefer|prefers|preferred|preference|preferences|like|likes|love|loves|favourite|favorite|favourites"
        "|favorites|hobby|hobbies|personality|allergic|allergy|allergies|enjoy|enjoys|hate|hates|dislike"
        "|dislikes|interested|interests|habit|habits|usually|kind of person|taste|diet|values|believe",
        _P,
        kind="attribute",
    ),
    Cue(
        "喜欢|偏好|性格|爱好|爱吃|讨厌|不喜欢|习惯|过敏|口味|兴趣|最爱|喜好|个性|平时|通常|经常|口头禅|忌口",
        _P,
        kind="attribute",
    ),
)
"""Every cue, in precedence order within a route (causal before temporal)."""


def _compile(cue: Cue) -> re.Pattern[str]:
    words = sorted(cue.words.split("|"), key=len, reverse=True)
    if words[0].isascii():
        alternatives = "|".join(r"\s+".join(map(re.escape, w.split())) for w in words)
        return re.compile(rf"(?<![\w'])(?:{alternatives})(?![\w'])", re.I)
    return re.compile("|".join(map(re.escape, words)))


_COMPILED: tuple[tuple[Cue, re.Pattern[str]], ...] = tuple((c, _compile(c)) for c in CUES)


# A set asked for: "kinds of", "how many", "what are", a plural noun after what/which ("what activities",
# "which books"), and their Chinese counterparts. Written once from English and Chinese grammar, not tuned.
_BROAD_EN = re.compile(
    r"(?<![\w'])(?:kinds?\s+of|types?\s+of|sorts?\s+of|how\s+many|in\s+what\s+ways|both|what\s+are|which\s+are)(?![\w'])",
    re.I,
)
_PLURAL_EN = re.compile(r"(?<![\w'])(?:what|which)\s+(?:\w+\s+){0,2}?(\w+(?:ies|s))(?![\w'])", re.I)
_NOT_PLURAL = re.compile(
    r"is|was|does|has|this|its|his|hers|yours|ours|theirs|us|as|plus|less|unless|always|perhaps|sometimes"
    r"|towards|afterwards|news|series|\w*ss"
)
_BROAD_ZH = re.compile("哪些|哪几|几个|几种|几次|几样|多少|分别|都有什么|各种")


def is_broad(question: str) -> bool:
    """Whether a question asks for a set of things ("what activities ...", "how many ...", 哪些) rather than one."""
    if _BROAD_EN.search(question) or _BROAD_ZH.search(question):
        return True
    m = _PLURAL_EN.search(question)
    word = m[1].lower() if m else ""
    return bool(word) and _NOT_PLURAL.fullmatch(word) is None


def route_query(question: str) -> RoutePlan:
    """The route of ``question``: graph for temporal/causal cues, persona for attribute cues, else semantic."""
    text = strip_references(question)
    plan = _route(text)
    return replace(plan, broad=True) if is_broad(text) else plan


def _route(text: str) -> RoutePlan:
    """The route of a question whose explicit references were removed."""
    spans = sorted(
        (
            (m.start(), -len(m[0]), i, m[0].lower())
            for i, (_, pattern) in enumerate(_COMPILED)
            for m in pattern.finditer(text)
        )
    )
    fired: list[tuple[Cue, str]] = []
    end = -1
    for start, negative_length, i, word in spans:  # overlapping cues: the longest wins ("since then")
        if start >= end:
            fired.append((_COMPILED[i][0], word))
            end = start - negative_length
    graph = [(c, w) for c, w in fired if c.route is Route.GRAPH]
    if graph:
        directions = {c.direction for c, _ in graph if c.direction is not Direction.ANY}
        causal = [w for c, w in graph if c.kind == "causal"]
        if causal:
            direction = Direction.ANTECEDENT
        elif len(directions) == 1:
            direction = directions.pop()
        else:
            direction = Direction.ANY
        words = tuple(dict.fromkeys(w for _, w in graph))
        kind = "causal" if causal else "temporal"
        return RoutePlan(
            Route.GRAPH, direction, words, f"{kind} cue(s) {', '.join(words)}: graph expansion", bool(causal)
        )
    persona = tuple(dict.fromkeys(w for c, w in fired if c.route is Route.PERSONA))
    if persona:
        return RoutePlan(Route.PERSONA, Direction.ANY, persona, f"attribute cue(s) {', '.join(persona)}: persona first")
    return RoutePlan(Route.SEMANTIC, Direction.ANY, (), "no temporal, causal or attribute cue: semantic retrieval")
