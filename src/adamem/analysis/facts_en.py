"""English first-person statements of facts about the speaker: home, origin, work, relations, pets, health.

Every pattern is anchored on the speaker ("I", "my"; "the company" in a first-person message), and
the fact's ``key`` is its conflict slot: ``lives_in``, ``from``, ``job``, ``works_at``,
``company_location``, ``husband`` (one per person) or ``sister:emma`` (one per name), ``pet:max``,
``health:blood lipids``, ``studies``, ``school``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from adamem.analysis.statements_en import scaled_confidence as _conf
from adamem.analysis.statements_en import strip_trailing_time
from adamem.events import ExtractedFact

__all__ = ["english_facts"]

_PROPER = r"[A-Z][\w'&-]*(?:\s+(?:of|de|la|&)\s+[A-Z][\w'&-]*|\s+[A-Z][\w'&-]*)*"
_PLACE = rf"(?P<place>(?:the\s+)?{_PROPER}(?:,\s+(?!I\b){_PROPER})?)"
_STOP = r"(?:in|on|at|for|with|and|but|as|because|so|near|since|where|which|that|who|to|from|of|now|right|here|there)"
_ORG = rf"(?P<org>{_PROPER}|(?:an?|the|my|our)\s+(?!{_STOP}\b)[a-z][\w-]*(?:\s+(?!{_STOP}\b)[a-z][\w-]*){{0,2}})"
_JOB = (
    r"(?P<job>(?:[a-z-]+\s+){0,2}?(?:engineer|developer|programmer|teacher|nurse|doctor|designer|manager|student"
    r"|lawyer|accountant|artist|writer|scientist|researcher|analyst|consultant|chef|cook|driver|mechanic|architect"
    r"|photographer|musician|counsell?or|therapist|pharmacist|dentist|professor|intern|entrepreneur|founder"
    r"|co-founder|salesperson|cashier|waiter|waitress|barista|pilot|firefighter|officer|soldier|journalist|editor"
    r"|marketer|freelancer|librarian|electrician|plumber|carpenter|farmer|baker|veterinarian|vet|paramedic|worker"
    r"|coach|instructor|trainer|tutor|dancer|singer|actor|actress|producer|director|athlete|surgeon|psychologist"
    r"|technician|clerk|secretary|CEO|CTO|owner|player|guard|forward|striker|goalkeeper|pitcher|banker|mechanic))"
)
_REL = (
    r"(?P<rel>husband|wife|partner|spouse|boyfriend|girlfriend|fianc[ée]e?|mom|mum|mother|dad|father|sister"
    r"|brother|son|daughter|grandma|grandmother|grandpa|grandfather|aunt|uncle|cousin|niece|nephew|best\s+friend"
    r"|friend|boss|colleague|coworker|co-worker|roommate|mentor|neighbou?r|stepmom|stepdad|twin)"
)
_UNIQUE_RELATIONS_WORDS = (
    "husband wife partner spouse boyfriend girlfriend fiancé fiancée mother father boss best_friend"
)
_UNIQUE_RELATIONS = frozenset(_UNIQUE_RELATIONS_WORDS.split())
_REL_ALIASES = {"mom": "mother", "mum": "mother", "dad": "father", "fiance": "fiancé", "fiancee": "fiancée"}
_NOT_A_NAME_WORDS = (
    "I The And But So Oh My We He She They It You This That Mom Dad God OK Ok Yes No Monday Tuesday Wednesday"
    " Thursday Friday Saturday Sunday January February March April May June July August September October"
    " November December"
)
_NOT_A_NAME = frozenset(_NOT_A_NAME_WORDS.split())
_HEALTH_QUALIFIERS = re.compile(
    r"^(?:(?:high|low|elevated|raised|normal|abnormal|slightly|very|a\s+bit|borderline|mildly|some|a|an|severe"
    r"|chronic|mild|type\s+\d|increased|decreased|too\s+much|too\s+little)\s+)+",
    re.I,
)
_CONDITIONS = (
    r"diabetes|asthma|high\s+blood\s+pressure|hypertension|high\s+cholesterol|arthritis|migraines|anxiety"
    r"|depression|insomnia|ADHD|adhd|celiac\s+disease|eczema|a\s+bad\s+back|back\s+pain|a\s+heart\s+condition"
)

FactBuilder = Callable[[re.Match[str], str, float], list[ExtractedFact]]


def _tidy(text: str) -> str:
    return strip_trailing_time(" ".join(text.split())).rstrip(" ,")


def _moved(m: re.Match[str], name: str, hedge: float) -> list[ExtractedFact]:
    origin = f" (moved from {_tidy(m['origin'])})" if m["origin"] else ""
    place = _tidy(m["place"])
    return [ExtractedFact(f"{name} lives in {place}{origin}", _conf(0.9, hedge), "location", "lives_in")]


def _lives(m: re.Match[str], name: str, hedge: float) -> list[ExtractedFact]:
    return [ExtractedFact(f"{name} lives in {_tidy(m['place'])}", _conf(0.9, hedge), "location", "lives_in")]


def _origin(m: re.Match[str], name: str, hedge: float) -> list[ExtractedFact]:
    verb = "grew up in" if "grew" in m[0] else "is from"
    return [ExtractedFact(f"{name} {verb} {_tidy(m['place'])}", _conf(0.9, hedge), "location", "from")]


def _job(m: re.Match[str], name: str, hedge: float) -> list[ExtractedFact]:
    job = _tidy(m["job"])
    article = "an" if job[0].lower() in "aeiou" else "a"
    facts = [ExtractedFact(f"{name} is {article} {job}", _conf(0.85, hedge), "work", "job")]
    if m["org"]:
        org = _tidy(m["org"])
        if job.endswith("student"):
            facts.append(ExtractedFact(f"{name} studies at {org}", _conf(0.85, hedge), "education", "school"))
        else:
            facts.append(ExtractedFact(f"{name} works at {org}", _conf(0.85, hedge), "work", "works_at"))
    return facts


def _works_at(m: re.Match[str], name: str, hedge: float) -> list[ExtractedFact]:
    facts = [ExtractedFact(f"{name} works at {_tidy(m['org'])}", _conf(0.85, hedge), "work", "works_at")]
    if m["job"]:
        job = _tidy(m["job"])
        article = "an" if job[0].lower() in "aeiou" else "a"
        facts.append(ExtractedFact(f"{name} is {article} {job}", _conf(0.85, hedge), "work", "job"))
    return facts


def _works_in(m: re.Match[str], name: str, hedge: float) -> list[ExtractedFact]:
    if m["place"]:
        place = _tidy(m["place"])
        return [ExtractedFact(f"{name}'s workplace is in {place}", _conf(0.8, hedge), "work", "company_location")]
    return [ExtractedFact(f"{name} works in {_tidy(m['field'])}", _conf(0.8, hedge), "work", "industry")]


def _company_location(m: re.Match[str], name: str, hedge: float) -> list[ExtractedFact]:
    what = m["what"].lower()
    content = f"{name}'s {what} is in {_tidy(m['place'])}"
    return [ExtractedFact(content, _conf(0.8, hedge), "work", "company_location")]


def _relation(m: re.Match[str], name: str, hedge: float) -> list[ExtractedFact]:
    person = m["person"]
    if person in _NOT_A_NAME:
        return []
    rel = " ".join(m["rel"].lower().split())
    rel = _REL_ALIASES.get(rel, rel)
    slot = rel.replace(" ", "_")
    key = slot if slot in _UNIQUE_RELATIONS else f"{slot}:{person.lower()}"
    return [ExtractedFact(f"{name}'s {rel} is {person}", _conf(0.85, hedge), "relationship", key)]


def _pet_named(m: re.Match[str], name: str, hedge: float) -> list[ExtractedFact]:
    pet, kind = m["pet"], " ".join(m["kind"].lower().split())
    if pet in _NOT_A_NAME:
        return []
    article = "an" if kind[0] in "aeiou" else "a"
    return [ExtractedFact(f"{name} has {article} {kind} named {pet}", _conf(0.85, hedge), "pet", f"pet:{pet.lower()}")]


def _pets_owned(m: re.Match[str], name: str, hedge: float) -> list[ExtractedFact]:
    kind = " ".join(m["kind"].lower().split())
    names = [n for n in (m["pet"], m["pet2"]) if n and n not in _NOT_A_NAME]
    singular = kind[:-1] if kind.endswith("s") and kind != "fish" else kind
    if names:
        conf = _conf(0.85, hedge)
        return [ExtractedFact(f"{name} has a pet {singular} named {n}", conf, "pet", f"pet:{n.lower()}") for n in names]
    return [ExtractedFact(f"{name} has {m['count'].lower()} {kind}", _conf(0.85, hedge), "pet", f"pets:{singular}")]


def _health_key(condition: str) -> str:
    return "health:" + (_HEALTH_QUALIFIERS.sub("", condition.lower()).strip() or condition.lower())


def _health_report(m: re.Match[str], name: str, hedge: float) -> list[ExtractedFact]:
    condition = _tidy(m["cond"])
    source = " ".join(m["source"].split())
    content = f"{name}'s {source} showed {condition}"
    return [ExtractedFact(content, _conf(0.85, hedge), "health", _health_key(condition))]


def _health_condition(m: re.Match[str], name: str, hedge: float) -> list[ExtractedFact]:
    condition = _tidy(m["cond"])
    verb = "was diagnosed with" if "diagnosed" in m[0] else "has"
    return [ExtractedFact(f"{name} {verb} {condition}", _conf(0.85, hedge), "health", _health_key(condition))]


def _studies(m: re.Match[str], name: str, hedge: float) -> list[ExtractedFact]:
    facts = [ExtractedFact(f"{name} studies {_tidy(m['field'])}", _conf(0.85, hedge), "education", "studies")]
    if m["org"]:
        facts.append(ExtractedFact(f"{name} studies at {_tidy(m['org'])}", _conf(0.85, hedge), "education", "school"))
    return facts


_I_PAST = r"\bI(?:'ve|\s+have|\s+had|\s+just|\s+recently|\s+finally|\s+also|\s+actually|\s+now)*\s+"
_FACTS: tuple[tuple[re.Pattern[str], FactBuilder], ...] = (
    (re.compile(rf"{_I_PAST}(?:moved|relocated)\s+(?:here\s+)?from\s+(?P<origin>{_PROPER})\s+to\s+{_PLACE}"), _moved),
    (re.compile(rf"{_I_PAST}(?:moved|relocated)\s+(?:back\s+|here\s+)?to\s+{_PLACE}(?P<origin>)"), _moved),
    (re.compile(rf"\bI(?:'m|\s+am)\s+(?:(?:currently|now|still)\s+)?(?:living|based)\s+in\s+{_PLACE}"), _lives),
    (re.compile(rf"\bI\s+(?:(?:currently|now|still|also|actually)\s+)?live\s+in\s+{_PLACE}"), _lives),
    (re.compile(rf"\bI(?:'m|\s+am)\s+(?:originally\s+)?from\s+{_PLACE}"), _origin),
    (re.compile(rf"\bI\s+(?:originally\s+)?(?:come|came)\s+from\s+{_PLACE}"), _origin),
    (re.compile(rf"\bI\s+grew\s+up\s+in\s+{_PLACE}"), _origin),
    (re.compile(rf"\b[Mm]y\s+home\s*town\s+is\s+{_PLACE}"), _origin),
    (
        re.compile(
            rf"\bI(?:'m|\s+am)\s+(?:(?:now|currently|also|still|actually|just)\s+)*an?\s+"
            rf"(?:(?:full-time|part-time|freelance|senior|junior)\s+)?{_JOB}\b(?:\s+(?:at|for|with)\s+{_ORG})?"
        ),
        _job,
    ),
    (
        re.compile(rf"\bI\s+(?:(?:currently|now|still|also)\s+)*work\s+as\s+an?\s+{_JOB}\b(?:\s+(?:at|for)\s+{_ORG})?"),
        _job,
    ),
    (
        re.compile(
            rf"\bI\s+(?:(?:currently|now|still|also|actually)\s+)*work\s+(?:at|for)\s+{_ORG}(?:\s+as\s+an?\s+{_JOB}\b)?"
        ),
        _works_at,
    ),
    (
        re.compile(
            rf"\bI\s+(?:(?:currently|now|still|also|actually)\s+)*work\s+in\s+(?:{_PLACE}|(?P<field>(?!an?\s|the\s)"
            r"[a-z]+(?:\s+[a-z]+)?)(?=\s*[,.;!?]|\s*$))"
        ),
        _works_in,
    ),
    (
        re.compile(
            rf"\b(?:[Tt]he|[Mm]y|[Oo]ur)\s+(?P<what>company|office|workplace|firm|startup)\s+is\s+"
            rf"(?:(?:located|based)\s+)?in\s+{_PLACE}"
        ),
        _company_location,
    ),
    (
        re.compile(
            rf"\b[Mm]y\s+(?:(?:older|younger|little|big|baby|twin|eldest|oldest|youngest|dear|late|new)\s+)?{_REL},?\s+"
            r"(?:(?:is\s+)?(?:named|called)\s+|whose\s+name\s+is\s+)?(?P<person>[A-Z][a-z]+)\b"
        ),
        _relation,
    ),
    (
        re.compile(
            r"\b[Mm]y\s+(?:(?:new|little|old|sweet|lovely|rescue|adorable|cute)\s+)*(?P<kind>dog|cat|puppy|pup|kitten"
            r"|bunny|rabbit|hamster|parrot|turtle|horse|bird|guinea\s+pig|pet)\s+(?:(?:is\s+)?(?:named|called)\s+)?"
            r"(?P<pet>[A-Z][a-z]+)\b"
        ),
        _pet_named,
    ),
    (
        re.compile(
            r"\bI\s+(?:(?:also|now|still|just)\s+)?(?:have|'ve\s+got|have\s+got|own|adopted)\s+(?P<count>an?|one|two"
            r"|three|four|\d+)\s+(?:(?:new|little|rescue|cute)\s+)?(?P<kind>dogs?|cats?|pupp(?:y|ies)|kittens?"
            r"|bunn(?:y|ies)|rabbits?|hamsters?|parrots?|turtles?|horses?|birds?|guinea\s+pigs?)\b"
            r"(?:\s+(?:named|called)\s+(?P<pet>[A-Z][a-z]+)(?:\s+and\s+(?P<pet2>[A-Z][a-z]+))?)?"
        ),
        _pets_owned,
    ),
    (
        re.compile(
            r"\b[Mm]y\s+(?P<source>(?:(?:annual|yearly|recent|latest|last|medical|routine|physical)\s+)*"
            r"(?:check-?up|medical|blood\s+test|blood\s+work|tests?|scan|x-ray|MRI|physical|lab\s+results?)"
            r"(?:\s+(?:report|results?))?)\s+(?:showed|shows|found|revealed|reveals|indicated|indicates|said|says"
            r"|came\s+back\s+with)\s+(?:that\s+)?(?:I\s+(?:have|had)\s+)?(?P<cond>[^,.;:!?]+)"
        ),
        _health_report,
    ),
    (
        re.compile(
            r"\bI(?:'ve|\s+have|\s+was|\s+got|\s+just|\s+recently|\s+been)*\s+diagnosed\s+with\s+(?P<cond>[^,.;:!?]+)"
        ),
        _health_condition,
    ),
    (re.compile(rf"\bI\s+(?:have|suffer\s+from|'ve\s+got|have\s+got)\s+(?P<cond>{_CONDITIONS})\b"), _health_condition),
    (
        re.compile(
            rf"\bI(?:'m|\s+am)\s+(?:(?:currently|now|still)\s+)?studying\s+(?P<field>(?!to\b|for\b|hard\b)[a-z]+"
            rf"(?:\s+(?!{_STOP}\b)[a-z]+)?)(?:\s+at\s+{_ORG})?"
        ),
        _studies,
    ),
)


def english_facts(sentence: str, name: str, hedge: float) -> list[ExtractedFact]:
    """Facts about the speaker ``name`` stated in one English sentence."""
    found: list[ExtractedFact] = []
    for pattern, build in _FACTS:
        for m in pattern.finditer(sentence):
            found.extend(build(m, name, hedge))
    return found
