"""The query service's API: ``Retriever(store, embedder).query(owner_id, question)`` → ``Answer``.

One query runs five stages, each timed:

1. resolve — the shard's change token, the owner's state (``retrieval.cache``: synchronised with
   the store's changes when the token moved), whose memory, the reference time; and, when the
   answer is not cached, the owner's snapshot (loading it counts here);
2. route — ``route_query``: semantic, graph (temporal/causal) or persona first;
3. retrieve — embed the question (memoised), try the semantic query cache, base retrieval over every layer;
4. expand — graph expansion from the top ``graph_seeds`` base hits;
5. fuse — the four-part score, then three ordering rules, each a stable partition of the ranking:
   persona traits first on the persona route; off the time/cause route, messages whose records
   were all superseded last; on a "why" question, items later than the event asked about (and not
   said in its conversation) last. Then one item per piece of new evidence (an item whose
   evidence messages are all shown already is dropped), both sides when whose-memory is
   ambiguous, top-k, provenance. Scores are therefore not always monotone in rank: an item a rule
   moved names the rule (`Item.ordered_by`).

The service only reads: it never writes to the store. Open a LanceDB store read-only for it.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import sys
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import numpy as np

from adamem.analysis import Embedder
from adamem.partitioning import owner_partition
from adamem.projections.folds.ids import node_id, trait_id
from adamem.projections.folds.params import SEED_DEFAULT as MEMORY_DEFAULT
from adamem.projections.folds.params import MemoryParameters
from adamem.projections.folds.rows import EpisodicRow, MessageRow, PersonaRow
from adamem.projections.folds.style import STYLE_KIND, AnswerStyle, style_of
from adamem.projections.packs import owner_parameters, recorded_parameters
from adamem.projections.store.base import MemoryStore
from adamem.retrieval.answer import Answer, Item, PathStep, Provenance, Timing, readable
from adamem.retrieval.archive import SEARCHES as COLD_SEARCHES
from adamem.retrieval.archive import ColdArchive
from adamem.retrieval.base import Candidate, SemanticScorer, base_candidates, speaker_of
from adamem.retrieval.cache import LFUCache, OwnerFacts, OwnerState, QueryCache, VectorMemo
from adamem.retrieval.config import SEED_DEFAULT, Direction, Layer, RetrievalConfig, Route, Subject
from adamem.retrieval.errors import UnknownOwner
from adamem.retrieval.feedback import Feedback
from adamem.retrieval.fusion import (
    PRESENT,
    Breakdown,
    TimeWindow,
    fact_support,
    fuse,
    item_times,
    temporal_score,
    time_windows,
)
from adamem.retrieval.graph import MemoryGraph, PositionRelevance, Reach, expand
from adamem.retrieval.index import Vector
from adamem.retrieval.language import language_notice
from adamem.retrieval.route import RoutePlan, route_query
from adamem.retrieval.snapshot import AsOf, MemoryRow, OwnerSnapshot, View
from adamem.retrieval.whose import WhoseDecision, whose_memory
from adamem.text import tokenize

__all__ = ["Retriever"]

_Scored = tuple[float, Candidate, Breakdown, Reach | None]

RULE_SUPERSEDED = "superseded: after current evidence"
RULE_LATER = "later than the event asked about: after earlier items"
RULE_PERSONA = "persona route: traits first"
RULE_NEWEST = "a question about now: the newest stated change first"
RULE_STYLE = "this owner's answer style: raised"
"""The ordering rules of the fuse stage, named on each item they moved (``Item.ordered_by``)."""


def _embedder_key(record: dict[str, str]) -> tuple[str, ...]:
    return tuple(record.get(k, "") for k in ("embedder", "embed_model", "embed_dim"))


def parallel_expansion(config: RetrievalConfig, gil: bool | None = None) -> bool:
    """Whether graph expansion runs seeds in threads: only without the GIL, and with more than one allowed.

    Expansion is pure Python; under the GIL its threads take turns, so they add their switching
    (about 2 ms of CPU per query at a 10k-message owner, measured with ``bench/query_ab.py
    --parallel-seeds``) and nothing else. ``gil``: whether the interpreter has one (default: asks it).
    """
    if gil is None:
        gil = bool(getattr(sys, "_is_gil_enabled", lambda: True)())
    return config.max_parallel_seeds > 1 and not gil


class Retriever:
    """Adaptive retrieval over one store: whose memory, routing, base retrieval, graph expansion, fusion."""

    def __init__(
        self,
        store: MemoryStore,
        embedder: Embedder,
        config: RetrievalConfig = SEED_DEFAULT,
        *,
        partitions: int | None = None,
        memory_params: MemoryParameters = MEMORY_DEFAULT,
        embedder_for: Callable[[dict[str, str]], Embedder] | None = None,
    ) -> None:
        """``embedder_for`` makes the embedder of a recorded analysis generation: with it, questions are
        embedded by the embedder of the active view's generation, also after a switch to a reanalysis."""
        self.store = store
        self.embedder = embedder
        self._embedder_for = embedder_for
        self._embedders: dict[tuple[str, ...], Embedder] = {}
        if embedder_for is not None:
            self._embedders[_embedder_key(store.generation())] = embedder
        self.config = config
        # base retrieval of a question asking for a set (``RoutePlan.broad``): its own fusion constant, made once
        self._broad_config = replace(config, rrf_k=config.broad_rrf_k) if config.broad_rrf_k else config
        self.partitions = partitions
        self.memory_params = memory_params
        self._pack_params: tuple[str, dict[str, MemoryParameters]] = ("", {})
        c = config.cache
        self._states: LFUCache[str, OwnerState] = LFUCache(c.owners)
        self._snapshots: LFUCache[str, tuple[int, OwnerSnapshot]] = LFUCache(
            c.hot_owners, c.hot_bytes, lambda kept: kept[1].size, lambda _, kept: _close_archive(kept[1])
        )
        self._answers: QueryCache[Answer] = QueryCache(c.query_entries, c.query_cosine, c.query_bytes, _answer_size)
        self._vectors = VectorMemo(c.question_vectors)
        self._working: dict[str, tuple[str, tuple[MessageRow, ...]]] = {}
        self._syncing = [threading.Lock() for _ in range(64)]  # one synchronisation of an owner at a time
        self._versions = itertools.count(1)
        self._executor = (
            ThreadPoolExecutor(config.max_parallel_seeds, thread_name_prefix="graph-expand")
            if parallel_expansion(config)
            else None
        )

    def close(self) -> None:
        """Stop the expansion threads and the reads of cold parts."""
        for _, (_, snap) in self._snapshots.items():
            _close_archive(snap)
        if self._executor is not None:
            self._executor.shutdown(wait=True)

    def cache_stats(self) -> list[tuple[str, int, int, int, int, int]]:
        """``(cache, hits, misses, entries, bytes, budget)`` of each cache: hot snapshots, the cold parts of
        long-lived owners held in process (hits: cold searches answered there, misses: by the store; their
        bytes count within the snapshots' budget), owner states, answers, question vectors; bytes and budget
        (approximate) for the snapshots and cold parts only, -1 for the others."""
        snaps = self._snapshots
        cold = [i for _, (_, snap) in snaps.items() if snap.archive is not None and (i := snap.archive.loaded)]
        return [
            ("hot_snapshots", snaps.hits, snaps.misses, len(snaps), snaps.weight, snaps.budget),
            (  # owners' older messages held in process: searches answered there (hit) or by the store (miss)
                "cold_parts",
                COLD_SEARCHES.in_process,
                COLD_SEARCHES.in_store,
                len(cold),
                sum(i.nbytes for i in cold),
                snaps.budget,
            ),
            ("owner_states", self._states.hits, self._states.misses, len(self._states), -1, -1),
            ("query_answers", self._answers.hits, self._answers.misses, len(self._answers), -1, -1),
            ("question_vectors", self._vectors.hits, self._vectors.misses, len(self._vectors), -1, -1),
        ]

    def warm_up(self) -> None:
        """Load the lazy parts once (jieba's dictionary, ~0.7 s; the embedder) so the first query is not slow."""
        tokenize("预热 warm up")
        self.embedder.embed_query(["warm up"])

    def _query_embedder(self) -> Embedder:
        """The embedder of the active view's analysis generation."""
        if self._embedder_for is None:
            return self.embedder
        record = self.store.generation()
        key = _embedder_key(record)
        if key not in self._embedders:
            self._embedders[key] = self._embedder_for(record)
        self.embedder = self._embedders[key]
        return self.embedder

    def token(self, owner_id: str) -> str:
        """The change token of the owner's shard (``MemoryStore.change_token``)."""
        count = self.partitions or self.store.partition_count() or 1
        return self.store.change_token(owner_partition(owner_id, count))

    def _hot(self, owner_id: str, version: int) -> OwnerSnapshot | None:
        kept = self._snapshots.get(owner_id)
        return kept[1] if kept is not None and kept[0] == version else None

    def _sync(self, owner_id: str, need_snapshot: bool) -> tuple[OwnerState, OwnerSnapshot | None]:
        """The owner as the store has it now: its state, and its snapshot if ``need_snapshot`` (or it is hot).

        When the shard's token moved, the hot snapshot is brought up to date with the owner's
        changes (a new version only if its rows changed); without a hot snapshot, or when the
        store cannot tell what changed, every row is loaded. One request per owner does this;
        the others wait for it and use its result.
        """
        token = self.token(owner_id)
        state = self._states.get(owner_id)
        if state is not None and state.token == token:
            snap = self._hot(owner_id, state.version)
            if snap is not None or not need_snapshot:
                return state, snap
        with self._syncing[hash(owner_id) % len(self._syncing)]:
            state = self._states.peek(owner_id)
            snap = self._hot(owner_id, state.version) if state is not None else None
            if state is not None and state.token == token and (snap is not None or not need_snapshot):
                return state, snap
            if state is not None and snap is not None:
                changes = self.store.owner_changes(owner_id, state.token)
                updated = snap.updated(changes) if changes is not None else None
                if changes is not None and updated is snap:
                    state = OwnerState(changes.token, state.version, state.facts)
                    self._states.put(owner_id, state)
                    return state, snap
                if changes is not None and updated is not None:
                    return self._keep(owner_id, changes.token, updated)
            # the same token: the rows of the version held (a commit since would have moved the token)
            same = state.version if state is not None and state.token == token else None
            return self._keep(owner_id, token, self._load(owner_id), same)

    def _load(self, owner_id: str, whole: bool = False) -> OwnerSnapshot:
        """The owner's snapshot from the store: whole, or its newest ``hot_messages`` messages and a cold archive.

        ``whole``: every message (as-of views: which messages existed then is read from all of them).
        """
        hot = self.config.cache.hot_messages
        split = self.store.archive_split(owner_id, hot) if hot > 0 and not whole else None
        if split is None:
            return OwnerSnapshot.of_columns(
                owner_id, self.store.load_owner_columns(owner_id), self.params_for(owner_id)
            )
        columns = self.store.load_owner_columns(owner_id, messages_from_seq=split.cold_below_seq)
        cache = self.config.cache
        archive = ColdArchive(
            self.store,
            owner_id,
            split,
            cache.cold_memo_rows,
            cache.cold_index_bytes,
            context=self.config.context_words,
        )
        return OwnerSnapshot.of_columns(owner_id, columns, self.params_for(owner_id), archive)

    def params_for(self, owner_id: str) -> MemoryParameters:
        """The memory parameters the owner was folded with: ``memory_params`` with its tenant's recorded packs."""
        digest = (self.store.generation() or {}).get("packs_digest", "")
        if not digest:
            return self.memory_params
        if self._pack_params[0] != digest:
            self._pack_params = (digest, recorded_parameters(self.store, self.memory_params))
        return owner_parameters(self._pack_params[1], owner_id, self.memory_params)

    def _keep(
        self, owner_id: str, token: str, snap: OwnerSnapshot, version: int | None = None
    ) -> tuple[OwnerState, OwnerSnapshot]:
        """Cache a snapshot as ``version`` of the owner's rows (by default a new one)."""
        facts = OwnerFacts(snap.owner is not None or bool(snap.messages), snap.speakers, snap.last_event_time)
        state = OwnerState(token, next(self._versions) if version is None else version, facts)
        self._snapshots.put(owner_id, (state.version, snap))
        self._states.put(owner_id, state)
        return state, snap

    def _known(self, owner_id: str, state: OwnerState) -> None:
        """Raise ``UnknownOwner`` for an owner without memory."""
        if not state.facts.known:
            raise UnknownOwner(owner_id, self.store.url, self.store.owners())

    def snapshot(self, owner_id: str) -> OwnerSnapshot:
        """The owner's memory as the store has it now (from the hot cache when fresh); raises ``UnknownOwner``."""
        state, snap = self._sync(owner_id, need_snapshot=True)
        self._known(owner_id, state)
        assert snap is not None
        return snap

    def require(self, owner_id: str) -> None:
        """Raise ``UnknownOwner`` unless the owner has memory (from its facts: no rows are loaded for this)."""
        state, _ = self._sync(owner_id, need_snapshot=False)
        self._known(owner_id, state)

    def working_memory(self, owner_id: str) -> tuple[MessageRow, ...]:
        """The owner's working memory, oldest first (pinned until the shard's token moves)."""
        token = self.token(owner_id)
        pinned = self._working.get(owner_id)
        if pinned is not None and pinned[0] == token:
            return pinned[1]
        rows = [r for r in self.store.rows("messages", owner_id) if isinstance(r, MessageRow) and r.in_working]
        working = tuple(sorted(rows, key=lambda m: m.working_seq))
        self._working[owner_id] = (token, working)
        return working

    def embed(self, question: str) -> Vector:
        """The question's unit vector (memoised by embedder and text)."""

        embedder = self._query_embedder()

        def embed(text: str) -> Vector:
            vector = np.asarray(embedder.embed_query([text])[0], dtype=np.float64)
            return vector / (float(np.linalg.norm(vector)) or 1.0)

        return self._vectors.vector(getattr(embedder, "name", type(embedder).__name__), question, embed)

    async def aquery(
        self,
        owner_id: str,
        question: str,
        top_k: int | None = None,
        as_of: int | AsOf | None = None,
        reference_time: int | None = None,
        refine: Feedback | None = None,
    ) -> Answer:
        """``query`` in a worker thread, for asyncio callers."""
        return await asyncio.to_thread(self.query, owner_id, question, top_k, as_of, reference_time, refine)

    def query(
        self,
        owner_id: str,
        question: str,
        top_k: int | None = None,
        as_of: int | AsOf | None = None,
        reference_time: int | None = None,
        refine: Feedback | None = None,
    ) -> Answer:
        """Ranked evidence for ``question`` from ``owner_id``'s memory, now or ``as_of`` (event ms or ``AsOf``).

        ``reference_time`` resolves time words in the question ("last week"); by default the
        owner's clock (its newest event time, or the as-of time). Raises ``UnknownOwner``. An owner
        is an owner key ``tenant:user_id`` (``adamem.owners``). A cached answer is
        found from the owner's facts alone: the rows are only needed to compute one.
        ``refine``: a later round of research (``retrieval.research``): base retrieval searches with its
        moved vector and its weighted terms besides the question's; such answers are not cached.
        """
        cfg = self.config
        k = top_k or cfg.top_k
        point = AsOf(time=as_of) if isinstance(as_of, int) else as_of
        by_offset = point is not None and point.offset is not None
        t0 = time.perf_counter()
        state, snap = self._sync(owner_id, need_snapshot=not cfg.cache.query_cache or by_offset or refine is not None)
        self._known(owner_id, state)
        if by_offset and snap is not None and snap.archive is not None:
            snap = self._load(owner_id, whole=True)
        whose, now = self._frame(state, snap, question, point, reference_time)
        t1 = time.perf_counter()
        plan = route_query(question)
        windows = time_windows(question, now)
        t2 = time.perf_counter()
        qvec = self.embed(question)
        guard = self._guard(question, k, point, plan, whose, windows, now)
        cache = cfg.cache.query_cache and refine is None
        if cache:
            hit = self._answers.get(owner_id, state.version, qvec, guard)
            if hit is not None:
                t3 = time.perf_counter()
                timing = Timing(_ms(t0, t1), _ms(t1, t2), _ms(t2, t3), 0.0, 0.0, _ms(t0, t3))
                return replace(hit, question=question, timing=timing, cached=True)
        loading = 0.0
        if snap is None:
            started = time.perf_counter()
            version = state.version
            state, snap = self._sync(owner_id, need_snapshot=True)
            if state.version != version:  # the rows changed meanwhile: answer from the new ones
                self._known(owner_id, state)
                whose, now = self._frame(state, snap, question, point, reference_time)
                windows = time_windows(question, now)
                guard = self._guard(question, k, point, plan, whose, windows, now)
            loading = time.perf_counter() - started
        assert snap is not None
        if point is not None and snap.archive is not None:
            snap = self._load(owner_id, whole=True)  # a tiered owner's past: from every message, not kept
        view = View(snap, point)
        scorer = SemanticScorer(
            view,
            question,
            qvec if refine is None else refine.vector,
            self._broad_config if plan.broad else cfg,
            whose,
            refine.terms if refine is not None else None,
            context=cfg.context_words and plan.route is not Route.GRAPH,
        )
        base = base_candidates(self.store, scorer, question)
        t3 = time.perf_counter()
        reaches: dict[str, Reach] = {}
        candidates = {(c.table, c.row.id): c for c in base}
        if plan.route is Route.GRAPH or cfg.graph_all_routes:
            seeds = self._seeds(view, scorer, base)
            reaches = self._expand(view, scorer, seeds, plan)
            self._add_reached(view, scorer, reaches, candidates)
            if cfg.dialogue_turns > 0 and not plan.causal:
                self._dialogue_context(view, scorer, seeds, candidates, plan)
            if cfg.seed_self_graph and plan.route is not Route.GRAPH:
                for node, score in seeds:  # a seed stands where its own score puts it
                    reaches[node] = Reach(node, score, node, ())
        t4 = time.perf_counter()
        style = self._style(view)
        items = self._rank(view, scorer, candidates, reaches, plan, whose, windows, now, k, question, style)
        t5 = time.perf_counter()
        styled = style is not None and any(RULE_STYLE in item.ordered_by for item in items)
        answer = Answer(
            owner_id,
            question,
            tuple(items),
            plan,
            whose,
            Timing(_ms(t0, t1 + loading), _ms(t1, t2), _ms(t2 + loading, t3), _ms(t3, t4), _ms(t4, t5), _ms(t0, t5)),
            now,
            windows,
            point,
            cfg.name,
            notices=tuple(n for n in (language_notice(question), _style_notice(style) if styled else "") if n),
        )
        if cache:
            self._answers.put(owner_id, state.version, qvec, guard, answer)
        if snap.archive is not None:
            snap.archive.begin_read()  # later questions search the cold part in process
        return answer

    def _frame(
        self,
        state: OwnerState,
        snap: OwnerSnapshot | None,
        question: str,
        point: AsOf | None,
        reference_time: int | None,
    ) -> tuple[WhoseDecision, int]:
        """Whose memory the question is about, and the reference time ("now" of the view, unless given)."""
        whose = whose_memory(question, state.facts.speakers)
        if reference_time is not None:
            return whose, reference_time
        if point is not None and point.offset is not None:  # the time of the newest message below the offset
            assert snap is not None
            return whose, View(snap, point).now
        return whose, point.time if point is not None and point.time is not None else state.facts.last_event_time

    def _guard(
        self,
        question: str,
        k: int,
        point: AsOf | None,
        plan: RoutePlan,
        whose: WhoseDecision,
        windows: tuple[TimeWindow, ...],
        now: int,
    ) -> Hashable:
        terms = frozenset(tokenize(question)) if self.config.cache.query_same_terms else None
        return (k, point, plan, whose, windows, now, terms)

    # --- expansion -------------------------------------------------------------------------------

    def _graph(self, view: View) -> MemoryGraph:
        snap = view.snapshot
        key = view.as_of
        graph = snap.graphs.get(key)
        if graph is None:  # the view's nodes and edges, walked lazily from the snapshot's edge index
            graph = MemoryGraph.over(
                snap.nodes, snap.edges_at, self.config, view.node, None if view.live else view.edge
            )
            if len(snap.graphs) >= 8:
                snap.graphs.pop(next(k for k in snap.graphs if k is not None), None)
            snap.graphs[key] = graph
        return graph

    def _seeds(self, view: View, scorer: SemanticScorer, base: Sequence[Candidate]) -> list[tuple[str, float]]:
        snap = view.snapshot
        seeds: dict[str, float] = {}
        for c in base[: self.config.graph_seeds]:
            rows = self._evidence(view, scorer, c.row) if isinstance(c.row, PersonaRow) else [c.row]
            nodes = [n for r in rows if (n := snap.node_for(r.id)) is not None]
            for node in nodes:
                seeds.setdefault(node, c.semantic)
        return list(seeds.items())

    def _expand(
        self, view: View, scorer: SemanticScorer, seeds: list[tuple[str, float]], plan: RoutePlan
    ) -> dict[str, Reach]:
        graph, snap = self._graph(view), view.snapshot

        def related(seed: str, node: str) -> bool:
            """A seed and a node standing on the same messages (a message and its own record)."""
            return not snap.sources_of_node(seed).isdisjoint(snap.sources_of_node(node))

        relevance = (
            PositionRelevance(scorer.cosines("messages"), snap.message_position)
            if snap.archive is None
            else _with_cold(view, scorer)
        )
        return expand(
            graph,
            seeds,
            self.config,
            plan.direction,
            executor=self._executor,
            related=related,
            relevance=relevance if self.config.hub_by_relevance and plan.route is not Route.GRAPH else None,
        )

    def _add_reached(
        self,
        view: View,
        scorer: SemanticScorer,
        reaches: dict[str, Reach],
        candidates: dict[tuple[str, str], Candidate],
    ) -> None:
        snap = view.snapshot
        nodes = [n for node in sorted(reaches) if (n := snap.nodes.get(node)) is not None and n.node_type != "topic"]
        messages = snap.messages_for(  # cold ones in one store read
            n.ref_id for n in nodes if n.node_type == "message" and ("messages", n.ref_id) not in candidates
        )
        for n in nodes:
            table = "messages" if n.node_type == "message" else "episodic"
            if (table, n.ref_id) in candidates:
                continue
            row = messages.get(n.ref_id) if table == "messages" else snap.row(table, n.ref_id)
            if row is None or not scorer.usable(row):
                continue
            candidates[(table, row.id)] = scorer.candidate(table, row, origin="graph")

    def _dialogue_context(
        self,
        view: View,
        scorer: SemanticScorer,
        seeds: list[tuple[str, float]],
        candidates: dict[tuple[str, str], Candidate],
        plan: RoutePlan,
    ) -> None:
        """Lift the turns around each seed message in its session, up to ``dialogue_turns`` away along its
        ``temporal_next`` arcs, to ``share ** d`` × the seed's score at d turns away: ``dialogue_context`` for a
        focused question, ``narrow_dialogue_context`` for one asking for a set (``RoutePlan.broad``) and for
        a time question (the graph route).

        Where superseded rows go last (``current_first``), a seed that is history lends its context nothing
        and a neighbour that is history is not lifted: "Beijing is lovely in spring!" beside "I live in
        Beijing" must not come back for "where do I live?" after a move."""
        cfg = self.config
        narrow = plan.broad or plan.route is Route.GRAPH
        share = cfg.narrow_dialogue_context if narrow else cfg.dialogue_context
        if share <= 0:
            return
        graph, snap = self._graph(view), view.snapshot
        gap = view.snapshot.params.session_gap_ms
        current = cfg.current_first and plan.route is not Route.GRAPH

        def message_at(node: str) -> MessageRow | None:
            """The message a graph node stands for, unless it is history where history goes last."""
            n = snap.nodes.get(node)
            row = snap.message(n.ref_id) if n is not None and n.node_type == "message" else None
            return None if row is None or (current and _stale(view, row)) else row

        for node, score in seeds:
            seed_row = message_at(node) if node in graph else None
            if seed_row is None:
                continue
            ring, seen = [node], {node}
            for step in range(1, cfg.dialogue_turns + 1):
                lifted = score * share**step
                nxt: list[str] = []
                for u in ring:
                    for _, v, _, edge_type in graph.arcs(u):
                        if v in seen:
                            continue
                        row = message_at(v) if edge_type == "temporal_next" else None
                        if (
                            row is None
                            or _conversation(row) != _conversation(seed_row)
                            or abs(_said_at(row) - _said_at(seed_row)) >= gap
                            or not scorer.usable(row)
                        ):
                            continue
                        seen.add(v)
                        nxt.append(v)
                        key = ("messages", row.id)
                        c = candidates.get(key) or scorer.candidate("messages", row, origin="graph")
                        candidates[key] = replace(c, semantic=lifted) if c.semantic < lifted else c
                ring = nxt

    # --- fusion and answer ------------------------------------------------------------------------

    def _rank(
        self,
        view: View,
        scorer: SemanticScorer,
        candidates: dict[tuple[str, str], Candidate],
        reaches: dict[str, Reach],
        plan: RoutePlan,
        whose: WhoseDecision,
        windows: tuple[TimeWindow, ...],
        now: int,
        k: int,
        question: str,
        style: AnswerStyle | None = None,
    ) -> list[Item]:
        cfg, snap = self.config, view.snapshot
        scored: list[_Scored] = []
        lean = cfg.style_weight * style.preference if style is not None else 0.0
        plain: dict[int, float] = {}  # id of a scored entry -> its score without the owner's style, when it has one
        # a cause is older than what it explains; recency only matters for questions about the present
        recency = plan.direction is not Direction.ANTECEDENT and PRESENT.search(question) is not None
        # a question asking for a time ("when did ...", 什么时候): its evidence is a statement that dates something
        asks_time = plan.route is Route.GRAPH and not plan.causal and plan.direction is Direction.ANY and not windows
        asks_time = asks_time and not recency and cfg.dated_when > 0
        top = max(candidates.values(), key=lambda c: (c.origin == "base", c.semantic, c.row.id), default=None)
        anchor = None if top is None or plan.direction is Direction.ANY else min(item_times(top.row, snap.times_memo))
        anchor_conversation = _conversation(top.row) if top is not None else ""
        anchor_said = _said_at(top.row) if top is not None else -1
        gap = view.snapshot.params.session_gap_ms
        best_cosine = max((c.cosine for c in candidates.values()), default=0.0)
        for key in sorted(candidates):
            c = candidates[key]
            # said in the anchor's session: its conversation, and no session gap in event time away from it
            beside = (
                bool(anchor_conversation)
                and _conversation(c.row) == anchor_conversation
                and abs(_said_at(c.row) - anchor_said) < gap
            )
            node = snap.node_for(c.row.id) if not isinstance(c.row, PersonaRow) else None
            reach = reaches.get(node) if node is not None else None
            graph_score = reach.score if reach is not None else 0.0
            if cfg.graph_relevance > 0 and not plan.causal:
                graph_score *= 1.0 - cfg.graph_relevance + cfg.graph_relevance * c.semantic
            temporal = temporal_score(
                item_times(c.row, snap.times_memo), windows, now, cfg, recency, anchor, plan.direction, beside
            )
            if recency and not windows and anchor is None and cfg.recency_topic_margin > 0:
                temporal *= min(1.0, max(0.0, 1.0 - (best_cosine - c.cosine) / cfg.recency_topic_margin))
            if asks_time and len(item_times(c.row, snap.times_memo)) > 1:
                temporal = max(temporal, cfg.dated_when)
            parts = Breakdown(c.semantic, graph_score, temporal, fact_support(c.row, view, cfg))
            fused = fuse(parts, cfg.fusion)
            entry = (fused * (1.0 + lean * (-1.0 if isinstance(c.row, MessageRow) else 1.0)), c, parts, reach)
            if lean:
                plain[id(entry)] = fused
            scored.append(entry)
        scored.sort(key=lambda s: (-s[0], s[1].table, s[1].row.id))

        def order(scored: list[_Scored]) -> tuple[list[_Scored], dict[int, list[str]]]:
            """The ordering rules, then the top k: the chosen entries and the rules that moved each."""
            moved: dict[int, list[str]] = {}  # id of a scored entry -> the ordering rules that moved it, shown with it
            if plan.route is not Route.GRAPH and cfg.current_first:
                # what a message stated and a newer message superseded is history: current evidence first
                flags = [_stale(view, s[1].row) for s in scored]
                stale = [s for s, old in zip(scored, flags, strict=True) if old]
                scored = [s for s, old in zip(scored, flags, strict=True) if not old] + stale
                for s in stale:
                    moved.setdefault(id(s), []).append(RULE_SUPERSEDED)
            if recency and not windows and plan.route is not Route.GRAPH and cfg.newest_first > 0:
                before = scored
                shown = self._shown_head(view, scorer, scored, cfg.newest_first) if cfg.newest_first_shown else None
                scored = _newest_change_first(scored, cfg.newest_first if shown is None else shown)
                lifted = next((a for a, b in zip(scored, before, strict=True) if a is not b), None)
                if lifted is not None:
                    moved.setdefault(id(lifted), []).append(RULE_NEWEST)
            if anchor is not None and plan.causal and not windows and cfg.causal_order:
                # a cause is never later than its effect: later items go last
                later = [s for s in scored if s[2].temporal == 0]
                scored = [s for s in scored if s[2].temporal > 0] + later
                for s in later:
                    moved.setdefault(id(s), []).append(RULE_LATER)
            if plan.route is Route.PERSONA:
                first = [s for s in scored if s[1].table == "persona" and s[1].semantic >= cfg.persona_first_min]
                first = first[: cfg.persona_first]
                scored = first + [s for s in scored if s not in first]
                for s in first:
                    moved.setdefault(id(s), []).append(RULE_PERSONA)
            return self._select(view, scorer, scored, whose, k), moved

        chosen, moved = order(scored)
        if plain:  # an item the owner's style put above where it stands without the style says so
            unstyled, _ = order(sorted(scored, key=lambda s: (-plain[id(s)], s[1].table, s[1].row.id)))
            place = {id(s): i for i, s in enumerate(unstyled)}
            for i, s in enumerate(chosen):
                if i < place.get(id(s), len(unstyled)):
                    moved.setdefault(id(s), []).append(RULE_STYLE)
        snap.messages_for(  # the cold messages the chosen items stand on, in one store read
            i for s in chosen if isinstance(s[1].row, EpisodicRow) for i in s[1].row.source_message_ids
        )
        return [
            self._item(rank, view, scorer, s, "; ".join(moved.get(id(s), ()))) for rank, s in enumerate(chosen, start=1)
        ]

    def _style(self, view: View) -> AnswerStyle | None:
        """The owner's answer style when it is to rank this view: live, from enough feedback, leaning one way."""
        if not view.live:  # a past view is ranked as its memory stood, without what feedback later taught
            return None
        snap = view.snapshot
        row = snap.traits.get(trait_id(snap.owner_id, STYLE_KIND, STYLE_KIND, ""))
        if row is None or row.status != "active":
            return None
        return self.ranking_style(style_of(row))

    def ranking_style(self, style: AnswerStyle) -> AnswerStyle | None:
        """``style`` when it ranks answers: from ``style_min_feedback`` feedback events or more, leaning one way."""
        if style.feedback < self.config.style_min_feedback or style.value(self.memory_params.style_margin) == "either":
            return None
        return style

    def _select(
        self, view: View, scorer: SemanticScorer, scored: list[_Scored], whose: WhoseDecision, k: int
    ) -> list[_Scored]:
        """Top k, skipping items that add no new evidence; an ambiguous subject reserves room for both sides."""
        cfg = self.config
        fresh: list[_Scored] = []
        covered: set[str] = set()
        for s in scored:
            ids = self._source_ids(view, scorer, s[1].row)
            if cfg.dedupe_evidence and ids and ids <= covered:
                continue
            covered |= ids
            fresh.append(s)
            if len(fresh) >= k * 3:
                break
        if whose.subject is not Subject.AMBIGUOUS:
            return fresh[:k]
        quota = {Subject.USER: math.ceil(k * cfg.ambiguous_share)}
        quota[Subject.ASSISTANT] = k - quota[Subject.USER]
        picked: list[_Scored] = []
        for s in fresh:
            side = Subject.USER if speaker_of(s[1].row, scorer.user_names)[1] == "user" else Subject.ASSISTANT
            if quota[side] > 0:
                quota[side] -= 1
                picked.append(s)
        picked += [s for s in fresh if s not in picked][: k - len(picked)]
        order = {id(s): i for i, s in enumerate(fresh)}
        return sorted(picked, key=lambda s: order[id(s)])[:k]

    def _evidence(self, view: View, scorer: SemanticScorer, trait: PersonaRow) -> list[MessageRow]:
        snap = view.snapshot
        found = snap.messages_for(mid for mid, _, _ in view.evidence(trait))
        msgs = [m for mid, _, _ in view.evidence(trait) if (m := found.get(mid)) is not None]
        msgs.sort(key=lambda m: (-scorer.cosine("messages", m), -m.occurred_at, m.id))
        return msgs[: self.config.persona_evidence]

    def _shown_head(self, view: View, scorer: SemanticScorer, scored: list[_Scored], window: int) -> int:
        """How many scored items it takes to show ``window`` items: those whose evidence higher items already
        show are dropped from the answer (``dedupe_evidence``), so they do not count."""
        if not self.config.dedupe_evidence:
            return window
        covered: set[str] = set()
        shown = 0
        for n, s in enumerate(scored):
            ids = self._source_ids(view, scorer, s[1].row)
            if ids and ids <= covered:
                continue
            covered |= ids
            shown += 1
            if shown == window:
                return n + 1
        return len(scored)

    def _source_ids(self, view: View, scorer: SemanticScorer, row: MemoryRow) -> set[str]:
        """Ids of the messages ``_sources`` gives for an item; a record's without reading a cold one's row."""
        if isinstance(row, EpisodicRow) and not (row.type == "summary" and self.config.summary_evidence > 0):
            return view.visible_messages(row.source_message_ids)
        return {m.id for m in self._sources(view, scorer, row)}

    def _sources(self, view: View, scorer: SemanticScorer, row: MemoryRow) -> list[MessageRow]:
        if isinstance(row, MessageRow):
            return [row]
        if isinstance(row, EpisodicRow):
            snap = view.snapshot
            found = snap.messages_for(row.source_message_ids)
            msgs = [m for i in row.source_message_ids if (m := found.get(i)) is not None and view.message(m)]
            if row.type == "summary" and self.config.summary_evidence > 0:
                msgs.sort(key=lambda m: (-scorer.cosine("messages", m), -m.occurred_at, m.id))
                return msgs[: self.config.summary_evidence]
            return msgs
        return self._evidence(view, scorer, row)

    def _item(self, rank: int, view: View, scorer: SemanticScorer, scored: _Scored, ordered_by: str = "") -> Item:
        score, c, parts, reach = scored
        row, snap = c.row, view.snapshot
        provenance = tuple(Provenance.of(m) for m in self._sources(view, scorer, row))
        path: tuple[PathStep, ...] = ()
        if reach is not None and reach.path:  # a seed's own score has no path
            steps = [PathStep(reach.seed, _ntype(snap, reach.seed), _label(snap, reach.seed))]
            steps += [
                PathStep(h.node, _ntype(snap, h.node), _label(snap, h.node), h.edge_type, h.weight) for h in reach.path
            ]
            path = tuple(steps)
        speaker, role = speaker_of(row, scorer.user_names)
        if isinstance(row, MessageRow):
            layer = Layer.WORKING if row.id in view.working_ids else Layer.ARCHIVE
            times = item_times(row, snap.times_memo)  # when it was said, then what it dates ("two weeks ago …")
            kind, content, at, when = "message", row.text, row.occurred_at, times[1] if len(times) > 1 else -1
        elif isinstance(row, EpisodicRow):
            layer, kind, at, when = Layer.EPISODIC, row.type, row.occurred_at, row.event_time
            content = readable(row.content, speaker)
        else:
            layer, kind, content, at, when = Layer.PERSONA, row.kind, _trait_text(row), row.last_seen, -1
        if c.origin == "graph":
            layer = Layer.GRAPH
        offset = next((p.utc_offset_minutes for p in provenance if p.occurred_at == at), None)
        return Item(
            rank,
            layer,
            kind,
            row.id,
            content,
            score,
            parts,
            speaker,
            role,
            at,
            when,
            provenance,
            path,
            ordered_by,
            offset,
        )


