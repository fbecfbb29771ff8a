"""Persona memory: traits distilled from attribute mentions and recurring events.

- Evidence: every attribute mention with confidence > ``add_threshold`` (whatever the episodic
  router decided: a redundant mention is exactly what makes a trait stable), once per message,
  from messages whose speaker role is in ``persona_roles`` (the owner, not the assistant).
  Evidence time is the message's ``occurred_at``; "now" is the owner's ``last_event_time``.
- ``strength = base_confidence * ln(mention_count + 1) * time_decay`` with ``base_confidence``
  the mean confidence of the kept evidence and ``time_decay`` the mean of
  ``0.5 ** ((now - t) / half_life)`` over it. Because the decay is exponential, a stored strength
  computed at ``updated_at`` decays to any later time t by the same factor (``strength_at``).
- Stable when ``strength ≥ 0.65`` and ``mention_count ≥ 3`` (re-evaluated whenever a trait is
  written; rows do not decay by themselves — readers use ``strength_at``).
- Conflicts (traits in one slot: ``likes X`` vs ``dislikes X``; two values of a single-valued key),
  comparing the updated trait's fresh strength c with its strongest rival's strength o (decayed to
  now): |c − o| ≤ ``persona_tie_tolerance`` → both kept, both ``disputed``; c > o and the trait was
  already ahead → plain update; c > o and the trait was behind (the profile is changing) → adjust
  gradually: trait = ``o*0.9 + c*0.1`` and the rival is damped to ``o*0.9``; c < o → the outlier is
  ignored: its mention is counted but its strength does not move.
- Preference clusters: a preference value joins the lexicon cluster whose term it contains
  (``lexicon.PREFERENCE_CLUSTERS``: Sichuan / Hunan / spicy / 川菜 / 湖南菜 / 辣 → "strong
  flavours"), else the cluster sharing most tokens with it (ties → smallest label), else a cluster
  of its own. A cluster with two or more distinct values of one polarity gets an aggregate trait
  (kind ``preference_cluster``: "likes strong flavours") whose evidence is the union of its members'.
- Habits: ``habit_min_occurrences`` (3) active event records of one activity make a ``habit`` trait
  labelled "gym every Wednesday evening" when two thirds of the occurrences agree on weekday and
  part of day (UTC + ``habit_utc_offset_minutes``), "gym every Wednesday", "gym regularly in the
  evening" or "gym regularly" otherwise.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from itertools import repeat
from operator import truediv
from typing import TypeVar

from adamem.analysis.timeexpr_zh import has_cjk
from adamem.projections.folds.ids import trait_id
from adamem.projections.folds.keys import attribute_identity, trait_slot
from adamem.projections.folds.lexicon import ACTIVITY_LABELS_ZH, CLUSTER_LABELS_ZH, lexicon_cluster, tokens
from adamem.projections.folds.params import DAY_MS, MemoryParameters
from adamem.projections.folds.rows import PersonaRow, Row, evolve, float32_vector, persona_row
from adamem.projections.folds.state import Transaction

__all__ = [
    "choose_cluster",
    "drop_evidence",
    "evidence_strength",
    "habit_label",
    "is_healthy_stability",
    "observe_attribute",
    "refresh_cluster",
    "refresh_habit",
    "stability_index",
    "strength_at",
]

_T = TypeVar("_T", int, str)
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_WEEKDAYS_ZH = ("周一", "周二", "周三", "周四", "周五", "周六", "周日")
_PARTS_ZH = {"morning": "早上", "afternoon": "下午", "evening": "晚上", "night": "夜里"}


def _mostly_chinese(texts: Iterable[str]) -> bool:
    """Whether more of ``texts`` hold Chinese characters than do not: the language a label is shown in."""
    said = [has_cjk(t) for t in texts]
    return sum(said) * 2 > len(said)


def _decay(now: int, t: int, params: MemoryParameters) -> float:
    return float(0.5 ** (max(0, now - t) / params.half_life_ms))


def evidence_strength(
    confidences: Sequence[float], times: Sequence[int], mention_count: int, now: int, params: MemoryParameters
) -> float:
    """``base_confidence * ln(mention_count + 1) * time_decay`` over the kept evidence."""
    if not confidences:
        return 0.0
    base = sum(confidences) / len(confidences)
    decay = sum(_decay(now, t, params) for t in times) / len(times)
    return base * math.log(mention_count + 1) * decay


def strength_at(row: PersonaRow, t: int, params: MemoryParameters) -> float:
    """A trait's stored strength decayed from ``updated_at`` to event time ``t``."""
    return row.strength * _decay(t, row.updated_at, params)


