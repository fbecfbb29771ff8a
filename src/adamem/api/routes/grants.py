"""Grants: the owner lets another tenant read a scope of their memory, confirms it, revokes it, and
reads the audit trail of what was read under it.

Every route here takes the owner's own key (another tenant's key is refused, 403, as for any write).
A grant, a confirmation and a revocation are control events on the log (``MemoryGrantChanged``);
each route answers once memory reflects it, so the next read sees it. A grant is ``pending`` until
confirmed, and a pending grant gives no access. How another tenant reads under a grant is in
``api.sharing``.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from fastapi import APIRouter, Depends, Path
from fastapi.responses import JSONResponse

from adamem.api.errors import responses
from adamem.api.grant_models import GrantAnswer, GrantBody, GrantChangeBody
from adamem.api.models import to_millis
from adamem.api.service import Service
from adamem.api.sharing import audit_trail, grant_json, grants_of
from adamem.errors import InvalidArgument, NotFound
from adamem.events import NAMESPACE, GrantAction, GrantChanged, grant_event_id
from adamem.owners import split_owner
from adamem.projections.folds.rows import GrantRow

__all__ = ["GrantNotFound", "grants_router", "new_grant_id"]

_NO_OPTIONS = GrantChangeBody.model_validate({})
GRANT = Path(description="A grant's id, as POST /v1/users/{user}/grants answered it.")


class GrantNotFound(NotFound):
    """The owner has no grant of that id."""

    def __init__(self, owner_id: str, grant_id: str) -> None:
        super().__init__(f"user {split_owner(owner_id)[1]!r} has no grant {grant_id!r}; list them with GET .../grants")


def new_grant_id(owner_id: str, body: GrantBody, at_ms: int) -> str:
    """The id of a new grant: derived from the owner, its scope and when it was made."""
    parts = (
        owner_id,
        body.grantee_tenant,
        ",".join(sorted(body.layers)),
        ",".join(sorted(body.topics)),
        str(body.from_),
        str(body.until),
        str(body.include_sensitive),
        str(body.expires_at),
        str(at_ms),
    )
    return str(uuid.uuid5(NAMESPACE, "\x1f".join(("grant", *parts))))


def grants_router(service: Service) -> APIRouter:
    """The grant routes of ``service``: changes need its log."""
    router = APIRouter()
    store = service.retriever.store

    def find(owner_id: str, grant_id: str) -> GrantRow:
        for grant in grants_of(store, owner_id):
            if grant.grant_id == grant_id:
                return grant
        raise GrantNotFound(owner_id, grant_id)

    async def publish(event: GrantChanged, wait_ms: int) -> GrantRow:
        await service.append_control(
            event, "change grants", wait_ms, "the change is on the log and takes effect when the projections reach it"
        )
        return await asyncio.to_thread(find, event.owner_id, event.grant_id)

    async def change(owner_id: str, grant_id: str, action: GrantAction, body: GrantChangeBody) -> GrantRow:
        tenant, user = split_owner(owner_id)
        grant = await asyncio.to_thread(find, owner_id, grant_id)
        if action == "confirmed" and grant.status == "revoked":
            raise InvalidArgument(f"grant {grant_id!r} is revoked; a revoked grant stays revoked: make another")
        if (action, grant.status) in (("confirmed", "active"), ("revoked", "revoked")):
            return grant  # already so: nothing to write
        event = GrantChanged(
            event_id=grant_event_id(tenant, user, action, grant_id),
            user_id=user,
            tenant=tenant,
            grant_id=grant_id,
            action=action,
            occurred_at=int(time.time() * 1000),  # stamped here, at the edge: the folds never read a clock
            reason=body.reason,
        )
        return await publish(event, body.wait_ms)

    def answer(grant: GrantRow, status: int = 200) -> JSONResponse:
        return JSONResponse(grant_json(grant), status_code=status)

    keyed = service.keyed_errors

    @router.post(
        "/v1/users/{user}/grants",
        status_code=201,
        summary="Grant another tenant read access to a scope of this memory (pending until confirmed)",
        response_model=GrantAnswer,
        responses=responses(*keyed, 400, 404, 409, 413, 415, 422, 500, 503),
    )
    async def grant(body: GrantBody, owner_id: str = Depends(service.owner_of)) -> JSONResponse:
        tenant, user = split_owner(owner_id)
        if body.grantee_tenant == tenant:
            raise InvalidArgument(f"tenant {tenant!r} owns this memory already: grant another tenant")
        await service.owner_known(owner_id)
        at = int(time.time() * 1000)
        grant_id = new_grant_id(owner_id, body, at)
        scope_from = None if body.from_ is None else to_millis(body.from_)
        scope_until = None if body.until is None else to_millis(body.until)
        if scope_from is not None and scope_until is not None and scope_from > scope_until:
            raise InvalidArgument("'from' is after 'until': the time range covers nothing")
        event = GrantChanged(
            event_id=grant_event_id(tenant, user, "granted", grant_id),
            user_id=user,
            tenant=tenant,
            grant_id=grant_id,
            action="granted",
            occurred_at=at,
            grantee_tenant=body.grantee_tenant,
            layers=tuple(body.layers),
            topics=tuple(body.topics),
            scope_from=scope_from,
            scope_until=scope_until,
            include_sensitive=body.include_sensitive,
            expires_at=None if body.expires_at is None else to_millis(body.expires_at),
            reason=body.reason,
        )
        return answer(await publish(event, body.wait_ms), 201)

    @router.get(
        "/v1/users/{user}/grants",
        summary="The grants of this memory, pending, active and revoked",
        responses=responses(*keyed, 422, 500, 503),
    )
    async def list_grants(owner_id: str = Depends(service.owner_of)) -> dict[str, Any]:
        tenant, user = split_owner(owner_id)
        grants = await asyncio.to_thread(grants_of, store, owner_id)
        return {"user_id": user, "tenant": tenant, "grants": [grant_json(g) for g in grants]}

    @router.get(
        "/v1/users/{user}/audit",
        summary="Who read this memory under a grant: which grant, route and items, and when",
        responses=responses(*keyed, 422, 500, 503),
    )
    async def audit(owner_id: str = Depends(service.owner_of)) -> dict[str, Any]:
        tenant, user = split_owner(owner_id)
        return {"user_id": user, "tenant": tenant, "reads": await audit_trail(service.log, service.settings, owner_id)}

    @router.post(
        "/v1/users/{user}/grants/{grant_id}/confirm",
        summary="Confirm a pending grant: from then on it gives access",
        response_model=GrantAnswer,
        responses=responses(*keyed, 400, 404, 409, 413, 415, 422, 500, 503),
    )
    async def confirm(
        grant_id: str = GRANT,
        body: GrantChangeBody | None = None,
        owner_id: str = Depends(service.owner_of),
    ) -> JSONResponse:
        return answer(await change(owner_id, grant_id, "confirmed", body or _NO_OPTIONS))

    @router.delete(
        "/v1/users/{user}/grants/{grant_id}",
        summary="Revoke a grant: the next read under it is refused",
        response_model=GrantAnswer,
        responses=responses(*keyed, 400, 404, 409, 413, 415, 422, 500, 503),
    )
    async def revoke(
        grant_id: str = GRANT,
        body: GrantChangeBody | None = None,
        owner_id: str = Depends(service.owner_of),
    ) -> JSONResponse:
        return answer(await change(owner_id, grant_id, "revoked", body or _NO_OPTIONS))

    return router
