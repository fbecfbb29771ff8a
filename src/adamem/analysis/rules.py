"""The default Memory Agent extractor: offline, deterministic rules for English and Chinese.

``RuleExtractor().extract(message)`` splits the text into sentences and, per sentence, decides
the dialog act and certainty, then reads first-person statements into attributes and facts
(``statements_en``, ``facts_en``, ``statements_zh``), time-bounded actions into events (times resolved by
``timeexpr`` against ``occurred_at``), and keywords into topics, sentiment and entities
(``lexicon``). Questions yield no attributes, facts or events. Hedged sentences ("maybe", 可能,
"probably", 大概) scale confidences by 0.7 (possible) or 0.55 (guess).

The speaker's local day for time expressions comes from the offset the message's time stated
(``ChatMessage.utc_offset_minutes``), else from the optional message metadata ``utc_offset``
("+08:00", "-0530" or minutes); without either days are UTC days.
"""

from __future__ import annotations

import re
from typing import Final

from adamem.analysis import Extraction
from adamem.analysis.entities import entities_of
from adamem.analysis.facts_en import english_facts
from adamem.analysis.lexicon import sentiment_of, topics_of
from adamem.analysis.statements_en import english_attributes
from adamem.analysis.statements_zh import chinese_attributes, chinese_facts, chinese_names
from adamem.analysis.timeexpr import find_time_expressions
from adamem.analysis.timeexpr_zh import has_cjk
from adamem.events import ChatMessage, ExtractedAttribute, ExtractedEvent, ExtractedFact

__all__ = ["RULES_VERSION", "RuleExtractor", "split_sentences"]

RULES_VERSION: Final = "1"
"""Bump whenever the extractor's output for some message changes."""