def _vector(tx: Transaction, message_ids: Iterable[str], params: MemoryParameters) -> tuple[float, ...]:
    """The normalised sum of the newest ``persona_vector_window`` evidence messages' vectors.

    The evidence is read newest first and only as far as the window reaches: it holds up to
    ``persona_evidence_cap`` (200) messages, and this runs whenever a trait is written.
    """
    ids = message_ids if isinstance(message_ids, Sequence) else list(message_ids)
    window = params.persona_vector_window
    vectors: list[tuple[float, ...]] = []
    for i in reversed(ids):
        m = tx.state.message(i)
        if m is not None and m.vector:
            vectors.append(m.vector)
            if len(vectors) == window:
                break
    vectors.reverse()
    if not vectors:
        return ()
    dim = len(vectors[-1])
    sums = list(map(math.fsum, zip(*(v for v in vectors if len(v) == dim), strict=True)))
    norm = math.hypot(*sums)
    return float32_vector(map(truediv, sums, repeat(norm)) if norm > 0 else sums)


def _finish(before: PersonaRow | None, row: PersonaRow, now: int, params: MemoryParameters) -> PersonaRow:
    stable = (
        row.status == "active"
        and row.strength >= params.persona_stable_strength
        and row.mention_count >= params.persona_min_evidence
    )
    changed = before is None or (before.value, before.stable, before.disputed, before.status) != (
        row.value,
        stable,
        row.disputed,
        row.status,
    )
    return evolve(row, stable=stable, changed_at=now if changed else before.changed_at if before else now)


def _settle(
    tx: Transaction, row: PersonaRow, current: float, prev: float, now: int, params: MemoryParameters
) -> PersonaRow:
    if row.status != "active":
        return evolve(row, strength=current)
    slot = trait_slot(row)
    rivals = (
        [
            r
            for r in (tx.state.trait(i) for i in tx.state.index.trait_slot.get(slot, ()) if i != row.id)
            if r is not None
        ]
        if slot
        else []
    )
    if not rivals:
        return evolve(row, strength=current, disputed=False)
    rival = max(rivals, key=lambda r: (strength_at(r, now, params), r.id))
    o, tol = strength_at(rival, now, params), params.persona_tie_tolerance
    if abs(current - o) <= tol:
        if not rival.disputed:
            tx.put(_finish(rival, evolve(rival, disputed=True), now, params))
        return evolve(row, strength=current, disputed=True)
    if current < o:
        return evolve(row, strength=prev, disputed=False)
    if prev > o + tol:
        strength = current
        damped = evolve(rival, disputed=False)
    else:
        strength = o * params.persona_smoothing_old + current * params.persona_smoothing_new
        damped = evolve(rival, strength=o * params.persona_smoothing_old, updated_at=now, disputed=False)
    if damped != rival:
        tx.put(_finish(rival, damped, now, params))
    return evolve(row, strength=strength, disputed=False)


def _blank(user: str, id: str, kind: str, key: str, value: str, cluster: str, at: int) -> PersonaRow:
    return persona_row(
        id,
        user,
        kind,
        key,
        value,
        cluster,
        [value],
        0.0,
        0.0,
        0,
        [],
        [],
        [],
        at,
        at,
        at,
        at,
        False,
        False,
        "active",
        "",
        -1,
        (),
    )


def choose_cluster(tx: Transaction, value: str) -> str:
    """Cluster label of a new preference value: lexicon, else best token overlap, else the value."""
    label = lexicon_cluster(value)
    if label is not None:
        return label
    scores: Counter[str] = Counter()
    for tok in tokens(value):
        scores.update(tx.state.index.cluster_tokens.get(tok, ()))
    if not scores:
        return value
    return min(scores, key=lambda lab: (-scores[lab], lab))


