"""Micro-benchmark of the memory folds: fold synthetic analyses for many owners and print events/s.

    .venv/bin/python bench/fold_speed.py [--owners 100] [--per-owner 100] [--dim 384] [--seed 7] [--repeat 3]

Events are built up front (not timed); only ``apply`` is timed, best of ``--repeat`` fresh runs
(fresh states and cold memo caches). Each owner talks in sessions of about ten messages a few
days apart, in English and Chinese, with facts (some conflicting), preferences, recurring events
and topics, so working-memory eviction, session-end consolidation, all three routers, persona
clustering / habits and the graph are exercised.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adamem.events import (
    Analyzer,
    ChatMessage,
    Embedding,
    ExtractedAttribute,
    ExtractedEvent,
    ExtractedFact,
    MessageAnalyzed,
    Speaker,
    analysis_event_id,
    message_event_id,
)
from adamem.projections.folds import OwnerMemory, Positioned, apply, ids, lexicon

HOUR, DAY = 3_600_000, 86_400_000
T0 = 1_709_510_400_000
CITIES = ["Shanghai", "Beijing", "Shenzhen", "Hangzhou", "成都", "武汉"]
LIKES = [
    "spicy food",
    "Sichuan food",
    "湖南菜",
    "green tea",
    "coffee",
    "jazz",
    "sci-fi novels",
    "hiking",
    "火锅",
    "Japanese ramen",
    "Japanese curry",
    "cats",
]
EVENTS = ["went to the gym", "去健身房锻炼", "went running", "played badminton", "visited my parents", "看了一场电影"]
TOPICS = ["work", "food", "fitness", "travel", "family", "健康", "电影", "music"]


def _vector(rng: random.Random, dim: int) -> tuple[float, ...]:
    raw = [rng.gauss(0.0, 1.0) for _ in range(dim)]
    norm = math.sqrt(sum(x * x for x in raw))
    return tuple(x / norm for x in raw)


def synthetic(owners: int, per_owner: int, dim: int, seed: int) -> list[Positioned]:
    """Interleaved analyses of many owners, as a partition would deliver them."""
    rng = random.Random(seed)
    streams: list[list[Positioned]] = []
    offset = 0
    for o in range(owners):
        user = f"user-{o:04d}"
        out: list[Positioned] = []
        at = T0 + rng.randrange(7 * DAY)
        session = 0
        for n in range(per_owner):
            if n % 10 == 0:
                session += 1
                at += rng.randrange(2 * DAY, 6 * DAY)
            at += rng.randrange(30_000, 600_000)
            user_turn = n % 2 == 0
            conv = f"{user}-s{session}"
            mid = f"m{n}"
            eid = message_event_id("default", user, conv, mid)
            facts: list[ExtractedFact] = []
            attrs: list[ExtractedAttribute] = []
            events: list[ExtractedEvent] = []
            if user_turn:
                if rng.random() < 0.3:
                    facts.append(ExtractedFact(f"lives in {rng.choice(CITIES)}", rng.uniform(0.6, 1.0), key="lives_in"))
                if rng.random() < 0.3:
                    facts.append(ExtractedFact(f"works on project {rng.randrange(5)}", rng.uniform(0.6, 1.0)))
                if rng.random() < 0.4:
                    attrs.append(
                        ExtractedAttribute(
                            rng.choice(["likes", "likes", "dislikes", "喜欢"]), rng.choice(LIKES), rng.uniform(0.6, 1.0)
                        )
                    )
                if rng.random() < 0.3:
                    events.append(ExtractedEvent(rng.choice(EVENTS), rng.uniform(0.6, 1.0)))
            msg = ChatMessage(
                event_id=eid,
                user_id=user,
                conversation_id=conv,
                message_id=mid,
                speaker=Speaker(role="user", name="U") if user_turn else Speaker(role="assistant", name="Assistant"),
                text=f"message {n} of {user}",
                occurred_at=at,
            )
            analysis = MessageAnalyzed(
                event_id=analysis_event_id(eid, "bench", "1", "g1"),
                message=msg,
                analyzer=Analyzer("bench", "1"),
                embedding=Embedding("bench", _vector(rng, dim)),
                topics=tuple(rng.sample(TOPICS, rng.randrange(1, 3))),
                facts=tuple(facts),
                attributes=tuple(attrs),
                events=tuple(events),
                entities=tuple(rng.sample(CITIES, 1)) if facts else (),
            )
            out.append(Positioned(analysis, "adamem.analyses", o % 4, 0))
        streams.append(out)
    merged: list[Positioned] = []
    cursors = [0] * owners
    while len(merged) < owners * per_owner:
        o = rng.randrange(owners)
        if cursors[o] < per_owner:
            p = streams[o][cursors[o]]
            merged.append(Positioned(p.event, p.topic, p.partition, offset))
            offset += 1
            cursors[o] += 1
    return merged


def main() -> None:
    """Build the events, fold them, print events/s and what was written."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--owners", type=int, default=100)
    parser.add_argument("--per-owner", type=int, default=100)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=3, help="fold the events this many times; report the best")
    args = parser.parse_args()
    events = synthetic(args.owners, args.per_owner, args.dim, args.seed)
    best = math.inf
    for _ in range(args.repeat):
        for memo in (
            ids.node_id,
            lexicon.normalize,
            lexicon.tokens,
            lexicon.preference_polarity,
            lexicon.is_single_valued,
            lexicon.lexicon_cluster,
            lexicon.activity_of,
        ):
            memo.cache_clear()
        states: dict[str, OwnerMemory] = {}
        changes = 0
        start = time.perf_counter()
        for p in events:
            user = p.event.user_id
            state = states.get(user)
            if state is None:
                state = states[user] = OwnerMemory(user)
            _, out = apply(state, p)
            changes += len(out)
        best = min(best, time.perf_counter() - start)
    rows = sum(len(t) for s in states.values() for t in s.tables.values())
    print(
        f"folded {len(events):,} analyses for {len(states)} owners (dim {args.dim}) in {best:.3f} s "
        f"(best of {args.repeat}): {len(events) / best:,.0f} events/s; {changes:,} row changes, {rows:,} rows"
    )


if __name__ == "__main__":
    main()
