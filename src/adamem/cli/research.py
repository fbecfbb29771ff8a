"""``adamem research``: the Research Agent in-process (or of a running service): graded evidence in rounds."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from adamem.settings import Settings

__all__ = ["print_research", "run_research"]


def run_research(
    settings: Settings,
    user: str,
    query: str,
    *,
    tenant: str,
    depth: int,
    context: str,
    hints: Sequence[str],
    top_k: int,
    as_of: str | None,
    as_json: bool,
    url: str | None,
) -> int:
    """Research ``tenant``'s user's memory in up to ``depth`` rounds; print the graded answer."""
    from adamem.ingest import parse_time
    from adamem.owners import owner_key
    from adamem.retrieval.research import ResearchRequest, research

    request = ResearchRequest(query, context, tuple(hints), depth, top_k)  # InputError for a bad one, before any I/O
    if url is not None:
        from adamem.api.client import MemoryClient
        from adamem.cli.remote import service_key

        with MemoryClient(url, service_key(settings, tenant), tenant=tenant) as client:
            answer = client.research(user, query, depth, context, list(hints), top_k, as_of)
    else:
        from adamem.cli.commands import build_retriever

        retriever = build_retriever(settings)
        try:
            point = None if as_of is None else (int(as_of) if as_of.isdigit() else parse_time(as_of))
            answer = research(retriever, owner_key(tenant, user), request, as_of=point).to_dict()
        finally:
            retriever.close()
    if as_json:
        print(json.dumps(answer, ensure_ascii=False, indent=1))
    else:
        print_research(answer)
    return 0


def print_research(answer: dict[str, Any]) -> None:
    """The graded answer as text: confidence and why, each round, conflicts, then the items."""
    from adamem.events import ms_to_iso
    from adamem.retrieval.answer import when_text

    print(f"confidence: {answer['confidence']} — {answer['because']}")
    for r in answer["rounds"]:
        cues = ", ".join(r["cues"]) if r["cues"] else "the question alone"
        print(f"round {r['round']}: searched for {cues}; added {len(r['added'])} item(s)")
    print(f"stopped: {answer['stopped']}")
    for c in answer["conflicts"]:
        now, old = c["current"], c["earlier"]
        print(
            f"conflict ({c['slot'] or 'statement'}): {now['content'][:80]} ({ms_to_iso(now['occurred_at'])}) "
            f"replaces {old['content'][:80]} ({ms_to_iso(old['occurred_at'])})"
        )
    for item in answer["items"]:
        g = item["grade"]
        when = when_text(item.get("occurred_at", -1), item.get("event_time", -1), item.get("utc_offset_minutes"))
        mark = "" if g["current"] else "  [replaced]"
        print(
            f"{item['rank']:2}. [{item['layer']}/{item['kind']}] grade {g['score']:.2f} (reliability "
            f"{g['reliability']}, freshness {g['freshness']:.2f}, {g['agreement']} agree; round {item['round']}) "
            f"{when} {item['content'][:120]}{mark}"
        )
    if not answer["items"]:
        print("no items")
