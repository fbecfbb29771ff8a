"""Writing to the log: publish messages, wait until what was published is in memory (read your writes),
and forget (an item, a message, or the whole owner), answered once memory reflects it."""

from __future__ import annotations

import asyncio
import time

from fastapi import APIRouter, Depends

from adamem.api.auth import Principal
from adamem.api.errors import responses
from adamem.api.models import (
    FeedbackAnswer,
    FeedbackBody,
    ForgetAnswer,
    ForgetBody,
    ForgetEverything,
    ForgetItem,
    ForgetMessage,
    LogPosition,
    PublishAnswer,
    PublishBody,
    WaitAnswer,
    WaitBody,
    publish_body,
    to_millis,
    utc_offset_of,
)
from adamem.api.provenance import ItemNotFound
from adamem.api.service import Service
from adamem.errors import Forbidden, LogError

__all__ = ["feedback_target", "forget_target", "writes_router"]

_ITEM_TABLES = ("episodic", "persona", "graph_nodes", "graph_edges", "messages")


def _holds(service: Service, owner_id: str, target: str, any_item: bool) -> bool:
    """Whether the owner's memory holds ``target``: any item's id, or (``any_item`` False) a message's."""
    store = service.retriever.store
    return any(
        row.id == target
        for table in (_ITEM_TABLES if any_item else ("messages",))
        for row in store.rows(table, owner_id)
    )


async def forget_target(service: Service, owner_id: str, body: ForgetBody) -> ForgetAnswer:
    """Forget ``body``'s target of ``owner_id`` through the log; return once memory no longer holds it.

    ``ItemNotFound`` for a target the owner's memory does not hold, ``UnknownOwner`` for an owner with
    none, ``NotVisible`` when the projections do not reach the forget within ``body.wait_ms``. The HTTP
    route and the inspector (``routes.ui``) both forget through this.
    """
    if service.log is None:
        raise LogError("this service was started without --log; it cannot forget")
    from adamem.core import forget_event
    from adamem.owners import split_owner

    tenant, user = split_owner(owner_id)
    item = body.item if isinstance(body, ForgetItem) else None
    message = body.message if isinstance(body, ForgetMessage) else None
    event = forget_event(  # stamped here, at the edge, as the CLI and the clients do
        user,
        tenant,
        item=item,
        message=message,
        everything=isinstance(body, ForgetEverything),
        reason=body.reason,
        at_ms=int(time.time() * 1000),
    )
    await service.owner_known(owner_id)
    target = item or message
    if target is not None and not await asyncio.to_thread(_holds, service, owner_id, target, message is None):
        raise ItemNotFound(owner_id, target)
    loop = asyncio.get_running_loop()
    started = loop.time()
    last = await service.append_control(
        event,
        "forget",
        body.wait_ms,
        "the forget is on the log and takes effect when the projections reach it; ask a query again",
    )
    return ForgetAnswer(
        event_id=event.event_id,
        scope=event.scope,
        positions=[LogPosition(partition=p, offset=o) for p, o in sorted(last.items())],
        visible=True,
        waited_ms=round((loop.time() - started) * 1000, 1),
    )


async def feedback_target(service: Service, owner_id: str, body: FeedbackBody) -> FeedbackAnswer:
    """Put ``body``'s feedback for ``owner_id`` on the log; return once folded, with the owner's answer style.

    ``InvalidArgument`` for feedback naming no item or one twice, ``ItemNotFound`` for an item the
    owner's memory does not hold, ``NotVisible`` when the projections do not reach it within ``wait_ms``.
    """
    if service.log is None:
        raise LogError("this service was started without --log; it cannot take feedback")
    from adamem.core import feedback_event
    from adamem.projections.folds.ids import trait_id
    from adamem.projections.folds.style import STYLE_KIND, style_of

    await service.owner_known(owner_id)
    store = service.retriever.store
    event = await asyncio.to_thread(  # stamped here, at the edge
        feedback_event, store, owner_id, body.helped, body.unhelpful, at_ms=int(time.time() * 1000)
    )
    loop = asyncio.get_running_loop()
    started = loop.time()
    last = await service.append_control(
        event,
        "take feedback",
        body.wait_ms,
        "the feedback is on the log and ranks this owner's answers when the projections reach it",
    )
    style_id = trait_id(owner_id, STYLE_KIND, STYLE_KIND, "")
    rows = await asyncio.to_thread(store.rows, "persona", owner_id)
    style = style_of(next((r for r in rows if r.id == style_id), None))  # type: ignore[arg-type]
    retriever = service.retriever
    return FeedbackAnswer(
        event_id=event.event_id,
        judged=len(event.items),
        answer_style=style.value(retriever.memory_params.style_margin),  # type: ignore[arg-type]
        feedback=style.feedback,
        ranks_answers=retriever.ranking_style(style) is not None,
        positions=[LogPosition(partition=p, offset=o) for p, o in sorted(last.items())],
        waited_ms=round((loop.time() - started) * 1000, 1),
    )


