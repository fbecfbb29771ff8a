"""A per-owner overview of the four layers, for ``adamem memory``: counts and a few top items."""

from __future__ import annotations

from collections import Counter
from typing import Any

from adamem.owners import split_owner
from adamem.projections.folds.rows import EpisodicRow, GraphEdgeRow, GraphNodeRow, PersonaRow
from adamem.projections.folds.state import OwnerMemory

__all__ = ["owner_summary"]


def owner_summary(state: OwnerMemory, top: int = 5) -> dict[str, Any]:
    """Counts per layer and the ``top`` strongest traits, newest records and most mentioned topics."""
    records = [r for r in state.tables["episodic"].values() if isinstance(r, EpisodicRow)]
    traits = [t for t in state.tables["persona"].values() if isinstance(t, PersonaRow)]
    nodes = [n for n in state.tables["graph_nodes"].values() if isinstance(n, GraphNodeRow)]
    edges = [e for e in state.tables["graph_edges"].values() if isinstance(e, GraphEdgeRow)]
    active = [r for r in records if r.status == "active"]
    active_traits = [t for t in traits if t.status == "active"]
    topic_labels = {n.id: n.label for n in nodes if n.node_type == "topic"}
    mentions = Counter(topic_labels[e.dst] for e in edges if e.edge_type == "mentions" and e.dst in topic_labels)
    working = state.working_ids()
    return {
        "user_id": split_owner(state.owner_id)[1],
        "tenant": split_owner(state.owner_id)[0],
        "last_event_time": state.last_event_time,
        "working": {"size": len(working), "message_ids": working},
        "archive": {"messages": len(state.tables["messages"])},
        "episodic": {
            "active": dict(sorted(Counter(r.type for r in active).items())),
            "superseded": sum(1 for r in records if r.status == "superseded"),
            "latest": [
                {"id": r.id, "type": r.type, "content": r.content, "confidence": r.confidence}
                for r in sorted(active, key=lambda r: (r.valid_from, r.id), reverse=True)[:top]
            ],
        },
        "persona": {
            "traits": len(active_traits),
            "stable": sum(1 for t in active_traits if t.stable),
            "disputed": sum(1 for t in active_traits if t.disputed),
            "strongest": [
                {
                    "id": t.id,
                    "kind": t.kind,
                    "key": t.key,
                    "value": t.value,
                    "strength": round(t.strength, 4),
                    "mentions": t.mention_count,
                    "stable": t.stable,
                }
                for t in sorted(active_traits, key=lambda t: (-t.strength, t.id))[:top]
            ],
        },
        "graph": {
            "nodes": dict(sorted(Counter(n.node_type for n in nodes).items())),
            "edges": dict(sorted(Counter(e.edge_type for e in edges).items())),
            "top_topics": [
                {"topic": t, "mentions": c} for t, c in sorted(mentions.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
            ],
        },
    }
