"""A small Python client of the query service, sync (``MemoryClient``) and async (``AsyncMemoryClient``).

Both mirror the HTTP API one method per endpoint and raise ``ServiceError`` (with the status and
the service's message) for any 4xx/5xx answer — ``ServiceNotFound``, also a ``NotFound``, for a 404 —
and ``ServiceUnavailable`` when the service cannot be reached or does not answer. The LangChain
integration wraps these.

``add`` is the mem0-style entry point: it publishes one message and returns once the memory
reflects it (``POST /v1/messages``, then ``POST /v1/visible`` with the positions written), so a
``query`` right after it sees the message::

    with MemoryClient("http://127.0.0.1:8000") as m:
        m.add("alice", "I moved to Lisbon last month.")
        m.query("alice", "Where does Alice live?")
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Sequence
from typing import Any

import httpx

from adamem.errors import AdaMemError, NotFound, ServiceUnavailable

__all__ = ["AsyncMemoryClient", "MemoryClient", "ServiceError", "ServiceNotFound", "ServiceUnavailable"]


class ServiceError(AdaMemError):
    """The query service answered with an error status; it carries that status and kind on.

    A command exits as the service failed (5) for a 5xx answer, as a usage error (2) otherwise.
    """

    def __init__(self, status: int, kind: str, detail: str) -> None:
        self.status, self.kind, self.detail = status, kind, detail
        self.http_status = status
        self.exit_code = 5 if status >= 500 else 2
        super().__init__(f"HTTP {status} {kind}: {detail}")

    def public_detail(self) -> str:
        """What the service said."""
        return self.detail


class ServiceNotFound(ServiceError, NotFound):
    """The service has no such owner, item or path for this key (HTTP 404): the same error as in-process."""

    def __init__(self, status: int, kind: str, detail: str) -> None:
        super().__init__(status, kind, detail)
        self.exit_code = NotFound.exit_code


def _check(resp: httpx.Response) -> Any:
    if resp.status_code >= 400:
        try:
            body = resp.json()
            kind, detail = body.get("error", "error"), body.get("detail", resp.text)
        except ValueError:
            kind, detail = "error", resp.text
        raise (ServiceNotFound if resp.status_code == 404 else ServiceError)(resp.status_code, kind, detail)
    return resp.json()


def _unreachable(base_url: httpx.URL, exc: httpx.TransportError) -> ServiceUnavailable:
    """What a failed connection means to the caller: which service, and whether it was reached at all."""
    base = str(base_url).rstrip("/")
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
        return ServiceUnavailable(f"cannot reach {base}: is `adamem serve` running? ({exc or type(exc).__name__})")
    return ServiceUnavailable(f"{base} did not answer: {exc or type(exc).__name__}")


def _forget_body(item: str | None, message: str | None, everything: bool, reason: str, wait_ms: int) -> dict[str, Any]:
    """The body of ``POST /v1/users/{user}/forget``: exactly one of item, message, everything."""
    body: dict[str, Any] = {"wait_ms": min(wait_ms, 5_000)}
    if item is not None:
        body["item"] = item
    if message is not None:
        body["message"] = message
    if everything:
        body["everything"] = True
    if reason:
        body["reason"] = reason
    return body


def _grant_body(
    grantee_tenant: str,
    layers: Sequence[str],
    topics: Sequence[str],
    start: str | int | None,
    until: str | int | None,
    include_sensitive: bool,
    expires_at: str | int | None,
    reason: str,
    wait_ms: int,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "grantee_tenant": grantee_tenant,
        "layers": list(layers),
        "topics": list(topics),
        "include_sensitive": include_sensitive,
        "reason": reason,
        "wait_ms": wait_ms,
    }
    for name, value in (("from", start), ("until", until), ("expires_at", expires_at)):
        if value is not None:
            body[name] = value
    return body


def _research_body(
    query: str,
    context: str,
    memory_hints: list[str] | tuple[str, ...],
    depth: int,
    top_k: int,
    as_of: str | int | dict[str, Any] | None,
) -> dict[str, Any]:
    body: dict[str, Any] = {"query": query, "depth": depth, "top_k": top_k}
    if context:
        body["context"] = context
    if memory_hints:
        body["memory_hints"] = list(memory_hints)
    if as_of is not None:
        body["as_of"] = as_of
    return body


def _query_body(
    question: str,
    top_k: int,
    as_of: str | int | dict[str, Any] | None,
    min_position: list[dict[str, int]] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {"question": question, "top_k": top_k}
    if as_of is not None:
        body["as_of"] = as_of
    if min_position:
        body["min_position"] = min_position
    return body


def _message(
    user: str,
    text: str,
    speaker: str | None,
    role: str,
    occurred_at: str | int | None,
    conversation_id: str | None,
    metadata: dict[str, str] | None,
    tenant: str | None,
    message_id: str | None = None,
) -> dict[str, Any]:
    """One message of ``add``: said by ``speaker`` (default: the user) now, unless ``occurred_at`` says when."""
    when = occurred_at if occurred_at is not None else dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")
    message: dict[str, Any] = {"user_id": user, "speaker": speaker or user, "role": role, "text": text}
    message["occurred_at"] = when.replace("+00:00", "Z") if isinstance(when, str) else when
    if conversation_id is not None:
        message["conversation_id"] = conversation_id
    if metadata is not None:
        message["metadata"] = metadata
    if message_id is not None:
        message["message_id"] = message_id  # with the owner and conversation, it makes the event id
    if tenant is not None:
        message["tenant"] = tenant  # the client's tenant (a key acts for its own, and refuses any other)
    return message


WAIT_STEP_MS = 5_000  # the service's longest wait per request (api.models.MAX_WAIT_MS)


def _step(deadline: float) -> int:
    """The wait of the next ``/v1/visible`` request: what is left, within one request's limit."""
    return max(0, min(WAIT_STEP_MS, int((deadline - time.monotonic()) * 1000)))


