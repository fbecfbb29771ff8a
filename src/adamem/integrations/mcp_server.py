"""``adamem mcp``: the memory as an MCP server (the official ``mcp`` SDK), over stdio or streamable HTTP.

Tools: ``remember``, ``recall``, ``research``, ``as_of``, ``persona``, ``timeline``, ``forget``, ``feedback``;
resources: an
owner's persona and working memory (``adamem://users/{user_id}/persona|working``). Every tool
answers a compact text an LLM reads and the same answer as structured content. A failure the
caller can fix (unknown user, bad arguments, bad input) is a tool error (``isError``) with a
message that says what to do; an unknown resource owner is an MCP ``-32602`` error.

Tenants: over stdio the server acts for one tenant (``--tenant``, default ``ADAMEM_TENANT``) — the
local user who started it. Over HTTP it checks the same keys as ``adamem serve``
(``ADAMEM_API_KEYS``, sent as ``X-API-Key`` or ``Authorization: Bearer``): a missing key is
answered 401, a wrong one 403, ``X-Tenant`` naming another tenant 403 (unless ``X-Grant`` names a
grant), all as ``{"error", "detail"}`` before the MCP layer sees the request; a key acts for its
own tenant's users only. Without keys, HTTP runs open and a request names its tenant in ``X-Tenant``.
A request naming another tenant and a grant reads that tenant's owner through the query service,
which enforces the grant (``integrations.mcp_sharing``): ``recall``, ``as_of`` and ``research``
only; the other tools refuse it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError, UnexpectedToolError
from mcp_types import CallToolResult, InputRequiredResult, TextContent
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.types import ASGIApp, Receive, Scope, Send

from adamem.api.auth import KeyRing
from adamem.errors import AdaMemError
from adamem.events import ms_to_iso
from adamem.ingest import parse_time, stated_time
from adamem.integrations.mcp_sharing import SharedReadError, compact_shared, read_through_service, shared_headers
from adamem.memory import InvalidArgument, Memory, UnknownUser
from adamem.retrieval.answer import Answer, when_text
from adamem.retrieval.research import MAX_DEPTH, Research

__all__ = [
    "INSTRUCTIONS",
    "KeyCheck",
    "MemoryServer",
    "MessageIn",
    "argument_errors",
    "build_server",
    "compact_answer",
    "compact_research",
    "http_app",
]

INSTRUCTIONS = (
    "Long-term memory of the people you talk with (AdaMem Stream). Call `recall` before answering "
    "anything that depends on what a user said earlier; call `remember` with what the user (and you) "
    "said worth keeping; `research` gathers evidence in rounds, graded, with conflicts shown. "
    "`persona` gives a user's stable traits, `timeline` what happened between two times, `as_of` what "
    "was known at a past time, `forget` erases on request. Every user is "
    "named by user_id; times are RFC 3339 (2024-03-01T09:30:00Z) or integer milliseconds."
)

UserId = Annotated[str, Field(min_length=1, max_length=200, description="The user whose memory this is (user_id).")]
Time = Annotated[
    str | int,
    Field(description="A time: RFC 3339 with offset, e.g. 2024-03-01T09:30:00Z, or integer ms since the epoch."),
]


class MessageIn(BaseModel):
    """One message to remember."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, description="What was said.")
    speaker: str | None = Field(None, min_length=1, description="Who said it (default: the user_id).")
    role: Literal["user", "assistant", "other"] = Field("user", description="The speaker's role.")
    occurred_at: str | int | None = Field(None, description="When it was said (default: now); RFC 3339 or ms.")
    conversation_id: str | None = Field(None, min_length=1, description="The conversation (default: 'default').")
    message_id: str | None = Field(None, min_length=1, description="Its id within the conversation (optional).")


def _ms(value: str | int, name: str) -> int:
    try:
        return parse_time(value)
    except ValueError as exc:
        raise InvalidArgument(f"{name}: {exc}") from exc


