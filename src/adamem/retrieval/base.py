"""Base retrieval: vector and BM25 search over persona traits, episodic records and archived messages.

Candidates are the ``fetch_k`` best rows per table and per search (vector, BM25) that the view can
see (active rows now; the rows valid then for as-of queries) and an explicit whose-memory
restriction allows. Working memory is part of the archive (every message is archived), so it is
searched with it. Two sources give the same candidates for the live view:

- ``SearchSource.SNAPSHOT`` (default): in-process over the owner's cached snapshot — one matrix
  product per table and an inverted index; exact, filtered before the cut, no store round trip;
- ``SearchSource.STORE``: the store's ``vector_search`` / ``text_search`` ports, over-fetched
  (``as_of_overfetch`` for as-of views) and filtered afterwards.

The semantic score is computed here, the same way for every row, whichever store holds it: cosine
from the stored float32 vector, BM25 from the owner-scoped index (LanceDB's own BM25 uses
shard-wide statistics, so its scores only choose candidates). Then:

- ``BaseFusion.RRF``: reciprocal-rank fusion of the cosine ranking (all tables together: one
  embedder, comparable cosines) and the BM25 ranking (BM25 scaled by each table's best score),
  divided by its maximum ``2 / (rrf_k + 1)``; an unranked modality contributes 0;
- ``BaseFusion.MIX``: ``mix_vector_weight · cosine + (1 − mix_vector_weight) · scaled BM25``.

Rows found later by graph expansion are scored by the same ``SemanticScorer``, ranked as if they
had been inserted into the base lists (the base candidates keep their ranks). Whose-memory boosts
then move the score toward 1: ``(1 − b)·s + b`` for rows of the speakers the question is about.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from adamem.projections.folds.rows import EpisodicRow, MessageRow, PersonaRow
from adamem.projections.folds.style import STYLE_KIND
from adamem.projections.store.base import MemoryStore
from adamem.retrieval.archive import ColdFound
from adamem.retrieval.cold import ColdIndex
from adamem.retrieval.config import BaseFusion, RetrievalConfig, SearchSource, Subject
from adamem.retrieval.index import Beside, TextIndex, Vector, best_first
from adamem.retrieval.snapshot import MemoryRow, View
from adamem.retrieval.whose import WhoseDecision
from adamem.text import tokenize

__all__ = [
    "QUESTION_WORDS_ZH",
    "TABLES",
    "Candidate",
    "SemanticScorer",
    "allowed",
    "base_candidates",
    "query_terms",
    "side_of",
    "speaker_of",
]

TABLES: tuple[str, ...] = ("persona", "episodic", "messages")
"""Tables base retrieval searches."""

QUESTION_WORDS_ZH = frozenset(
    (
        "什么",
        "为什么",
        "为何",
        "怎么",
        "怎么样",
        "怎样",
        "如何",
        "哪",
        "哪里",
        "哪儿",
        "哪个",
        "哪些",
        "谁",
        "几",
        "多少",
        "是不是",
        "有没有",
        "什么时候",
        "时候",
        "吗",
        "呢",
        "吧",
    )
)
"""Chinese interrogatives dropped from BM25 query terms (English ones are stop words of ``adamem.text`` already)."""


def query_terms(question: str) -> list[str]:
    """BM25 terms of a question: its search tokens without interrogatives."""
    return [t for t in tokenize(question) if t not in QUESTION_WORDS_ZH]


@dataclass(frozen=True, slots=True)
class Candidate:
    """A row that may answer the question, with its table and semantic score in [0, 1]."""

    table: str
    row: MemoryRow
    semantic: float
    cosine: float
    bm25: float
    origin: str = "base"  # base | graph (found only by graph expansion)


def speaker_of(row: MemoryRow, user_names: Sequence[str]) -> tuple[str, str]:
    """(speaker name, role) of a row; persona traits describe the owner (the user)."""
    if isinstance(row, MessageRow):
        return row.speaker, row.role
    if isinstance(row, EpisodicRow):
        return row.speaker, row.speaker_role
    return (user_names[0] if user_names else ""), "user"


def side_of(role: str) -> Subject:
    """The whose-memory side of a speaker role: the user, or the other party."""
    return Subject.USER if role == "user" else Subject.ASSISTANT


def allowed(row: MemoryRow, whose: WhoseDecision, user_names: Sequence[str]) -> bool:
    """Whether an explicit whose-memory restriction lets this row through."""
    if not whose.restrict or whose.subject not in (Subject.USER, Subject.ASSISTANT):
        return True
    return side_of(speaker_of(row, user_names)[1]) is whose.subject


class SemanticScorer:
    """Scores any row of one query consistently: cosine, scaled BM25, and their fusion."""

    def __init__(
        self,
        view: View,
        question: str,
        query_vector: Vector,
        config: RetrievalConfig,
        whose: WhoseDecision,
        expansion: Mapping[str, float] | None = None,
        *,
        context: bool = False,
    ) -> None:
        """``expansion``: weighted terms added to the question's own (a second round's cues, ``feedback``).
        ``context``: messages are scored by their words and their ``context`` (the owner's message before each)."""
        self.view = view
        self.context = context
        self._history: dict[str, bool] = {}  # message id -> whether the message before it is history here
        self.config = config
        self.whose = whose
        norm = float(np.linalg.norm(query_vector))
        self.q: Vector = query_vector / norm if norm else query_vector
        self._q32 = self.q.astype(np.float32)
        self.terms = query_terms(question)
        self.expansion = dict(expansion or {})
        self.user_names = view.snapshot.user_names
        self._cosines: dict[str, Vector] = {}
        self._bm25: dict[tuple[str, bool], Vector] = {}  # (table, with the messages' context) -> every row's BM25
        self._bm25_max: dict[str, float] = {}
        self._bm25_outside: dict[tuple[bool, str], float] = {}  # cold messages of a tiered owner, by id
        self._outside: dict[bool, Callable[[MemoryRow], float]] = {}  # their scorers, for this question's terms
        self._cold: dict[bool, Beside | None] = {}  # the cold part's statistics, once looked for
        self.cold_vectors: dict[str, npt.NDArray[np.float32]] = {}  # the cold messages this query read
        self.cold_cosines: tuple[ColdIndex, npt.NDArray[np.float32]] | None = None  # with every cold message
        self._read_cosines: dict[str, float] = {}
        self._cos_desc: list[float] = []  # negated, ascending: base cosines best first
        self._bm_desc: list[float] = []

    def cosines(self, table: str) -> Vector:
        """Cosine of the question with every row of a table (in the vector index's order)."""
        found = self._cosines.get(table)
        if found is None:
            found = self._cosines[table] = self.view.snapshot.vector_index(table).cosines(self.q)
        return found

    def cosine(self, table: str, row: MemoryRow) -> float:
        """Cosine similarity of the question and the row's vector (0 without a vector)."""
        snap = self.view.snapshot
        pos = snap.vector_index(table).position.get(row.id)
        if pos is not None:
            return float(self.cosines(table)[pos])
        if snap.archive is not None and table == "messages" and row.id not in self.cold_vectors:
            v = snap.archive.vector(row.id)
            if v is not None:
                self.cold_vectors[row.id] = v
        found = self.read_cosine(row.id) if table == "messages" else None
        return found if found is not None else 0.0

    def read_cosine(self, message_id: str) -> float | None:
        """Cosine of the question with a cold message this query read (None for one it did not): from the product
        over the cold part when it was searched in process (a matrix product, as the hot messages' cosines are)."""
        found = self._read_cosines.get(message_id)
        v = self.cold_vectors.get(message_id)
        if found is not None or v is None or v.shape != self._q32.shape:
            return found
        at = None
        if self.cold_cosines is not None:
            index, cosines = self.cold_cosines
            at = index.positions((message_id,)).get(message_id)
        found = self._read_cosines[message_id] = float(cosines[at]) if at is not None else float(v @ self._q32)
        return found

    def text_index(self, table: str, *, plain: bool = False) -> TextIndex:
        """The BM25 index this question scores a table's rows by (the messages' by their ``context`` too, or not;
        ``plain``: by their own words)."""
        return self.view.snapshot.text_index(table, context=self._wide(table, plain))

    def _wide(self, table: str, plain: bool = False) -> bool:
        """Whether rows of ``table`` are scored with their ``context``."""
        return self.context and not plain and table == "messages"

    def bm25_all(self, table: str, *, plain: bool = False) -> Vector:
        """Raw BM25 of the question against every row of a table (in the text index's order)."""
        key = (table, self._wide(table, plain))
        found = self._bm25.get(key)
        if found is None:
            index = self.text_index(table, plain=plain)
            found = self._bm25[key] = index.scores(self.terms, self.expansion, self._beside(table, key[1]))
        return found

    def _beside(self, table: str, wide: bool) -> Beside | None:
        """BM25 statistics of a tiered owner's cold messages once its first answer is ready (the cold part read into
        the process, or its words counted): hot and cold messages are then scored against the statistics of every
        message, as when the owner is held whole (``wide``: of the messages with their ``context``)."""
        if table != "messages":
            return None
        if wide not in self._cold:
            archive = self.view.snapshot.archive
            self._cold[wide] = archive.statistics(context=wide) if archive is not None else None
        return self._cold[wide]

    def bm25_raw(self, table: str, row: MemoryRow) -> float:
        """Raw BM25 of one row (of a message whose ``context`` is history where history goes last: by its own words)."""
        plain = self._wide(table) and self.config.current_first and self._history_before(row)
        return self.indexed_bm25(table, row, plain=plain)

    def indexed_bm25(self, table: str, row: MemoryRow, *, plain: bool = False) -> float:
        """Raw BM25 of one row in the index this question scores its table by (``bm25_all``'s, a cold message's as
        if that index held it): the score base retrieval chooses candidates by (``plain``: the messages' index by
        their own words)."""
        wide = self._wide(table, plain)
        index = self.text_index(table, plain=plain)
        pos = index.position.get(row.id)
        if pos is not None:
            return float(self.bm25_all(table, plain=plain)[pos])
        if self.view.snapshot.archive is not None and table == "messages":
            found = self._bm25_outside.get((wide, row.id))
            if found is None:
                outside = self._outside.get(wide)
                if outside is None:
                    outside = self._outside[wide] = index.outside(self.terms, self.expansion, self._beside(table, wide))
                found = self._bm25_outside[(wide, row.id)] = outside(row)
            return found
        return 0.0

    def _history_before(self, row: MemoryRow) -> bool:
        """Whether the message before this one (its ``context``) is history in the view: "Beijing is lovely in
        spring!" after "I live in Beijing" is not found by "live" after a move."""
        if not isinstance(row, MessageRow):
            return False
        found = self._history.get(row.id)
        if found is None:
            before = self.view.snapshot.message_before(row)
            found = self._history[row.id] = before is not None and self.view.stale_id(before)
        return found

    def bm25(self, table: str, row: MemoryRow) -> float:
        """BM25 scaled by the table's best base candidate (0..1)."""
        top = self._bm25_max.get(table, 0.0)
        return min(1.0, self.bm25_raw(table, row) / top) if top > 0 else 0.0

    def calibrate(self, rows: Sequence[tuple[str, MemoryRow]]) -> None:
        """Fix the BM25 scale and the base rankings from the base candidates."""
        for table, row in rows:
            self._bm25_max[table] = max(self._bm25_max.get(table, 0.0), self.bm25_raw(table, row))
        self._cos_desc = sorted(-self.cosine(t, r) for t, r in rows)
        self._bm_desc = sorted(-b for t, r in rows if (b := self.bm25(t, r)) > 0)

    def _boost(self, row: MemoryRow) -> float:
        whose, b = self.whose, self.config.speaker_boost
        name, role = speaker_of(row, self.user_names)
        if whose.speakers:
            return b if name in whose.speakers else 0.0
        if whose.subject in (Subject.USER, Subject.ASSISTANT) and not whose.restrict:
            return b if side_of(role) is whose.subject else 0.0
        return 0.0

    def candidate(self, table: str, row: MemoryRow, origin: str = "base") -> Candidate:
        """The row scored as a candidate (``origin`` says how it was found)."""
        cos, bm = self.cosine(table, row), self.bm25(table, row)
        cfg = self.config
        if cfg.base_fusion is BaseFusion.RRF:
            k = cfg.rrf_k
            s = 1.0 / (k + bisect.bisect_left(self._cos_desc, -cos) + 1)
            if bm > 0:
                s += 1.0 / (k + bisect.bisect_left(self._bm_desc, -bm) + 1)
            semantic = s * (k + 1) / 2.0
        else:
            w = cfg.mix_vector_weight
            semantic = w * max(0.0, cos) + (1 - w) * bm
        boost = self._boost(row)
        semantic = (1 - boost) * semantic + boost
        return Candidate(table, row, min(1.0, max(0.0, semantic)), cos, bm, origin)

    def usable(self, row: MemoryRow | None) -> bool:
        """Whether a row is visible in the view and allowed by whose memory."""
        return row is not None and self.view.visible(row) and allowed(row, self.whose, self.user_names)


def _best_usable(
    scorer: SemanticScorer,
    table: str,
    scores: Vector,
    ids: Sequence[str],
    k: int,
    at: npt.NDArray[np.intp] | None = None,
) -> list[MemoryRow]:
    """The ``k`` best-scoring rows that the view and whose memory allow, best first.

    Rows are taken in the order of a stable sort of the scores, best first (ties by position),
    looking at the best ``4k`` first and widening only when too few of them are usable. ``at``:
    the position in ``ids`` of each score (default: the same position).
    """
    snap, out = scorer.view.snapshot, []
    seen, want = 0, 4 * k
    while True:
        order = best_first(scores, want)
        for pos in order[seen:]:
            row = snap.row(table, ids[pos if at is None else at[pos]])
            if scorer.usable(row):
                assert row is not None
                out.append(row)
                if len(out) >= k:
                    return out
        if len(order) >= len(scores):
            return out
        seen, want = len(order), want * 4


def _from_snapshot(scorer: SemanticScorer, table: str, k: int, cold: _ColdFound | None = None) -> list[MemoryRow]:
    """The ``k`` best rows of a table by vector and by words; ``cold``: the cold messages' search under way, for the
    messages table of a tiered owner (the ``k`` best of hot and cold messages together, as of one index over every
    message: by score, ties by id, as positions in an index follow ids)."""
    snap = scorer.view.snapshot
    nearest = _best_usable(scorer, table, scorer.cosines(table), snap.vector_index(table).ids, k)
    matched: list[MemoryRow] = []
    if scorer.terms or scorer.expansion:
        bm = scorer.bm25_all(table)
        matching = np.flatnonzero(bm > 0)  # the ids of the rows looked at only (of thousands matching)
        text_ids = scorer.text_index(table).ids
        matched = _best_usable(scorer, table, bm[matching], text_ids, k, at=matching)
    if cold is None:
        return nearest + matched
    cold_nearest, cold_matched = _archive_found(scorer, cold, k)
    nearest = sorted(nearest + cold_nearest, key=lambda r: (-scorer.cosine(table, r), r.id))[:k]
    worded = [(b, r.id, r) for r in cold_matched if (b := scorer.indexed_bm25(table, r)) > 0]
    worded += [(scorer.indexed_bm25(table, r), r.id, r) for r in matched]
    return nearest + [r for _, _, r in sorted(worded, key=lambda w: (-w[0], w[1]))[:k]]


_ColdFound = Callable[[], ColdFound]


def _begin_archive(scorer: SemanticScorer, k: int) -> _ColdFound:
    """The search of a tiered owner's cold messages (``retrieval.archive``) begun: in process, its vector product
    runs beside the other tables' searches."""
    archive = scorer.view.snapshot.archive
    assert archive is not None
    words = [*scorer.terms, *sorted(scorer.expansion)]
    hot = scorer.text_index("messages").statistics
    text = " ".join(words)
    return archive.begin_search(scorer.q.tolist(), text, k, context=scorer.context, beside=hot, terms=words)


def _archive_found(scorer: SemanticScorer, cold: _ColdFound, k: int) -> tuple[list[MemoryRow], list[MemoryRow]]:
    """The ``k`` nearest cold messages by vector and the ``k`` best by words that the view and whose memory allow,
    their vectors kept for the scorer: searched again, four times as deep each time, while the rows not allowed
    leave fewer than ``k`` of a search that found all it was asked for."""
    found, asked = cold(), k
    while True:
        scorer.cold_vectors.update((r.id, v) for r, v in found.rows if v is not None)
        nearest: list[MemoryRow] = [r for r, _ in found.nearest if scorer.usable(r)]
        matched: list[MemoryRow] = [r for r, _ in found.matched if scorer.usable(r)]
        deeper = len(nearest) < k <= asked <= len(found.nearest) or len(matched) < k <= asked <= len(found.matched)
        if not deeper:
            break
        asked *= 4
        found = _begin_archive(scorer, asked)()
    if found.index is not None and found.cosines is not None:
        scorer.cold_cosines = (found.index, found.cosines)
    return nearest[:k], matched[:k]


def _from_store(store: MemoryStore, scorer: SemanticScorer, question: str, table: str, k: int) -> list[MemoryRow]:
    snap, user = scorer.view.snapshot, scorer.view.snapshot.owner_id
    hits = store.vector_search(table, user, scorer.q.tolist(), k)
    if scorer.terms:
        hits = hits + store.text_search(table, user, question, k, context=scorer.context and table == "messages")
    rows = [snap.row(table, h.row.id) for h in hits]  # the snapshot's version: one consistent state per query
    return [r for r in rows if r is not None and scorer.usable(r)]


def base_candidates(store: MemoryStore, scorer: SemanticScorer, question: str) -> list[Candidate]:
    """Search every table, keep what the view and whose memory allow, score, best first."""
    view, cfg = scorer.view, scorer.config
    found: dict[tuple[str, str], tuple[str, MemoryRow]] = {}
    cold = None
    if cfg.search is not SearchSource.STORE and view.snapshot.archive is not None:
        cold = _begin_archive(scorer, cfg.fetch_k)  # first: the other tables are searched beside its product
    for table in TABLES:
        if cfg.search is SearchSource.STORE:
            k = cfg.fetch_k * (1 if view.live else cfg.as_of_overfetch)
            rows = _from_store(store, scorer, question, table, k)
        else:
            rows = _from_snapshot(scorer, table, cfg.fetch_k, cold if table == "messages" else None)
        for row in rows:
            if isinstance(row, PersonaRow) and row.kind == STYLE_KIND:
                continue  # how the owner likes answers is not itself an answer
            found.setdefault((table, row.id), (table, row))
    rows_found = [found[key] for key in sorted(found)]
    scorer.calibrate(rows_found)
    out = [scorer.candidate(t, r) for t, r in rows_found]
    out.sort(key=lambda c: (-c.semantic, c.table, c.row.id))
    return out