def _again(resp: httpx.Response, deadline: float) -> bool:
    """Ask again: the projections are behind (409 not_visible) and there is time left."""
    if resp.status_code != 409 or time.monotonic() >= deadline:
        return False
    try:
        return bool(resp.json().get("error") == "not_visible")
    except ValueError:
        return False


def _added(published: Any, waited: Any) -> dict[str, Any]:
    return {
        "event_id": published["event_ids"][0],
        "positions": published["positions"],
        "topic": published["topic"],
        "waited_ms": waited["waited_ms"],
    }


def _headers(api_key: str | None, tenant: str | None) -> dict[str, str]:
    """A key names its tenant; ``tenant`` names it for a service without keys (sent as ``X-Tenant``)."""
    headers = {"X-API-Key": api_key} if api_key else {}
    if tenant:
        headers["X-Tenant"] = tenant
    return headers


class MemoryClient:
    """Blocking client: ``MemoryClient("http://127.0.0.1:8000", api_key=...)``.

    A user is named by its ``user_id``; the tenant is the key's (or ``tenant``, on a service without keys).
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
        tenant: str | None = None,
    ) -> None:
        headers = _headers(api_key, tenant)
        self._tenant = tenant
        self._http = httpx.Client(base_url=base_url, headers=headers, timeout=timeout, transport=transport)

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            return self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise _unreachable(self._http.base_url, exc) from exc

    def __enter__(self) -> MemoryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def query(
        self,
        user: str,
        question: str,
        top_k: int = 10,
        as_of: str | int | dict[str, Any] | None = None,
        min_position: list[dict[str, int]] | None = None,
    ) -> Any:
        """Ranked evidence for a question (``POST /v1/users/{user}/query``), after ``min_position`` if given."""
        body = _query_body(question, top_k, as_of, min_position)
        return _check(self._send("POST", f"/v1/users/{user}/query", json=body))

    def research(
        self,
        user: str,
        query: str,
        depth: int = 1,
        context: str = "",
        memory_hints: list[str] | tuple[str, ...] = (),
        top_k: int = 10,
        as_of: str | int | dict[str, Any] | None = None,
    ) -> Any:
        """Evidence gathered in up to ``depth`` rounds, graded, with conflicts (``POST /v1/users/{user}/research``)."""
        body = _research_body(query, context, memory_hints, depth, top_k, as_of)
        return _check(self._send("POST", f"/v1/users/{user}/research", json=body))

    def memory(self, user: str, layer: str = "episodic", limit: int = 500) -> Any:
        """One layer of a user's memory (``GET /v1/users/{user}/memory``)."""
        return _check(self._send("GET", f"/v1/users/{user}/memory", params={"layer": layer, "limit": limit}))

    def provenance(self, user: str, item: str) -> Any:
        """From a memory item back to its messages and analyses."""
        return _check(self._send("GET", f"/v1/users/{user}/memory/{item}/provenance"))

    def forget(
        self,
        user: str,
        *,
        item: str | None = None,
        message: str | None = None,
        everything: bool = False,
        reason: str = "",
        wait_ms: int = 5_000,
    ) -> Any:
        """Forget one memory item, one message (its text is shredded) or the whole owner; answered once memory
        no longer holds it (``ServiceError`` 409 not_visible if not within ``wait_ms``, 404 for an unknown item)."""
        body = _forget_body(item, message, everything, reason, wait_ms)
        return _check(self._send("POST", f"/v1/users/{user}/forget", json=body))

    def feedback(
        self, user: str, *, helped: Sequence[str] = (), unhelpful: Sequence[str] = (), wait_ms: int = 5_000
    ) -> Any:
        """Say which items of an answer (their ``id``) helped and which did not; answered once folded, with the
        owner's ``answer_style`` (404 for an item the owner's memory does not hold)."""
        body = {"helped": list(helped), "unhelpful": list(unhelpful), "wait_ms": wait_ms}
        return _check(self._send("POST", f"/v1/users/{user}/feedback", json=body))

    def grant(
        self,
        user: str,
        grantee_tenant: str,
        layers: Sequence[str],
        *,
        topics: Sequence[str] = (),
        start: str | int | None = None,
        until: str | int | None = None,
        include_sensitive: bool = False,
        expires_at: str | int | None = None,
        reason: str = "",
        wait_ms: int = 5_000,
    ) -> Any:
        """Grant another tenant read access to a scope of ``user``'s memory; the grant is pending until confirmed."""
        body = _grant_body(grantee_tenant, layers, topics, start, until, include_sensitive, expires_at, reason, wait_ms)
        return _check(self._send("POST", f"/v1/users/{user}/grants", json=body))

    def confirm_grant(self, user: str, grant_id: str, wait_ms: int = 5_000) -> Any:
        """Confirm a pending grant: from then on it gives access."""
        return _check(self._send("POST", f"/v1/users/{user}/grants/{grant_id}/confirm", json={"wait_ms": wait_ms}))

    def revoke_grant(self, user: str, grant_id: str, wait_ms: int = 5_000) -> Any:
        """Revoke a grant: the next read under it is refused."""
        return _check(self._send("DELETE", f"/v1/users/{user}/grants/{grant_id}", json={"wait_ms": wait_ms}))

    def grants(self, user: str) -> Any:
        """The grants of ``user``'s memory: pending, active and revoked."""
        return _check(self._send("GET", f"/v1/users/{user}/grants"))

    def audit(self, user: str) -> Any:
        """Every read of ``user``'s memory under a grant: grant, grantee, route, item ids, time."""
        return _check(self._send("GET", f"/v1/users/{user}/audit"))

    def publish(self, messages: list[dict[str, Any]]) -> Any:
        """Publish messages to the log (``POST /v1/messages``); the answer's ``positions`` say where."""
        return _check(self._send("POST", "/v1/messages", json={"messages": messages}))

    def wait(self, positions: list[dict[str, int]], wait_ms: int = 10_000) -> Any:
        """Return once the messages at ``positions`` are in memory (``POST /v1/visible``, asked again while the
        service's longest wait per request is shorter than ``wait_ms``); ``ServiceError`` 409 if not in time."""
        deadline = time.monotonic() + wait_ms / 1000
        while True:
            step = _step(deadline)
            resp = self._send("POST", "/v1/visible", json={"positions": positions, "wait_ms": step})
            if not _again(resp, deadline):
                return _check(resp)

    def add(
        self,
        user: str,
        text: str,
        *,
        speaker: str | None = None,
        role: str = "user",
        occurred_at: str | int | None = None,
        conversation_id: str | None = None,
        metadata: dict[str, str] | None = None,
        message_id: str | None = None,
        wait_ms: int = 10_000,
    ) -> dict[str, Any]:
        """Publish one message of ``user`` and wait until the memory reflects it; its event id and positions.

        ``speaker`` defaults to the user, ``occurred_at`` to now. ``message_id`` (your id of the message
        in its conversation) makes ``add`` idempotent: the same id again is the same event, kept once.
        Raises ``ServiceError`` (409 not_visible) when the projections do not reach it within
        ``wait_ms``; the message stays published.
        """
        message = _message(user, text, speaker, role, occurred_at, conversation_id, metadata, self._tenant, message_id)
        published = self.publish([message])
        return _added(published, self.wait(published["positions"], wait_ms))

    def health(self) -> Any:
        """Readiness and projection lag."""
        return _check(self._send("GET", "/health"))


