"""HTML of the inspector: escaping, the page layout with its inline stylesheet, tables and error pages."""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from urllib.parse import quote, urlencode

from fastapi.responses import HTMLResponse

from adamem.events import ms_to_iso

__all__ = ["PageError", "Row", "error_page", "esc", "href", "page", "segment", "table", "td", "when"]

CSS = """
:root { --fg: #1b1f24; --muted: #57606a; --line: #d0d7de; --bg: #ffffff; --soft: #f6f8fa; --accent: #0b5cad;
  --ok: #1a7f37; --warn: #9a6700; --bad: #cf222e; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.45 system-ui, -apple-system, "Segoe UI", "Noto Sans", "Noto Sans CJK SC",
  "Microsoft YaHei", sans-serif; color: var(--fg); background: var(--bg); }
header { background: var(--soft); border-bottom: 1px solid var(--line); padding: .6rem 1.2rem; }
header h1 { font-size: 1.15rem; margin: 0 0 .3rem; }
header h1 a { color: inherit; text-decoration: none; }
main { padding: .8rem 1.2rem 2rem; max-width: 1400px; }
a { color: var(--accent); }
a:focus, button:focus, input:focus, select:focus { outline: 3px solid #f0b400; outline-offset: 1px; }
nav.tabs { display: flex; gap: .25rem; flex-wrap: wrap; margin-top: .4rem; }
nav.tabs a { padding: .3rem .7rem; border: 1px solid var(--line); border-bottom: none; border-radius: 6px 6px 0 0;
  text-decoration: none; background: var(--bg); }
nav.tabs a[aria-current="page"] { background: var(--accent); color: #fff; font-weight: 600; }
form.asof { display: flex; gap: .6rem; align-items: center; flex-wrap: wrap; margin: .6rem 0; padding: .5rem .7rem;
  background: var(--soft); border: 1px solid var(--line); border-radius: 6px; }
form.asof input[type=range] { width: 340px; }
form.asof output { font-family: ui-monospace, monospace; font-size: 13px; min-width: 12rem; }
table { border-collapse: collapse; width: 100%; margin: .4rem 0 1rem; font-size: 14px; }
th, td { border-bottom: 1px solid var(--line); padding: .25rem .45rem; text-align: left; vertical-align: top; }
th { background: var(--soft); font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.time, span.time { font-family: ui-monospace, monospace; font-size: 12.5px; white-space: nowrap; }
.muted { color: var(--muted); }
.tag { display: inline-block; padding: 0 .4rem; border-radius: 10px; font-size: 12px; border: 1px solid var(--line);
  background: var(--soft); white-space: nowrap; }
.tag.ok { color: var(--ok); border-color: var(--ok); }
.tag.warn { color: var(--warn); border-color: var(--warn); }
.tag.bad { color: var(--bad); border-color: var(--bad); }
tr.superseded td { color: var(--muted); }
tr.superseded td.content { text-decoration: line-through; }
.bar { position: relative; width: 160px; height: 12px; background: #eaeef2; border-radius: 3px; display: inline-block;
  vertical-align: middle; }
.bar span { position: absolute; left: 0; top: 0; bottom: 0; background: #4c8dd6; border-radius: 3px; }
.bar i { position: absolute; top: -3px; bottom: -3px; width: 2px; background: var(--bad); }
.notice { padding: .5rem .8rem; border-radius: 6px; margin: .5rem 0; border: 1px solid var(--ok); background: #dafbe1; }
.error { padding: .8rem 1rem; border-radius: 6px; border: 1px solid var(--bad); background: #ffebe9; }
button, input[type=submit] { font: inherit; padding: .2rem .7rem; border-radius: 6px; border: 1px solid var(--line);
  background: var(--bg); cursor: pointer; }
button.danger { color: var(--bad); border-color: var(--bad); }
a.danger { color: var(--bad); }
input[type=text], input[type=search], input[type=password], input[type=number] { font: inherit; padding: .2rem .4rem;
  border: 1px solid var(--line); border-radius: 6px; }
h2 { font-size: 1.05rem; margin: 1.1rem 0 .3rem; }
dl.kv { display: grid; grid-template-columns: max-content 1fr; gap: .15rem .8rem; margin: .3rem 0 1rem; }
dl.kv dt { color: var(--muted); }
dl.kv dd { margin: 0; }
.graph { display: flex; gap: 1rem; flex-wrap: wrap; align-items: flex-start; }
.graph svg { border: 1px solid var(--line); border-radius: 6px; background: #fcfcfd; }
.graph svg a:focus circle { stroke: #f0b400; stroke-width: 4; }
code { font-family: ui-monospace, monospace; font-size: 12.5px; }
"""