def observe_attribute(
    tx: Transaction, message_id: str, at: int, key: str, value: str, confidence: float, params: MemoryParameters
) -> None:
    """Count one attribute mention of a message as persona evidence."""
    kind, canonical, norm_value = attribute_identity(key, value)
    if not norm_value or not canonical or confidence <= params.add_threshold:
        return
    state, now = tx.state, tx.state.last_event_time
    ids = state.index.trait_value.get(f"{kind}|{canonical}|{norm_value}")
    tid = min(ids) if ids else trait_id(state.owner_id, kind, canonical, norm_value)
    before = state.trait(tid)
    if before is not None and message_id in before.evidence_message_ids:
        return
    if before is None:
        cluster = choose_cluster(tx, norm_value) if kind == "preference" else ""
        old = _blank(state.owner_id, tid, kind, canonical, norm_value, cluster, at)
    else:
        old = before
    cap = params.persona_evidence_cap
    msgs = [*old.evidence_message_ids, message_id][-cap:]
    confs = [*old.evidence_confidences, confidence][-cap:]
    times = [*old.evidence_times, at][-cap:]
    count = old.mention_count + 1
    row = evolve(
        old,
        evidence_message_ids=msgs,
        evidence_confidences=confs,
        evidence_times=times,
        mention_count=count,
        base_confidence=sum(confs) / len(confs),
        first_seen=min(old.first_seen, at),
        last_seen=max(old.last_seen, at),
        updated_at=now,
        vector=_vector(tx, msgs, params),
    )
    current = evidence_strength(confs, times, count, now, params)
    prev = strength_at(old, now, params) if before is not None else 0.0
    tx.put(_finish(before, _settle(tx, row, current, prev, now, params), now, params))
    if kind == "preference":
        refresh_cluster(tx, canonical, row.cluster, params)


def refresh_cluster(tx: Transaction, polarity: str, label: str, params: MemoryParameters) -> None:
    """Write (or remove) the aggregate trait of one preference cluster from its members."""
    state, now = tx.state, tx.state.last_event_time
    aid = trait_id(state.owner_id, "preference_cluster", polarity, label)
    before = state.trait(aid)
    members = sorted(
        (
            t
            for t in (state.trait(i) for i in state.index.cluster_members.get(label, ()))
            if t is not None and t.key == polarity
        ),
        key=lambda t: t.id,
    )
    values = sorted({t.value for t in members})
    if len(values) < 2:
        if before is not None and before.status == "active":
            tx.delete("persona", aid)
        return
    seen: dict[str, tuple[int, str, float]] = {}
    for t in members:
        for mid, conf, at in zip(t.evidence_message_ids, t.evidence_confidences, t.evidence_times, strict=True):
            seen.setdefault(mid, (at, mid, conf))
    evidence = sorted(seen.values())[-params.persona_evidence_cap :]
    count = sum(t.mention_count for t in members)
    confs, times = [e[2] for e in evidence], [e[0] for e in evidence]
    first_seen = min(t.first_seen for t in members)
    old = before or _blank(state.owner_id, aid, "preference_cluster", polarity, label, label, first_seen)
    shown = CLUSTER_LABELS_ZH.get(label, label) if _mostly_chinese(values) else label
    # members asserted only by corrections carry no evidence list: fall back to their confidences
    base = sum(confs) / len(confs) if confs else sum(t.base_confidence for t in members) / len(members)
    row = evolve(
        old,
        value=shown,
        members=values,
        evidence_message_ids=[e[1] for e in evidence],
        evidence_confidences=confs,
        evidence_times=times,
        mention_count=count,
        base_confidence=base,
        first_seen=first_seen,
        last_seen=max(t.last_seen for t in members),
        updated_at=now,
        vector=_vector(tx, (e[1] for e in evidence), params),
    )
    current = evidence_strength(confs, times, count, now, params) if confs else base * math.log(count + 1)
    prev = strength_at(old, now, params) if before is not None else 0.0
    tx.put(_finish(before, _settle(tx, row, current, prev, now, params), now, params))


