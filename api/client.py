"""A small Python client of the query service, sync (``MemoryClient``) and async (``AsyncMemoryClient``).

Both mirror the HTTP API one method per endpoint and raise ``ServiceError`` (with the status and
the service's message) for any 4xx/5xx answer. The LangChain integration wraps these.
"""

from __future__ import annotations

from typing import Any

import httpx

from adamem.errors import AdaMemError

__all__ = ["AsyncMemoryClient", "MemoryClient", "ServiceError"]


class ServiceError(AdaMemError):
    """The query service answered with an error status."""

    def __init__(self, status: int, kind: str, detail: str) -> None:
        self.status, self.kind, self.detail = status, kind, detail
        super().__init__(f"HTTP {status} {kind}: {detail}")


def _check(resp: httpx.Response) -> Any:
    if resp.status_code >= 400:
        try:
            body = resp.json()
            kind, detail = body.get("error", "error"), body.get("detail", resp.text)
        except ValueError:
            kind, detail = "error", resp.text
        raise ServiceError(resp.status_code, kind, detail)
    return resp.json()


def _query_body(question: str, top_k: int, as_of: str | int | dict[str, Any] | None) -> dict[str, Any]:
    body: dict[str, Any] = {"question": question, "top_k": top_k}
    if as_of is not None:
        body["as_of"] = as_of
    return body


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
        self._http = httpx.Client(base_url=base_url, headers=headers, timeout=timeout, transport=transport)

    def __enter__(self) -> MemoryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def query(self, user: str, question: str, top_k: int = 10, as_of: str | int | dict[str, Any] | None = None) -> Any:
        """Ranked evidence for a question (``POST /v1/users/{user}/query``)."""
        return _check(self._http.post(f"/v1/users/{user}/query", json=_query_body(question, top_k, as_of)))

    def memory(self, user: str, layer: str = "episodic", limit: int = 500) -> Any:
        """One layer of a user's memory (``GET /v1/users/{user}/memory``)."""
        return _check(self._http.get(f"/v1/users/{user}/memory", params={"layer": layer, "limit": limit}))

    def provenance(self, user: str, item: str) -> Any:
        """From a memory item back to its messages and analyses."""
        return _check(self._http.get(f"/v1/users/{user}/memory/{item}/provenance"))

    def publish(self, messages: list[dict[str, Any]]) -> Any:
        """Publish messages to the log (``POST /v1/messages``)."""
        return _check(self._http.post("/v1/messages", json={"messages": messages}))

    def health(self) -> Any:
        """Readiness and projection lag."""
        return _check(self._http.get("/health"))


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
        self._http = httpx.AsyncClient(base_url=base_url, headers=headers, timeout=timeout, transport=transport)

    async def __aenter__(self) -> AsyncMemoryClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def query(
        self, user: str, question: str, top_k: int = 10, as_of: str | int | dict[str, Any] | None = None
    ) -> Any:
        """Ranked evidence for a question."""
        return _check(await self._http.post(f"/v1/users/{user}/query", json=_query_body(question, top_k, as_of)))

    async def memory(self, user: str, layer: str = "episodic", limit: int = 500) -> Any:
        """One layer of a user's memory."""
        return _check(await self._http.get(f"/v1/users/{user}/memory", params={"layer": layer, "limit": limit}))

    async def provenance(self, user: str, item: str) -> Any:
        """From a memory item back to its messages and analyses."""
        return _check(await self._http.get(f"/v1/users/{user}/memory/{item}/provenance"))

    async def publish(self, messages: list[dict[str, Any]]) -> Any:
        """Publish messages to the log."""
        return _check(await self._http.post("/v1/messages", json={"messages": messages}))

    async def health(self) -> Any:
        """Readiness and projection lag."""
        return _check(await self._http.get("/health"))
