"""Parameters of the four memory layers (ARCHITECTURE.md section 3), as one frozen dataclass.

Vary a preset by copying (``dataclasses.replace(SEED_DEFAULT, working_capacity=30)``), never by
mutating it. The seed document's values are the default. The AdaMem paper (arXiv 2603.16496 v2)
is the source of the graph write weights, which the seed leaves blank, so both agree there; the
only parameter known to differ between the two (the fusion weights 0.70/0.15/0.10/0.05 vs
0.7/0.1/0.1/0.1) belongs to retrieval, not to these folds. ``PAPER_V2`` is therefore equal to
``SEED_DEFAULT`` today and exists so that a future difference has a named home.

Weights this module adds to the design (marked "added" below): ``supports`` message→event (the
design lists no weight for it; events would otherwise hang off facts only), ``supersedes`` (newer record
→ the record it replaced) and ``similar`` (a message ↔ the messages of earlier sessions nearest to it in
meaning: the graph's links across sessions that do not hang on a shared topic label), all kept at or
above the retrieval pruning floor 0.6.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = ["DAY_MS", "PAPER_V2", "SEED_DEFAULT", "MemoryParameters"]

DAY_MS = 86_400_000


@dataclass(frozen=True, slots=True)
class MemoryParameters:
    """Every tunable number of the memory folds, with the seed's default."""

    # Working memory
    working_capacity: int = 20
    """Messages kept in the FIFO working memory of one owner."""
    eviction_batch: int = 5
    """Oldest messages popped (and consolidated) at once when the FIFO overflows."""
    consolidate_on_session_end: bool = True
    """Also consolidate the working entries when a message opens a new session."""
    session_gap_ms: int = 3 * 3_600_000
    """A message at least this long (event time) after the owner's previous one opens a new session,
    also within one conversation id: a stream without conversation ids still has sessions (added)."""

    # Episodic routers
    add_threshold: float = 0.7
    """An extracted item needs confidence strictly above this to be ADDed or to UPDATE."""
    merge_redundant_sources: bool = True
    """A redundant mention adds its message to the existing record's ``source_message_ids``."""

    # Persona
    persona_roles: tuple[str, ...] = ("user",)
    """Speaker roles whose attributes and events describe the memory owner (the assistant's do not)."""
    persona_stable_strength: float = 0.65
    """Evidence strength at or above which a trait may be stable."""
    persona_min_evidence: int = 3
    """Mentions needed before a trait may be stable."""
    persona_smoothing_old: float = 0.9
    """Weight of the old strength when contrary evidence overtakes it (``old*0.9 + current*0.1``)."""
    persona_smoothing_new: float = 0.1
    """Weight of the current strength when contrary evidence overtakes the old trait."""
    persona_tie_tolerance: float = 0.05
    """Strengths closer than this count as equal: both traits are kept and marked disputed."""
    persona_half_life_days: float = 90.0
    """Half-life of evidence in event time (decay against the owner's latest event time)."""
    persona_evidence_cap: int = 200
    """Most recent evidence entries kept per trait (``mention_count`` keeps counting)."""
    persona_vector_window: int = 20
    """Most recent evidence messages averaged into a trait's vector."""
    habit_min_occurrences: int = 3
    """Occurrences of an activity (event records) before it becomes a habit trait."""
    habit_utc_offset_minutes: int = 0
    """Offset applied to event times before naming weekdays and parts of day in habit labels."""
    style_margin: float = 0.1
    """An answer style (``folds.style``) is ``summaries`` or ``examples`` once its preference is further than this
    from 0, ``either`` until then."""
    stability_healthy_low: float = 0.15
    """Lower bound of a healthy weekly change rate of core traits."""
    stability_healthy_high: float = 0.30
    """Upper bound of a healthy weekly change rate of core traits."""

    # Compression (``adamem.projections.compressor``; added)
    compression_min_records: int = 4
    """Active event records of one speaker and activity needed before they are distilled into one summary."""
    compression_min_span_days: float = 7.0
    """Event time those records must span (a burst within days is not yet a pattern)."""
    compression_excerpts: int = 3
    """Representative record contents quoted in a summary."""
    compression_by_topic: bool = False
    """Also group the event records no activity cluster took by speaker and their message's first topic."""

    # Graph write weights (paper)
    w_mentions: float = 0.75
    """message → topic."""
    w_supports_message_fact: float = 0.85
    """message → fact."""
    w_supports_fact_event: float = 0.80
    """fact → event (same message, or sharing an entity)."""
    w_supports_message_attribute: float = 0.80
    """message → attribute."""
    w_supports_message_event: float = 0.80
    """message → event (added)."""
    w_temporal_same_speaker_forward: float = 0.90
    """previous → next message of the owner, same speaker."""
    w_temporal_same_speaker_backward: float = 0.45
    """next → previous message of the owner, same speaker."""
    w_temporal_any_forward: float = 0.70
    """previous → next message of the owner, different speakers."""
    w_temporal_any_backward: float = 0.35
    """next → previous message of the owner, different speakers."""
    w_same_topic: float = 0.55
    """message ↔ the latest earlier message sharing a topic."""
    w_speaker_related: float = 0.65
    """message ↔ the same speaker's latest message in another conversation."""
    w_supersedes: float = 0.60
    """newer record → the record it superseded (added)."""
    w_similar: float = 0.60
    """message ↔ a message of an earlier session nearest to it in meaning (added)."""
    similar_links: int = 3
    """Messages of earlier sessions a message is linked to by ``similar`` edges: those whose vectors have the
    highest cosine with its own (0: none; added)."""
    similar_window: int = 1024
    """Newest earlier messages of the owner searched for ``similar`` links (a bound on the fold's cost per
    message for a long-lived owner; added)."""
    entity_link_limit: int = 3
    """Most recent facts (events) sharing an entity that a new event (fact) is linked to."""

    # Domain packs (``adamem.packs``)
    relations: tuple[tuple[str, str, str, float], ...] = ()
    """(from type, to type, edge type, weight): a message mentioning one type is linked to the owner's newest
    earlier message mentioning the other (``graph.link_arrival``); a tenant's domain packs give them."""

    @property
    def half_life_ms(self) -> float:
        """The persona half-life in milliseconds."""
        return self.persona_half_life_days * DAY_MS


SEED_DEFAULT = MemoryParameters()
"""The seed document's values (the default)."""

PAPER_V2 = replace(SEED_DEFAULT)
"""The AdaMem paper's values; equal to the seed for every memory-layer parameter known today."""