def writes_router(service: Service) -> APIRouter:
    """The write routes of ``service``: publishing needs its log; a publish wakes its writer."""
    router = APIRouter()

    async def publish(body: PublishBody, who: Principal = Depends(service.principal)) -> PublishAnswer:
        if service.log is None:
            raise LogError("this service was started without --log; it cannot publish")
        from adamem.ingest import messages_from_records
        from adamem.streams.publish import publish_messages

        # Stamped here, at the edge, as the CLI and the clients do (the folds never read a clock); one
        # millisecond apart, so that the batch keeps its order and two equal texts stay two messages.
        received = int(time.time() * 1000)
        records = []
        for i, message in enumerate(body.messages):
            record = message.model_dump(mode="json", exclude_none=True)
            tenant = message.tenant or who.tenant or service.settings.default_tenant
            if not who.may_see(tenant):
                raise Forbidden(f"this key may not publish for tenant {tenant!r}")
            when = received + i if message.occurred_at is None else to_millis(message.occurred_at)
            offset = None if message.occurred_at is None else utc_offset_of(message.occurred_at)
            records.append({**record, "tenant": tenant, "occurred_at": when, "utc_offset_minutes": offset})
        messages = messages_from_records(records, service.settings, "body.messages")
        report = await publish_messages(service.log, messages, service.settings)
        if service.writer is not None:
            service.writer.wake()
        return PublishAnswer(
            published=report.messages,
            owners=report.owners,
            topic=report.topic,
            event_ids=[m.event_id for m in messages],
            positions=[LogPosition(partition=p, offset=o) for p, o in sorted(report.last.items())],
        )

    # This service's own text limit (ADAMEM_MAX_TEXT_BYTES) is part of its description.
    publish.__annotations__["body"] = publish_body(service.settings.max_text_bytes)
    router.post(
        "/v1/messages",
        status_code=202,
        summary="Publish messages to the log",
        response_model=PublishAnswer,
        responses=responses(*service.keyed_errors, 400, 413, 415, 422, 500, 503),
    )(publish)

    @router.post(
        "/v1/visible",
        summary="Wait until messages just published are in memory (read your writes)",
        response_model=WaitAnswer,
        responses=responses(*service.keyed_errors, 400, 409, 413, 415, 422, 500, 503),
    )
    async def visible(body: WaitBody, who: Principal = Depends(service.principal)) -> WaitAnswer:
        loop = asyncio.get_running_loop()
        started = loop.time()
        await service.reached(body.positions, body.wait_ms)
        return WaitAnswer(visible=True, waited_ms=round((loop.time() - started) * 1000, 1))

    @router.post(
        "/v1/users/{user}/forget",
        summary="Forget a memory item, a message or the whole owner; answered once memory no longer holds it",
        response_model=ForgetAnswer,
        responses=responses(*service.keyed_errors, 400, 404, 409, 413, 415, 422, 500, 503),
    )
    async def forget(body: ForgetBody, owner_id: str = Depends(service.owner_of)) -> ForgetAnswer:
        return await forget_target(service, owner_id, body)

    @router.post(
        "/v1/users/{user}/feedback",
        summary="Say which items of an answer helped; later answers of this user are ranked by it",
        response_model=FeedbackAnswer,
        responses=responses(*service.keyed_errors, 400, 404, 409, 413, 415, 422, 500, 503),
    )
    async def feedback(body: FeedbackBody, owner_id: str = Depends(service.owner_of)) -> FeedbackAnswer:
        return await feedback_target(service, owner_id, body)

    return router
