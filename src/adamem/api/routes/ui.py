"""The memory inspector: server-rendered HTML pages under ``/ui`` over the same service as the API.

Pages: the tenant's owners (``/ui``, filtered by a substring); per owner, the timeline (messages and
episodic records with their validity), persona (traits as of the point — at a past point the
persona fold replayed from the log, ``api.ui.replay`` — and the weekly stability index as a chart),
graph neighbourhood, query playground, and the store's views with one view's per-layer diff against
the active one (``/ui/owners/{user}/{panel}``); an item's provenance; and forgetting a message or an
item, confirmed on a page of its own and done by the same code as ``POST /v1/users/{user}/forget``.
Every owner page takes ``as_of`` (an ISO-8601 time, integer milliseconds, or ``offset:N``), the
point a query's ``as_of`` names, and shows memory as it stood then; its as-of form (a slider over
the owner's message times and a text box) is a GET form that redirects to the page's canonical URL.

Keys: as the API's. A service without keys is open (``?tenant=`` picks a tenant, the service's
default otherwise); with keys, a page reads the tenant's key from ``X-API-Key``, a bearer token or
the cookie ``/ui/login`` sets (HttpOnly, SameSite=Strict; a cross-origin form post is refused).
Bad input — an unknown owner or item, an as-of that is no time or offset, a malformed parameter —
is answered with a 4xx page that says what is wrong; no route here appears in the OpenAPI description.
"""

from __future__ import annotations

import asyncio
import bisect
import json
import logging
import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response
from pydantic import ValidationError

from adamem.api.models import MAX_QUESTION_CHARS, MAX_WAIT_MS, ForgetItem, ForgetMessage
from adamem.api.routes.writes import forget_target
from adamem.api.service import Service
from adamem.api.ui.html import PageError, Row, error_page, esc, href, page, segment, table, td, when
from adamem.api.ui.inspect import (
    AsOfError,
    Inspection,
    MessageCache,
    StabilityWeek,
    WrittenBy,
    as_of_text,
    parse_as_of,
)
from adamem.api.ui.replay import PersonaReplays
from adamem.errors import AdaMemError
from adamem.owners import owner_key, split_owner
from adamem.projections.folds.rows import EpisodicRow, GraphEdgeRow, GraphNodeRow, PersonaRow
from adamem.retrieval.answer import Answer, Item, when_text
from adamem.streams.generations import analyzer_summary
from adamem.streams.reanalyze import LayerChanges, layer_changes

__all__ = ["PANELS", "ui_router"]

log = logging.getLogger("adamem.api")

PANELS = {
    "timeline": "Timeline",
    "persona": "Persona",
    "graph": "Graph",
    "query": "Query",
    "views": "Views",
}
"""The owner pages, by path segment, with their tab titles."""

COOKIE = "adamem_key"
PAGE_ROWS = 100  # messages per page of the timeline
NEIGHBOURS = 24  # edges drawn around a graph node
NODE_COLOURS = {
    "message": "#4c8dd6",
    "topic": "#8a63d2",
    "fact": "#1a7f37",
    "attribute": "#bf8700",
    "event": "#cf222e",
}
_PANEL_PARAMS = {
    "graph": ("node", "find", "item"),
    "query": ("q", "top_k"),
    "timeline": (),
    "persona": (),
    "views": ("compare",),
}
"""Parameters of a panel that its as-of form carries along."""


@dataclass(frozen=True)
class Viewer:
    """Who looks: the tenant the pages show, and the ``tenant`` parameter links carry (open services only)."""

    tenant: str
    carry: str | None


@dataclass
class Ctx:
    """One owner page being drawn: the viewer, the owner, the point, and the panel's own parameters."""

    viewer: Viewer
    user: str
    panel: str
    point_text: str
    params: dict[str, str]

    def url(self, panel: str | None = None, **params: object | None) -> str:
        """An escaped link to a panel of this owner at this page's point (``as_of`` may be overridden)."""
        merged: dict[str, object | None] = {"as_of": self.point_text or None, "tenant": self.viewer.carry}
        merged.update(params)
        return href(f"/ui/owners/{segment(self.user)}/{panel or self.panel}", merged)

    def raw_url(self, panel: str | None = None, **params: object | None) -> str:
        """The same link unescaped (for a redirect or a ``back`` field)."""
        merged: dict[str, object | None] = {"as_of": self.point_text or None, "tenant": self.viewer.carry}
        merged.update(params)
        query = {k: str(v) for k, v in merged.items() if v is not None and v != ""}
        return f"/ui/owners/{segment(self.user)}/{panel or self.panel}" + ("?" + urlencode(query) if query else "")