def _stated(value: str | int, name: str) -> int | str:
    try:
        return stated_time(value)
    except ValueError as exc:
        raise InvalidArgument(f"{name}: {exc}") from exc


def compact_answer(answer: Answer) -> str:
    """An answer as a few lines an LLM reads: the route, then each item with score parts and sources."""
    route = answer.route
    lines = [f"route: {route.route.value} ({route.reason}); whose memory: {answer.whose.subject.value}"]
    lines += [f"notice: {n}" for n in answer.notices]
    for item in answer.items:
        when = when_text(item.occurred_at, item.event_time, item.utc_offset_minutes)
        b = item.breakdown
        parts = f"semantic {b.semantic:.2f} graph {b.graph:.2f} temporal {b.temporal:.2f} fact {b.fact:.2f}"
        sources = "; ".join(
            f"{p.speaker} in {p.conversation_id}/{p.message_id} at {p.source_topic} p{p.source_partition}:"
            f"{p.source_offset}"
            for p in item.provenance[:3]
        )
        lines.append(
            f"{item.rank}. [{item.layer.value}/{item.kind}] {item.score:.3f} {when} {item.content}\n"
            f"   why: {parts}" + (f"\n   from: {sources}" if sources else "")
        )
    if not answer.items:
        lines.append("(nothing in memory matches)")
    return "\n".join(lines)


def compact_research(found: Research) -> str:
    """A research answer as lines an LLM reads: how sure and why, each round's cues, conflicts, graded items."""
    lines = [f"confidence: {found.confidence} ({found.because})"]
    for r in found.rounds:
        cues = ", ".join(r.cues) if r.cues else "the question alone"
        lines.append(f"round {r.number}: searched for {cues}; {len(r.added)} new item(s)")
    for c in found.conflicts:
        lines.append(
            f"conflict ({c.slot or 'statement'}): now {c.current_text!r} ({ms_to_iso(c.current_at)}), "
            f"before {c.earlier_text!r} ({ms_to_iso(c.earlier_at)})"
        )
    for g in found.items:
        item, grade = g.item, g.grade
        when = when_text(item.occurred_at, item.event_time, item.utc_offset_minutes)
        mark = "" if grade.current else " [replaced by a newer statement]"
        lines.append(
            f"{item.rank}. [{item.layer.value}/{item.kind}] grade {grade.score:.2f} {when} {item.content}{mark}"
        )
    if not found.items:
        lines.append("(nothing in memory matches)")
    return "\n".join(lines)


def _allowed(schema: Mapping[str, Any]) -> str:
    """What an argument's JSON schema allows, in words: "an integer from 1 to 50", "text of 1 to 2000 characters"."""
    if "enum" in schema:
        return "one of " + ", ".join(str(v) for v in schema["enum"])
    kind = schema.get("type")
    if kind == "integer" and "minimum" in schema and "maximum" in schema:
        return f"an integer from {schema['minimum']} to {schema['maximum']}"
    if kind == "string" and "maxLength" in schema:
        return f"text of {schema.get('minLength', 0)} to {schema['maxLength']} characters"
    if kind == "array" and "maxItems" in schema:
        return f"a list of {schema.get('minItems', 0)} to {schema['maxItems']} items"
    if kind == "boolean":
        return "true or false"
    described = str(schema.get("description", "")).rstrip(".")
    return described[:1].lower() + described[1:]


