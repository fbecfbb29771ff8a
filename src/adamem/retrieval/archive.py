"""The cold part of a long-lived owner's archive: messages older than its hot window.

A query process holds an owner with more than ``CacheSettings.hot_messages`` messages as its
newest ``hot_messages`` messages plus every record, trait and graph node, and its edges as columns
(``OwnerSnapshot``, ``retrieval.edges``). The older messages are cold. ``ColdArchive`` finds them
for the owner's first question with the store's own vector and full-text indexes (``below_seq``:
the cold part only), then reads the cold part's columns once, in the background once that answer is ready
(``retrieval.cold.ColdIndex``: unit vectors as one float32 matrix, a BM25 index of the stored
tokens, the other fields as Arrow), when they fit ``CacheSettings.cold_index_bytes``; every later
question waits for that read and searches the cold part in process, exactly, with no store read.
A cold part larger than that stays in the store and every question reads it through its indexes;
its words are counted instead, in the same background read (``retrieval.cold.ColdCounts``: the
stored tokens column only, about 100 bytes a distinct word).
What the archive read either way is kept in a bounded memo: rows without their vectors, and each
vector once, normalised, as float32. Whether a cold message exists (all the current view needs of
a record's sources or a trait's evidence) is answered from the cold part's ids, read once on first
need and held as a sorted array of their hashes: 8 bytes a message.

Cold candidates are scored as hot ones are (``SemanticScorer``): the cosine from the stored vector,
BM25 from the words of the message (speaker, text and extraction: the store's ``tokens``). The
first question takes the hot window's BM25 statistics (``TextIndex.score_outside``); every later
one waits for the read or count and takes the statistics of hot and cold messages together
(``ColdArchive.statistics``), so every message's BM25 is the one the owner held whole gives it.
Base retrieval keeps the ``k`` best of hot and cold messages together, by cosine and by BM25, of those the view and
whose memory allow (``retrieval.base``): the ``k`` best of one index over every message. Searched in process, the
cold part ranks its words with the hot window's statistics beside its own, and its product gives the cosine of
every cold message (graph expansion's hub relevance), so that after the first answer a tiered owner's candidates
are the whole owner's, up to the last bits of float32 products. Through the store, what its searches do not
return (ranked by the store's own statistics) is not a candidate: that, and the first question's statistics,
are where a tiered owner's answers may differ from an owner held whole (measured by ``adamem bench scale``,
``bench/locomo_variants.py`` and ``bench/results/notes.md``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import dataclasses
import functools
import itertools
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from adamem.projections.folds.rows import MessageRow
from adamem.projections.store.base import ArchiveSplit, MemoryStore
from adamem.retrieval.cold import ColdCounts, ColdIndex
from adamem.retrieval.index import Beside

__all__ = ["SEARCHES", "ColdArchive", "ColdFound", "Vector"]

Vector = npt.NDArray[np.float32]

log = logging.getLogger(__name__)

_SEARCHES = ThreadPoolExecutor(4, thread_name_prefix="adamem-cold")
"""Full-text searches of cold messages, run beside the vector search of the same query."""
_READS = ThreadPoolExecutor(1, thread_name_prefix="adamem-cold-index")
"""Reads of cold parts into ``ColdIndex``es, one at a time, beside the questions."""
_ROW_BYTES = 2800
"""Approximate resident bytes of a message row without its vector (``snapshot._ROW_BYTES``)."""
INDEX_ROW_BYTES = 2400
"""Approximate resident bytes a cold message takes in a ``ColdIndex`` (a 384-float vector, its columns, postings by
its words and with its ``context``, and id), to tell before reading whether a cold part fits
``CacheSettings.cold_index_bytes``."""
INDEX_READ_ROWS = 2048
"""Cold messages read from the store at a time while a ``ColdIndex`` is made."""
COUNT_READ_ROWS = 32_768
"""Cold messages whose tokens are read from the store at a time while their words are counted (``ColdCounts``)."""


def _libc_trim() -> Callable[[int], object] | None:
    try:
        trim: Callable[[int], object] = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None
    return trim


_TRIM = _libc_trim()


def _release() -> None:
    """Hand the memory a piece's read freed back to the system (Arrow's pool, and glibc's heaps)."""
    pa.default_memory_pool().release_unused()
    if _TRIM is not None:
        _TRIM(0)


class _Searches:
    """Cold searches of the process: answered in process (a held cold part) or through the store (for metrics)."""

    def __init__(self) -> None:
        self.in_process = 0
        self.in_store = 0
        self._lock = threading.Lock()

    def count(self, in_process: bool) -> None:
        with self._lock:
            if in_process:
                self.in_process += 1
            else:
                self.in_store += 1


