"""Parameters of retrieval (ARCHITECTURE.md section 4), as frozen dataclasses and enums.

Vary a preset by copying, never by mutating it::

    fast = dataclasses.replace(SEED_DEFAULT, top_k=5, max_hops=2)

``SEED_DEFAULT`` holds the seed document's values (fusion 0.70 / 0.15 / 0.10 / 0.05);
``PAPER_V2`` differs only in the fusion weights of the AdaMem paper (0.7 / 0.1 / 0.1 / 0.1).
Values this module adds to the design are marked "beyond the seed" and were tuned on the LoCoMo dev split
(``bench/locomo_quick.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum

from adamem.errors import ConfigError

__all__ = [
    "BUILT_IN_EDGES",
    "PAPER_V2",
    "SEED_DEFAULT",
    "BaseFusion",
    "CacheSettings",
    "Direction",
    "FusionWeights",
    "Layer",
    "RetrievalConfig",
    "Route",
    "SearchSource",
    "Subject",
]

BUILT_IN_EDGES = frozenset(
    {"mentions", "same_topic", "similar", "speaker_related", "supersedes", "supports", "temporal_next"}
)
"""The edge types the graph fold writes itself; any other type is a domain pack's relation."""


class Route(StrEnum):
    """Which retrieval path a question takes."""

    SEMANTIC = "semantic"  # base retrieval only
    GRAPH = "graph"  # base retrieval, then graph expansion from its top hits
    PERSONA = "persona"  # persona traits first, then base retrieval


class Direction(StrEnum):
    """Which way in event time graph expansion may walk from a seed."""

    ANY = "any"
    ANTECEDENT = "antecedent"  # causes come before effects: "why", "because", 为什么
    CONSEQUENT = "consequent"  # "what happened after", 后来


class Subject(StrEnum):
    """Whose memory a question is about."""

    USER = "user"  # the memory owner (role user)
    ASSISTANT = "assistant"  # the other party: the assistant, or the other person of a two-person chat
    BOTH = "both"
    AMBIGUOUS = "ambiguous"


class Layer(StrEnum):
    """Where an answer item comes from."""

    WORKING = "working"  # a message still in working memory
    ARCHIVE = "archive"  # an archived message
    EPISODIC = "episodic"  # an event, fact or attribute record
    PERSONA = "persona"  # a persona trait
    GRAPH = "graph"  # a message or record reached only through graph expansion


class BaseFusion(StrEnum):
    """How the vector and the BM25 ranking of base retrieval are combined."""

    RRF = "rrf"  # reciprocal-rank fusion
    MIX = "mix"  # weighted mix of the cosine and the max-normalised BM25 score


class SearchSource(StrEnum):
    """Where base retrieval finds its candidates."""

    SNAPSHOT = "snapshot"  # in-process over the owner's cached snapshot (exact, filtered, fastest)
    STORE = "store"  # the store's ``vector_search`` / ``text_search`` ports, over-fetched, then filtered


@dataclass(frozen=True, slots=True)
class FusionWeights:
    """Weights of the final score's components; each component lies in [0, 1]."""

    semantic: float
    graph: float
    temporal: float
    fact: float

    def __post_init__(self) -> None:
        weights = (self.semantic, self.graph, self.temporal, self.fact)
        if min(weights) < 0 or sum(weights) <= 0:
            raise ConfigError(f"fusion weights must be non-negative and not all zero, got {weights}")