def _style_notice(style: AnswerStyle | None) -> str:
    if style is None:
        return ""
    first = "records and traits" if style.preference > 0 else "messages"
    return (
        f"ranked for this owner's answer style: {first} first, learned from {style.feedback} answers they judged "
        "(items it raised say so)"
    )


def _close_archive(snap: OwnerSnapshot) -> None:
    if snap.archive is not None:
        snap.archive.close()


def _answer_size(answer: Answer) -> int:
    """Approximate resident bytes of an answer (for the answer cache's budget)."""
    size = 2_000
    for item in answer.items:
        size += 800 + 2 * len(item.content) + 500 * len(item.provenance) + 300 * len(item.hop_path)
    return size


def _ms(a: float, b: float) -> float:
    return (b - a) * 1000.0


def _with_cold(view: View, scorer: SemanticScorer) -> PositionRelevance:
    """Hub relevance of a tiered owner: with its cold part searched in process, a cold message node is as relevant
    as its cosine, as when the owner is held whole (the search's product gave the cosine with every cold message);
    searched through the store, as its cosine when this query read it (the cold messages its base searches
    found), 0 otherwise, as a non-message is: the same reads give the same relevance, whatever other queries
    left in the archive's memo. The cold cosines sit after the hot ones at the snapshot's
    ``tiered_message_position`` (stable, so a hub's positions are made once)."""
    snap = view.snapshot
    positions = snap.tiered_message_position
    hot = scorer.cosines("messages")
    cosines = np.zeros(len(hot) + len(positions) - len(snap.message_position), dtype=np.float64)  # cold after hot
    cosines[: len(hot)] = hot
    if scorer.cold_cosines is not None:
        index, cold = scorer.cold_cosines
        rows = snap.cold_rows(index)
        cosines[len(hot) :] = np.where(rows >= 0, cold[np.maximum(rows, 0)], 0.0) if len(cold) else 0.0
        return PositionRelevance(cosines, positions)
    for mid in scorer.cold_vectors:
        at = positions.get(node_id(snap.owner_id, "message", mid), -1)
        if at >= len(hot) and (cosine := scorer.read_cosine(mid)) is not None:
            cosines[at] = cosine
    return PositionRelevance(cosines, positions)


