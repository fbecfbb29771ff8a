"""Reads of another tenant's memory under a grant, from the MCP server: asked of the query service.

A grant's scope, the masking of sensitive data and the owner's audit trail belong to the query
service (``api.sharing``); the MCP server does not repeat them. Over HTTP, a request whose
``X-Tenant`` names another tenant and whose ``X-Grant`` names the grant passes the key check; the
read tools (``recall``, ``as_of``, ``research``) then ask the ``adamem serve`` that writes the
embedded log, with the caller's own key and those headers, and answer what it answers. Every other
tool refuses such a request, and without a running service there is nothing to ask: the answer is
a tool error that says so.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import httpx

from adamem.api.auth import KeyRing
from adamem.settings import Settings

__all__ = ["SharedReadError", "compact_shared", "read_through_service", "shared_headers"]


class SharedReadError(Exception):
    """A read under a grant that cannot be answered: the sentence says why and what to do."""


def shared_headers(headers: Mapping[str, str] | None, keys: KeyRing, presented: str | None) -> dict[str, str] | None:
    """The headers to send the query service when a request reads another tenant's owner (else None).

    ``headers`` are the request's, lower-cased (None over stdio, which acts for one tenant).
    """
    if headers is None or keys.open:
        return None
    who = keys.principal(presented)
    named = headers.get("x-tenant")
    if who is None or who.tenant is None or named in (None, who.tenant) or presented is None:
        return None
    out = {"X-API-Key": presented, "X-Tenant": named}
    if headers.get("x-grant"):
        out["X-Grant"] = headers["x-grant"]
    return out


async def read_through_service(
    settings: Settings, path: str, body: Mapping[str, Any], headers: Mapping[str, str]
) -> dict[str, Any]:
    """The query service's answer to a read under a grant; ``SharedReadError`` with its detail otherwise."""
    from adamem.api.notice import serving_url

    url = await asyncio.to_thread(serving_url, settings)
    if url is None:
        raise SharedReadError(
            "reads under a grant are answered by the query service (adamem serve), which keeps the owner's "
            "audit trail; none is running on this log"
        )
    async with httpx.AsyncClient(base_url=url, headers=dict(headers), timeout=60) as client:
        r = await client.post(path, json=dict(body))
    if r.status_code != 200:
        try:
            detail = str(r.json().get("detail", r.text))
        except ValueError:
            detail = r.text
        raise SharedReadError(f"the query service refused ({r.status_code}): {detail}")
    answer: dict[str, Any] = r.json()
    return answer


def compact_shared(answer: Mapping[str, Any]) -> str:
    """A shared answer (query or research) as lines an LLM reads: each item's rank, layer, kind and content."""
    lines = [f"shared by tenant {answer.get('tenant')!r} under a grant (sensitive data may be masked)"]
    if "confidence" in answer:
        lines.append(f"confidence: {answer['confidence']} ({answer.get('because', '')})")
    for item in answer.get("items", []):
        lines.append(f"{item['rank']}. [{item['layer']}/{item['kind']}] {item['content']}")
    if not answer.get("items"):
        lines.append("(nothing the grant covers matches)")
    return "\n".join(lines)