@dataclass(frozen=True, slots=True)
class CacheSettings:
    """Sizes and thresholds of the service's caches (``retrieval.cache``), bounded by approximate memory."""

    hot_owners: int = 100_000
    """Owner snapshots (rows, indexes, graph) kept at most (0: load every row on every query)."""
    hot_bytes: int = 2 << 30
    """Approximate memory of the snapshots kept (``OwnerSnapshot.size``), least frequently used out first.
    A 100-message owner takes about 1.1 MB, a 10,000-message one about 90 MB."""
    hot_messages: int = 2000
    """Messages of an owner held in its snapshot, newest first (0: every message). A longer-lived owner's older
    messages stay in the store and are found through its vector and full-text indexes (``retrieval.archive``)."""
    cold_memo_rows: int = 4096
    """Cold messages an owner's snapshot keeps after reading them (least recently used out first)."""
    cold_index_bytes: int = 512 << 20
    """Approximate memory an owner's cold messages may take when held in process after its first question
    (``retrieval.cold``: about 2.4 KB a message with 384-dimension vectors, so up to ~220k cold messages);
    a larger cold part is searched through the store's indexes on every question (0: always)."""
    query_entries: int = 4096
    """Answers kept per owner in the semantic query cache (least frequently used evicted)."""
    query_bytes: int = 256 << 20
    """Approximate memory of every owner's cached answers together."""
    query_cosine: float = 0.92
    """Cosine between question vectors at or above which a cached answer may be reused."""
    query_same_terms: bool = True
    """Also require the same content words (beyond the seed: e5 puts 我住在哪里 / 我妹妹住在哪里 at 0.93)."""
    query_cache: bool = True
    """Switch the semantic query cache off (benchmarks, debugging)."""
    question_vectors: int = 8192
    """Question vectors memoised by embedder and text (0: embed every question)."""
    owners: int = 1_000_000
    """Owners whose change token, version and query facts are remembered (a few hundred bytes each)."""


