"""The cold part of a long-lived owner's archive: messages older than its hot window, read through the store.

A query process holds an owner with more than ``CacheSettings.hot_messages`` messages as its
newest ``hot_messages`` messages plus every record, trait and graph node, and its edges as columns
(``OwnerSnapshot``, ``retrieval.edges``). The older messages stay in the store. ``ColdArchive``
finds them for a question with the store's own vector and full-text indexes (``below_seq``: the
cold part only), reads them by id when a record, a trait or a graph node points at one, and keeps
what it read in a bounded memo: rows without their vectors, and each vector once, normalised, as
float32. Whether a cold message exists (all the current view needs of a record's sources or a
trait's evidence) is answered from the cold part's ids, read once on first need and held as a
sorted array of their hashes: 8 bytes a message.

Cold candidates are scored as hot ones are (``SemanticScorer``): the cosine from the stored vector,
BM25 with the hot window's statistics (``TextIndex.score_outside``). What the store's indexes do not
return is not a candidate: that, and BM25 statistics taken from the hot window, are where a tiered
owner's answers may differ from an owner held whole (measured by ``adamem bench scale`` and
``bench/results/notes.md``).
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import numpy.typing as npt

from adamem.projections.folds.rows import MessageRow
from adamem.projections.store.base import ArchiveSplit, MemoryStore

__all__ = ["ColdArchive", "Vector"]

Vector = npt.NDArray[np.float32]

_SEARCHES = ThreadPoolExecutor(4, thread_name_prefix="adamem-cold")
"""Full-text searches of cold messages, run beside the vector search of the same query."""
_ROW_BYTES = 2800
"""Approximate resident bytes of a message row without its vector (``snapshot._ROW_BYTES``)."""


class ColdArchive:
    """One owner's cold messages as a query process sees them: a split point, the store, and a memo."""

    def __init__(self, store: MemoryStore, owner_id: str, split: ArchiveSplit, memo_rows: int = 4096) -> None:
        self.store = store
        self.owner_id = owner_id
        self.split = split
        self._memo_rows = max(1, memo_rows)
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
        """Approximate resident bytes of the memo."""
        ids = self._id_hashes.nbytes if self._id_hashes is not None else 0
        return ids + len(self._rows) * _ROW_BYTES + sum(v.nbytes for v in self._vectors.values())

    def _keep(self, rows: Iterable[MessageRow]) -> list[tuple[MessageRow, Vector | None]]:
        """Memoise rows read from the store (vectors apart); the memo's version of each with its unit vector."""
        out = []
        with self._lock:
            for row in rows:
                v: Vector | None = None
                if row.vector:
                    v = np.asarray(row.vector, dtype=np.float32)
                    norm = float(np.linalg.norm(v))
                    v = v / norm if norm else v
                    self._vectors[row.id] = v
                    row = dataclasses.replace(row, vector=())
                self._rows[row.id] = row
                self._rows.move_to_end(row.id)
                self._absent.discard(row.id)
                out.append((row, v))
            while len(self._rows) > self._memo_rows:
                old, _ = self._rows.popitem(last=False)
                self._vectors.pop(old, None)
        return out

    def search(self, vector: Sequence[float], text: str, k: int) -> list[tuple[MessageRow, Vector | None]]:
        """The ``k`` nearest cold messages by vector, and the ``k`` best by full text when ``text`` has words,
        each with its unit vector (the caller keeps these: the memo may drop them for other queries' reads)."""
        words = (
            _SEARCHES.submit(self.store.text_search, "messages", self.owner_id, text, k, self.below_seq)
            if text.strip()
            else None
        )  # beside the vector search: the store's reads release the GIL
        hits = self.store.vector_search("messages", self.owner_id, vector, k, below_seq=self.below_seq)
        self.reads += 1
        if words is not None:
            hits = hits + words.result()
            self.reads += 1
        seen: dict[str, MessageRow] = {}
        for hit in hits:
            if isinstance(hit.row, MessageRow):
                seen.setdefault(hit.row.id, hit.row)
        return self._keep(seen.values())

    def get(self, message_id: str) -> MessageRow | None:
        """A memoised cold message (no store read)."""
        with self._lock:
            return self._rows.get(message_id)

    def fetch(self, ids: Iterable[str]) -> dict[str, MessageRow]:
        """The cold messages among ``ids``, read from the store in one read for those not memoised."""
        wanted = sorted(set(ids))
        with self._lock:
            found = {i: r for i in wanted if (r := self._rows.get(i)) is not None}
            missing = [i for i in wanted if i not in found and i not in self._absent]
        if missing:
            rows = self.store.messages_by_id(self.owner_id, missing)
            self.reads += 1
            kept = self._keep(r for r in rows if self.holds(r))
            found.update((r.id, r) for r, _ in kept)
            with self._lock:
                self._absent.update(i for i in missing if i not in found)
        return found

    def existing(self, ids: Iterable[str]) -> set[str]:
        """The cold messages among ``ids`` that exist, without reading their rows.

        The cold part's ids are read once (``message_ids``) and kept as the sorted hashes of their text;
        an id is taken to exist when its hash is among them (two ids of one owner sharing a 64-bit hash
        is the only way to be wrong). The cold part does not change under a snapshot: a cold message
        rewritten or forgotten makes the owner load afresh, with a new archive.
        """
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return set()
        with self._lock:
            hashes = self._id_hashes
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