def _int_param(params: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    value = params.get(name, "").strip()
    if not value:
        return default
    try:
        number = int(value)
    except ValueError:
        raise PageError(400, "Bad parameter", f"{name} {value!r} is not a whole number") from None
    if not low <= number <= high:
        raise PageError(400, "Bad parameter", f"{name} is {number}; it must be between {low} and {high}")
    return number


def _tag(text: str, kind: str = "") -> str:
    return f'<span class="tag {esc(kind)}">{esc(text)}</span>'


def _bar(value: float, threshold: float | None = None) -> str:
    width = max(0.0, min(1.0, value)) * 100
    mark = f'<i style="left:{threshold * 100:.1f}%" title="threshold {threshold}"></i>' if threshold is not None else ""
    return f'<span class="bar" aria-hidden="true"><span style="width:{width:.1f}%"></span>{mark}</span>'


def _short(text: str, n: int = 90) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def ui_router(service: Service) -> APIRouter:
    """The inspector's pages over ``service``: its keys, retriever, log and forget path."""
    router = APIRouter(include_in_schema=False)
    messages_of = MessageCache()
    settings = service.settings
    replays = PersonaReplays(service.log, settings) if service.log is not None else None

    # --- who is asking ------------------------------------------------------------------------

    def login_form(note: str = "") -> str:
        return (
            f"<p>{esc(note)}</p>"
            * bool(note)
            + '<form method="post" action="/ui/login"><p><label for="key">Your tenant\'s API key</label> '
            '<input type="password" id="key" name="key" autocomplete="current-password" required> '
            '<button type="submit">Sign in</button></p></form>'
        )

    def viewer(request: Request) -> Viewer:
        asked = (request.query_params.get("tenant") or "").strip() or None
        default = settings.default_tenant
        if service.keys.open:
            return Viewer(asked or default, asked if asked and asked != default else None)
        presented = request.headers.get("x-api-key")
        auth = request.headers.get("authorization", "")
        if not presented and auth.lower().startswith("bearer "):
            presented = auth[7:].strip()
        presented = presented or request.cookies.get(COOKIE)
        who = service.keys.principal(presented)
        if who is None:
            if not presented:
                raise PageError(401, "Sign in", "this service needs your tenant's API key", login_form())
            raise PageError(403, "Key not valid", "this API key is not valid", login_form("Try another key."))
        assert who.tenant is not None
        if asked is not None and asked != who.tenant:
            raise PageError(403, "Other tenant", f"this API key acts for its own tenant, not for {asked!r}")
        return Viewer(who.tenant, None)

    def same_origin(request: Request) -> None:
        """Refuse a form posted from another site or an opaque origin (the key cookie is SameSite=Strict as well)."""
        origin = request.headers.get("origin")
        if origin and urlsplit(origin).netloc != request.headers.get("host", ""):
            raise PageError(403, "Cross-site form", "this form was posted from another site; open the inspector itself")

    async def guarded(work: Callable[[], Awaitable[Response]]) -> Response:
        try:
            return await work()
        except PageError as exc:
            return exc.response()
        except AdaMemError as exc:
            status = exc.http_status
            if status >= 500:
                log.warning("inspector request failed: %s", exc)
            titles = {404: "Not found", 409: "Not in memory yet", 403: "Forbidden", 422: "Bad request"}
            return error_page(status, titles.get(status, "Unavailable"), exc.public_detail())
        except Exception:
            log.exception("unexpected error in the inspector")
            return error_page(500, "Unexpected error", "unexpected error; it has been logged")

    # --- layout -------------------------------------------------------------------------------

    def owner_heading(ctx: Ctx) -> str:
        tabs = "".join(
            f'<a href="{ctx.url(name)}"' + (' aria-current="page"' if name == ctx.panel else "") + f">{esc(title)}</a>"
            for name, title in PANELS.items()
        )
        owners = href("/ui", {"tenant": ctx.viewer.carry})
        return (
            f'<h1><a href="{owners}">AdaMem memory inspector</a> / <span class="muted">{esc(ctx.viewer.tenant)}</span>'
            f" / {esc(ctx.user)}</h1>"
            f'<nav class="tabs" aria-label="Panels">{tabs}</nav>'
        )

    def as_of_form(ctx: Ctx, insp: Inspection) -> str:
        times = sorted(m.occurred_at for m in insp.all_messages)
        now_index = len(times)
        index = now_index if insp.time is None else max(0, bisect.bisect_right(times, insp.time) - 1)
        shown = "now (live memory)" if insp.point is None else ctx.point_text
        if insp.point is not None and insp.point.offset is not None:
            shown += f" (event time {when(insp.time if insp.time is not None else -1)})"
        hidden = "".join(
            f'<input type="hidden" name="{esc(k)}" value="{esc(v)}">'
            for k, v in {"tenant": ctx.viewer.carry or "", **ctx.params}.items()
            if v
        )
        path = esc(f"/ui/owners/{segment(ctx.user)}/{ctx.panel}")
        now_link = ctx.url(as_of=None, **{k: v for k, v in ctx.params.items()})
        return (
            f'<form class="asof" method="get" action="{path}" role="search" aria-label="Memory as of">{hidden}'
            f'<label for="asof-range">Memory as of</label>'
            f'<input type="range" id="asof-range" name="at" min="0" max="{now_index}" step="1" value="{index}" '
            f'data-times="{esc(json.dumps(times))}" aria-describedby="asof-shown">'
            f'<output id="asof-shown" for="asof-range">{esc(shown)}</output>'
            f'<input type="hidden" name="shown_at" value="{index}">'
            f'<input type="hidden" name="shown" value="{esc(ctx.point_text)}">'
            f'<label for="asof-text">time or offset</label>'
            f'<input type="text" id="asof-text" name="as_of" value="{esc(ctx.point_text)}" size="24" '
            f'placeholder="ISO time, ms or offset:N">'
            f'<button type="submit" id="asof-go">Show</button> <a href="{now_link}">Now</a></form>'
            "<script>(function(){var r=document.getElementById('asof-range'),t=document.getElementById('asof-text'),"
            "o=document.getElementById('asof-shown'),ts=JSON.parse(r.dataset.times);"
            "r.addEventListener('input',function(){var i=+r.value;"
            "var l=i>=ts.length?'':new Date(ts[i]).toISOString().replace('.000Z','Z');"
            "o.textContent=l||'now (live memory)';t.value=l;});})();</script>"
        )

    def owner_page(ctx: Ctx, insp: Inspection, title: str, body: str) -> Response:
        notice = ""
        if ctx.params.get("forgotten"):
            notice = (
                f'<p class="notice" role="status">Forgotten: {esc(ctx.params["forgotten"])}. '
                "Memory no longer holds it.</p>"
            )
        ctx.params.pop("forgotten", None)
        return page(f"{ctx.user} · {title}", notice + as_of_form(ctx, insp) + body, heading=owner_heading(ctx))

    # --- loading an owner ---------------------------------------------------------------------

    def inspect(owner_id: str, point_text: str) -> Inspection:
        try:
            point = parse_as_of(point_text)
        except AsOfError as exc:
            raise PageError(400, "Bad as_of", str(exc)) from None
        snap = service.retriever.snapshot(owner_id)  # UnknownOwner: 404
        return Inspection(owner_id, snap, messages_of.messages(service.retriever, owner_id, snap), point)

    def chosen_point(params: Mapping[str, str], insp: Inspection) -> str:
        """The point an as-of form submission asks for: the text box when it was edited, else the slider."""
        text, shown = params.get("as_of", "").strip(), params.get("shown", "").strip()
        at, shown_at = params.get("at", "").strip(), params.get("shown_at", "").strip()
        if text != shown or not at or at == shown_at:
            return text
        times = sorted(m.occurred_at for m in insp.all_messages)
        index = _int_param(params, "at", len(times), 0, len(times))
        return "" if index >= len(times) else as_of_text(parse_as_of(str(times[index])))

    async def owner_panel(request: Request, user: str, panel: str) -> Response:
        who = viewer(request)
        owner_id = owner_key(who.tenant, user)
        params = {k: v for k, v in request.query_params.items() if k != "tenant"}
        point_text = params.get("as_of", "").strip()
        if "at" in params:  # the as-of form: answered with the page's canonical URL
            insp = await asyncio.to_thread(inspect, owner_id, "")
            point_text = chosen_point(params, insp)
            await asyncio.to_thread(inspect, owner_id, point_text)  # a bad text answers 400 here
            keep = {k: params[k] for k in _PANEL_PARAMS[panel] if params.get(k)}
            ctx = Ctx(who, user, panel, point_text, keep)
            return RedirectResponse(ctx.raw_url(**keep), status_code=303)
        insp = await asyncio.to_thread(inspect, owner_id, point_text)
        point_text = as_of_text(insp.point)
        ctx = Ctx(
            who,
            user,
            panel,
            point_text,
            {k: params[k] for k in (*_PANEL_PARAMS[panel], "forgotten", "page") if params.get(k)},
        )
        draw = {
            "timeline": timeline,
            "persona": persona,
            "graph": graph,
            "query": query,
            "views": views,
        }[panel]
        body = await draw(ctx, insp)
        return owner_page(ctx, insp, PANELS[panel], body)

    # --- panels -------------------------------------------------------------------------------

    def forget_link(ctx: Ctx, kind: str, target: str, label: str) -> str:
        back = ctx.raw_url()
        url = href(
            f"/ui/owners/{segment(ctx.user)}/forget",
            {kind: target, "back": back, "tenant": ctx.viewer.carry},
        )
        return f'<a class="danger" href="{url}" aria-label="Forget {esc(label)}">Forget</a>'

    async def timeline(ctx: Ctx, insp: Inspection) -> str:
        shown = list(reversed(insp.messages))
        pages = max(1, math.ceil(len(shown) / PAGE_ROWS))
        number = _int_param(ctx.params, "page", 1, 1, pages)
        part = shown[(number - 1) * PAGE_ROWS : number * PAGE_ROWS]
        rows = []
        for m in part:
            tags = []
            if m.id in insp.working:
                tags.append(_tag("working", "ok"))
            if m.consolidated:
                tags.append(_tag("consolidated"))
            if insp.view.stale(m):
                tags.append(_tag("superseded", "warn"))
            rows.append(
                Row(
                    "message",
                    (
                        td(m.seq, "num"),
                        td(when(m.occurred_at, m.utc_offset_minutes), "time"),
                        td(f"{m.source_partition}:{m.source_offset}", "num"),
                        td(f"{m.speaker} ({m.role})"),
                        td(m.text, "content"),
                        td(" ".join(tags), raw=True),
                        td(
                            f'<a href="{ctx.url("graph", item=m.id, node=None, find=None)}">graph</a> · '
                            f'<a href="{item_url(ctx, m.id)}">provenance</a> · '
                            + forget_link(ctx, "message", m.id, _short(m.text, 40)),
                            raw=True,
                        ),
                    ),
                )
            )
        pager = ""
        if pages > 1:
            links = []
            if number > 1:
                links.append(f'<a href="{ctx.url(page=number - 1)}" rel="prev">Newer</a>')
            if number < pages:
                links.append(f'<a href="{ctx.url(page=number + 1)}" rel="next">Older</a>')
            pager = f"<p>Page {number} of {pages} · {' · '.join(links)}</p>"
        messages = table(
            ["#", "said at", "log offset", "speaker", "text", "memory", ""],
            rows,
            cls="messages",
            caption=f"{len(insp.messages)} of {len(insp.all_messages)} messages existed then, newest first"
            if insp.point is not None
            else f"{len(insp.messages)} messages, newest first",
        )
        recs = sorted(
            (r for r in insp.snap.records.values() if insp.record_known(r)),
            key=lambda r: (r.occurred_at, r.id),
            reverse=True,
        )
        rec_rows = []
        for r in recs:
            valid = insp.record_valid(r)
            if valid:
                state = _tag("valid", "ok")
            elif insp.replaced_by_then(r):
                newer = insp.snap.records.get(r.superseded_by)
                what = f"“{_short(newer.content, 60)}”" if newer is not None else "a correction"
                state = (
                    _tag("superseded", "warn") + f" by {esc(what)} at <span class='time'>{esc(when(r.valid_to))}</span>"
                )
            elif insp.point is None and r.id in insp.snap.pending:
                state = _tag("pending update", "warn")
            else:
                state = _tag("not valid then", "bad")
            replaces = insp.snap.records.get(r.supersedes) if r.supersedes else None
            content = esc(r.content) + (
                f'<br><span class="muted">replaces “{esc(_short(replaces.content, 60))}”</span>' if replaces else ""
            )
            rec_rows.append(
                Row(
                    "record" + ("" if valid else " superseded"),
                    (
                        td(r.type),
                        td(content, "content", raw=True),
                        td(f"{when(r.valid_from)} → {when(r.valid_to) if r.valid_to >= 0 else 'open'}", "time"),
                        td(state, raw=True),
                        td(f"{r.confidence:.2f}", "num"),
                        td(r.router),
                        td(
                            f'<a href="{ctx.url("graph", item=r.id, node=None, find=None)}">graph</a> · '
                            f'<a href="{item_url(ctx, r.id)}">provenance</a> · '
                            + forget_link(ctx, "item", r.id, _short(r.content, 40)),
                            raw=True,
                        ),
                    ),
                )
            )
        records = table(
            ["type", "content", "valid from → to", "at this point", "confidence", "router", ""],
            rec_rows,
            cls="records",
            caption="episodic records (events, facts, attributes) written by then",
        )
        return (
            f'<h2 id="messages">Messages</h2>{pager}{messages}{pager}'
            f'<h2 id="records">Episodic records</h2>{records if rec_rows else "<p>No records.</p>"}'
        )

    def item_url(ctx: Ctx, item: str) -> str:
        return href(
            f"/ui/owners/{segment(ctx.user)}/items/{segment(item)}",
            {"tenant": ctx.viewer.carry, "as_of": ctx.point_text or None},
        )

    async def persona(ctx: Ctx, insp: Inspection) -> str:
        params = insp.snap.params
        threshold, needed = params.persona_stable_strength, params.persona_min_evidence
        unreplayed = "no log to replay"
        if insp.point is not None and replays is not None:
            try:
                insp.replayed = await replays.at(
                    service.retriever.store, insp.owner_id, insp.point, params, insp.all_messages
                )
            except AdaMemError as exc:  # the log unreachable, or no keystore to open it: the rows, said so
                log.warning("inspector could not replay the persona of %s: %s", insp.owner_id, exc)
                unreplayed = f"the log could not be replayed ({exc.public_detail()})"
        standing, history = insp.traits_at()
        at = {t.id: insp.trait_at(t) for t in (*standing, *history)}

        def rows(traits: list[PersonaRow]) -> list[Row]:
            out = []
            for t in sorted(traits, key=lambda t: (-at[t.id].strength, t.id)):
                state = at[t.id]
                tags = [_tag("stable", "ok") if state.stable else _tag("not stable")]
                if state.disputed:
                    tags.append(_tag("disputed", "bad"))
                elif state.disputed is None:
                    tags.append(_tag("dispute flag not known", "warn"))
                if t.status != "active" and (insp.replayed is not None or not insp.trait(t)):
                    tags.append(_tag(t.status, "warn"))
                value = t.value + (f" ({', '.join(t.members)})" if t.cluster and t.members else "")
                above = "at or above" if state.strength >= threshold else "below"
                how = (
                    ""
                    if state.exact
                    else " <span class='muted' title='recomputed from the evidence dated by then'>*</span>"
                )
                standing_then = t.status == "active" if insp.replayed is not None else insp.trait(t)
                links = (
                    f'<a href="{item_url(ctx, t.id)}">provenance</a> · '
                    + forget_link(ctx, "item", t.id, _short(value, 40))
                    if t.id in insp.snap.traits
                    else "<span class='muted'>not in memory now</span>"
                )
                out.append(
                    Row(
                        "trait" + ("" if standing_then else " superseded"),
                        (
                            td(t.kind),
                            td(t.key),
                            td(value, "content"),
                            td(
                                f"{_bar(state.strength, threshold)} <span class='num'>{state.strength:.3f}</span>{how} "
                                f"<span class='muted'>{above} {threshold}</span>",
                                raw=True,
                            ),
                            td(state.mentions, "num"),
                            td(" ".join(tags), raw=True),
                            td(f"{when(t.first_seen)} → {when(state.last_seen)}", "time"),
                            td(links, raw=True),
                        ),
                    )
                )
            return out

        head = ["kind", "key", "value", "evidence strength", "mentions", "state", "first → last seen", ""]
        traits = [t for t in standing if t.kind != "habit"]
        habits = [t for t in standing if t.kind == "habit"]
        disputed = [t for t in standing if at[t.id].disputed]
        approximate = ""
        if insp.point is None:
            shown = "Strength, mentions and flags are as the fold last computed them."
        elif insp.replayed is not None:
            shown = (
                "Traits, values, strength, mentions and flags are the persona fold's own at this point: the "
                f"owner's {insp.replayed.events} events up to it folded again from the log, as a replay to this "
                "point folds them (a forget asked for later is folded too: what was forgotten stays forgotten), "
                "each strength decayed to this point. A message is evidence once the fold has consolidated it "
                "(it left working memory, or its session ended), so the newest messages by then may count for "
                "nothing yet."
            )
        else:
            approximate = f'<p class="notice" id="approximate">approximate: {esc(unreplayed)}</p>'
            shown = (
                "Strength, mentions and flags are as they stood at this point: a trait the fold last computed "
                "by then shows its strength decayed to this point; an earlier one (marked *) shows its strength "
                "recomputed with the fold's formula from the evidence dated by then (a conflict's damping is not "
                "replayed), and a dispute flag changed after this point is not known."
            )
        out = (
            approximate
            + f"<p>A trait is stable once its evidence strength is at or above <strong>{threshold}</strong> "
            f"(<code>persona_stable_strength</code>) with at least {needed} mentions; the red mark on each bar is "
            f"that threshold. {shown}</p>"
            + stability_chart(insp)
            + f'<h2 id="traits">Traits and preferences ({len(traits)})</h2>'
            + (table(head, rows(traits), cls="traits") if traits else "<p>No traits.</p>")
            + f'<h2 id="disputed">Disputed ({len(disputed)})</h2>'
            + (table(head, rows(disputed), cls="disputed") if disputed else "<p>No disputed traits.</p>")
            + f'<h2 id="habits">Habits ({len(habits)})</h2>'
            + (table(head, rows(habits), cls="habits") if habits else "<p>No habits.</p>")
        )
        if history:
            out += f'<h2 id="history">Superseded or not standing ({len(history)})</h2>' + table(
                head, rows(history), cls="history"
            )
        return out

    def stability_chart(insp: Inspection) -> str:
        weeks = insp.stability
        params = insp.snap.params
        low, high = params.stability_healthy_low, params.stability_healthy_high
        intro = (
            '<h2 id="stability">Stability index</h2><p>Each week\'s share of core traits that changed (value, '
            f"stability or dispute flag); healthy between {low:.0%} and {high:.0%} (shaded). The chart is "
            "approximate: each week's traits are recomputed from the rows as they stand now and the evidence "
            "dated by then, not folded again week by week, so a conflict's damping is not replayed in it.</p>"
        )
        if not weeks:
            return intro + "<p>No messages yet.</p>"
        return intro + _stability_svg(weeks, low, high)

    async def graph(ctx: Ctx, insp: Inspection) -> str:
        snap = insp.snap
        visible = [n for n in snap.nodes.values() if insp.node(n)]
        counts: dict[str, int] = {}
        for n in visible:
            counts[n.node_type] = counts.get(n.node_type, 0) + 1
        summary = " ".join(
            f'<span class="tag" style="border-color:{NODE_COLOURS.get(k, "#888")}">{esc(k)}: {v}</span>'
            for k, v in sorted(counts.items())
        )
        center_id = ctx.params.get("node", "")
        item = (ctx.params.get("item") or "").strip()
        if item:
            center_id = snap.node_for(item) or ""
            if not center_id:
                raise PageError(404, "No graph node", f"memory item {item!r} has no graph node for this owner")
        if center_id and center_id not in snap.nodes:
            raise PageError(404, "No graph node", f"this owner has no graph node {center_id!r}")
        if not center_id and visible:
            center_id = max(
                [n for n in visible if n.node_type != "message"] or visible,
                key=lambda n: (snap.edges_at.degree(n.id), n.id),
            ).id
        find = ctx.params.get("find", "").strip()
        finder = (
            f'<form method="get" action="{esc(f"/ui/owners/{segment(ctx.user)}/graph")}">'
            + "".join(
                f'<input type="hidden" name="{k}" value="{esc(v)}">'
                for k, v in {"as_of": ctx.point_text, "tenant": ctx.viewer.carry or "", "node": center_id}.items()
                if v
            )
            + f'<label for="find">Find a node</label> <input type="search" id="find" name="find" value="{esc(find)}">'
            ' <button type="submit">Find</button></form>'
        )
        found = ""
        if find:
            hits = [n for n in visible if find.lower() in n.label.lower()][:30]
            found = (
                "<ul class='found'>"
                + "".join(
                    f'<li><a href="{ctx.url(node=n.id, find=None)}">{esc(_short(n.label, 80))}</a> '
                    f'<span class="muted">{esc(n.node_type)}</span></li>'
                    for n in hits
                )
                + "</ul>"
                if hits
                else "<p>No node matches.</p>"
            )
        if not center_id:
            return f"<p>Nodes by type: {summary or 'none'}</p>{finder}{found}<p>No graph nodes at this point.</p>"
        center = snap.nodes[center_id]
        if not insp.node(center):
            return (
                f"<p>Nodes by type: {summary}</p>{finder}{found}<p class='error'>The node "
                f"“{esc(_short(center.label, 80))}” did not exist at this point.</p>"
            )
        edges: list[tuple[GraphEdgeRow, GraphNodeRow]] = []
        for e in snap.edges_at.get(center_id, ()):
            other = snap.nodes.get(e.dst if e.src == center_id else e.src)
            if other is not None and insp.edge(e):
                edges.append((e, other))
        edges.sort(key=lambda p: (-p[0].weight, p[1].id))
        drawn = edges[:NEIGHBOURS]
        svg = _svg(ctx, center, drawn)
        rows = []
        for e, other in edges:
            arrow = "↔" if e.direction == "both" else ("→" if e.src == center_id else "←")
            rows.append(
                Row(
                    "edge",
                    (
                        td(f"{arrow} {e.edge_type}"),
                        td(f"{e.weight:.2f}", "num"),
                        td(
                            f'<a href="{ctx.url(node=other.id, find=None)}">{esc(_short(other.label, 90))}</a>',
                            raw=True,
                        ),
                        td(other.node_type),
                        td(when(e.occurred_at), "time"),
                    ),
                )
            )
        info = (
            f'<dl class="kv"><dt>centre</dt><dd id="centre">{esc(center.label)}</dd>'
            f"<dt>type</dt><dd>{esc(center.node_type)}</dd><dt>written</dt><dd>{esc(when(center.occurred_at))}</dd>"
            f"<dt>edges</dt><dd>{len(edges)} at this point"
            + (f" (the {NEIGHBOURS} heaviest drawn)" if len(edges) > NEIGHBOURS else "")
            + "</dd></dl>"
        )
        neighbours = table(
            ["edge", "weight", "neighbour (re-centre)", "type", "written"], rows, cls="edges", caption="neighbourhood"
        )
        return (
            f"<p>Nodes by type: {summary}</p>{finder}{found}{info}"
            f'<div class="graph">{svg}<div style="flex:1;min-width:420px">{neighbours}</div></div>'
        )

    async def query(ctx: Ctx, insp: Inspection) -> str:
        question = ctx.params.get("q", "").strip()
        if len(question) > MAX_QUESTION_CHARS:
            raise PageError(400, "Question too long", f"a question has at most {MAX_QUESTION_CHARS} characters")
        top_k = _int_param(ctx.params, "top_k", 10, 1, 100)
        hidden = "".join(
            f'<input type="hidden" name="{k}" value="{esc(v)}">'
            for k, v in {"as_of": ctx.point_text, "tenant": ctx.viewer.carry or ""}.items()
            if v
        )
        form = (
            f'<form method="get" action="{esc(f"/ui/owners/{segment(ctx.user)}/query")}" class="ask">{hidden}'
            f'<p><label for="q">Question</label> <input type="text" id="q" name="q" size="70" '
            f'maxlength="{MAX_QUESTION_CHARS}" value="{esc(question)}"> '
            f'<label for="top_k">top k</label> <input type="number" id="top_k" name="top_k" min="1" max="100" '
            f'value="{top_k}" style="width:5rem"> <button type="submit" id="ask">Ask</button></p></form>'
        )
        if not question:
            return form + "<p class='muted'>Ask a question to see its route, ranked items and their provenance.</p>"
        answer: Answer = await service.retriever.aquery(insp.owner_id, question, top_k, insp.point)
        route = answer.route
        whose = answer.whose
        cues = " ".join(_tag(c) for c in route.cues) or "<span class='muted'>none</span>"
        windows = ", ".join(f"{w.text}: {when(w.start)} → {when(w.end)}" for w in answer.time_windows) or "none"
        info = (
            '<dl class="kv" id="route">'
            f"<dt>route</dt><dd><strong id='route-name'>{esc(route.route.value)}</strong> "
            f"(direction {esc(route.direction.value)}{', causal' if route.causal else ''}"
            f"{', broad' if route.broad else ''})</dd>"
            f"<dt>cues</dt><dd id='cues'>{cues}</dd><dt>why</dt><dd>{esc(route.reason)}</dd>"
            f"<dt>whose memory</dt><dd>{esc(whose.subject.value)} — {esc(whose.reason)}</dd>"
            f"<dt>time windows</dt><dd>{esc(windows)}</dd>"
            f"<dt>reference time</dt><dd>{esc(when(answer.reference_time))}</dd>"
            f"<dt>timing</dt><dd>{esc(', '.join(f'{k} {v} ms' for k, v in answer.timing.to_dict().items()))}"
            f"{' (cached answer)' if answer.cached else ''}</dd></dl>"
        )
        rows = [_item_row(ctx, i) for i in answer.items]
        items = table(
            ["#", "layer / kind", "content", "score", "semantic · graph · temporal · fact", "graph path", "provenance"],
            rows,
            cls="items",
            caption=f"{len(answer.items)} ranked items",
        )
        return form + info + (items if rows else "<p>No items.</p>")

    def _item_row(ctx: Ctx, i: Item) -> Row:
        b = i.breakdown
        parts = " · ".join(f"{v:.3f}" for v in (b.semantic, b.graph, b.temporal, b.fact))
        path = (
            " ".join(
                (f"—{esc(s.edge_type)} {s.weight:.2f}→ " if s.edge_type else "")
                + f"<span>{esc(_short(s.label, 40))}</span>"
                for s in i.hop_path
            )
            or "<span class='muted'>direct</span>"
        )
        prov = "<br>".join(
            f"<code>{esc(p.source_topic)}:{p.source_partition}@{p.source_offset}</code> "
            f"{esc(p.analyzer)} <span class='muted'>{esc(p.message_id)}</span>"
            for p in i.provenance
        )
        moved = f"<br><span class='muted'>moved: {esc(i.ordered_by)}</span>" if i.ordered_by else ""
        said = when_text(i.occurred_at, i.event_time, i.utc_offset_minutes)  # on the speaker's clock
        moved += f"<br><span class='time'>{esc(said)}</span>" if said != "-" else ""
        return Row(
            "item",
            (
                td(i.rank, "num"),
                td(f"{i.layer.value} / {i.kind}"),
                td(esc(i.content) + moved, "content", raw=True),
                td(f"{i.score:.3f}", "num"),
                td(parts, "num"),
                td(path, raw=True),
                td(prov + f'<br><a href="{item_url(ctx, i.id)}">full provenance</a>', raw=True),
            ),
        )

    async def views(ctx: Ctx, insp: Inspection) -> str:
        store: Any = service.retriever.store
        compare = ctx.params.get("compare", "").strip()

        def read() -> tuple[str, str, list[tuple[str, dict[str, str], int]], dict[str, LayerChanges] | None]:
            if not hasattr(store, "views"):
                return "", getattr(store, "view", ""), [], None
            active, names = store.active_view(), store.views()
            listed = []
            for name in names:
                handle = store.open_view(name, read_only=True)
                try:
                    record = handle.generation()
                    topic = record.get("topic", settings.topic("analyses"))
                    reached = sum(handle.checkpoint(p).get(topic, 0) for p in range(handle.partition_count()))
                finally:
                    handle.close()
                listed.append((name, record, reached))
            if not compare:
                return active, store.view, listed, None
            if compare not in names:
                raise PageError(
                    404, "No such view", f"the store has no view {compare!r}; its views: {', '.join(names)}"
                )
            live, other = store.open_view(active, read_only=True), store.open_view(compare, read_only=True)
            try:
                then = WrittenBy(live, insp).reader, WrittenBy(other, insp).reader
                return active, store.view, listed, layer_changes(*then, [insp.owner_id])
            finally:
                live.close()
                other.close()

        active, reading, listed, changes = await asyncio.to_thread(read)
        if not listed:
            return "<p>This store keeps no view catalog.</p>"
        rows = []
        for name, record, reached in listed:
            analyzer = analyzer_summary(dict(sorted(record.items())))
            state = []
            if name == active:
                state.append(_tag("active", "ok"))
            if name == reading:
                state.append(_tag("read by this service"))
            link = "" if name == active else f'<a href="{ctx.url(compare=name)}">compare with {esc(active)}</a>'
            rows.append(
                Row(
                    "view" + (" active" if name == active else "") + (" compared" if name == compare else ""),
                    (
                        td(name),
                        td(" ".join(state), raw=True),
                        td(record.get("name", "g1")),
                        td(analyzer or "not recorded"),
                        td(record.get("topic", "")),
                        td(reached, "num"),
                        td(link, raw=True),
                    ),
                )
            )
        out = (
            f"<p>Active view: <strong id='active-view'>{esc(active)}</strong>. A rebuild (replay, reanalyze) "
            "writes a new view beside it and switches when it has caught up.</p>"
            + table(
                ["view", "state", "generation", "analyzer", "analyses topic", "analyses folded", ""], rows, cls="views"
            )
        )
        if changes is not None:
            out += layer_diff(active, compare, changes, insp)
        return out

    def layer_diff(active: str, other: str, changes: dict[str, LayerChanges], insp: Inspection) -> str:
        scope = (
            "Every row of both views is compared."
            if insp.point is None
            else "Only rows written by this point are compared (messages that existed then, records valid then "
            "or before, traits first seen by then, graph nodes and edges by their time), with their content as "
            "it stands: a row later rewritten is compared as rewritten."
        )
        rows = [
            Row(
                f"layer layer-{layer}",
                (
                    td(layer),
                    td(c.added, "num added"),
                    td(c.removed, "num removed"),
                    td(c.altered, "num altered"),
                    td(c.unchanged, "num unchanged"),
                ),
            )
            for layer, c in changes.items()
        ]
        examples = [
            Row(f"example {kind}", (td(layer), td(kind), td(table_name), td(text, "content")))
            for layer, c in changes.items()
            for kind, _owner, table_name, text in c.examples
        ]
        return (
            f'<h2 id="diff">{esc(other)} against {esc(active)}, layer by layer</h2>'
            f"<p>This owner's rows of view <strong>{esc(other)}</strong> against the active view "
            f"<strong>{esc(active)}</strong>, matched by table and id: added (only in {esc(other)}), removed "
            f"(only in {esc(active)}), altered (content differs, provenance aside) and unchanged. {scope}</p>"
            + table(["layer", "added", "removed", "altered", "unchanged"], rows, cls="diff")
            + (
                "<h3>Examples</h3>" + table(["layer", "change", "table", "row"], examples, cls="diff-examples")
                if examples
                else ""
            )
        )

    # --- routes -------------------------------------------------------------------------------

    @router.get("/ui")
    async def owners(request: Request) -> Response:
        async def work() -> Response:
            who = viewer(request)
            q = (request.query_params.get("q") or "").strip()
            everyone = await asyncio.to_thread(service.retriever.store.owners)
            tenants = sorted({split_owner(o)[0] for o in everyone})
            mine = [split_owner(o)[1] for o in everyone if split_owner(o)[0] == who.tenant]
            shown = [u for u in mine if q.lower() in u.lower()]
            items = "".join(
                f'<li><a href="{href(f"/ui/owners/{segment(u)}/timeline", {"tenant": who.carry})}">{esc(u)}</a>'
                f' <span class="muted">· <a href="{href(f"/ui/owners/{segment(u)}/persona", {"tenant": who.carry})}">'
                f'persona</a> · <a href="{href(f"/ui/owners/{segment(u)}/query", {"tenant": who.carry})}">query</a>'
                "</span></li>"
                for u in shown
            )
            hidden = f'<input type="hidden" name="tenant" value="{esc(who.carry)}">' if who.carry else ""
            other = ""
            if service.keys.open and len(tenants) > 1:
                other = (
                    "<p>Tenants: "
                    + " · ".join(
                        f'<a href="{href("/ui", {"tenant": t if t != settings.default_tenant else None})}"'
                        + (' aria-current="page"' if t == who.tenant else "")
                        + f">{esc(t)}</a>"
                        for t in tenants
                    )
                    + "</p>"
                )
            body = (
                f"<h2>Owners of tenant {esc(who.tenant)}</h2>{other}"
                f'<form method="get" action="/ui" role="search">{hidden}<label for="q">Find an owner</label> '
                f'<input type="search" id="q" name="q" value="{esc(q)}"> <button type="submit">Filter</button>'
                + (' <a href="/ui">Clear</a>' if q else "")
                + "</form>"
                + f"<p class='muted'>{len(shown)} of {len(mine)} owners</p>"
                + (f'<ul class="owners">{items}</ul>' if shown else "<p>No owner matches.</p>")
            )
            return page("Owners", body)

        return await guarded(work)

    @router.get("/ui/login")
    async def login_page(request: Request) -> Response:
        if service.keys.open:
            return page("Sign in", "<p>This service runs open: no key is needed. <a href='/ui'>Owners</a></p>")
        return page("Sign in", login_form())

    @router.post("/ui/login")
    async def login(request: Request) -> Response:
        async def work() -> Response:
            same_origin(request)
            form = parse_qs((await request.body()).decode("utf-8", "replace"))
            key = (form.get("key") or [""])[0].strip()
            if service.keys.open:
                return RedirectResponse("/ui", status_code=303)
            if service.keys.principal(key) is None:
                raise PageError(403, "Key not valid", "this API key is not valid", login_form("Try another key."))
            done = RedirectResponse("/ui", status_code=303)
            done.set_cookie(
                COOKIE, key, httponly=True, samesite="strict", path="/ui", secure=request.url.scheme == "https"
            )
            return done

        return await guarded(work)

    @router.post("/ui/logout")
    async def logout(request: Request) -> Response:
        done = RedirectResponse("/ui/login", status_code=303)
        done.delete_cookie(COOKIE, path="/ui")
        return done

    @router.get("/ui/owners/{user}")
    async def owner_home(request: Request, user: str) -> Response:
        return await guarded(lambda: owner_panel(request, user, "timeline"))

    @router.get("/ui/owners/{user}/items/{item}")
    async def item_page(request: Request, user: str, item: str) -> Response:
        async def work() -> Response:
            from adamem.api.provenance import trace

            who = viewer(request)
            owner_id = owner_key(who.tenant, user)
            point_text = (request.query_params.get("as_of") or "").strip()
            insp = await asyncio.to_thread(inspect, owner_id, point_text)
            ctx = Ctx(who, user, "timeline", as_of_text(insp.point), {})
            traced = await trace(service.retriever, service.log, settings, owner_id, item)
            kind = "message" if item in insp.by_id else "item"
            rows = []
            for m in traced["messages"]:
                a = m["analysis"]
                where = m.get("analysis", {}).get("message_position")
                rows.append(
                    Row(
                        "source",
                        (
                            td(when(m["occurred_at"], m.get("utc_offset_minutes")), "time"),
                            td(m["speaker"]),
                            td(m["text"], "content"),
                            td(f"{a['topic']}:{a['partition']}@{a['offset']}"),
                            td(f"{where['topic']}:{where['partition']}@{where['offset']}" if where else "-"),
                            td(f"{a.get('analyzer', '')} {a.get('generation', '')}".strip()),
                            td(a.get("event_id", "")),
                        ),
                    )
                )
            body = (
                f'<h2>{esc(traced["kind"])}</h2><dl class="kv"><dt>content</dt><dd id="item-content">'
                f"{esc(traced['content'])}</dd><dt>id</dt><dd><code>{esc(item)}</code></dd>"
                f"<dt>origin event</dt><dd><code>{esc(traced['origin_event_id'] or '-')}</code></dd>"
                f"<dt>sources not in memory</dt><dd>{traced['missing_sources']}</dd></dl>"
                + table(
                    ["said at", "speaker", "text", "analysis at", "message at", "analyzer", "analysis event"],
                    rows,
                    cls="provenance",
                    caption="the messages it came from, with their places on the log",
                )
                + f"<p>{forget_link(ctx, kind, item, str(traced['content'])[:40])}</p>"
            )
            return page(f"{user} · provenance", body, heading=owner_heading(ctx))

        return await guarded(work)

    def forget_target_of(form: Mapping[str, str]) -> tuple[str, str]:
        given = [(k, form[k].strip()) for k in ("message", "item") if form.get(k, "").strip()]
        if len(given) != 1:
            raise PageError(400, "Nothing to forget", "name exactly one message or item to forget")
        return given[0]

    def safe_back(value: str, ctx: Ctx) -> str:
        return value if value.startswith("/ui/") and not value.startswith("//") else ctx.raw_url("timeline")

    @router.get("/ui/owners/{user}/forget")
    async def forget_confirm(request: Request, user: str) -> Response:
        async def work() -> Response:
            who = viewer(request)
            owner_id = owner_key(who.tenant, user)
            params = dict(request.query_params)
            kind, target = forget_target_of(params)
            insp = await asyncio.to_thread(inspect, owner_id, "")
            ctx = Ctx(who, user, "timeline", "", {})
            back = safe_back(params.get("back", ""), ctx)
            snap = insp.snap
            if kind == "message":
                m = insp.by_id.get(target)
                if m is None:
                    raise PageError(404, "Not found", f"user {user!r} has no message {target!r}")
                what = f"the message “{m.text}” ({m.speaker}, {when(m.occurred_at, m.utc_offset_minutes)})"
                effect = "Its rows in every layer go, and its text on the log can no longer be read."
            else:
                row: EpisodicRow | PersonaRow | GraphNodeRow | GraphEdgeRow | None = (
                    snap.records.get(target)
                    or snap.traits.get(target)
                    or snap.nodes.get(target)
                    or snap.edge_rows.get(target)
                )
                if row is None:
                    raise PageError(404, "Not found", f"user {user!r} has no memory item {target!r}")
                label = (
                    row.content
                    if isinstance(row, EpisodicRow)
                    else row.value
                    if isinstance(row, PersonaRow)
                    else row.label
                    if isinstance(row, GraphNodeRow)
                    else row.edge_type
                )
                what = f"the {type(row).__name__.removesuffix('Row').lower()} “{label}”"
                effect = "The item goes from memory; the messages it came from stay."
            hidden = "".join(
                f'<input type="hidden" name="{k}" value="{esc(v)}">'
                for k, v in {kind: target, "back": back, "label": _short(what, 120), "tenant": who.carry or ""}.items()
                if v
            )
            body = (
                f"<h2>Forget {esc(what)}?</h2><p>{esc(effect)} This cannot be undone.</p>"
                f'<form method="post" action="{esc(f"/ui/owners/{segment(user)}/forget")}">{hidden}'
                f'<button type="submit" class="danger" id="confirm-forget">Forget it</button> '
                f'<a href="{esc(back)}" id="cancel-forget">Cancel</a></form>'
            )
            return page("Forget?", body, heading=owner_heading(ctx))

        return await guarded(work)

    @router.post("/ui/owners/{user}/forget")
    async def forget_done(request: Request, user: str) -> Response:
        async def work() -> Response:
            same_origin(request)
            who = viewer(request)
            owner_id = owner_key(who.tenant, user)
            raw = parse_qs((await request.body()).decode("utf-8", "replace"))
            form = {k: v[0] for k, v in raw.items() if v}
            kind, target = forget_target_of(form)
            reason = "forgotten in the inspector"
            try:
                body = (
                    ForgetMessage(message=target, reason=reason, wait_ms=MAX_WAIT_MS)
                    if kind == "message"
                    else ForgetItem(item=target, reason=reason, wait_ms=MAX_WAIT_MS)
                )
            except ValidationError:
                raise PageError(400, "Bad id", f"{kind} {target[:80]!r} is not an id memory could hold") from None
            await forget_target(service, owner_id, body)
            ctx = Ctx(who, user, "timeline", "", {})
            back = safe_back(form.get("back", ""), ctx)
            sep = "&" if "?" in back else "?"
            label = form.get("label", "").strip()[:200] or f"{kind} {target}"
            return RedirectResponse(f"{back}{sep}{urlencode({'forgotten': label})}", status_code=303)

        return await guarded(work)

    @router.get("/ui/owners/{user}/{panel}")
    async def owner_tab(request: Request, user: str, panel: str) -> Response:
        if panel not in PANELS:
            return error_page(404, "Not found", f"there is no panel {panel!r}; panels: {', '.join(PANELS)}")
        return await guarded(lambda: owner_panel(request, user, panel))

    @router.get("/ui/{rest:path}")
    async def unknown(rest: str) -> Response:
        return error_page(404, "Not found", f"there is no inspector page /ui/{rest}")

    @router.api_route("/ui/{rest:path}", methods=["POST", "PUT", "PATCH", "DELETE"])
    async def not_allowed(request: Request, rest: str) -> Response:
        """A method no inspector page takes (forms post to forget, login and logout only)."""
        return error_page(405, "Method not allowed", f"{request.method} is not allowed on /ui/{rest}")

    return router


def _svg(ctx: Ctx, center: GraphNodeRow, edges: list[tuple[GraphEdgeRow, GraphNodeRow]]) -> str:
    """The neighbourhood as an inline SVG: the centre in the middle, its neighbours on a circle, each a link."""
    w, h, cx, cy, radius = 560, 460, 280, 230, 175
    lines, nodes = [], []
    for i, (e, other) in enumerate(edges):
        angle = 2 * math.pi * i / max(1, len(edges)) - math.pi / 2
        x, y = cx + radius * math.cos(angle), cy + radius * math.sin(angle)
        lines.append(
            f'<line x1="{cx}" y1="{cy}" x2="{x:.1f}" y2="{y:.1f}" stroke="#8c959f" '
            f'stroke-width="{0.5 + 4 * max(0.0, e.weight):.2f}"><title>{esc(e.edge_type)} {e.weight:.2f}</title></line>'
        )
        colour = NODE_COLOURS.get(other.node_type, "#888")
        anchor = "start" if math.cos(angle) >= 0 else "end"
        dx = 14 if anchor == "start" else -14
        nodes.append(
            f'<a href="{ctx.url(node=other.id, find=None, item=None)}" aria-label="{esc(other.node_type)}: '
            f'{esc(_short(other.label, 60))}"><circle cx="{x:.1f}" cy="{y:.1f}" r="10" fill="{colour}"/>'
            f'<text x="{x + dx:.1f}" y="{y + 4:.1f}" font-size="11" text-anchor="{anchor}">'
            f"{esc(_short(other.label, 22))}</text></a>"
        )
    colour = NODE_COLOURS.get(center.node_type, "#888")
    middle = (
        f'<circle cx="{cx}" cy="{cy}" r="16" fill="{colour}" stroke="#1b1f24" stroke-width="2"/>'
        f'<text x="{cx}" y="{cy + 32}" font-size="12" font-weight="600" text-anchor="middle">'
        f"{esc(_short(center.label, 40))}</text>"
    )
    legend = "".join(
        f'<circle cx="{14 + 90 * i}" cy="14" r="6" fill="{c}"/><text x="{24 + 90 * i}" y="18" font-size="11">{esc(t)}'
        "</text>"
        for i, (t, c) in enumerate(NODE_COLOURS.items())
    )
    return (
        f'<svg role="img" aria-label="graph around {esc(_short(center.label, 60))}" width="{w}" height="{h}" '
        f'viewBox="0 0 {w} {h}" xmlns="http://www.w3.org/2000/svg">{legend}{"".join(lines)}{middle}{"".join(nodes)}'
        "</svg>"
    )


def _stability_svg(weeks: list[StabilityWeek], low: float, high: float) -> str:
    """A small line chart of weekly stability indices (0-100 %) with the healthy band shaded."""
    w, h, left, top, bottom = 640, 150, 40, 10, 24
    inner_w, inner_h = w - left - 10, h - top - bottom

    def y(rate: float) -> float:
        return top + inner_h * (1 - max(0.0, min(1.0, rate)))

    def x(i: int) -> float:
        return left + (inner_w * i / (len(weeks) - 1) if len(weeks) > 1 else inner_w / 2)

    parts = [
        f'<svg class="stability" role="img" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
        f'aria-label="stability index of {len(weeks)} weeks">',
        f'<rect x="{left}" y="{y(high):.1f}" width="{inner_w}" height="{y(low) - y(high):.1f}" fill="#dafbe1"/>',
    ]
    for rate in (0.0, 0.5, 1.0):
        parts.append(
            f'<line x1="{left}" x2="{left + inner_w}" y1="{y(rate):.1f}" y2="{y(rate):.1f}" stroke="#d0d7de"/>'
            f'<text x="{left - 4}" y="{y(rate) + 4:.1f}" text-anchor="end" font-size="10">{rate:.0%}</text>'
        )
    points = " ".join(f"{x(i):.1f},{y(wk.rate):.1f}" for i, wk in enumerate(weeks))
    parts.append(f'<polyline points="{points}" fill="none" stroke="#4c8dd6" stroke-width="2"/>')
    for i, wk in enumerate(weeks):
        label = f"week of {when(wk.start)}: {wk.changed} of {wk.core} core traits changed ({wk.rate:.0%})"
        parts.append(
            f'<circle class="pt" cx="{x(i):.1f}" cy="{y(wk.rate):.1f}" r="3" fill="#4c8dd6" '
            f'data-rate="{wk.rate:.4f}"><title>{esc(label)}</title></circle>'
        )
    for i, anchor in ((0, "start"), (len(weeks) - 1, "end")) if len(weeks) > 1 else ((0, "middle"),):
        day = esc(when(weeks[i].start)[:10])
        parts.append(f'<text x="{x(i):.1f}" y="{h - 6}" text-anchor="{anchor}" font-size="10">{day}</text>')
    parts.append("</svg>")
    return "".join(parts)