SEARCHES = _Searches()


class _Closed(Exception):
    """The archive was closed while its cold part was being read."""


@dataclasses.dataclass(frozen=True, slots=True)
class ColdFound:
    """What one search of the cold part found, each message with its unit vector: the nearest by vector and the
    best by words, each best first; searched in process, the ``ColdIndex`` and the cosine with each of its rows."""

    nearest: list[tuple[MessageRow, Vector | None]]
    matched: list[tuple[MessageRow, Vector | None]]
    index: ColdIndex | None = None
    cosines: Vector | None = None

    @property
    def rows(self) -> list[tuple[MessageRow, Vector | None]]:
        """The messages found, each once: the nearest first."""
        return list({row.id: (row, v) for row, v in self.nearest + self.matched}.values())


class ColdArchive:
    """One owner's cold messages as a query process sees them: a split point, the store, and a memo."""

    def __init__(
        self,
        store: MemoryStore,
        owner_id: str,
        split: ArchiveSplit,
        memo_rows: int = 4096,
        index_bytes: int = 0,
        *,
        context: bool = True,
    ) -> None:
        """``index_bytes``: the most a ``ColdIndex`` of this cold part may take (0: never read one). ``context``:
        whether questions score the messages with their ``context`` (``RetrievalConfig.context_words``); without,
        the cold part's index and counts are made of the messages' own words only."""
        self.store = store
        self.context = context
        self.owner_id = owner_id
        self.split = split
        self._memo_rows = max(1, memo_rows)
        self.indexed = 0 < split.cold_messages * INDEX_ROW_BYTES <= index_bytes
        self._index: Future[ColdIndex | None] | None = None
        self._counts: Future[ColdCounts | None] | None = None  # a cold part not held: its BM25 statistics
        self._closed = False
        self._rows: OrderedDict[str, MessageRow] = OrderedDict()  # least recently used first
        self._vectors: dict[str, npt.NDArray[np.float32]] = {}
        self._absent: set[str] = set()
        self._id_hashes: npt.NDArray[np.int64] | None = None
        self._lock = threading.Lock()
        self.reads = 0  # store reads made (searches and fetches), for tests and metrics

    @property
    def below_seq(self) -> int:
        """Messages with a smaller ``seq`` are cold."""
        return self.split.cold_below_seq

    def holds(self, row: MessageRow) -> bool:
        """Whether a message belongs to the cold part."""
        return row.seq < self.split.cold_below_seq

    @property
    def size(self) -> int:
        """Approximate resident bytes of the memo, of the cold index held or to be read, and of the words counted."""
        ids = self._id_hashes.nbytes if self._id_hashes is not None else 0
        index = self.split.cold_messages * INDEX_ROW_BYTES if self.indexed else 0
        counting = self._counts
        counts = counting.result() if counting is not None and counting.done() and not counting.cancelled() else None
        index += counts.nbytes if counts is not None else 0
        return index + ids + len(self._rows) * _ROW_BYTES + sum(v.nbytes for v in self._vectors.values())

    def close(self) -> None:
        """Stop reading the cold part (an evicted or closed owner): its questions go to the store's indexes."""
        with self._lock:
            self._closed = True
            for reading in (self._index, self._counts):
                if reading is not None:
                    reading.cancel()

    def _read_index(self) -> ColdIndex | None:
        try:
            index = ColdIndex(self._parts(), capacity=self.split.cold_messages, context=self.context)
            _release()
            return index
        except _Closed:
            return None
        except Exception:  # the store's indexes still answer; say why once
            log.exception("reading the cold messages of %s failed; they are searched through the store", self.owner_id)
            return None

    def _read_counts(self) -> ColdCounts | None:
        try:
            columns = ("tokens", "context") if self.context else ("tokens",)
            counts = ColdCounts(self._parts(columns, COUNT_READ_ROWS), context=self.context)
            _release()
            return counts
        except _Closed:
            return None
        except Exception:  # questions go on with the hot window's statistics; say why once
            log.exception(
                "counting the cold messages' words of %s failed; the hot window's statistics serve", self.owner_id
            )
            return None

    def _parts(self, columns: Sequence[str] | None = None, rows: int = INDEX_READ_ROWS) -> Iterator[pa.Table]:
        """The cold part's columns (``columns``: these only) in pieces of about ``rows`` messages (bounds of ``seq``
        from one read of the ``seq`` column), so that only one piece's Arrow is held beside what is made."""
        seqs = self.store.message_columns(self.owner_id, below_seq=self.below_seq, columns=("seq",))
        self.reads += 1
        if seqs is None or not seqs.num_rows:
            return
        ordered = np.sort(seqs.column("seq").to_numpy())
        bounds = [int(b) for b in ordered[::rows]] + [self.below_seq]
        for lo, hi in itertools.pairwise(bounds):
            if self._closed:
                raise _Closed
            part = self.store.message_columns(self.owner_id, from_seq=lo, below_seq=hi, columns=columns)
            self.reads += 1
            if part is not None:
                yield part
            _release()

    def held(self) -> ColdIndex | None:
        """The cold part in process, once its read has begun (waiting for it to end); None before or without."""
        with self._lock:
            reading = self._index
        if reading is None:
            return None
        try:
            return reading.result()
        except CancelledError:
            return None

    @property
    def loaded(self) -> ColdIndex | None:
        """The cold part in process if its read has ended (no waiting)."""
        with self._lock:
            reading = self._index
        if reading is None or not reading.done() or reading.cancelled():
            return None
        return reading.result()

    def begin_read(self) -> None:
        """Begin reading the cold part into the process when it fits, or else counting its words, when not begun yet
        (``Retriever.query`` calls this once an answer is ready: the read runs between questions, not beside the
        first one's ranking)."""
        with self._lock:
            if self._closed:
                return
            if self.indexed and self._index is None:
                self._index = _READS.submit(self._read_index)
            elif not self.indexed and self._counts is None and self.split.cold_messages:
                self._counts = _READS.submit(self._read_counts)

    def statistics(self, *, context: bool = False) -> Beside | None:
        """The cold part's BM25 statistics once its read or count has begun (waiting for it to end), from the
        ``ColdIndex`` held or the ``ColdCounts`` of a part searched through the store; None before, or without.
        ``context``: over each message's words and its ``context`` (an archive made with ``context``)."""
        if context and not self.context:
            raise ValueError("this archive was made without the messages' context")
        index = self.held()
        if index is not None:
            return index.context_statistics if context else index.statistics
        with self._lock:
            counting = self._counts
        if counting is None:
            return None
        try:
            counts = counting.result()
        except CancelledError:
            return None
        if counts is None:
            return None
        return counts.context_statistics if context else counts.statistics

    def _keep(self, rows: Iterable[MessageRow]) -> list[tuple[MessageRow, Vector | None]]:
        """Memoise rows read from the store (vectors apart); the memo's version of each with its unit vector."""
        out = []
        for row in rows:
            v: Vector | None = None
            if row.vector:
                v = np.asarray(row.vector, dtype=np.float32)
                norm = float(np.linalg.norm(v))
                v = v / norm if norm else v
                row = dataclasses.replace(row, vector=())
            out.append((row, v))
        return self._remember(out)

    def _remember(self, found: Iterable[tuple[MessageRow, Vector | None]]) -> list[tuple[MessageRow, Vector | None]]:
        """Memoise rows without their vectors, each given with its unit vector."""
        out = list(found)
        with self._lock:
            for row, v in out:
                if v is not None:
                    self._vectors[row.id] = v
                self._rows[row.id] = row
                self._rows.move_to_end(row.id)
                self._absent.discard(row.id)
            while len(self._rows) > self._memo_rows:
                old, _ = self._rows.popitem(last=False)
                self._vectors.pop(old, None)
        return out

    def search(
        self, vector: Sequence[float], text: str, k: int, *, context: bool = False
    ) -> list[tuple[MessageRow, Vector | None]]:
        """``begin_search``, finished at once: the messages found, each once."""
        return self.begin_search(vector, text, k, context=context)().rows

    def begin_search(
        self,
        vector: Sequence[float],
        text: str,
        k: int,
        *,
        context: bool = False,
        beside: Beside | None = None,
        terms: Sequence[str] | None = None,
    ) -> Callable[[], ColdFound]:
        """The ``k`` nearest cold messages by vector, and the ``k`` best by full text when ``text`` has words (each
        by its words and its ``context`` too with ``context``), each with its unit vector (the caller keeps these:
        the memo may drop them for other queries' reads), as a call.

        Through the store's indexes until the cold part's read has begun (``begin_read``), in process after: then
        the vector product starts on other threads now and the call returned finishes it, so the asker can do
        other work meanwhile, and gives the cosine with every cold message too (``ColdFound.cosines``); ``beside``:
        the hot window's BM25 statistics, which the words of the cold messages are then ranked with;
        ``terms``: the words of ``text`` as the question's scorer cut them, matched as they are (``ColdIndex.matching``;
        the store cuts ``text`` itself)."""
        index = self.held()
        SEARCHES.count(index is not None)
        if index is None:
            return lambda: self._search_store(vector, text, k, context)
        cosines = index.begin_cosines(vector)

        def finish() -> ColdFound:
            matched = (  # while the product runs
                index.matching(text, k, context=context, beside=beside, terms=terms) if text.strip() else []
            )
            scores = cosines()
            nearest = index.nearest_of(scores, k)
            at = list(dict.fromkeys(nearest + matched))
            rows = dict(zip(at, self._remember(index.rows(at)), strict=True))
            return ColdFound([rows[p] for p in nearest], [rows[p] for p in matched], index, scores)

        return finish

    def _search_store(self, vector: Sequence[float], text: str, k: int, context: bool) -> ColdFound:
        words = (
            _SEARCHES.submit(
                functools.partial(self.store.text_search, context=context),
                "messages",
                self.owner_id,
                text,
                k,
                self.below_seq,
            )
            if text.strip()
            else None
        )  # beside the vector search: the store's reads release the GIL
        hits = self.store.vector_search("messages", self.owner_id, vector, k, below_seq=self.below_seq)
        self.reads += 1
        matched = []
        if words is not None:
            matched = words.result()
            self.reads += 1
        seen: dict[str, MessageRow] = {}
        for hit in hits + matched:
            if isinstance(hit.row, MessageRow):
                seen.setdefault(hit.row.id, hit.row)
        kept = {row.id: (row, v) for row, v in self._keep(seen.values())}
        nearest = dict.fromkeys(h.row.id for h in hits if isinstance(h.row, MessageRow))
        words_found = dict.fromkeys(h.row.id for h in matched if isinstance(h.row, MessageRow))
        return ColdFound([kept[i] for i in nearest], [kept[i] for i in words_found])

    def get(self, message_id: str) -> MessageRow | None:
        """A memoised cold message (no store read)."""
        with self._lock:
            return self._rows.get(message_id)

    def fetch(self, ids: Iterable[str]) -> dict[str, MessageRow]:
        """The cold messages among ``ids``: those not memoised from the held cold part, or else read from the
        store in one read."""
        wanted = sorted(set(ids))
        with self._lock:
            found = {i: r for i in wanted if (r := self._rows.get(i)) is not None}
            missing = [i for i in wanted if i not in found and i not in self._absent]
        if not missing:
            return found
        index = self.held()
        if index is not None:
            kept = self._remember(index.rows(sorted(index.positions(missing).values())))
        else:
            rows = self.store.messages_by_id(self.owner_id, missing)
            self.reads += 1
            kept = self._keep(r for r in rows if self.holds(r))
        found.update((r.id, r) for r, _ in kept)
        with self._lock:
            self._absent.update(i for i in missing if i not in found)
        return found

    def existing(self, ids: Iterable[str]) -> set[str]:
        """The cold messages among ``ids`` that exist, without reading their rows.

        The cold part's ids are those of its ``ColdIndex`` once held, or else read once (``message_ids``), kept as
        the sorted hashes of their text;
        an id is taken to exist when its hash is among them (two ids of one owner sharing a 64-bit hash
        is the only way to be wrong). The cold part does not change under a snapshot: a cold message
        rewritten or forgotten makes the owner load afresh, with a new archive.
        """
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return set()
        index = self.loaded
        with self._lock:
            hashes = index.id_hashes if index is not None else self._id_hashes  # held in process: no read
        if hashes is None:
            cold = self.store.message_ids(self.owner_id, below_seq=self.below_seq)
            self.reads += 1
            hashes = np.sort(np.fromiter((hash(i) for i in cold), dtype=np.int64, count=len(cold)))
            with self._lock:
                self._id_hashes = hashes
        asked = np.fromiter((hash(i) for i in wanted), dtype=np.int64, count=len(wanted))
        at = np.minimum(np.searchsorted(hashes, asked), max(len(hashes) - 1, 0))
        hit = hashes[at] == asked if len(hashes) else np.zeros(len(wanted), dtype=bool)
        return {i for i, h in zip(wanted, hit.tolist(), strict=True) if h}

    def vector(self, message_id: str) -> Vector | None:
        """A memoised message's unit vector (None when none is held)."""
        with self._lock:
            return self._vectors.get(message_id)
