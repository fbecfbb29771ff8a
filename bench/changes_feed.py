"""What the memory change feed costs and how soon a subscriber hears of a commit.

    .venv/bin/python bench/changes_feed.py [--owners 100] [--per-owner 100] [--dim 384] [--repeat 5] [--batch 1000]

The synthetic analyses of ``bench/fold_speed.py`` (many owners, sessions, conflicts, preferences,
habits), in one run:

1. **Fold** — the pure fold timed alone, then ``change_events`` over the changes it recorded, then
   encoding those events (what a publish adds before its append), best of ``--repeat`` each; and
   ``Projector.apply_batch`` over the in-memory store with the feed off and on, alternating.
2. **Projection on the embedded log into LanceDB** — the analyses are appended to an embedded
   log, then ``project_pending`` folds them into a fresh LanceDB store with the feed off, then on
   (publishing to the changes topic), alternating, best of ``--repeat``: events/s of the real path.
3. **Commit → subscriber** — during the feed-on projection a subscriber on another thread (its own
   event loop and log instance, as a second process would) polls the changes topic every 50 ms, the
   SSE route's interval; per batch, the time from the end of the store commit to the subscriber
   reading the batch's last record.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adamem.feed import MemoryChanged
from adamem.projections.feed import change_events
from adamem.projections.folds import Change, OwnerMemory, Positioned, apply, ids, lexicon
from adamem.projections.projector import Projector
from adamem.projections.store.lance import LanceStore
from adamem.projections.store.memory import InMemoryStore
from adamem.schemas.serde import encode_event
from adamem.settings import Settings
from adamem.streams.factory import open_log
from adamem.streams.feed import FEED_HEADER
from adamem.streams.log import OutgoingRecord
from adamem.streams.pipeline import project_pending
from bench.fold_speed import synthetic

TOPIC = "adamem.analyses"


def _clear_memos() -> None:
    for memo in (ids.node_id, lexicon.normalize, lexicon.tokens, lexicon.preference_polarity,
                 lexicon.is_single_valued, lexicon.lexicon_cluster, lexicon.activity_of):  # fmt: skip
        memo.cache_clear()


def fold_costs(events: list[Positioned], repeat: int) -> dict[str, float]:
    """Seconds (best of ``repeat``) of the pure fold, of ``change_events`` over its recorded changes, of encoding those.

    Timed apart on the same changes, so the feed's share does not drown in the machine's noise.
    """
    best = {"fold": math.inf, "feed": math.inf, "encode": math.inf}
    pairs: list[tuple[Positioned, list[Change]]] = []
    for _ in range(repeat):
        _clear_memos()
        states: dict[str, OwnerMemory] = {}
        pairs = []
        start = time.perf_counter()
        for p in events:
            owner = p.event.owner_id
            state = states.get(owner)
            if state is None:
                state = states[owner] = OwnerMemory(owner)
            _, delta = apply(state, p)
            pairs.append((p, delta))
        best["fold"] = min(best["fold"], time.perf_counter() - start)
    feed: list[MemoryChanged] = []
    for _ in range(repeat):
        start = time.perf_counter()
        feed = [e for p, delta in pairs for e in change_events(p, delta, "r1")]
        best["feed"] = min(best["feed"], time.perf_counter() - start)
    for _ in range(repeat):
        start = time.perf_counter()
        for e in feed:
            encode_event(e)
        best["encode"] = min(best["encode"], time.perf_counter() - start)
    print(
        f"fold: {len(events):,} analyses, {sum(len(d) for _, d in pairs):,} row changes, {len(feed):,} change events "
        f"({sum(len(e.changes) for e in feed):,} item changes)"
    )
    return best


def fold_rates(events: list[Positioned], batch: int, repeat: int) -> dict[str, float]:
    """Events/s of ``Projector.apply_batch`` (in-memory store), feed off and on, alternating; best of ``repeat``."""
    best = {"off": math.inf, "on": math.inf}
    for _ in range(repeat):
        for mode in best:
            _clear_memos()
            store = InMemoryStore()
            store.bind(1)
            projector = Projector(store, feed=mode == "on")
            start = time.perf_counter()
            for i in range(0, len(events), batch):
                projector.apply_batch(0, TOPIC, events[i : i + batch])
            best[mode] = min(best[mode], time.perf_counter() - start)
    return {mode: len(events) / seconds for mode, seconds in best.items()}


async def _fill_log(settings: Settings, events: list[Positioned]) -> None:
    log = open_log(settings.log_url, settings)
    await log.start()
    try:
        topic = settings.topic("analyses")
        for i in range(0, len(events), 2000):
            chunk = events[i : i + 2000]
            await log.append(topic, [OutgoingRecord(p.event.user_id, encode_event(p.event)) for p in chunk])
    finally:
        await log.stop()


def _subscriber(settings: Settings, stop: threading.Event, seen: dict[int, float]) -> None:
    """Poll the changes topic every 50 ms from a log instance of its own; record when each batch's reach is read."""

    async def run() -> None:
        log = open_log(settings.log_url, settings)
        await log.start()
        topic, analyses = settings.topic("changes"), settings.topic("analyses")
        position = 0
        while not stop.is_set():
            end = (await log.end_offsets(topic)).get(0, 0)
            if end > position:
                async for rec in log.read(topic, from_offsets={0: position}, until={0: end}):
                    reach = json.loads(dict(rec.headers)[FEED_HEADER]).get(analyses)
                    seen.setdefault(reach, time.monotonic())
                position = end
            await asyncio.sleep(0.05)

    asyncio.run(run())


