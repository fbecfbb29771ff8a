"""Reading memory: ranked evidence for a question, research in rounds, a layer's rows, an item's provenance.

Each read answers the owner's own key in full, and a key of another tenant under an active grant
(``api.sharing``) within the grant's scope only, sensitive data masked unless the grant includes it;
such a read is on the owner's audit trail before it is answered.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal, cast

from fastapi import APIRouter, Depends, Path, Query
from fastapi.responses import JSONResponse, Response

from adamem.api.errors import responses
from adamem.api.metrics import observe_answer
from adamem.api.models import QueryBody, ResearchBody
from adamem.api.provenance import ItemNotFound
from adamem.api.service import OWNER, Service
from adamem.api.sharing import Access, GrantScope, ScopedRetriever, record_read, scoped_query
from adamem.errors import Forbidden
from adamem.owners import split_owner
from adamem.projections.folds.rows import row_json
from adamem.retrieval.research import ResearchRequest, research
from adamem.retrieval.service import Retriever

__all__ = ["LAYER_TABLES", "reads_router"]

LAYER_TABLES = {
    "working": ("messages",),
    "episodic": ("episodic",),
    "persona": ("persona",),
    "graph": ("graph_nodes", "graph_edges"),
    "archive": ("messages",),
}


def reads_router(service: Service) -> APIRouter:
    """The read routes of ``service``."""
    router = APIRouter()
    store, settings = service.retriever.store, service.settings

    async def scope_of(access: Access) -> GrantScope:
        assert access.grant is not None
        return await asyncio.to_thread(GrantScope.load, service.retriever, access.grant)

    @router.post(
        "/v1/users/{user}/query",
        summary="Ranked evidence for a question, with provenance",
        response_model=dict[str, Any],
        response_class=JSONResponse,
        responses=responses(*service.keyed_errors, 400, 404, 409, 413, 415, 422, 500, 503),
    )
    async def query(body: QueryBody, access: Access = Depends(service.access_of)) -> Response:
        owner_id = access.owner_id
        if body.min_position:
            await service.reached(body.min_position, body.wait_ms)
        point = service.as_of_point(body.as_of)
        if access.shared:
            scope = await scope_of(access)
            found = await asyncio.to_thread(
                scoped_query, service.retriever, scope, owner_id, body.question, body.top_k, point
            )
            await record_read(service.log, settings, access, "POST /v1/users/{user}/query", [i.id for i in found.items])
            return JSONResponse(scope.shown(found.to_dict()))
        answer = await service.retriever.aquery(owner_id, body.question, body.top_k, point)
        if service.probes:
            lag = service.probes["lag"]
            observe_answer(answer, lag.owner_lag(owner_id) if lag is not None else None)
        return JSONResponse(answer.to_dict())  # serialised once by json, not validated by a model again

    @router.post(
        "/v1/users/{user}/research",
        summary="Evidence gathered in rounds, graded, with conflicts and how sure the answer is",
        response_model=dict[str, Any],
        response_class=JSONResponse,
        responses=responses(*service.keyed_errors, 400, 404, 413, 415, 422, 500, 503),
    )
    async def research_request(body: ResearchBody, access: Access = Depends(service.access_of)) -> Response:
        request = ResearchRequest(body.query, body.context, tuple(body.memory_hints), body.depth, body.top_k)
        point = service.as_of_point(body.as_of)
        if not access.shared:
            found = await asyncio.to_thread(research, service.retriever, access.owner_id, request, as_of=point)
            return JSONResponse(found.to_dict())
        scope = await scope_of(access)
        scoped = cast(Retriever, ScopedRetriever(service.retriever, scope))
        shared = await asyncio.to_thread(research, scoped, access.owner_id, request, as_of=point)
        answer = shared.to_dict()
        answer["conflicts"] = [
            c
            for c in answer["conflicts"]
            if scope.covers_id(c["current"]["id"]) and scope.covers_id(c["earlier"]["id"])
        ]
        ids = [item["id"] for item in answer["items"]]
        await record_read(service.log, settings, access, "POST /v1/users/{user}/research", ids)
        return JSONResponse(scope.shown(answer))

    @router.get(
        "/v1/users/{user}/memory",
        summary="One layer of a user's memory",
        responses=responses(*service.keyed_errors, 404, 422, 500, 503),
    )
    async def memory(
        user: str = OWNER,
        layer: Literal["working", "episodic", "persona", "graph", "archive"] = Query("episodic"),
        limit: int = Query(500, ge=1, le=10_000),
        access: Access = Depends(service.access_of),
    ) -> dict[str, Any]:
        owner_id = access.owner_id
        await service.owner_known(owner_id)
        rows = [r for t in LAYER_TABLES[layer] for r in await asyncio.to_thread(store.rows, t, owner_id)]
        if layer == "working":
            rows = sorted((r for r in rows if r.in_working), key=lambda r: r.working_seq)  # type: ignore[union-attr]
        answer = {"user_id": user, "tenant": split_owner(owner_id)[0], "layer": layer}
        if not access.shared:
            return {**answer, "count": len(rows), "rows": [row_json(r) for r in rows[:limit]]}
        scope = await scope_of(access)
        if not scope.covers_layer(layer):
            raise Forbidden(f"grant {scope.grant.grant_id} does not cover the {layer} layer")
        rows = [r for r in rows if scope.covers(r)]
        shown = rows[:limit]
        await record_read(
            service.log, settings, access, f"GET /v1/users/{{user}}/memory?layer={layer}", [r.id for r in shown]
        )
        return {**answer, "count": len(rows), "rows": scope.shown([row_json(scope.narrow_row(r)) for r in shown])}

    @router.get(
        "/v1/users/{user}/memory/{item}/provenance",
        summary="From a memory item back to its messages",
        responses=responses(*service.keyed_errors, 404, 422, 500, 503),
    )
    async def provenance(
        item: str = Path(description="A memory item's id."), access: Access = Depends(service.access_of)
    ) -> dict[str, Any]:
        owner_id = access.owner_id
        await service.owner_known(owner_id)
        from adamem.api.provenance import trace

        if not access.shared:
            return await trace(service.retriever, service.log, settings, owner_id, item)
        scope = await scope_of(access)
        if not (scope.covers_id(item) and any(scope.covers_layer(layer) for layer in _layers_of(scope, item))):
            raise ItemNotFound(owner_id, item)  # as for an item that does not exist: nothing is said about it
        found = await trace(service.retriever, service.log, settings, owner_id, item)
        found["messages"] = [m for m in found["messages"] if scope.covers_id(m["message_event_id"])]
        for m in found["messages"]:
            m.pop("analysis", None)  # the recorded analysis holds every fact of the message, covered or not
        ids = [item, *(m["message_event_id"] for m in found["messages"])]
        await record_read(service.log, settings, access, "GET /v1/users/{user}/memory/{item}/provenance", ids)
        return cast(dict[str, Any], scope.shown(found))

    return router


def _layers_of(scope: GrantScope, item: str) -> tuple[str, ...]:
    """The layers an item of that id is read in."""
    if item in scope.records:
        return ("episodic", "graph")
    if item in scope.traits:
        return ("persona",)
    if item in scope.nodes:
        return ("graph",)
    return ("working", "archive", "graph")