def habit_label(activity: str, times: Sequence[int], utc_offset_minutes: int = 0, *, chinese: bool = False) -> str:
    """ "gym every Wednesday evening" style label of an activity's occurrence times ("每周三晚上健身" in Chinese)."""
    shifted = [t + utc_offset_minutes * 60_000 for t in times]
    weekday = _agreeing([(s // DAY_MS + 3) % 7 for s in shifted])  # 1970-01-01 was a Thursday
    part = _agreeing([_part_of_day((s % DAY_MS) // 3_600_000) for s in shifted])
    if chinese:
        when = f"每{_WEEKDAYS_ZH[weekday]}" if weekday is not None else "经常"
        return when + (_PARTS_ZH[part] if part is not None else "") + ACTIVITY_LABELS_ZH.get(activity, activity)
    if weekday is not None:
        return f"{activity} every {_WEEKDAYS[weekday]}" + (f" {part}" if part is not None else "")
    return f"{activity} regularly" + (f" in the {part}" if part is not None else "")


def _part_of_day(hour: int) -> str:
    if 5 <= hour < 12:
        return "morning"
    if 12 <= hour < 17:
        return "afternoon"
    return "evening" if 17 <= hour < 22 else "night"


def _agreeing(values: list[_T]) -> _T | None:
    counts = Counter(values)
    best = min(counts, key=lambda v: (-counts[v], v))
    return best if counts[best] * 3 >= len(values) * 2 else None


def refresh_habit(tx: Transaction, activity: str, params: MemoryParameters) -> None:
    """Write (or remove) the habit trait of one activity from the owner's active event records."""
    if not activity:
        return
    state, now = tx.state, tx.state.last_event_time
    hid = trait_id(state.owner_id, "habit", "habit", activity)
    before = state.trait(hid)
    ids = [i for role in params.persona_roles for i in state.index.activity_events.get(f"{role}|{activity}", ())]
    records = [r for r in (state.record(i) for i in ids) if r is not None]
    if len(records) < params.habit_min_occurrences:
        if before is not None and before.status == "active":
            tx.delete("persona", hid)
        return
    records.sort(key=lambda r: (r.event_time if r.event_time >= 0 else r.occurred_at, r.id))
    kept = records[-params.persona_evidence_cap :]
    times = [r.event_time if r.event_time >= 0 else r.occurred_at for r in kept]
    confs = [r.confidence for r in kept]
    msgs = [r.source_message_ids[0] if r.source_message_ids else r.id for r in kept]
    old = before or _blank(state.owner_id, hid, "habit", "habit", activity, "", times[0])
    chinese = _mostly_chinese(r.content for r in kept)
    label = habit_label(activity, times, params.habit_utc_offset_minutes, chinese=chinese)
    value = label if old.status == "active" else old.value
    row = evolve(
        old,
        value=value,
        members=[activity],
        evidence_message_ids=msgs,
        evidence_confidences=confs,
        evidence_times=times,
        mention_count=len(records),
        base_confidence=sum(confs) / len(confs),
        first_seen=times[0],
        last_seen=times[-1],
        updated_at=now,
        vector=_vector(tx, msgs, params),
        strength=evidence_strength(confs, times, len(records), now, params),
    )
    tx.put(_finish(before, row, now, params))


def drop_evidence(tx: Transaction, row: PersonaRow, message_ids: set[str], params: MemoryParameters) -> None:
    """Remove forgotten messages from a preference/trait's evidence; delete it when none is left."""
    keep = [i for i, mid in enumerate(row.evidence_message_ids) if mid not in message_ids]
    removed = len(row.evidence_message_ids) - len(keep)
    if removed == 0:
        return
    if not keep:
        tx.delete("persona", row.id)
        return
    now = tx.state.last_event_time
    msgs = [row.evidence_message_ids[i] for i in keep]
    confs = [row.evidence_confidences[i] for i in keep]
    times = [row.evidence_times[i] for i in keep]
    count = max(len(keep), row.mention_count - removed)
    strength = min(strength_at(row, now, params), evidence_strength(confs, times, count, now, params))
    new = evolve(
        row,
        evidence_message_ids=msgs,
        evidence_confidences=confs,
        evidence_times=times,
        mention_count=count,
        base_confidence=sum(confs) / len(confs),
        first_seen=min(times),
        last_seen=max(times),
        updated_at=now,
        strength=strength,
        vector=_vector(tx, msgs, params),
    )
    tx.put(_finish(row, new, now, params))


def stability_index(rows: Iterable[Row], week_start: int, week_end: int) -> float:
    """Weekly change rate of core traits: changed in [week_start, week_end) / core traits (0.0 if none).

    Core traits are the active stable traits seen before ``week_end`` plus any trait whose value,
    stability or dispute flag changed during the week (``changed_at``); compute it on the rows as
    of the week's end (only each trait's latest change is recorded).
    """
    considered = changed = 0
    for row in rows:
        if not isinstance(row, PersonaRow) or row.first_seen >= week_end:
            continue
        in_week = week_start <= row.changed_at < week_end
        if in_week or (row.stable and row.status == "active"):
            considered += 1
            changed += in_week
    return changed / considered if considered else 0.0


def is_healthy_stability(rate: float, params: MemoryParameters) -> bool:
    """True when a weekly change rate lies in the healthy band (15–30 % by default)."""
    return params.stability_healthy_low <= rate <= params.stability_healthy_high
