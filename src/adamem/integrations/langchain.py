"""LangChain: a retriever over a user's memory and a chat message history on the log (``langchain`` extra).

``AdaMemRetriever`` is a ``BaseRetriever``: each ``Document`` is one ranked item, its metadata the
layer, kind, score and score breakdown, the route, and the provenance back to the log.
``AdaMemChatMessageHistory`` is a ``BaseChatMessageHistory``: ``add_messages`` publishes the
messages to the log and returns once they are projected; ``messages`` reads the owner's working
memory (the most recent messages, as the working layer keeps them); ``clear`` forgets them.
Both work sync and async.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, BaseMessage, ChatMessage, HumanMessage, SystemMessage
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict

from adamem.memory import Memory, UnknownUser
from adamem.projections.folds.rows import MessageRow
from adamem.retrieval.answer import Answer

__all__ = ["AdaMemChatMessageHistory", "AdaMemRetriever", "answer_documents"]


def answer_documents(answer: Answer) -> list[Document]:
    """One ``Document`` per ranked item, with the score breakdown and provenance in its metadata."""
    route = answer.route.route.value
    return [
        Document(
            page_content=item.content,
            id=item.id,
            metadata={
                "rank": item.rank,
                "layer": item.layer.value,
                "kind": item.kind,
                "score": round(item.score, 6),
                "breakdown": item.breakdown.to_dict(),
                "route": route,
                "speaker": item.speaker,
                "occurred_at": item.occurred_at,
                "event_time": item.event_time,
                "provenance": [p.to_dict() for p in item.provenance],
                "hop_path": [s.to_dict() for s in item.hop_path],
                "owner_id": answer.owner_id,
            },
        )
        for item in answer.items
    ]


class AdaMemRetriever(BaseRetriever):
    """Ranked evidence from one user's four-layer memory for a question (optionally as of a past time)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    memory: Memory
    """The memory to read."""
    user_id: str
    """Whose memory."""
    tenant: str | None = None
    """The user's tenant (default: the settings' tenant)."""
    top_k: int = 8
    """How many items."""
    as_of: int | None = None
    """Read the memory as it was at this event time (ms); None: now."""

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        answer = self.memory.recall(self.user_id, query, tenant=self.tenant, top_k=self.top_k, as_of=self.as_of)
        return answer_documents(answer)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        answer = await asyncio.to_thread(
            self.memory.recall, self.user_id, query, tenant=self.tenant, top_k=self.top_k, as_of=self.as_of
        )
        return answer_documents(answer)


_ROLES = {"human": "user", "ai": "assistant"}


def _row_message(row: MessageRow) -> BaseMessage:
    meta = {"event_id": row.id, "occurred_at": row.occurred_at, "speaker": row.speaker}
    if row.role == "user":
        return HumanMessage(row.text, id=row.id, response_metadata=meta, name=row.speaker)
    if row.role == "assistant":
        return AIMessage(row.text, id=row.id, response_metadata=meta, name=row.speaker)
    if row.speaker == "system":
        return SystemMessage(row.text, id=row.id, response_metadata=meta)
    return ChatMessage(content=row.text, role=row.speaker, id=row.id, response_metadata=meta)


class AdaMemChatMessageHistory(BaseChatMessageHistory):
    """A conversation of one user: appended to the log, read back from working memory."""

    def __init__(
        self,
        memory: Memory,
        user_id: str,
        *,
        tenant: str | None = None,
        conversation_id: str = "default",
        assistant_name: str = "assistant",
    ) -> None:
        """Messages go to ``user_id``'s memory in ``conversation_id``; AI messages are spoken by ``assistant_name``."""
        self.memory, self.user_id, self.tenant = memory, user_id, tenant
        self.conversation_id, self.assistant_name = conversation_id, assistant_name

    def _rows(self) -> list[MessageRow]:
        try:
            rows = self.memory.working(self.user_id, tenant=self.tenant)
        except UnknownUser:
            return []  # a conversation not started yet
        return [r for r in rows if r.conversation_id == self.conversation_id]

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The conversation's messages in working memory, oldest first."""
        return [_row_message(r) for r in self._rows()]

    async def aget_messages(self) -> list[BaseMessage]:
        """``messages`` for asyncio callers."""
        rows = await asyncio.to_thread(self._rows)
        return [_row_message(r) for r in rows]

    def _records(self, messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
        out = []
        for m in messages:
            if isinstance(m, SystemMessage):
                speaker, role = "system", "other"
            elif isinstance(m, ChatMessage):
                speaker, role = m.role, "other"
            else:
                role = _ROLES.get(m.type, "other")
                speaker = m.name or (self.user_id if role == "user" else self.assistant_name)
            out.append({"text": m.text, "speaker": speaker, "role": role, "conversation_id": self.conversation_id})
        return out

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Publish the messages to the log; return once working memory holds them."""
        self.memory.remember(self.user_id, self._records(messages), self.tenant)

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        """``add_messages`` for asyncio callers."""
        await self.memory.aremember(self.user_id, self._records(messages), self.tenant)

    def clear(self) -> None:
        """Forget the conversation's messages in working memory (a forget per message, on the log)."""
        for row in self._rows():
            self.memory.forget(self.user_id, tenant=self.tenant, message=row.id, reason="chat history cleared")

    async def aclear(self) -> None:
        """``clear`` for asyncio callers."""
        for row in await asyncio.to_thread(self._rows):
            await self.memory.aforget(self.user_id, tenant=self.tenant, message=row.id, reason="chat history cleared")