_HEDGE = {"certain": 1.0, "possible": 0.7, "guess": 0.55}
_SPLIT = re.compile(r"(?<=[。！？；])\s*|(?<=[.!?])\s+|\n+")
_GUESS = re.compile(
    r"\b(?:i\s+guess|probably|i\s+suppose|i\s+bet|presumably|i\s+reckon|i\s+assume)\b|大概|估计|我猜|多半|八成", re.I
)
_POSSIBLE = re.compile(
    r"\b(?:maybe|might|perhaps|possibly|i\s+think|i\s+believe|not\s+sure|could\s+be|i'm\s+thinking|i\s+am\s+thinking"
    r"|considering|hopefully)\b|可能|也许|或许|我觉得|我认为|说不定|不确定|好像|似乎|考虑",
    re.I,
)
_REQUEST = re.compile(
    r"^(?:please|pls|can\s+you|could\s+you|would\s+you|will\s+you|can\s+u|would\s+you\s+mind|remind\s+me|tell\s+me"
    r"|help\s+me|show\s+me|give\s+me|let\s+me\s+know|recommend|suggest|find\s+me|book|send\s+me)\b|\bplease\b"
    r"|^(?:请|麻烦|帮我|能不能帮|可以帮|能帮|提醒我|给我|替我)|帮我",
    re.I,
)
_QUESTION_EN = re.compile(
    r"[?？]\s*$|^(?:what|why|how|when|where|who|which|whose)\s+(?:do|does|did|is|are|was|were|can|could|would"
    r"|will|should|have|has|about)\b|^(?:do|does|did|are|is|was|were|can|could|would|will|should|have|has)\s+"
    r"(?:you|i|we|they|he|she|it|the|your|there|my)\b",
    re.I,
)
_QUESTION_ZH = re.compile(r"[吗呢][。.!！]?\s*$|为什么|什么|怎么|哪|谁|多少|几点|是不是|有没有|要不要|能不能|可不可以")
_NOT_QUESTION_ZH = re.compile(r"没什么|不怎么|什么都|怎么也|哪怕|多少有")
_EN_ACTION = re.compile(
    r"\b(?:I|we)(?:\s+(?:just|finally|recently|also|actually|even|already|then|totally|first|both|all|never|once))*"
    r"(?:\s+|'ve\s+|\s+have\s+|\s+had\s+)(?:(?:been\s+)?(?:went|gone|got|gotten|took|taken|made|met|saw|seen|did|done"
    r"|ran|run|won|lost|bought|began|begun|came|left|gave|given|found|built|wrote|written|flew|drove|swam|ate|sang"
    r"|caught|brought|taught|spent|sold|fell|broke|broken|became|chose|quit|sent|rode|paid|told|threw|had|(?!(?:loved|liked"
    r"|hated|wanted|needed|seemed|hoped|wished|used|guessed|supposed|believed|agreed|realized|realised|noticed|felt"
    r"|learned|missed|enjoyed|appreciated|imagined|figured|wondered|expected|ended|preferred)\b)[a-z]+ed)\b)",
    re.I,
)
_EN_PLAN = re.compile(
    r"\bI(?:(?:'ll|\s+will)(?:\s+(?:definitely|probably|also|just|really|totally))?\s+(?!not\b|be\b)[a-z]{2,}"
    r"|(?:'m|\s+am)\s+(?:going\s+to|gonna|planning\s+(?:to|on)|thinking\s+(?:about|of)|about\s+to|hoping\s+to"
    r"|considering|starting|moving|joining|quitting)|\s+plan\s+to|\s+intend\s+to|(?:'ve|\s+have)?\s+decided"
    r"\s+(?:to|that))\b"
)
_EN_BARE_PAST = re.compile(
    r"^(?:just\s+|finally\s+|recently\s+|also\s+)?(?:went|got|took|made|met|saw|did|ran|won|bought|started|finished"
    r"|visited|tried|joined|decided|spent|signed|baked|cooked|painted|wrote|watched|played|completed|attended"
    r"|adopted|booked|moved|hiked|celebrated)\b",
    re.I,
)
_ZH_ACTION = re.compile(r"了|过(?![来去年])|刚|已经|开始|决定|打算|准备|计划")
_ZH_NOT_ACTION = re.compile(r"太[\u4e00-\u9fff]{1,4}了|[极好对算除为]了|了解|不了|难过|过敏|不过|过得")
_VERBISH_EN = re.compile(r"\b(?:is|are|was|were)\s+\w+ing\b|\bwill\s+\w+|\b\w+ed\b")
_VERBISH_ZH = re.compile("会|要|去|来|在")
_DECISION = re.compile(r"\bdecided\b|决定", re.I)
_FIRST_PERSON_EN = re.compile(
    r"\b(?:I'm|I am|I've|I have|I haven't|I don't|I do|I'll|I will|I'd|I was|I|[Mm]y|[Mm]e|[Mm]ine|[Mm]yself)\b"
)
_EN_PRONOUN = {
    "i'm": "{} is", "i am": "{} is", "i've": "{} has", "i have": "{} has", "i haven't": "{} hasn't",
    "i don't": "{} doesn't", "i do": "{} does", "i'll": "{} will", "i will": "{} will", "i'd": "{} would",
    "i was": "{} was", "i": "{}", "my": "{}'s", "me": "{}", "mine": "{}'s", "myself": "{}",
}  # fmt: skip
_ZH_FIRST_PERSON = re.compile(r"我(?!们)")
_EN_SELF = re.compile(r"\b(?:I|[Mm]y|[Tt]he\s+company)\b|\b[Oo]ur\s+(?:company|office)\b")
_ZH_SELF = re.compile("我|公司|体检|检查|化验")
_SHORT_GREETING = re.compile(r"^\W*(?:\w+\W*){1,2}$")


def split_sentences(text: str) -> list[str]:
    """Sentences of an English or Chinese text, stripped, in order."""
    return [s.strip() for s in _SPLIT.split(text) if s and s.strip()]


def _certainty(sentence: str) -> str:
    if _GUESS.search(sentence):
        return "guess"
    if _POSSIBLE.search(sentence):
        return "possible"
    return "certain"


def _act(sentence: str) -> str:
    if _REQUEST.search(sentence):
        return "request"
    if _QUESTION_EN.search(sentence):
        return "question"
    if has_cjk(sentence) and _QUESTION_ZH.search(sentence) and not _NOT_QUESTION_ZH.search(sentence):
        return "question"
    return "statement"


def _third_person(sentence: str, name: str, chinese: bool) -> str:
    """The sentence with the speaker's first person replaced by their name."""
    if chinese:
        return _ZH_FIRST_PERSON.sub(name, sentence)
    text = _FIRST_PERSON_EN.sub(lambda m: _EN_PRONOUN[m[0].lower()].format(name), sentence)
    if _EN_BARE_PAST.match(text):
        text = f"{name} {text[0].lower()}{text[1:]}"
    return text


