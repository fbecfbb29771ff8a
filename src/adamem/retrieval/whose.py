"""Whose memory a question is about: the user, the other party, both, or ambiguous (English and Chinese).

Evidence, strongest first:

1. explicit references to what someone said: "you said before", "you told me", 你之前说过 → the
   other party (the assistant); "I said", "I told you", 我说过 → the user. These *restrict*
   retrieval to that side's rows;
2. names of the owner's known speakers ("When did Caroline go to ...") → those speakers, whose
   rows are boosted (their role decides the subject);
3. pronouns: I / me / my / 我 → user; you / your / 你 → the other party (unless "you" is only the
   addressee of a request: "can you remind me ..."); we / our / 我们 / 咱们 → both. They boost.

No evidence, or evidence for both sides without a "we", is ambiguous: retrieval then reserves part
of the answer for each side (a small retrieval on both, merged).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from adamem.retrieval.config import Subject

__all__ = ["REFERENCES", "WhoseDecision", "strip_references", "whose_memory"]


@dataclass(frozen=True, slots=True)
class WhoseDecision:
    """The subject of a question, the named speakers, whether to restrict to that side, and why."""

    subject: Subject
    speakers: tuple[str, ...] = ()
    restrict: bool = False
    cues: tuple[str, ...] = ()
    reason: str = ""

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form."""
        return {
            "subject": self.subject.value,
            "speakers": list(self.speakers),
            "restrict": self.restrict,
            "cues": list(self.cues),
            "reason": self.reason,
        }


_SAY_EN = r"(?:said|told|mentioned|suggested|recommended|promised|say|tell|mention|suggest|recommend|promise)"
_ALREADY = r"(?:'ve|\s+have|\s+had)?\s+(?:already\s+|once\s+|just\s+)?"
_WHEN_EN = r"(?:\s+(?:before|earlier|previously|once|last\s+time))?"
_SAY_ZH = "(?:之前|以前|上次|刚才|曾经)?"
_TOLD_ME_ZH = "(?:说过|说的|告诉过?我|提到过?|建议过?|推荐过?|讲过)"
REFERENCES: tuple[tuple[Subject, re.Pattern[str]], ...] = (
    (Subject.ASSISTANT, re.compile(rf"\byou{_ALREADY}{_SAY_EN}{_WHEN_EN}\b", re.I)),
    (Subject.ASSISTANT, re.compile(rf"\bdid\s+you\s+(?:ever\s+)?{_SAY_EN}{_WHEN_EN}\b", re.I)),
    (Subject.ASSISTANT, re.compile(r"\byour\s+(?:advice|suggestion|recommendation|answer)s?\b", re.I)),
    (Subject.ASSISTANT, re.compile(rf"(?<![跟和对给诉])你{_SAY_ZH}{_TOLD_ME_ZH}")),
    (Subject.USER, re.compile(rf"\bI{_ALREADY}{_SAY_EN}{_WHEN_EN}\b", re.I)),
    (Subject.USER, re.compile(rf"\bdid\s+I\s+(?:ever\s+)?{_SAY_EN}{_WHEN_EN}\b", re.I)),
    (Subject.USER, re.compile(rf"我{_SAY_ZH}(?:说过|说的|告诉过?你|跟你说过?|提到过?|讲过)")),
)
"""Explicit references to what one side said: (subject, pattern)."""

_USER_EN = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|me|my|mine|myself)\b", re.I)
_OTHER_EN = re.compile(r"\b(?:you|your|yours|yourself|you're|you've)\b", re.I)
_BOTH_EN = re.compile(r"\b(?:we|us|our|ours|ourselves|we're|we've)\b", re.I)
_USER_ZH = re.compile(r"我(?!们)")
_OTHER_ZH = re.compile(r"你(?!们)|您")
_BOTH_ZH = re.compile(r"我们|咱们|咱")
_ADDRESSEE = re.compile(
    r"\b(?:can|could|would|will)\s+you\b|\bdo\s+you\s+(?:know|remember|recall|think)\b|\b(?:tell|remind|show|help)\s+me\b"
    r"|^\s*please\b|你(?:能|可以|能不能|可不可以|还记得|记得|知道|觉得|认为)|(?:告诉|提醒|帮)我|请你?",
    re.I,
)


def strip_references(question: str) -> str:
    """The question without its explicit references (their "before" / 之前 is not a time cue)."""
    for _, pattern in REFERENCES:
        question = pattern.sub(" ", question)
    return question


def _named(question: str, speakers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for name, role in sorted(set(speakers)):
        if not name.strip():
            continue
        if name.isascii():
            if re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", question, re.I):
                found.append((name, role))
        elif name in question:
            found.append((name, role))
    return found


def _side(roles: set[str]) -> Subject:
    if roles == {"user"}:
        return Subject.USER
    if "user" not in roles:
        return Subject.ASSISTANT
    return Subject.BOTH


def whose_memory(question: str, speakers: Iterable[tuple[str, str]] = ()) -> WhoseDecision:
    """Decide whose memory ``question`` is about, given the owner's known ``(speaker name, role)`` pairs."""
    refs = [(subject, m[0]) for subject, pattern in REFERENCES for m in pattern.finditer(question)]
    if refs:
        subjects = {s for s, _ in refs}
        cues = tuple(c for _, c in refs)
        if len(subjects) == 1:
            subject = subjects.pop()
            return WhoseDecision(subject, (), True, cues, f"explicit reference to what the {subject.value} said")
        return WhoseDecision(Subject.BOTH, (), False, cues, "explicit references to both sides")

    named = _named(question, speakers)
    if named:
        names = tuple(n for n, _ in named)
        subject = _side({r for _, r in named})
        return WhoseDecision(subject, names, False, names, f"names {', '.join(names)} ({subject.value})")

    rest = _ADDRESSEE.sub(" ", question)
    user = [m[0] for p in (_USER_EN, _USER_ZH) for m in p.finditer(rest)]
    other = [m[0] for p in (_OTHER_EN, _OTHER_ZH) for m in p.finditer(rest)]
    both = [m[0] for p in (_BOTH_EN, _BOTH_ZH) for m in p.finditer(question)]
    if both:
        return WhoseDecision(Subject.BOTH, (), False, tuple(both), "first person plural")
    if user and not other:
        return WhoseDecision(Subject.USER, (), False, tuple(user), "first person")
    if other and not user:
        return WhoseDecision(Subject.ASSISTANT, (), False, tuple(other), "second person")
    if user and other:
        return WhoseDecision(Subject.AMBIGUOUS, (), False, (*user, *other), "first and second person")
    return WhoseDecision(Subject.AMBIGUOUS, (), False, (), "no name, pronoun or reference")
