"""LangGraph: a ``BaseStore`` whose items live in this project's memory (``langchain`` extra).

A namespace begins with the memory owner: ``(user_id, *labels)`` — each user's items are that
user's memory, in the store's tenant. An item is a message on the log, so it is analysed,
recalled, replayed and forgotten like every other:

* ``put(namespace, key, value)`` publishes the value (canonical JSON as the message text, spoken by
  ``langgraph``, role ``other``) in conversation ``lg:<labels as JSON>`` with message id ``key``,
  and returns once it is projected. An update first forgets the previous version (a
  ``MemoryForgotten`` of that message) and then publishes the new one, so the store holds one
  version per key and the log keeps them all; ``created_at`` is the time of the current version.
* ``delete`` (or ``put`` of ``None``) forgets the key's message and what only it supported.
* ``get`` and ``list_namespaces`` read the owner's archived messages; ``search`` filters like
  LangGraph's own ``InMemoryStore`` and, given a ``query``, ranks by this project's retrieval
  (an item scores the best score of any ranked evidence that came from it).

A value is at most ``ADAMEM_MAX_TEXT_BYTES`` of JSON. TTLs are not supported.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime

from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)
from langgraph.store.memory import _compare_values, _does_match  # the reference's own matching rules

from adamem.memory import Memory
from adamem.owners import split_owner
from adamem.projections.folds.rows import MessageRow

__all__ = ["AdaMemStore"]

PREFIX = "lg:"
SPEAKER = "langgraph"


def _conversation(labels: tuple[str, ...]) -> str:
    return PREFIX + json.dumps(list(labels), ensure_ascii=False, separators=(",", ":"))


def _labels(conversation_id: str) -> tuple[str, ...] | None:
    if not conversation_id.startswith(PREFIX):
        return None
    try:
        labels = json.loads(conversation_id[len(PREFIX) :])
    except ValueError:
        return None
    return tuple(labels) if isinstance(labels, list) and all(isinstance(x, str) for x in labels) else None


def _when(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


class AdaMemStore(BaseStore):
    """LangGraph long-term memory on the event log: namespaces ``(user_id, ...)`` of one tenant."""

    def __init__(self, memory: Memory, *, tenant: str | None = None) -> None:
        """Items of ``tenant``'s users (default: the settings' tenant) in ``memory``."""
        self.memory = memory
        self.tenant = tenant or memory.settings.default_tenant

    # -- reading ------------------------------------------------------------------------------

    def _items(self, user_id: str) -> dict[tuple[tuple[str, ...], str], MessageRow]:
        """The current version of every item of one owner, by (namespace, key)."""
        rows = self.memory.store.rows("messages", self.memory.owner(user_id, self.tenant))
        current: dict[tuple[tuple[str, ...], str], MessageRow] = {}
        for row in sorted((r for r in rows if isinstance(r, MessageRow)), key=lambda r: r.seq):
            labels = _labels(row.conversation_id) if row.speaker == SPEAKER else None
            if labels is not None:
                current[((user_id, *labels), row.message_id)] = row
        return current

    def _users(self, prefix: tuple[str, ...]) -> list[str]:
        if prefix and prefix[0] != "*":
            return [prefix[0]]
        owners = (split_owner(o) for o in self.memory.store.owners())
        return sorted(user for tenant, user in owners if tenant == self.tenant)

    @staticmethod
    def _item(namespace: tuple[str, ...], key: str, row: MessageRow, score: float | None = None) -> SearchItem:
        when = _when(row.occurred_at)
        return SearchItem(namespace, key, json.loads(row.text), when, when, score)

    def _get(self, op: GetOp) -> Item | None:
        row = self._items(op.namespace[0]).get((op.namespace, op.key)) if op.namespace else None
        if row is None:
            return None
        when = _when(row.occurred_at)
        return Item(value=json.loads(row.text), key=op.key, namespace=op.namespace, created_at=when, updated_at=when)

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = op.namespace_prefix
        found: list[tuple[tuple[str, ...], str, MessageRow]] = []
        for user in self._users(prefix):
            for (namespace, key), row in self._items(user).items():
                if namespace[: len(prefix)] != prefix:
                    continue
                value = json.loads(row.text)
                if op.filter and not all(_compare_values(value.get(k), v) for k, v in op.filter.items()):
                    continue
                found.append((namespace, key, row))
        if not op.query:
            return [self._item(n, k, r) for n, k, r in found[op.offset : op.offset + op.limit]]
        scores: dict[str, float] = {}
        for user in {n[0] for n, _, _ in found}:
            answer = self.memory.recall(user, op.query, tenant=self.tenant, top_k=50)
            for item in answer.items:
                for source in {item.id, *(p.message_event_id for p in item.provenance)}:
                    scores[source] = max(scores.get(source, 0.0), item.score)
        ranked = sorted(found, key=lambda f: (f[2].id not in scores, -scores.get(f[2].id, 0.0), f[2].seq))
        return [self._item(n, k, r, scores.get(r.id)) for n, k, r in ranked[op.offset : op.offset + op.limit]]

    def _namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        prefix: tuple[str, ...] = ()
        for condition in op.match_conditions or ():
            if condition.match_type == "prefix":
                prefix = tuple(condition.path)
        names = {n for user in self._users(prefix) for n, _ in self._items(user)}
        if op.match_conditions:
            names = {n for n in names if all(_does_match(c, n) for c in op.match_conditions)}
        if op.max_depth is not None:
            names = {n[: op.max_depth] for n in names}
        return sorted(names)[op.offset : op.offset + op.limit]

    # -- writing ------------------------------------------------------------------------------

    def _put(self, op: PutOp) -> None:
        if not op.namespace:
            raise InvalidNamespaceError("a namespace begins with the memory owner's user_id: (user_id, ...)")
        user, labels = op.namespace[0], op.namespace[1:]
        previous = self._items(user).get((op.namespace, op.key))
        if previous is not None:
            self.memory.forget(user, tenant=self.tenant, message=previous.id, reason=f"langgraph put {op.key}")
        if op.value is not None:
            text = json.dumps(op.value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
            message = {
                "text": text,
                "speaker": SPEAKER,
                "role": "other",
                "conversation_id": _conversation(labels),
                "message_id": op.key,
                "event_id": str(uuid.uuid4()),  # each version is an event of its own; the key stays the message id
            }
            self.memory.remember(user, [message], self.tenant)

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations in order; every write is projected before the next operation reads."""
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append(self._get(op))
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._namespaces(op))
            elif isinstance(op, PutOp):
                self._put(op)
                results.append(None)
            else:
                raise ValueError(f"unknown operation {type(op).__name__}")
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """``batch`` for asyncio callers (in a worker thread: reads are LanceDB calls, writes wait)."""
        return await asyncio.to_thread(self.batch, list(ops))