def argument_errors(tool: str, exc: ValidationError, schema: Mapping[str, Any]) -> str:
    """A tool's invalid arguments in one short message: each argument, what is wrong, and what is allowed.

    In place of pydantic's report (its model's name, the input's type, a link per error), which
    an agent has to dig the argument's name out of.
    """
    arguments = schema.get("properties", {})
    errors = exc.errors()
    parts: list[str] = []
    seen: set[str] = set()
    for err in errors:
        loc = [str(p) for p in err["loc"]]
        if loc and "anyOf" in arguments.get(loc[0], {}):
            loc = loc[:1]  # one error for the argument, not one per branch of its union ("start.str", "start.int")
        where = ".".join(loc) or "the arguments"
        if where in seen:
            continue
        seen.add(where)
        argument = arguments.get(loc[0]) if len(loc) == 1 else None
        if err["type"] == "missing":
            problem = f"{where} is missing"
        elif err["type"] == "extra_forbidden":
            problem = f"{where} is not " + ("an argument of this tool" if len(loc) == 1 else "allowed there")
        elif argument is not None:
            shown = repr(err.get("input"))
            problem = f"{where}: {shown if len(shown) <= 40 else shown[:37] + '...'} is not allowed"
        else:
            message = str(err["msg"]).removeprefix("Value error, ")
            problem = f"{where}: {message[:1].lower()}{message[1:]}"
        allowed = _allowed(argument) if argument is not None else ""
        parts.append(f"{problem}; give {allowed}" if allowed else problem)
    more = f" (and {len(parts) - 5} more)" if len(parts) > 5 else ""
    return f"invalid arguments to {tool}: " + ". ".join(parts[:5]) + more


