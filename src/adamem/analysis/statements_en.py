"""English first-person statements about the speaker's preferences and traits (likes, allergy, favourite_*, …).

Every pattern is anchored on the speaker ("I", "my"), so only what speakers say about themselves
becomes an attribute of them. Functions take one sentence (a statement, never a question) and a
hedge factor (1.0 certain, lower when hedged) that scales the confidence. Facts (home, work, …)
are in ``facts_en``.
"""

from __future__ import annotations

import re

from adamem.events import ExtractedAttribute

__all__ = ["english_attributes", "scaled_confidence", "strip_trailing_time"]

_ADV = (
    r"(?:really|absolutely|totally|just|also|still|truly|genuinely|honestly|actually|definitely|always|kinda"
    r"|seriously|do|now|even|personally|simply|so|sure|particularly|especially|most|secretly)"
)
_I = rf"\bI(?:\s+{_ADV})*\s+"
_IM = rf"\bI(?:'m|\s+am)(?:\s+{_ADV})*\s+"
_OBJ = r"(?P<obj>[^,.;:!?\"()\[\]]+)"
_BREAK = re.compile(
    r"\s+(?:but|because|'cause|cause|since|so|when|while|which|who|that|as|especially|particularly|like|though"
    r"|although|if|whenever|and\s+(?:i|it|they|we|he|she|that|this|my)|or\s+(?:i|it)|-|–|—"
    r"|(?:i|it|they|you|we|he|she)\s+\w+)(?:\s|$).*$",
    re.I,
)
_TRAILING = re.compile(
    r"\s+(?:a\s+lot|so\s+much|very\s+much|too|as\s+well|also|now|these\s+days|lately|again|anyway|anymore"
    r"|more\s+than\s+anything(?:\s+else)?|the\s+most|most|best|right\s+now|for\s+sure|though|haha|lol|honestly"
    r"|really|in\s+general|every\s+day|everyday|all\s+the\s+time|more|even\s+more|myself|in\s+life)$",
    re.I,
)
_TRAILING_TIME = re.compile(
    r"\s+(?:(?:last|this|next)\s+(?:week|weekend|month|year|night|summer|winter|spring|fall|autumn)|yesterday|today"
    r"|tonight|recently|lately|(?:a|an|one|two|three|four|five|six|few|\d+)\s+(?:days?|weeks?|months?|years?)\s+ago)$",
    re.I,
)
_LEADING = re.compile(r"^(?:to\s+|the\s+|a\s+|an\s+|some\s+|all\s+)+", re.I)
_NOT_A_VALUE_WORDS = (
    "it that this these those them you your yours him her his how what when where why which who the way idea"
    " everything anything something nothing all both each there here myself yourself u ya ur thinking think"
    " hear hearing see seeing know knowing say saying imagine believe thought one to they we he she i i'm me us is are"
    " was were be been am has have had it's that's there's - their makes keeps gives brings means helps"
)
_NOT_A_VALUE = frozenset(_NOT_A_VALUE_WORDS.split())
_DANGLING_WORDS = (
    "to in at of for with about on from into by than the a an my your our their and or every such some them it you"
    " him her this that these those me"
)
_DANGLING = frozenset(_DANGLING_WORDS.split())


def _clean(obj: str, max_words: int = 8) -> str | None:
    """Normalise a captured object: cut trailing clauses and adverbs, drop articles, lower-case."""
    value = _BREAK.sub("", obj.strip())
    previous = None
    while previous != value:
        previous = value
        value = _TRAILING_TIME.sub("", _TRAILING.sub("", value)).strip()
    value = _LEADING.sub("", value.strip(" '\"*-–—")).strip(" '\"*").lower()
    words = value.split()
    if not words or len(words) > max_words or words[0] in _NOT_A_VALUE or " ".join(words[:2]) in _NOT_A_VALUE:
        return None
    if words[-1] in _DANGLING or value in ("every day", "everyday", "more", "most"):
        return None
    return " ".join(words)


def scaled_confidence(base: float, hedge: float) -> float:
    """``base`` confidence scaled by the sentence's hedge factor, at most 1, rounded to 2 places."""
    return round(min(1.0, base * hedge), 2)


def strip_trailing_time(text: str) -> str:
    """``text`` without a trailing time phrase ("diabetes last year" → "diabetes")."""
    return _TRAILING_TIME.sub("", text)


_conf = scaled_confidence