async def _project(settings: Settings, root: Path, feed: bool, batch: int) -> tuple[float, list[float]]:
    """Seconds to project the whole log with the feed on or off; with it, commit-to-subscriber delays (s)."""
    log = open_log(settings.log_url, settings)
    await log.start()
    store = LanceStore(str(root), optimize_every=0)
    store.bind(1)
    committed: dict[int, float] = {}
    real_commit = store.commit

    def commit(partition: int, changes: Sequence[Change], offsets: dict[str, int]) -> None:
        real_commit(partition, changes, offsets)
        reach = offsets.get(settings.topic("analyses"))
        if reach is not None:
            committed[reach] = time.monotonic()

    store.commit = commit  # type: ignore[method-assign]
    seen: dict[int, float] = {}
    stop = threading.Event()
    watcher = threading.Thread(target=_subscriber, args=(settings, stop, seen))
    if feed:
        watcher.start()
    projector = Projector(store, feed=feed)
    try:
        start = time.perf_counter()
        await project_pending(log, projector, settings, 0, batch=batch)
        seconds = time.perf_counter() - start
        if feed:
            deadline = time.monotonic() + 10
            while max(committed) not in seen and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
    finally:
        stop.set()
        if feed:
            watcher.join()
        store.close()
        await log.stop()
    return seconds, [seen[r] - t for r, t in committed.items() if r in seen]


async def pipeline_rates(events: list[Positioned], batch: int, repeat: int) -> tuple[dict[str, float], list[float]]:
    """Events/s of ``project_pending`` with the feed off and on (fresh topics and store each run), and the delays."""
    with tempfile.TemporaryDirectory(prefix="adamem-feed-bench-") as tmp:
        best = {"off": math.inf, "on": math.inf}
        delays: list[float] = []
        warm = replace(Settings(), log_url=f"{tmp}/log", embedded_partitions=1, topic_prefix="warmup")
        await _fill_log(warm, events[: 2 * batch])
        await _project(warm, Path(tmp) / "store-warmup", True, batch)  # imports, first tables: not timed
        for r in range(repeat):
            for mode in best:
                settings = replace(Settings(), log_url=f"{tmp}/log", embedded_partitions=1, topic_prefix=f"{mode}{r}")
                await _fill_log(settings, events)
                seconds, d = await _project(settings, Path(tmp) / f"store-{mode}-{r}", mode == "on", batch)
                best[mode] = min(best[mode], seconds)
                delays += d
        return {mode: len(events) / s for mode, s in best.items()}, delays


def main() -> None:
    """Run the three measurements and print them."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--owners", type=int, default=100)
    parser.add_argument("--per-owner", type=int, default=100)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--pipeline-repeat", type=int, default=2)
    args = parser.parse_args()
    events = [
        Positioned(p.event, TOPIC, 0, i)
        for i, p in enumerate(synthetic(args.owners, args.per_owner, args.dim, args.seed))
    ]
    costs = fold_costs(events, args.repeat)
    fold_s = costs["fold"]
    print(
        f"pure fold {len(events) / fold_s:,.0f} ev/s ({fold_s:.3f} s); change_events on its changes "
        f"{costs['feed']:.3f} s (+{costs['feed'] / fold_s:.1%}); encoding them {costs['encode']:.3f} s "
        f"(+{costs['encode'] / fold_s:.1%}); fold + feed + encoding "
        f"{len(events) / (fold_s + costs['feed'] + costs['encode']):,.0f} ev/s"
    )
    rates = fold_rates(events, args.batch, args.repeat)
    print(
        f"Projector.apply_batch (in-memory store), alternating, best of {args.repeat}: feed off "
        f"{rates['off']:,.0f} ev/s, on {rates['on']:,.0f} ev/s ({rates['off'] / rates['on'] - 1:+.1%} time)"
    )
    prates, delays = asyncio.run(pipeline_rates(events, args.batch, args.pipeline_repeat))
    print(
        f"project_pending, embedded log -> LanceDB, best of {args.pipeline_repeat}: "
        f"feed off {prates['off']:,.0f} ev/s, "
        f"on {prates['on']:,.0f} ev/s ({prates['off'] / prates['on'] - 1:+.1%} time)"
    )
    if delays:
        ms = sorted(d * 1000 for d in delays)
        print(
            f"commit -> subscriber (50 ms polling), {len(ms)} batches: median {statistics.median(ms):.0f} ms, "
            f"p95 {ms[min(len(ms) - 1, int(0.95 * len(ms)))]:.0f} ms, max {ms[-1]:.0f} ms"
        )


if __name__ == "__main__":
    main()