class MemoryServer(MCPServer[Any]):
    """The SDK's server, whose answer to invalid tool arguments names each argument and what it allows."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        """Call a tool (``MCPServer.call_tool``); invalid arguments are a ``ToolError`` saying which, and why."""
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError:
            raise
        except ToolError as exc:
            if not isinstance(exc.__cause__, ValidationError):
                raise
            schema = next((t.input_schema for t in await self.list_tools() if t.name == name), {})
            raise ToolError(argument_errors(name, exc.__cause__, schema)) from exc.__cause__


def _result(text: str, structured: Mapping[str, Any]) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=dict(structured))


class KeyCheck:
    """ASGI middleware: the query service's tenant keys in front of the MCP endpoint (401/403 as JSON)."""

    def __init__(self, app: ASGIApp, keys: KeyRing) -> None:
        self.app, self.keys = app, keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse a request without a valid key before the MCP layer reads it."""
        if scope["type"] != "http" or self.keys.open:
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        who = self.keys.principal(_presented(headers))
        status, kind, detail = 0, "", ""
        if who is None:
            missing = _presented(headers) is None
            status, kind = (401, "unauthenticated") if missing else (403, "forbidden")
            detail = "send your tenant's API key in the X-API-Key header" if missing else "this API key is not valid"
        elif headers.get("x-tenant") not in (None, who.tenant) and not headers.get("x-grant"):
            status, kind, detail = (
                403,
                "forbidden",
                f"this API key acts for its own tenant, not {headers['x-tenant']!r}",
            )
        if not status:
            await self.app(scope, receive, send)
            return
        body = json.dumps({"error": kind, "detail": detail}).encode()
        extra = [(b"www-authenticate", b"ApiKey")] if status == 401 else []
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    *extra,
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def _presented(headers: Mapping[str, str]) -> str | None:
    key = headers.get("x-api-key")
    if key:
        return key
    scheme, _, token = headers.get("authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def build_server(memory: Memory, *, tenant: str | None = None, api_keys: str = "") -> MCPServer:
    """The MCP server over ``memory``; ``tenant`` is whom a request without HTTP headers (stdio) acts for."""
    keys = KeyRing(api_keys)
    local_tenant = tenant or memory.settings.default_tenant
    server = MemoryServer("adamem", instructions=INSTRUCTIONS, version="0.1.0", log_level="WARNING")

    def headers_of(ctx: Context | None) -> dict[str, str] | None:
        headers = None
        if ctx is not None:
            try:
                headers = ctx.headers
            except ValueError:  # outside a request
                headers = None
        return None if headers is None else {k.lower(): v for k, v in headers.items()}

    def tenant_of(ctx: Context | None) -> str:
        lower = headers_of(ctx)
        if lower is None:
            return local_tenant
        who = keys.principal(_presented(lower))
        if who is None:  # KeyCheck answered already; a server mounted without it refuses here too
            raise ToolError("this API key is not valid")
        named = lower.get("x-tenant")
        if who.tenant is not None and named not in (None, who.tenant):
            raise ToolError(
                f"this API key acts for its own tenant, not for {named!r}; under a grant, only recall, as_of and "
                "research read"
            )
        return who.tenant or named or memory.settings.default_tenant

    def shared(ctx: Context | None) -> dict[str, str] | None:
        """The query service's headers when the request reads another tenant's owner under a grant."""
        lower = headers_of(ctx)
        return shared_headers(lower, keys, None if lower is None else _presented(lower))

    async def through_service(path: str, body: dict[str, Any], headers: dict[str, str]) -> CallToolResult:
        try:
            answer = await read_through_service(memory.settings, path, body, headers)
        except SharedReadError as exc:
            raise ToolError(str(exc)) from exc
        return _result(compact_shared(answer), answer)

    def failed(exc: AdaMemError) -> ToolError:
        return ToolError(str(exc))

    @server.tool(
        description="Store messages in a user's long-term memory and wait until they can be recalled. "
        "Give each message's text; speaker, role (user/assistant/other), occurred_at, conversation_id are optional."
    )
    async def remember(
        user_id: UserId,
        messages: Annotated[list[MessageIn], Field(min_length=1, max_length=500, description="The messages.")],
        ctx: Context,
    ) -> CallToolResult:
        try:
            rows = [m.model_dump(exclude_none=True) for m in messages]
            for row in rows:
                if "occurred_at" in row:  # a time with an offset stays on that clock (the speaker's)
                    row["occurred_at"] = _stated(row["occurred_at"], "occurred_at")
            done = await memory.aremember(user_id, rows, tenant_of(ctx))
        except AdaMemError as exc:
            raise failed(exc) from exc
        text = f"remembered {len(done.event_ids)} message(s) for {user_id}; they are visible to recall now"
        return _result(text, {"user_id": user_id, **done.to_dict()})

    async def _recall(user_id: str, question: str, top_k: int, as_of: int | None, ctx: Context) -> CallToolResult:
        import asyncio

        grant = shared(ctx)
        if grant is not None:
            body: dict[str, Any] = {"question": question, "top_k": top_k}
            if as_of is not None:
                body["as_of"] = as_of
            return await through_service(f"/v1/users/{user_id}/query", body, grant)

        try:
            answer = await asyncio.to_thread(
                memory.recall, user_id, question, tenant=tenant_of(ctx), top_k=top_k, as_of=as_of
            )
        except AdaMemError as exc:
            raise failed(exc) from exc
        return _result(compact_answer(answer), answer.to_dict())

    @server.tool(
        description="Recall what a user's memory holds about a question: ranked evidence (messages, facts, "
        "events, persona traits), the retrieval route chosen, why each item scored, and the source messages."
    )
    async def recall(
        user_id: UserId,
        question: Annotated[str, Field(min_length=1, max_length=2000, description="The question, any language.")],
        ctx: Context,
        top_k: Annotated[int, Field(ge=1, le=50, description="How many items.")] = 8,
    ) -> CallToolResult:
        return await _recall(user_id, question, top_k, None, ctx)

    @server.tool(
        name="as_of",
        description="Recall as the memory was at a past time: only what had been said by then, and "
        "what was valid then (later corrections not yet applied).",
    )
    async def as_of(
        user_id: UserId,
        question: Annotated[str, Field(min_length=1, max_length=2000, description="The question.")],
        time: Time,
        ctx: Context,
        top_k: Annotated[int, Field(ge=1, le=50, description="How many items.")] = 8,
    ) -> CallToolResult:
        try:
            point = _ms(time, "time")
        except AdaMemError as exc:
            raise failed(exc) from exc
        return await _recall(user_id, question, top_k, point, ctx)

    @server.tool(
        description="Research a question in a user's memory: evidence gathered in up to `depth` rounds (each later "
        "round searches again with cues from what was found), every item graded (source reliability, freshness, "
        "agreement), conflicts shown with both sides and their dates, and how sure the answer is, in one line."
    )
    async def research(
        user_id: UserId,
        query: Annotated[str, Field(min_length=1, max_length=2000, description="The question, any language.")],
        ctx: Context,
        depth: Annotated[int, Field(ge=1, le=MAX_DEPTH, description="Rounds at most (1: one search).")] = 2,
        context: Annotated[str, Field(max_length=8000, description="Text around the question.")] = "",
        memory_hints: Annotated[
            list[Annotated[str, Field(max_length=200)]],
            Field(max_length=20, description="Words or names known to matter."),
        ] = [],  # noqa: B006 - pydantic copies defaults
        top_k: Annotated[int, Field(ge=1, le=50, description="How many items.")] = 8,
    ) -> CallToolResult:
        import asyncio

        grant = shared(ctx)
        if grant is not None:
            body = {"query": query, "depth": depth, "context": context, "memory_hints": memory_hints, "top_k": top_k}
            return await through_service(f"/v1/users/{user_id}/research", body, grant)
        try:
            found = await asyncio.to_thread(
                memory.research,
                user_id,
                query,
                tenant=tenant_of(ctx),
                depth=depth,
                context=context,
                memory_hints=memory_hints,
                top_k=top_k,
            )
        except AdaMemError as exc:
            raise failed(exc) from exc
        return _result(compact_research(found), found.to_dict())

    @server.tool(description="A user's stable traits and preferences, strongest first, with strength and evidence.")
    async def persona(
        user_id: UserId,
        ctx: Context,
        limit: Annotated[int, Field(ge=1, le=200, description="How many traits.")] = 20,
    ) -> CallToolResult:
        import asyncio

        try:
            traits = await asyncio.to_thread(memory.persona, user_id, tenant=tenant_of(ctx), limit=limit)
        except AdaMemError as exc:
            raise failed(exc) from exc
        lines = [
            f"- {t.kind} {t.key}={t.value} strength {t.strength:.2f}, {t.mentions} mention(s)"
            + (", stable" if t.stable else "")
            + (", disputed" if t.disputed else "")
            + (f'; e.g. "{t.evidence[-1].text}"' if t.evidence else "")
            for t in traits
        ]
        return _result(
            "\n".join(lines) or f"{user_id} has no persona traits yet",
            {"user_id": user_id, "traits": [t.to_dict() for t in traits]},
        )

    @server.tool(
        description="What happened to a user between two times: their messages and remembered events, in order."
    )
    async def timeline(
        user_id: UserId,
        start: Time,
        end: Time,
        ctx: Context,
        limit: Annotated[int, Field(ge=1, le=1000, description="How many entries at most.")] = 100,
    ) -> CallToolResult:
        import asyncio

        try:
            lo, hi = _ms(start, "start"), _ms(end, "end")
            entries = await asyncio.to_thread(memory.timeline, user_id, lo, hi, tenant=tenant_of(ctx), limit=limit)
        except AdaMemError as exc:
            raise failed(exc) from exc
        lines = [f"{e.time} [{e.source}] {e.text}" for e in entries]
        text = "\n".join(lines) or f"nothing for {user_id} between {ms_to_iso(lo)} and {ms_to_iso(hi)}"
        found = [e.to_dict() for e in entries]
        return _result(text, {"user_id": user_id, "start": ms_to_iso(lo), "end": ms_to_iso(hi), "entries": found})

    @server.tool(
        description="Forget, at the user's request: one memory item (item_id from recall), one message "
        "(message_event_id) and all derived only from it, or everything of the user (everything=true). "
        "Give exactly one. Takes effect before this returns."
    )
    async def forget(
        user_id: UserId,
        ctx: Context,
        item_id: Annotated[str | None, Field(description="A memory item id from recall.")] = None,
        message_event_id: Annotated[str | None, Field(description="A message event id from recall.")] = None,
        everything: Annotated[bool, Field(description="Forget the whole user.")] = False,
        reason: Annotated[str, Field(max_length=500, description="Why (kept for audit).")] = "",
    ) -> CallToolResult:
        try:
            done = await memory.aforget(
                user_id,
                tenant=tenant_of(ctx),
                item=item_id,
                message=message_event_id,
                everything=everything,
                reason=reason,
            )
        except AdaMemError as exc:
            raise failed(exc) from exc
        what = "everything" if everything else (f"item {item_id}" if item_id else f"message {message_event_id}")
        return _result(f"forgot {what} of {user_id}", {"user_id": user_id, **done.to_dict()})

    @server.tool(
        description="Say which items of a recall answer helped the user and which did not (their item ids). "
        "Later answers for this user put the kind that helps them first: records and traits, or messages."
    )
    async def feedback(
        user_id: UserId,
        ctx: Context,
        helped: Annotated[list[str], Field(max_length=100, description="Item ids from recall that helped.")] = [],  # noqa: B006
        unhelpful: Annotated[
            list[str], Field(max_length=100, description="Item ids from recall that did not help.")
        ] = [],  # noqa: B006
    ) -> CallToolResult:
        try:
            done = await memory.afeedback(user_id, tenant=tenant_of(ctx), helped=helped, unhelpful=unhelpful)
        except AdaMemError as exc:
            raise failed(exc) from exc
        judged = len(helped) + len(unhelpful)
        return _result(f"noted feedback on {judged} items for {user_id}", {"user_id": user_id, **done.to_dict()})

    @server.resource(
        "adamem://users/{user_id}/persona",
        name="persona",
        description="A user's persona traits (JSON), strongest first.",
        mime_type="application/json",
    )
    async def persona_resource(user_id: str, ctx: Context) -> str:
        import asyncio

        try:
            traits = await asyncio.to_thread(memory.persona, user_id, tenant=tenant_of(ctx))
        except UnknownUser as exc:
            raise ResourceNotFoundError(str(exc)) from exc
        return json.dumps({"user_id": user_id, "traits": [t.to_dict() for t in traits]}, ensure_ascii=False)

    @server.resource(
        "adamem://users/{user_id}/working",
        name="working_memory",
        description="A user's working memory (JSON): the most recent messages, oldest first.",
        mime_type="application/json",
    )
    async def working_resource(user_id: str, ctx: Context) -> str:
        import asyncio

        try:
            rows = await asyncio.to_thread(memory.working, user_id, tenant=tenant_of(ctx))
        except UnknownUser as exc:
            raise ResourceNotFoundError(str(exc)) from exc
        messages = [
            {
                "time": ms_to_iso(m.occurred_at, m.utc_offset_minutes),  # on the speaker's clock
                "speaker": m.speaker,
                "role": m.role,
                "text": m.text,
                "id": m.id,
            }
            for m in rows
        ]
        return json.dumps({"user_id": user_id, "messages": messages}, ensure_ascii=False)

    return server


def http_app(server: MCPServer, api_keys: str, *, path: str = "/mcp", host: str = "127.0.0.1") -> ASGIApp:
    """The streamable HTTP app behind the tenant key check.

    ``host`` is the listen address: on a loopback one the SDK also refuses requests whose ``Host``
    or ``Origin`` is not loopback (DNS rebinding protection).
    """
    return KeyCheck(server.streamable_http_app(streamable_http_path=path, host=host), KeyRing(api_keys))


def serve(
    memory: Memory,
    *,
    transport: Literal["stdio", "http"],
    tenant: str | None = None,
    host: str = "127.0.0.1",
    port: int = 8765,
    path: str = "/mcp",
) -> None:
    """Run the MCP server until interrupted (stdio: until the client closes standard input)."""
    import anyio

    server = build_server(memory, tenant=tenant, api_keys=memory.settings.api_keys if transport == "http" else "")
    try:
        if transport == "stdio":
            anyio.run(server.run_stdio_async)
        else:
            import uvicorn

            app = http_app(server, memory.settings.api_keys, path=path, host=host)
            uvicorn.run(app, host=host, port=port, log_level="warning")
    finally:
        memory.close()
