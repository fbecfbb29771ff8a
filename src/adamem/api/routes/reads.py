"""Reading memory: ranked evidence for a question, research in rounds, a layer's rows, an item's provenance."""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from fastapi import APIRouter, Depends, Path, Query
from fastapi.responses import JSONResponse, Response

from adamem.api.errors import responses
from adamem.api.metrics import observe_answer
from adamem.api.models import QueryBody, ResearchBody
from adamem.api.service import OWNER, Service
from adamem.owners import split_owner
from adamem.projections.folds.rows import row_json
from adamem.retrieval.research import ResearchRequest, research

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

    @router.post(
        "/v1/users/{user}/query",
        summary="Ranked evidence for a question, with provenance",
        response_model=dict[str, Any],
        response_class=JSONResponse,
        responses=responses(*service.keyed_errors, 400, 404, 409, 413, 415, 422, 500, 503),
    )
    async def query(body: QueryBody, owner_id: str = Depends(service.owner_of)) -> Response:
        if body.min_position:
            await service.reached(body.min_position, body.wait_ms)
        point = service.as_of_point(body.as_of)
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
    async def research_request(body: ResearchBody, owner_id: str = Depends(service.owner_of)) -> Response:
        request = ResearchRequest(body.query, body.context, tuple(body.memory_hints), body.depth, body.top_k)
        point = service.as_of_point(body.as_of)
        found = await asyncio.to_thread(research, service.retriever, owner_id, request, as_of=point)
        return JSONResponse(found.to_dict())

    @router.get(
        "/v1/users/{user}/memory",
        summary="One layer of a user's memory",
        responses=responses(*service.keyed_errors, 404, 422, 500, 503),
    )
    async def memory(
        user: str = OWNER,
        layer: Literal["working", "episodic", "persona", "graph", "archive"] = Query("episodic"),
        limit: int = Query(500, ge=1, le=10_000),
        owner_id: str = Depends(service.owner_of),
    ) -> dict[str, Any]:
        await service.owner_known(owner_id)
        store = service.retriever.store
        rows = [r for t in LAYER_TABLES[layer] for r in await asyncio.to_thread(store.rows, t, owner_id)]
        if layer == "working":
            rows = sorted((r for r in rows if r.in_working), key=lambda r: r.working_seq)  # type: ignore[union-attr]
        return {
            "user_id": user,
            "tenant": split_owner(owner_id)[0],
            "layer": layer,
            "count": len(rows),
            "rows": [row_json(r) for r in rows[:limit]],
        }

    @router.get(
        "/v1/users/{user}/memory/{item}/provenance",
        summary="From a memory item back to its messages",
        responses=responses(*service.keyed_errors, 404, 422, 500, 503),
    )
    async def provenance(
        item: str = Path(description="A memory item's id."), owner_id: str = Depends(service.owner_of)
    ) -> dict[str, Any]:
        await service.owner_known(owner_id)
        from adamem.api.provenance import trace

        return await trace(service.retriever, service.log, service.settings, owner_id, item)

    return router