def esc(value: object) -> str:
    """``value`` as HTML text (quotes escaped too: safe in attributes)."""
    return html.escape(str(value), quote=True)


def href(path: str, params: Mapping[str, object | None] | None = None) -> str:
    """A URL: ``path`` and the query parameters that are not None or empty (escaped for an attribute)."""
    query = {k: str(v) for k, v in (params or {}).items() if v is not None and v != ""}
    return esc(path + ("?" + urlencode(query) if query else ""))


def segment(value: str) -> str:
    """``value`` as one path segment."""
    return quote(value, safe="")


def when(ms: int, utc_offset_minutes: int | None = None) -> str:
    """An event time as ISO-8601 text, in UTC or on the clock of ``utc_offset_minutes`` (a speaker's); "-" for none."""
    return ms_to_iso(ms, utc_offset_minutes) if ms >= 0 else "-"


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], *, caption: str = "", cls: str = "") -> str:
    """A table of already escaped ``<td>`` cells, one sequence per row (a ``Row`` carries a CSS class too)."""
    head = "".join(f'<th scope="col">{esc(h)}</th>' for h in headers)
    body = []
    for row in rows:
        if isinstance(row, Row):
            body.append(f'<tr class="{esc(row.cls)}">' + "".join(row.cells) + "</tr>")
        else:
            body.append("<tr>" + "".join(row) + "</tr>")
    cap = f"<caption class='muted'>{esc(caption)}</caption>" if caption else ""
    return f'<table class="{esc(cls)}">{cap}<thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


class Row(tuple[str, ...]):
    """A table row of escaped ``<td>`` cells with a CSS class."""

    cls: str

    def __new__(cls, row_class: str, cells: Iterable[str]) -> Row:
        made = super().__new__(cls, tuple(cells))
        made.cls = row_class
        return made

    @property
    def cells(self) -> tuple[str, ...]:
        """The row's cells."""
        return tuple(self)


def td(value: object, cls: str = "", raw: bool = False) -> str:
    """One cell: ``value`` escaped (or as is with ``raw``)."""
    attr = f' class="{esc(cls)}"' if cls else ""
    return f"<td{attr}>{value if raw else esc(value)}</td>"


def page(
    title: str, body: str, *, status: int = 200, heading: str = "", headers: Mapping[str, str] | None = None
) -> HTMLResponse:
    """A whole HTML page: UTF-8, the stylesheet, a header naming the inspector, and ``body``."""
    top = heading or '<h1><a href="/ui">AdaMem memory inspector</a></h1>'
    text = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)} · AdaMem inspector</title><style>{CSS}</style></head>"
        f"<body><header>{top}</header><main>{body}</main></body></html>"
    )
    return HTMLResponse(
        text,
        status_code=status,
        headers={"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff", **(headers or {})},
    )


def error_page(status: int, title: str, detail: str, *, extra: str = "") -> HTMLResponse:
    """An error page: what went wrong, in a sentence, and a way back."""
    body = (
        f'<div class="error" role="alert"><h2>{esc(title)}</h2><p>{esc(detail)}</p></div>{extra}'
        '<p><a href="/ui">Back to the owners</a></p>'
    )
    return page(f"{status} {title}", body, status=status)


class PageError(Exception):
    """Raised by a page's code to answer with an error page (a 4xx with a clear message)."""

    def __init__(self, status: int, title: str, detail: str, extra: str = "") -> None:
        super().__init__(detail)
        self.status, self.title, self.detail, self.extra = status, title, detail, extra

    def response(self) -> HTMLResponse:
        """The error as an HTML page."""
        return error_page(self.status, self.title, self.detail, extra=self.extra)