def _event(sentence: str, name: str, occurred_at: int, offset: int, hedge: float) -> ExtractedEvent | None:
    """The sentence as an event when it reports a time-bounded action, a plan or a decision."""
    chinese = has_cjk(sentence)
    if (len(sentence) if chinese else sentence.count(" ") + 1) < 4:
        return None
    times = find_time_expressions(sentence, occurred_at, utc_offset_minutes=offset)
    if chinese:
        action = bool(_ZH_FIRST_PERSON.search(sentence)) and bool(_ZH_ACTION.search(_ZH_NOT_ACTION.sub("", sentence)))
    else:
        action = bool(_EN_PLAN.search(sentence) or _EN_ACTION.search(sentence) or _EN_BARE_PAST.match(sentence))
    if not action and not times:
        return None
    if action and times:
        base = 0.85
    elif action:
        base = 0.8 if _DECISION.search(sentence) else 0.75
    else:  # a time expression alone: an event only when something happens at that time
        verbish = (_VERBISH_ZH if chinese else _VERBISH_EN).search(sentence)
        base = 0.75 if verbish else 0.65
    content = _third_person(sentence, name, chinese)[:240]
    first = times[0] if times else None
    return ExtractedEvent(
        content=content,
        confidence=round(base * hedge, 2),
        when=first.when if first else None,
        when_text=first.text if first else "",
    )


def _summary(sentences: list[str], name: str) -> str:
    fallback = sentences[0] if sentences else ""
    chosen = next((s for s in sentences if not _SHORT_GREETING.match(s) or has_cjk(s)), fallback)
    if len(chosen) > 120:
        cut = chosen[:117]
        chosen = (cut.rsplit(" ", 1)[0] if " " in cut else cut) + "…"
    return f"{name}: {chosen}" if chosen else ""


def _utc_offset(metadata: dict[str, str]) -> int:
    raw = metadata.get("utc_offset", "").strip()
    match = re.fullmatch(r"([+-])(\d{1,2}):?(\d{2})", raw)
    if match:
        minutes = int(match[2]) * 60 + int(match[3])
        return -minutes if match[1] == "-" else minutes
    return int(raw) if re.fullmatch(r"[+-]?\d{1,4}", raw) else 0


def _dedupe_attributes(items: list[ExtractedAttribute]) -> tuple[ExtractedAttribute, ...]:
    best: dict[tuple[str, str], ExtractedAttribute] = {}
    for a in items:
        if (a.key, a.value) not in best or best[(a.key, a.value)].confidence < a.confidence:
            best[(a.key, a.value)] = a
    return tuple(best.values())


def _dedupe_facts(items: list[ExtractedFact]) -> tuple[ExtractedFact, ...]:
    best: dict[tuple[str, str], ExtractedFact] = {}
    for f in items:
        if (f.key, f.content) not in best or best[(f.key, f.content)].confidence < f.confidence:
            best[(f.key, f.content)] = f
    return tuple(best.values())


class RuleExtractor:
    """Offline, deterministic bilingual (English/Chinese) extractor: regexes and small lexicons."""

    name: str = "rules"
    version: str = RULES_VERSION
    model: str = ""

    def extract(self, message: ChatMessage) -> Extraction:
        """Analyse one message; the same message always gives the same ``Extraction``."""
        text = message.text.replace("’", "'").replace("‘", "'")
        name = message.speaker.name
        stated = message.utc_offset_minutes
        offset = _utc_offset(message.metadata) if stated is None else stated
        sentences = split_sentences(text)
        acts: list[str] = []
        certainties: list[str] = []
        attributes: list[ExtractedAttribute] = []
        facts: list[ExtractedFact] = []
        events: list[ExtractedEvent] = []
        names: list[str] = []
        for sentence in sentences:
            act = _act(sentence)
            acts.append(act)
            if act == "question":
                continue
            certainty = _certainty(sentence)
            certainties.append(certainty)
            hedge = _HEDGE[certainty]
            if has_cjk(sentence) and _ZH_SELF.search(sentence):
                attributes += chinese_attributes(sentence, hedge)
                facts += chinese_facts(sentence, name, hedge)
                names += chinese_names(sentence)
            if _EN_SELF.search(sentence):
                attributes += english_attributes(sentence, hedge)
                facts += english_facts(sentence, name, hedge)
            event = _event(sentence, name, message.occurred_at, offset, hedge)
            if event is not None and all(e.content != event.content for e in events):
                events.append(event)
        dialog_act = "request" if "request" in acts else "question" if "question" in acts else "statement"
        certainty = min(certainties or ["certain"], key=lambda c: _HEDGE[c])
        return Extraction(
            summary=_summary(sentences, name),
            topics=topics_of(text),
            sentiment=sentiment_of(text),
            dialog_act=dialog_act,
            certainty=certainty,
            facts=_dedupe_facts(facts),
            attributes=_dedupe_attributes(attributes),
            events=tuple(events),
            entities=entities_of(text, sentences, names),
        )
