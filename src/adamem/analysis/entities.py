"""Named entities for the rule extractor: capitalised names and places (English), gazetteer places (Chinese).

Kept simple and precise: a capitalised word that merely starts a sentence is not a name unless
it is a known place or part of a longer capitalised span ("Harry Potter").
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from adamem.analysis.lexicon import PLACES_EN, zh_places_in

__all__ = ["entities_of"]

_SPAN = re.compile(r"(?<![\w'])[A-Z][\w'&-]*(?:\s+(?:of\s+|de\s+)?[A-Z][\w'&-]*)*")
_LEAD = re.compile(r"^[\W\d_]*")
_NOT_AN_ENTITY_WORDS = (
    "I I'm I've I'll I'd OK Ok Okay Mom Dad Mum BTW LOL OMG TBH IDK Hi Hey Hello Wow Oh Yay Haha Thanks Thx Yes No"
    " Monday Tuesday Wednesday Thursday Friday Saturday Sunday January February March April May June July August"
    " September October November December Mr Mrs Ms Dr"
)
_NOT_AN_ENTITY = frozenset(_NOT_AN_ENTITY_WORDS.split())
_COMMON_STARTERS_WORDS = (
    "a an the my your our his her their its this that these those there here it i we you he she they me what why how"
    " when where who which whose do does did is are was were can could would will should have has had shall may might"
    " must and but so or if because since as though although yet also just really actually honestly well yeah yes no"
    " not oh wow hey hi hello thanks thank good great nice awesome cool sure ok okay sounds that's it's i'm i've"
    " i'll i'd let's let anyway btw besides plus still even maybe perhaps probably definitely totally absolutely"
    " glad happy sorry congrats congratulations wish hope love like enjoy went got took made met saw ran won bought"
    " started finished visited tried joined decided one two three four five six seven eight nine ten last next"
    " every each some any all both many much more most few lots today yesterday tomorrow tonight after before then"
    " now once finally recently lately speaking talking being having getting going taking making seeing looking"
    " remember keep take make see look go come tell check try please good-bye bye see you'll you're we're they're"
    " he's she's what's don't didn't can't won't isn't wasn't haven't yep yup nope yum woah whoa aw aww ooh"
    " hmm um ha haha hahaha gosh dang geez cheers hooray yay ugh phew omg lol"
)
_COMMON_STARTERS = frozenset(_COMMON_STARTERS_WORDS.split())


def _spans(sentence: str) -> Iterable[tuple[int, str]]:
    lead = _LEAD.match(sentence)
    start_of_sentence = lead.end() if lead else 0
    for match in _SPAN.finditer(sentence):
        tokens = [t.removesuffix("'s") for t in match[0].split()]
        at_start = match.start() == start_of_sentence
        common = tokens[0].lower() in _COMMON_STARTERS or len(tokens) == 1
        if at_start and tokens[0] not in PLACES_EN and common:
            tokens = tokens[1:]
        offset = match.start()
        current: list[str] = []
        for token in [*tokens, ""]:
            if token and token not in _NOT_AN_ENTITY:
                current.append(token)
                continue
            while current and current[-1] in ("of", "de"):
                current.pop()
            if current:
                yield offset, " ".join(current)
            current = []


def entities_of(text: str, sentences: list[str], names: Iterable[str] = ()) -> tuple[str, ...]:
    """Entities mentioned in ``text`` (already split into ``sentences``), in order, without duplicates."""
    found: dict[str, None] = {}
    base = 0
    positioned: list[tuple[int, str]] = []
    for sentence in sentences:
        at = text.find(sentence, base)
        base = at if at >= 0 else base
        positioned.extend((base + pos, span) for pos, span in _spans(sentence))
        if not sentence.isascii():
            cursor = 0
            for place in zh_places_in(sentence):
                cursor = sentence.find(place, cursor)
                positioned.append((base + cursor, place))
                cursor += len(place)
    for name in names:
        positioned.append((text.find(name), name))
    for _, entity in sorted(positioned, key=lambda p: p[0]):
        found.setdefault(entity, None)
    return tuple(found)