class AsyncMemoryClient:
    """Asyncio client with the same methods as ``MemoryClient``, awaited."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        timeout: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
        tenant: str | None = None,
    ) -> None:
        headers = _headers(api_key, tenant)
        self._tenant = tenant
        self._http = httpx.AsyncClient(base_url=base_url, headers=headers, timeout=timeout, transport=transport)

    async def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            return await self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise _unreachable(self._http.base_url, exc) from exc

    async def __aenter__(self) -> AsyncMemoryClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def query(
        self,
        user: str,
        question: str,
        top_k: int = 10,
        as_of: str | int | dict[str, Any] | None = None,
        min_position: list[dict[str, int]] | None = None,
    ) -> Any:
        """Ranked evidence for a question, after ``min_position`` if given."""
        body = _query_body(question, top_k, as_of, min_position)
        return _check(await self._send("POST", f"/v1/users/{user}/query", json=body))

    async def research(
        self,
        user: str,
        query: str,
        depth: int = 1,
        context: str = "",
        memory_hints: list[str] | tuple[str, ...] = (),
        top_k: int = 10,
        as_of: str | int | dict[str, Any] | None = None,
    ) -> Any:
        """Evidence gathered in up to ``depth`` rounds, graded, with conflicts."""
        body = _research_body(query, context, memory_hints, depth, top_k, as_of)
        return _check(await self._send("POST", f"/v1/users/{user}/research", json=body))

    async def memory(self, user: str, layer: str = "episodic", limit: int = 500) -> Any:
        """One layer of a user's memory."""
        return _check(await self._send("GET", f"/v1/users/{user}/memory", params={"layer": layer, "limit": limit}))

    async def provenance(self, user: str, item: str) -> Any:
        """From a memory item back to its messages and analyses."""
        return _check(await self._send("GET", f"/v1/users/{user}/memory/{item}/provenance"))

    async def forget(
        self,
        user: str,
        *,
        item: str | None = None,
        message: str | None = None,
        everything: bool = False,
        reason: str = "",
        wait_ms: int = 5_000,
    ) -> Any:
        """Forget one memory item, one message or the whole owner (see ``MemoryClient.forget``)."""
        body = _forget_body(item, message, everything, reason, wait_ms)
        return _check(await self._send("POST", f"/v1/users/{user}/forget", json=body))

    async def feedback(
        self, user: str, *, helped: Sequence[str] = (), unhelpful: Sequence[str] = (), wait_ms: int = 5_000
    ) -> Any:
        """Say which items of an answer helped and which did not (see ``MemoryClient.feedback``)."""
        body = {"helped": list(helped), "unhelpful": list(unhelpful), "wait_ms": wait_ms}
        return _check(await self._send("POST", f"/v1/users/{user}/feedback", json=body))

    async def grant(
        self,
        user: str,
        grantee_tenant: str,
        layers: Sequence[str],
        *,
        topics: Sequence[str] = (),
        start: str | int | None = None,
        until: str | int | None = None,
        include_sensitive: bool = False,
        expires_at: str | int | None = None,
        reason: str = "",
        wait_ms: int = 5_000,
    ) -> Any:
        """Grant another tenant read access to a scope of ``user``'s memory; the grant is pending until confirmed."""
        body = _grant_body(grantee_tenant, layers, topics, start, until, include_sensitive, expires_at, reason, wait_ms)
        return _check(await self._send("POST", f"/v1/users/{user}/grants", json=body))

    async def confirm_grant(self, user: str, grant_id: str, wait_ms: int = 5_000) -> Any:
        """Confirm a pending grant: from then on it gives access."""
        return _check(
            await self._send("POST", f"/v1/users/{user}/grants/{grant_id}/confirm", json={"wait_ms": wait_ms})
        )

    async def revoke_grant(self, user: str, grant_id: str, wait_ms: int = 5_000) -> Any:
        """Revoke a grant: the next read under it is refused."""
        return _check(await self._send("DELETE", f"/v1/users/{user}/grants/{grant_id}", json={"wait_ms": wait_ms}))

    async def grants(self, user: str) -> Any:
        """The grants of ``user``'s memory: pending, active and revoked."""
        return _check(await self._send("GET", f"/v1/users/{user}/grants"))

    async def audit(self, user: str) -> Any:
        """Every read of ``user``'s memory under a grant: grant, grantee, route, item ids, time."""
        return _check(await self._send("GET", f"/v1/users/{user}/audit"))

    async def publish(self, messages: list[dict[str, Any]]) -> Any:
        """Publish messages to the log; the answer's ``positions`` say where."""
        return _check(await self._send("POST", "/v1/messages", json={"messages": messages}))

    async def wait(self, positions: list[dict[str, int]], wait_ms: int = 10_000) -> Any:
        """Return once the messages at ``positions`` are in memory (see ``MemoryClient.wait``); 409 if not in time."""
        deadline = time.monotonic() + wait_ms / 1000
        while True:
            step = _step(deadline)
            resp = await self._send("POST", "/v1/visible", json={"positions": positions, "wait_ms": step})
            if not _again(resp, deadline):
                return _check(resp)

    async def add(
        self,
        user: str,
        text: str,
        *,
        speaker: str | None = None,
        role: str = "user",
        occurred_at: str | int | None = None,
        conversation_id: str | None = None,
        metadata: dict[str, str] | None = None,
        message_id: str | None = None,
        wait_ms: int = 10_000,
    ) -> dict[str, Any]:
        """Publish one message of ``user`` and wait until the memory reflects it (see ``MemoryClient.add``)."""
        message = _message(user, text, speaker, role, occurred_at, conversation_id, metadata, self._tenant, message_id)
        published = await self.publish([message])
        return _added(published, await self.wait(published["positions"], wait_ms))

    async def health(self) -> Any:
        """Readiness and projection lag."""
        return _check(await self._send("GET", "/health"))