_LIKES = (
    (re.compile(rf"{_I}(?P<verb>love|adore|like|enjoy|prefer|appreciate)\s+{_OBJ}", re.I), "likes"),
    (
        re.compile(
            rf"{_IM}(?P<verb>(?:a\s+(?:big\s+|huge\s+)?fan\s+of|into|passionate\s+about|obsessed\s+with|crazy\s+about"
            rf"|keen\s+on|fond\s+of|interested\s+in))\s+{_OBJ}",
            re.I,
        ),
        "likes",
    ),
    (
        re.compile(
            rf"(?:{_I}(?P<verb>hate|dislike|detest|loathe|can't\s+stand|cannot\s+stand|can't\s+bear)"
            rf"|\bI(?:\s+{_ADV})*\s+(?P<neg>don't|do\s+not|never|didn't)\s+(?:really\s+|much\s+|particularly\s+)?"
            rf"(?:like|enjoy|love|care\s+for)|{_IM}(?P<not>not\s+(?:a\s+(?:big\s+)?fan\s+of|into|keen\s+on|fond\s+of)))"
            rf"\s+{_OBJ}",
            re.I,
        ),
        "dislikes",
    ),
)
_STRONG = ("love", "adore", "hate", "loathe", "detest", "passionate", "obsessed")
_ESPECIALLY = re.compile(r"\b(?:especially|particularly|in\s+particular|above\s+all)\s+(?P<obj>[^,.;:!?\"()]+)", re.I)
_FAVOURITE = re.compile(
    r"\bmy\s+(?:(?:all-time|absolute|new|current|personal|very|top)\s+)*favou?rite\s+(?P<thing>[a-z]+(?:\s+[a-z]+)?)"
    r"(?:\s+to\s+\w+)?\s+(?:is|are|was|has\s+to\s+be|would\s+be|right\s+now\s+is)\s+" + _OBJ,
    re.I,
)
_FAVOURITE_TAIL = re.compile(
    r"(?:^|[,;:]\s*)(?P<obj>(?:[\w'-]+\s+){0,4}?[\w'-]+)\s+(?:is|are)\s+(?:definitely\s+|still\s+)?my\s+"
    r"(?:(?:new|all-time|absolute|current|personal)\s+)*favou?rites?(?:\s+(?P<thing>[a-z]+))?\b",
    re.I,
)
_ALLERGY = re.compile(
    rf"(?:{_IM}(?:(?:very|severely|a\s+bit|slightly|mildly|deathly|highly)\s+)?allergic\s+to\s+{_OBJ}"
    r"|\bI\s+(?:have|'ve\s+got|have\s+got)\s+(?:an?\s+)?(?:(?:severe|mild|bad|serious)\s+)?"
    r"(?:allerg(?:y|ies)\s+to\s+(?P<obj2>[^,.;:!?]+)|(?P<obj3>[a-z]+(?:\s+[a-z]+)?)\s+allerg(?:y|ies)\b))",
    re.I,
)
_INTOLERANT = re.compile(rf"{_IM}(?P<obj>[a-z]+)[\s-]+intolerant\b", re.I)
_DIET = "vegetarian|vegan|pescatarian|pescetarian|teetotal(?:l?er)?|gluten-free"
_TRAIT = re.compile(
    rf"{_IM}(?:(?:a|an|pretty\s+much|kind\s+of|quite|very|more\s+of|such|an\s+absolute|a\s+total|a\s+real)\s+)*"
    rf"(?P<obj>{_DIET}|introvert(?:ed)?|extrovert(?:ed)?|ambivert|night\s+owl|early\s+bird|morning\s+person"
    r"|night\s+person|homebody|perfectionist|workaholic|foodie|bookworm|optimist|pessimist|shy|outgoing"
    r"|animal\s+lover|dog\s+person|cat\s+person|people\s+person|neat\s+freak|left-handed|adventurous|introspective"
    r"|competitive|organized|organised|spontaneous)\b",
    re.I,
)
_TRAIT_AND = re.compile(r"\s+and\s+(?:an?\s+|also\s+|quite\s+|very\s+)*(?P<obj>[a-z]+(?:[\s-][a-z]+)?)\b", re.I)
_STATUS = re.compile(
    rf"{_IM}(?:a\s+|an\s+)?(?:proud\s+)?(?P<obj>(?:transgender|trans|gay|lesbian|bisexual|queer|non-binary|nonbinary"
    r"|single|married|divorced|widowed|engaged)(?:\s+(?:woman|man|person|mom|dad|parent|mother|father))?)(?![\w-])",
    re.I,
)
_MARITAL = ("single", "married", "divorced", "widowed", "engaged")
_HOBBY = re.compile(
    r"\bmy\s+(?:(?:favou?rite|main|new|biggest|current)\s+)?hobb(?:y|ies)\s+(?:is|are|include|includes)\s+"
    r"(?P<obj>[^.;:!?]+)",
    re.I,
)
_PLAYS = re.compile(
    rf"{_I}(?:usually\s+|often\s+|regularly\s+)?play\s+(?:the\s+)?(?P<obj>guitar|piano|violin|drums|cello|flute"
    r"|saxophone|ukulele|bass|basketball|football|soccer|tennis|volleyball|baseball|golf|badminton|chess|video\s+games"
    r"|table\s+tennis|ping\s+pong|hockey|cricket|rugby)\b",
    re.I,
)
_THING_ALIASES = {"color": "colour", "film": "movie", "flick": "movie", "tv show": "show", "author": "writer"}


