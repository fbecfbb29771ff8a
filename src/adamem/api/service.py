"""What every route of one service shares: its settings, retriever, log and write path, and the
dependencies that check a caller's key and name the owner it may read.

A key of one tenant sees only that tenant's owners: naming another tenant is refused (403), unless
that tenant's owner granted the key's tenant read access (``access_of``, ``api.sharing``), and then
only for the read routes and within the grant's scope.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from fastapi import Depends, Header, Path, Security
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from adamem.api.auth import KeyRing, Principal
from adamem.api.errors import AuthError
from adamem.api.models import AsOfBody, LogPosition, to_millis
from adamem.api.sharing import Access, access_for
from adamem.core import wait_visible
from adamem.errors import Forbidden, LogError, NotWritten
from adamem.events import ControlEvent
from adamem.owners import owner_key
from adamem.retrieval.service import Retriever
from adamem.retrieval.snapshot import AsOf
from adamem.settings import Settings
from adamem.streams.follow import Follower
from adamem.streams.log import EventLog

__all__ = ["Service"]

_API_KEY = APIKeyHeader(name="X-API-Key", auto_error=False, description="Your tenant's API key.")
_BEARER = HTTPBearer(auto_error=False, description="Your tenant's API key as a bearer token.")
OWNER = Path(description="The memory owner's user_id, within the caller's tenant.", examples=["alice"])


@dataclass
class Service:
    """One running service: with a ``writer`` it is the embedded default's one process, else read-only.

    ``principal``, ``owner_of`` and ``access_of`` are FastAPI dependencies: the caller's key, the owner
    key of the path's user for that caller (its key's own tenant, never someone else's: writes and
    the owner's own routes), and a read's ``Access`` (another tenant's owner under a grant).
    """

    settings: Settings
    retriever: Retriever
    log: EventLog | None
    keys: KeyRing
    writer: Follower | None = None
    probes: dict[str, Any] = field(default_factory=dict)  # api.metrics.instrument's, when settings.metrics
    principal: Callable[..., Principal] = field(init=False)
    owner_of: Callable[..., str] = field(init=False)
    access_of: Callable[..., Access] = field(init=False)

    def __post_init__(self) -> None:
        if self.writer is not None and (self.log is None or self.writer.log is not self.log):
            raise ValueError("the writer must follow the service's own log")
        keys, default_tenant = self.keys, self.settings.default_tenant

        def keyed(
            key: str | None = Security(_API_KEY), token: HTTPAuthorizationCredentials | None = Security(_BEARER)
        ) -> Principal:
            presented = key or (token.credentials if token is not None else None)
            who = keys.principal(presented)
            if who is None:
                raise AuthError(presented is None)
            return who

        def everyone() -> Principal:
            return Principal(None)

        # The description declares the keys only when the service checks them.
        principal: Callable[..., Principal] = everyone if keys.open else keyed

        def owner_of(
            user: str = OWNER,
            who: Principal = Depends(principal),
            x_tenant: str | None = Header(
                None,
                description="The tenant whose user this is, for a service without keys (default: the service's "
                "tenant). A key acts for its own tenant; naming another is refused (403).",
            ),
        ) -> str:
            """The owner key of ``user`` for this caller: a key's own tenant, never someone else's."""
            if who.tenant is not None and x_tenant is not None and x_tenant != who.tenant:
                raise Forbidden(f"this API key acts for its own tenant, not for {x_tenant!r}")
            return owner_key(who.tenant or x_tenant or default_tenant, user)

        store = self.retriever.store

        def access_of(
            user: str = OWNER,
            who: Principal = Depends(principal),
            x_tenant: str | None = Header(
                None,
                description="The tenant whose user this is (default: the key's own, or the service's tenant). "
                "Another tenant's owner is readable only under an active grant of that owner to the key's "
                "tenant; without one the answer is 403, whether the owner exists or not.",
            ),
            x_grant: str | None = Header(
                None, description="The grant to read under, when the owner granted the key's tenant several."
            ),
        ) -> Access:
            """The owner ``user`` names for this caller, and the grant a key of another tenant reads under."""
            return access_for(store, who.tenant, x_tenant, user, default_tenant, x_grant)

        self.principal, self.owner_of, self.access_of = principal, owner_of, access_of

    @property
    def mode(self) -> Literal["embedded", "read-only"]:
        """``embedded``: this process runs the write path; ``read-only``: other processes project."""
        return "embedded" if self.writer is not None else "read-only"

    @property
    def keyed_errors(self) -> tuple[int, ...]:
        """The statuses a key check can answer: none for a service without keys."""
        return () if self.keys.open else (401, 403)

    @staticmethod
    def as_of_point(value: str | int | AsOfBody | None) -> AsOf | None:
        """A request's ``as_of`` (a time, or ``{"time"}``/``{"offset"}``) as the retriever's point."""
        if value is None:
            return None
        if isinstance(value, AsOfBody):
            if value.offset is not None:
                return AsOf(offset=value.offset)
            assert value.time is not None  # the model holds exactly one
            value = value.time
        return AsOf(time=to_millis(value))

    async def owner_known(self, owner_id: str) -> None:
        """``UnknownOwner`` for an owner with no memory (the owner's facts only: no rows loaded for this)."""
        await asyncio.to_thread(self.retriever.require, owner_id)

    async def reached(self, positions: list[LogPosition], wait_ms: int) -> None:
        """Return once every message at ``positions`` is in memory; ``NotVisible`` when not within ``wait_ms``.

        ``NotWritten`` at once for a position that holds no message. One request waits at most
        ``MAX_WAIT_MS``: a client that wants to wait longer asks again (``MemoryClient.wait`` does).
        """
        log_ = self.log
        if log_ is None:
            raise LogError("this service was started without a log; it cannot tell where the projections are")
        topic = self.settings.topic("messages")  # every generation reads the one messages topic
        count = log_.partitions(topic)
        want: dict[int, int] = {}
        for pos in positions:
            if pos.partition >= count:
                raise NotWritten(f"{topic} has {count} partition(s); there is no partition {pos.partition}")
            want[pos.partition] = max(want.get(pos.partition, 0), pos.offset)
        ends = await log_.end_offsets(topic)
        for p, offset in sorted(want.items()):
            if offset >= ends.get(p, 0):
                raise NotWritten(
                    f"no message was written at {topic} partition {p} offset {offset}: the partition ends at "
                    f"offset {ends.get(p, 0)}"
                )
        await self.wait_until_visible({topic: want}, wait_ms, "ask again to wait longer")

    async def append_control(self, event: ControlEvent, what: str, wait_ms: int, advice: str) -> dict[int, int]:
        """Append a control event to the log (keyed by its owner), wake this service's writer, and return once
        memory reflects it: partition -> offset. ``LogError`` for a service without a log (it cannot ``what``);
        ``NotVisible`` with ``advice`` when the projections do not reach it within ``wait_ms``."""
        if self.log is None:
            raise LogError(f"this service was started without --log; it cannot {what}")
        from adamem.schemas.serde import encode_event
        from adamem.streams.log import OutgoingRecord

        topic = self.settings.topic("control")
        placed = dict(await self.log.append(topic, [OutgoingRecord(event.user_id, encode_event(event))]))
        if self.writer is not None:
            self.writer.wake()
        await self.wait_until_visible({topic: placed}, wait_ms, advice)
        return placed

    async def wait_until_visible(self, written: dict[str, dict[int, int]], wait_ms: int, advice: str) -> None:
        """Return once memory reflects ``written`` (topic -> partition -> last offset); ``NotVisible`` with
        ``advice`` when the projections do not reach it within ``wait_ms``."""
        if self.log is None:
            raise LogError("this service was started without a log; it cannot tell where the projections are")
        from adamem.streams.generations import active as active_settings

        active = await asyncio.to_thread(active_settings, self.settings, self.retriever.store)
        await wait_visible(self.log, self.retriever.store, active, written, wait_ms / 1000, poll_s=0.02, advice=advice)
