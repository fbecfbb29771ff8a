"""Grants: another tenant's read access to a scope of an owner's memory, folded from ``GrantChanged``.

- ``granted`` writes a ``pending`` grant with its scope (grantee tenant, layers, topics, event-time
  range, whether sensitive data is shown, expiry). A grant id already known changes nothing: a
  grant's scope never changes after it is made (a wider or narrower scope is another grant).
- ``confirmed`` turns a ``pending`` grant ``active``; any other grant (unknown, active, revoked)
  stays as it is, so a confirmation cannot revive a revoked grant.
- ``revoked`` turns a ``pending`` or ``active`` grant ``revoked`` for good.

No clock: the times stored are the events' own ``occurred_at``; a grant's ``expires_at`` is compared
with the time of each read by the read path (``api.sharing``), never here. Grants are not memory:
they do not move the owner's event-time clock, and the memory layers never read them.
"""

from __future__ import annotations

from adamem.events import GrantChanged
from adamem.projections.folds.ids import grant_row_id
from adamem.projections.folds.rows import GrantRow, evolve
from adamem.projections.folds.state import Transaction

__all__ = ["change_grant", "grant_of"]


def grant_of(tx: Transaction, grant_id: str) -> GrantRow | None:
    """The owner's grant of that id, if any."""
    row = tx.state.tables["grants"].get(grant_row_id(tx.state.owner_id, grant_id))
    return row if isinstance(row, GrantRow) else None


def _none(value: int | None) -> int:
    return -1 if value is None else value


def change_grant(tx: Transaction, event: GrantChanged) -> None:
    """Fold one ``GrantChanged`` into the owner's grants."""
    current = grant_of(tx, event.grant_id)
    if event.action == "granted":
        if current is None:
            tx.put(
                GrantRow(
                    id=grant_row_id(tx.state.owner_id, event.grant_id),
                    owner_id=tx.state.owner_id,
                    grant_id=event.grant_id,
                    grantee_tenant=event.grantee_tenant,
                    layers=sorted(set(event.layers)),
                    topics=sorted(set(event.topics)),
                    scope_from=_none(event.scope_from),
                    scope_until=_none(event.scope_until),
                    include_sensitive=event.include_sensitive,
                    expires_at=_none(event.expires_at),
                    status="pending",
                    granted_at=event.occurred_at,
                    confirmed_at=-1,
                    revoked_at=-1,
                    reason=event.reason,
                )
            )
    elif current is None:
        return
    elif event.action == "confirmed" and current.status == "pending":
        tx.put(evolve(current, status="active", confirmed_at=event.occurred_at))
    elif event.action == "revoked" and current.status != "revoked":
        tx.put(evolve(current, status="revoked", revoked_at=event.occurred_at))