def _thing_key(thing: str) -> str:
    thing = " ".join(thing.lower().split())
    if thing.endswith("s") and not thing.endswith(("ss", "series")) and len(thing) > 3:
        thing = thing[:-1]
    thing = _THING_ALIASES.get(thing, thing)
    return "favourite_" + thing.replace(" ", "_")


def english_attributes(sentence: str, hedge: float) -> list[ExtractedAttribute]:
    """Attributes of the speaker stated in one English sentence."""
    found: list[ExtractedAttribute] = []
    for pattern, key in _LIKES:
        for m in pattern.finditer(sentence):
            value = _clean(m["obj"])
            if value is None:
                continue
            verb = (m["verb"] or "").lower()
            strong = verb.startswith(_STRONG)
            base = 0.9 if strong else 0.75 if verb.startswith(("interested", "appreciate")) else 0.85
            found.append(ExtractedAttribute(key, value, _conf(base, hedge)))
            tail = _ESPECIALLY.search(sentence, m.end())
            extra = _clean(tail["obj"]) if tail else None
            if extra:
                found.append(ExtractedAttribute(key, extra, _conf(base - 0.05, hedge)))
    for m in _FAVOURITE.finditer(sentence):
        value = _clean(m["obj"])
        if value:
            found.append(ExtractedAttribute(_thing_key(m["thing"]), value, _conf(0.9, hedge)))
    for m in _FAVOURITE_TAIL.finditer(sentence):
        value = _clean(m["obj"], max_words=5)
        if value:
            key = _thing_key(m["thing"]) if m["thing"] else "likes"
            found.append(ExtractedAttribute(key, value, _conf(0.85, hedge)))
    for m in _ALLERGY.finditer(sentence):
        value = _clean(m["obj"] or m["obj2"] or m["obj3"] or "")
        if value:
            found.append(ExtractedAttribute("allergy", value, _conf(0.9, hedge)))
    for m in _INTOLERANT.finditer(sentence):
        found.append(ExtractedAttribute("intolerance", m["obj"].lower(), _conf(0.9, hedge)))
    for m in _TRAIT.finditer(sentence):
        values = [m["obj"]]
        more = _TRAIT_AND.match(sentence, m.end())
        if more and _TRAIT.match(f"I'm {more['obj']}"):
            values.append(more["obj"])
        for raw in values:
            value = " ".join(raw.lower().split())
            key = "diet" if re.fullmatch(_DIET, value) else "trait"
            found.append(ExtractedAttribute(key, value, _conf(0.85, hedge)))
    for m in _STATUS.finditer(sentence):
        value = " ".join(m["obj"].lower().split())
        key = "relationship_status" if value.startswith(_MARITAL) else "identity"
        found.append(ExtractedAttribute(key, value, _conf(0.85, hedge)))
    for m in _HOBBY.finditer(sentence):
        for part in re.split(r",\s*|\s+and\s+|\s*&\s*", m["obj"]):
            value = _clean(part, max_words=4)
            if value:
                found.append(ExtractedAttribute("hobby", value, _conf(0.85, hedge)))
    for m in _PLAYS.finditer(sentence):
        found.append(ExtractedAttribute("hobby", " ".join(m["obj"].lower().split()), _conf(0.8, hedge)))
    return found
