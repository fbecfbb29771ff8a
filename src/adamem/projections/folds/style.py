"""An owner's answer style, folded from ``AnswerFeedback``: do records and traits help them more than raw messages?

Some people want the conclusion ("runs three times a week"), others the example it was drawn from
(the message that told it). Each judged answer item is of one of two classes:

- **summary**: an episodic record (event, fact, attribute) or a persona trait;
- **detail**: a message (from working memory or the archive).

The fold counts, per class, the items judged and the items that helped, over every feedback event of
the owner. What tells a preference is *which* items helped, against what the answers offered: the
share ``s`` of summaries among the items that helped, against their share ``b`` among the items
judged. Its lift, scaled to [−1, 1] and weighed by how many items helped at all (``H``):

    lift = (s − b) / (1 − b) when s ≥ b, else (s − b) / b
    preference = lift · H / (H + 2)

A person for whom only records helped gets a preference towards +1, one for whom only messages
helped towards −1, each nearer the end the more items helped; one whom both classes helped as often
as the answers held them gets one near 0, however many messages the answers held, and so does one
whom nothing helped. Most items of an answer help nobody, whatever their class: rates of help per
class would differ by a few points between people who want opposite things, where the share of the
helpful items differs by its whole range.

The result is one persona row per owner (``kind == STYLE_KIND``): ``value`` is ``summaries``,
``examples`` or ``either``; ``strength`` is ``|preference|``; ``members`` holds the four counts
(``summary:HELPED/JUDGED``, ``detail:HELPED/JUDGED``); the evidence lists hold the feedback events
(ids, the event's own signal in [−1, 1], times). Retrieval ranks that owner's answers by it
(``retrieval.style``); it is never itself a candidate answer. Everything comes from the events: the
same feedback gives the same style, live or replayed.
"""

from __future__ import annotations

from dataclasses import dataclass

from adamem.events import AnswerFeedback, JudgedItem
from adamem.projections.folds.ids import trait_id
from adamem.projections.folds.params import MemoryParameters
from adamem.projections.folds.rows import PersonaRow, persona_row
from adamem.projections.folds.state import Transaction

__all__ = ["STYLE_KIND", "AnswerStyle", "is_summary", "learn", "style_of"]

STYLE_KIND = "answer_style"
"""``PersonaRow.kind`` (and ``key``) of the answer-style row."""

_SUMMARIES, _EXAMPLES, _EITHER = "summaries", "examples", "either"


def is_summary(layer: str, kind: str) -> bool:
    """Whether an answer item of this layer and kind is a summary (record or trait) rather than a message."""
    return kind != "message" and layer in ("episodic", "persona", "graph")


@dataclass(frozen=True, slots=True)
class AnswerStyle:
    """What an owner's feedback says: counts per class, and the preference they give."""

    helped_summary: int = 0
    judged_summary: int = 0
    helped_detail: int = 0
    judged_detail: int = 0
    feedback: int = 0  # feedback events folded

    @property
    def preference(self) -> float:
        """In (−1, 1): above 0, records and traits helped more than the answers held them; below 0, messages did."""
        helped = self.helped_summary + self.helped_detail
        judged = self.judged_summary + self.judged_detail
        if helped == 0 or judged == 0:
            return 0.0
        s, b = self.helped_summary / helped, self.judged_summary / judged
        if s == b:
            return 0.0
        lift = (s - b) / (1 - b) if s > b else (s - b) / b  # s > b needs b < 1, s < b needs b > 0
        return lift * helped / (helped + 2)

    def value(self, margin: float) -> str:
        """``summaries``, ``examples``, or ``either`` when the preference is within ``margin`` of 0."""
        p = self.preference
        return _SUMMARIES if p > margin else _EXAMPLES if p < -margin else _EITHER

    def with_items(self, items: tuple[JudgedItem, ...]) -> AnswerStyle:
        """These counts with one more feedback event's items."""
        hs, js, hd, jd = self.helped_summary, self.judged_summary, self.helped_detail, self.judged_detail
        for item in items:
            if is_summary(item.layer, item.kind):
                js, hs = js + 1, hs + item.helped
            else:
                jd, hd = jd + 1, hd + item.helped
        return AnswerStyle(hs, js, hd, jd, self.feedback + 1)

    def members(self) -> list[str]:
        """The counts as the row's ``members``."""
        return [
            f"summary:{self.helped_summary}/{self.judged_summary}",
            f"detail:{self.helped_detail}/{self.judged_detail}",
        ]


def _signal(items: tuple[JudgedItem, ...]) -> float:
    """One event's own lean in [−1, 1]: +1 for a helpful summary or an unhelpful message, −1 for the reverse."""
    votes = [(1 if is_summary(i.layer, i.kind) else -1) * (1 if i.helped else -1) for i in items]
    return sum(votes) / len(votes) if votes else 0.0


def style_of(row: PersonaRow | None) -> AnswerStyle:
    """The counts an answer-style row holds (none for no row)."""
    if row is None or row.kind != STYLE_KIND:
        return AnswerStyle()
    counts: dict[str, tuple[int, int]] = {}
    for member in row.members:
        name, _, ratio = member.partition(":")
        helped, _, judged = ratio.partition("/")
        counts[name] = (int(helped), int(judged))
    hs, js = counts.get("summary", (0, 0))
    hd, jd = counts.get("detail", (0, 0))
    return AnswerStyle(hs, js, hd, jd, row.mention_count)


def learn(tx: Transaction, event: AnswerFeedback, params: MemoryParameters) -> None:
    """Fold one feedback event into its owner's answer-style row (a feedback event judging nothing changes nothing)."""
    if not event.items:
        return
    id = trait_id(event.owner_id, STYLE_KIND, STYLE_KIND, "")
    before = tx.state.trait(id)
    if before is not None and event.event_id in before.evidence_message_ids:
        return  # a redelivered feedback event counts once
    style = style_of(before).with_items(event.items)
    keep = params.persona_evidence_cap - 1  # the newest feedback events, as a trait keeps its newest evidence
    ids = [*(before.evidence_message_ids[-keep:] if before else []), event.event_id]
    signals = [*(before.evidence_confidences[-keep:] if before else []), _signal(event.items)]
    times = [*(before.evidence_times[-keep:] if before else []), event.occurred_at]
    value = style.value(params.style_margin)
    first = before.first_seen if before is not None else event.occurred_at
    changed = before is None or before.value != value
    tx.put(
        persona_row(
            id,
            event.owner_id,
            STYLE_KIND,
            STYLE_KIND,
            value,
            "",
            style.members(),
            abs(style.preference),
            1.0,
            style.feedback,
            ids,
            signals,
            times,
            first,
            max(event.occurred_at, before.last_seen if before else event.occurred_at),
            event.occurred_at,
            event.occurred_at if changed or before is None else before.changed_at,
            style.feedback >= params.persona_min_evidence and value != _EITHER,
            False,
            "active",
            "",
            -1,
            (),
        )
    )