@dataclass(frozen=True, slots=True)
class RetrievalConfig:
    """Every tunable number of retrieval, with the seed's default."""

    name: str = "seed-default"
    """Preset name, reported with every answer."""
    top_k: int = 10
    """Items returned when the caller does not say."""

    # Base retrieval
    search: SearchSource = SearchSource.SNAPSHOT
    """Where candidates come from (beyond the seed: the snapshot is loaded anyway for the graph; see base.py)."""
    fetch_k: int = 40
    """Rows fetched per table and per search (vector, BM25) before fusion (beyond the seed)."""
    context_words: bool = True
    """A question the graph route does not take scores a message by BM25 over its words and the words of the owner's
    message before it in its session (its ``context``): an answer is often the reply to the turn that asked it, in
    other words. A "when" or "why" looks for a statement by its own words (a dated one, a cause told on another
    day), and a time or causal question scores the message alone (beyond the seed; measured on LoCoMo and the
    scenario suite)."""
    base_fusion: BaseFusion = BaseFusion.RRF
    """How vector and BM25 rankings are combined (beyond the seed; measured on LoCoMo)."""
    rrf_k: int = 30
    """Reciprocal-rank-fusion constant (beyond the seed): a sharp fusion, so the few rows both rankings put first
    lead. 30 was chosen leave-conversations-out in every fold on LoCoMo (over 60), together with ``broad_rrf_k``."""
    broad_rrf_k: int = 60
    """The constant for a question asking for a set of things (``RoutePlan.broad``: "what activities ...",
    "how many ...", 哪些): a flatter fusion, whose evidence is spread over sessions (beyond the seed: on LoCoMo
    rrf 30 alone gains 1.1 points on single-hop and loses 2.6 on multi-hop; 0: ``rrf_k`` for every question)."""
    mix_vector_weight: float = 0.6
    """Share of the cosine in ``BaseFusion.MIX`` (beyond the seed)."""
    as_of_overfetch: int = 4
    """Fetch multiplier for as-of queries, whose hits are filtered by time afterwards (beyond the seed)."""

    # Whose memory
    speaker_boost: float = 0.3
    """Added to the semantic score of rows of the speaker(s) a question is about (beyond the seed)."""
    ambiguous_share: float = 0.5
    """Share of top-k reserved for each side when whose-memory is ambiguous (beyond the seed)."""

    # Persona-first route
    persona_first: int = 3
    """Persona traits put first on the persona route (beyond the seed)."""
    persona_first_min: float = 0.35
    """Semantic score a trait needs to be put first (beyond the seed)."""
    persona_evidence: int = 1
    """Evidence messages shown per persona trait, most similar to the question first (beyond the seed)."""
    summary_evidence: int = 3
    """Source messages shown per summary record (compression), most similar to the question first; 0: all
    (beyond the seed). The record keeps them all: a summary of 40 runs would otherwise fill an answer's evidence."""

    # Answer style (``projections.folds.style``): an owner's feedback on earlier answers
    style_weight: float = 0.25
    """An owner's answer-style preference p in (−1, 1) scales a record's or trait's fused score by
    ``1 + style_weight * p`` and a message's by ``1 - style_weight * p`` (beyond the seed)."""
    style_min_feedback: int = 2
    """Feedback events an owner's answer style needs before it ranks their answers (beyond the seed)."""

    # Graph expansion
    graph_seeds: int = 5
    """Top base hits used as seeds."""
    min_node_confidence: float = 0.6
    """Nodes with a lower confidence are dropped."""
    hop_decay: float = 0.85
    """Score factor per hop."""
    max_hops: int = 3
    """Longest path from a seed."""
    max_parallel_seeds: int = 4
    """Seeds expanded at the same time, in threads (1: one after the other, in the query's own thread: the
    same answers). Expansion is pure Python: under the GIL threads cannot run it side by side, and on a
    10k-message owner 4 threads cost about 2 ms of CPU per query. So a GIL-bound interpreter expands in
    the query's own thread whatever this says (``parallel_expansion``); a free-threaded one uses it."""
    edge_priority: tuple[str, ...] = ("supports", "mentions", "temporal_next", "similar")
    """Edge types walked, in priority order (expansion order and tie-break: earlier types first)."""
    walk_other_edges: bool = False
    """Also walk edge types not in ``edge_priority`` (speaker_related, same_topic, supersedes), after them
    (beyond the seed)."""
    walk_relation_edges: bool = True
    """Walk the typed relation edges of domain packs (``adamem.packs``: ``indicates``, ``treated_with`` …),
    every edge type the folds do not write themselves, with the priority of ``supports`` (beyond the seed)."""
    min_edge_weight: float = 0.6
    """Edges with a lower weight are pruned."""
    similar_hops: int = 1
    """Hops of a path that may walk ``similar`` edges, counted from the seed (1: from a seed only; 0: never).
    Walked further, a message many others are nearest to passes on to all of them: on LoCoMo, 2 and 3 hops give
    the same R@10 as 1 at 1.5 and 2.6 times its ranking CPU."""
    walk_past_similar: bool = False
    """Walk on from a node a ``similar`` edge reached (off: it ends the path). On LoCoMo walking on gives the same
    R@10 for a third more ranking CPU a question (off: as much as without ``similar`` edges, within the noise)."""
    hub_fanout: int = 30
    """Messages a topic hub passes on to (beyond the seed; 30 chosen leave-conversations-out in four folds of five,
    40 in the fifth: against 10, an entity shared across sessions reaches the sessions of a multi-hop question)."""
    hub_by_relevance: bool = True
    """Off the graph route, hubs pass on to their messages most similar to the question; on it (time and
    cause questions), and always when off, to those nearest in time to the entering node (beyond the seed)."""
    graph_relevance: float = 0.0
    """Share of an expanded item's graph score that depends on its own semantic score: ``graph × (1 − r + r ×
    semantic)``, so a node reached from a good seed but unrelated to the question gains less (0: the path
    alone counts; never on "why" questions, whose causes share no words with them; beyond the seed)."""
    seed_self_graph: bool = True
    """Off the graph route, a seed's graph score is its own seed score (a seed reached at hop 0), not what the
    other seeds pass on to it: expansion adds the rows the base hits lead to, and does not re-rank the base hits
    by how many of them share a topic (three messages about a job outranked the one about running for a
    fitness question; beyond the seed)."""
    dialogue_context: float = 0.9
    """With graph expansion, a seed message's neighbours in its session (along its ``temporal_next`` arcs, same
    conversation, no session gap between) score at least ``dialogue_context ** d`` of the seed's semantic score
    at d turns away (``dialogue_turns``): the answer is often a turn next to the one that shares the question's
    words (on LoCoMo 68 of the 90 single-hop evidence turns missed at rank 10 lie within two turns of a top-10
    hit). In a two-person chat the turn two away is the same speaker going on. Not on "why" questions (their
    cause is in an earlier session: lifting the decision's neighbours pushed it out of the top 3); a superseded
    seed or neighbour is not lifted where superseded rows go last (0: off; beyond the seed). 0.7 and one turn until
    2026-12-02 night; at 1.0 a lifted turn ties its seed and temporal questions lose five points."""
    dialogue_turns: int = 2
    """How many turns away from a seed ``dialogue_context`` reaches (0: off; beyond the seed)."""
    narrow_dialogue_context: float = 0.7
    """The share for a question asking for a set (``RoutePlan.broad``), whose evidence is spread over sessions,
    and for a time question (the graph route), where graph and temporal scores are added to the lifted turn:
    with 0.9 the few seeds' sessions fill a broad question's top 10 (LoCoMo multi-hop −7 points), and a turn
    beside a time question's evidence takes rank 1 (temporal MRR@10 68 → 61). 0.7² two turns away lifts
    nothing that decides the top 10 (0: off for them; beyond the seed)."""
    graph_all_routes: bool = True
    """Also expand (with weight ``fusion.graph``) on the semantic and persona routes (beyond the seed)."""

    # Fusion
    fusion: FusionWeights = field(default_factory=lambda: FusionWeights(0.70, 0.15, 0.10, 0.05))
    """Final score weights (seed: 0.70 semantic, 0.15 graph, 0.10 temporal, 0.05 fact support)."""
    current_first: bool = True
    """Off the time/cause route, rank messages whose records were all superseded (by then) last (beyond the seed)."""
    newest_first: int = 5
    """On a question about the present ("now", 现在) naming no time, the newest user message stating a change
    (an extracted event) among the first this many items goes ahead of the older ones, also while it is
    still in working memory and no conflict slot knows of it yet (0: off; beyond the seed)."""
    newest_first_shown: bool = True
    """Count ``newest_first``'s window in items the answer shows: a record whose evidence a higher item already
    shows is dropped from the answer (``dedupe_evidence``), so it does not use up the window. Counted in rows, an
    old job's message and its two records fill three of five places and "Started at Siemens on Monday" (an
    extracted event) comes sixth (beyond the seed; LoCoMo R@10 is the same with it in every conversation)."""
    causal_order: bool = True
    """On "why" questions, rank items later than the event asked about (the best base hit) last (beyond the seed)."""
    dated_when: float = 1.0
    """Temporal score, on a time question naming no period ("when did ...", 什么时候), of an item that reports a
    resolved time besides when it was said (an extracted event's ``when``, a record's ``event_time``): the answer
    to "when" is dated by its evidence; without it such questions have no temporal score at all (0: off; beyond
    the seed: LoCoMo R@10 1–4 +0.6, up in 4 of 5 conversations and flat in the fifth, temporal +1.6; 1.0 is
    what a match with a question's period scores, 0.5 and 0.3 were measured as well, bench/results/notes.md)."""
    recency_half_life_days: float = 30.0
    """Half-life of the recency score used when a question names no time (beyond the seed)."""
    recency_topic_margin: float = 0.05
    """Topical agreement before recency: an item's recency counts in proportion to how close its cosine is to
    the best candidate's, ``1 − (best − cosine) / margin`` (clipped to [0, 1]), so a newer row about another
    topic does not outrank the older row that answers the question (0: recency alone; beyond the seed)."""
    fact_support_cap: int = 3
    """Supporting records/evidence at which fact support reaches 1 (beyond the seed)."""
    dedupe_evidence: bool = True
    """Drop an item whose evidence messages are all shown by higher-ranked items (beyond the seed)."""

    cache: CacheSettings = field(default_factory=CacheSettings)
    """Cache sizes and thresholds."""

    def __post_init__(self) -> None:
        if self.top_k < 1 or self.fetch_k < 1 or self.graph_seeds < 0 or self.max_hops < 0:
            raise ConfigError(f"retrieval preset {self.name!r}: top_k, fetch_k must be >= 1, seeds and hops >= 0")
        if not 0 < self.hop_decay <= 1:
            raise ConfigError(f"retrieval preset {self.name!r}: hop_decay must be in (0, 1], got {self.hop_decay}")
        if self.max_parallel_seeds < 1:
            raise ConfigError(f"retrieval preset {self.name!r}: max_parallel_seeds must be >= 1")

    def edge_rank(self, edge_type: str) -> int:
        """Priority of an edge type: 0 is expanded first."""
        if edge_type in self.edge_priority:
            return self.edge_priority.index(edge_type)
        if self.walk_relation_edges and edge_type not in BUILT_IN_EDGES:
            return self.edge_priority.index("supports") if "supports" in self.edge_priority else 0
        return len(self.edge_priority)


SEED_DEFAULT = RetrievalConfig()
"""The seed document's values (the default)."""

PAPER_V2 = replace(SEED_DEFAULT, name="paper-v2", fusion=FusionWeights(0.7, 0.1, 0.1, 0.1))
"""The AdaMem paper's fusion weights (0.7 semantic / 0.1 graph / 0.1 temporal / 0.1 fact support)."""
