"""``GET /v1/owners/{user}/changes``: an owner's memory change feed as server-sent events.

Each event is one ``MemoryChanged`` record of the changes topic (``streams.feed``): its SSE ``id``
is the record's offset on its partition of the changes topic, ``event`` is ``memory_changed``, and
``data`` the JSON of the change (item ids and kinds per layer, the causing log position; never
content: read the rows with ``/v1/users/{user}/memory``). A client resumes where it stopped by
sending the last id back as ``Last-Event-ID`` (browsers' ``EventSource`` does it by itself), or asks
for a start with ``from_offset``; without either the stream starts at the end: changes committed
from now on. Delivery is at least once: dedupe by ``event_id``.

Tenant keys are enforced as on every ``/v1`` route (the same ``owner_of`` dependency): a key sees
its own tenant's owners only, and an owner of another tenant with the same user id never shows up
in the stream. The stream does not require the owner to have memory yet, so a client may subscribe
before the owner's first message. The changes topic is read by polling the log (every
``POLL_S``), on the embedded log and on Kafka alike; a comment line every ``KEEPALIVE_S`` keeps
proxies from closing an idle stream.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import StreamingResponse

from adamem.errors import AdaMemError, LogError
from adamem.feed import MemoryChanged
from adamem.owners import partition_key
from adamem.partitioning import partition_for
from adamem.schemas.serde import decode_as
from adamem.settings import Settings
from adamem.streams.log import EventLog

__all__ = ["KEEPALIVE_S", "POLL_S", "changes_router"]

POLL_S = 0.05
"""How often the stream looks for new change records."""
KEEPALIVE_S = 15.0
"""Seconds between keep-alive comments on an idle stream."""


def _frame(offset: int, event: MemoryChanged) -> bytes:
    data = json.dumps(event.as_json(), ensure_ascii=False, separators=(",", ":"))
    return f"id: {offset}\nevent: memory_changed\ndata: {data}\n\n".encode()


def changes_router(
    settings: Settings,
    log_: EventLog | None,
    owner_of: Callable[..., str],
    responses: dict[int | str, dict[str, Any]],
) -> APIRouter:
    """The router of the change-feed stream; ``owner_of`` is the service's tenant-checking owner dependency."""
    router = APIRouter()

    @router.get(
        "/v1/owners/{user}/changes",
        summary="The owner's memory changes as they are committed (server-sent events)",
        response_class=StreamingResponse,
        responses={
            200: {"content": {"text/event-stream": {}}, "description": "A stream of memory_changed events."},
            **responses,
        },
    )
    async def changes(
        request: Request,
        user: str,
        from_offset: int | None = Query(
            None, ge=0, description="Start at this offset of the owner's partition of the changes topic."
        ),
        last_event_id: str | None = Header(
            None, description="The id of the last event received: the stream goes on after it."
        ),
        owner_id: str = Depends(owner_of),
    ) -> StreamingResponse:
        if log_ is None:
            raise LogError("this service was started without a log; it has no change feed to stream")
        log = log_
        topic = settings.topic("changes")
        key = partition_key(owner_id)
        partition = partition_for(key, log.partitions(topic))
        if last_event_id is not None and last_event_id.strip().isdigit():
            start = int(last_event_id) + 1
        elif from_offset is not None:
            start = from_offset
        else:
            start = (await log.end_offsets(topic)).get(partition, 0)

        async def stream() -> AsyncIterator[bytes]:
            position = start
            idle = 0.0
            yield b": memory changes of one owner\n\n"
            while not await request.is_disconnected():
                end = (await log.end_offsets(topic)).get(partition, 0)
                if end > position:
                    async for rec in log.read(topic, from_offsets={partition: position}, until={partition: end}):
                        if rec.key != key:
                            continue
                        try:
                            event = decode_as(rec.value, MemoryChanged)
                        except AdaMemError:
                            continue  # not a change event (another writer's garbage): nothing to stream
                        if event.owner_id == owner_id:  # the same user id of another tenant is not this owner
                            yield _frame(rec.offset, event)
                    position, idle = end, 0.0
                    continue
                await asyncio.sleep(POLL_S)
                idle += POLL_S
                if idle >= KEEPALIVE_S:
                    idle = 0.0
                    yield b": keep-alive\n\n"

        return StreamingResponse(
            stream(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    return router
