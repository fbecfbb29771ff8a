"""Memory rows as lines of text, the same in-process (``adamem memory``) and from a service (``--url``)."""

from __future__ import annotations

from typing import Any

from adamem.events import ms_to_iso

__all__ = ["row_line"]


def row_line(row: Any) -> str:
    """One memory row as a line of text (a store row, or its JSON form with ``TABLE`` set)."""
    table = row.TABLE
    if table == "messages":
        return f"[{ms_to_iso(row.occurred_at, getattr(row, 'utc_offset_minutes', None))}] {row.speaker}: {row.text}"
    if table == "episodic":
        valid = "" if row.status == "active" else f" (superseded at {ms_to_iso(row.valid_to)})"
        return f"{row.type:9} {row.confidence:.2f} {row.content}{valid}"
    if table == "persona":
        flags = ", ".join(f for f, on in (("stable", row.stable), ("disputed", row.disputed)) if on)
        return (
            f"{row.kind:18} {row.key}={row.value} strength {row.strength:.2f}, {row.mention_count} mention(s) {flags}"
        )
    if table == "graph_nodes":
        return f"node {row.node_type:9} {row.label[:80]}"
    return f"edge {row.edge_type:15} {row.weight:.2f} {row.src[:8]}→{row.dst[:8]} ({row.direction})"