def _stale(view: View, row: MemoryRow) -> bool:
    return isinstance(row, MessageRow) and view.stale(row)


def _conversation(row: MemoryRow) -> str:
    return row.conversation_id if isinstance(row, (MessageRow, EpisodicRow)) else ""


def _newest_change_first(scored: list[_Scored], window: int) -> list[_Scored]:
    """The newest user message that states a change (an extracted event) among the first ``window`` items,
    moved ahead of the older items ranked above it: on a question about the present the latest statement
    is the answer, whether or not consolidation has superseded the old one yet."""
    head = scored[:window]
    changes = [
        (s[1].row.occurred_at, -i)
        for i, s in enumerate(head)
        if isinstance(s[1].row, MessageRow) and s[1].row.role == "user" and _states_change(s[1].row)
    ]
    if not changes:
        return scored
    at, neg = max(changes)
    j = -neg
    i = next(i for i, s in enumerate(head) if _said_at(s[1].row) < at or i == j)
    return [*scored[:i], scored[j], *[s for n, s in enumerate(scored[i:], start=i) if n != j]]


def _states_change(row: MessageRow) -> bool:
    """Whether the message's recorded analysis found an event in it (a change stated with a verb)."""
    return '"events":[{' in row.extraction_json


def _said_at(row: MemoryRow) -> int:
    """When a message or record was said (event time; -1 for persona traits)."""
    return row.occurred_at if isinstance(row, (MessageRow, EpisodicRow)) else -1


def _ntype(snap: OwnerSnapshot, node: str) -> str:
    n = snap.nodes.get(node)
    return n.node_type if n is not None else ""


def _label(snap: OwnerSnapshot, node: str) -> str:
    n = snap.nodes.get(node)
    return n.label if n is not None else ""


def _trait_text(t: PersonaRow) -> str:
    if t.kind in ("preference", "preference_cluster"):
        return f"{t.key} {t.value}"
    if t.kind == "habit":
        return t.value
    return f"{t.key.replace('_', ' ')}: {t.value}"
