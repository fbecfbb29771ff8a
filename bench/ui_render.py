"""Time to first render of each inspector panel for an owner with 10,000 messages, in headless Chromium.

``adamem bench ui_render [--store FOLDER] [--messages 10000] [--runs 5]`` builds (or reuses) the
synthetic store of ``bench/scale.py`` — one owner, ``default:o0``, with that many messages — starts
``adamem serve`` over it (read-only: the store alone), and opens every panel in Chromium: once cold
(the first request of the panel since the service started; the first panel also loads the owner)
and ``--runs`` times warm. Per panel it records the browser's navigation timing: time to the first
byte of the page (the server's work), to the last byte, to DOMContentLoaded and to the first
contentful paint, all from the start of the navigation, and the page's size. The synthetic owner
has messages only (no records, traits or graph: ``bench/scale.py`` does not run the folds), so the
timeline and the query carry the owner's weight; the other panels show how the owner's size alone
weighs on them. Results: ``bench/results/ui_render.json``.

``--with-log``: the owner is ``default:user-0000`` of ``bench/fold_speed.py``'s synthetic analyses
(sessions of ten messages days apart, facts, preferences in English and Chinese, recurring events)
appended to an embedded log and projected by the fold, so it has every layer; the service is
``adamem serve --read-only`` over the store and that log, and the persona panel is timed now and at
two past points (an event time half-way through the owner's messages and a log offset three
quarters in), which the inspector answers by folding the owner's analyses again up to the point.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common import measure_and_record, print_table, standalone_main

__all__ = ["PANELS", "main", "panels_for", "run"]

USER = "o0"
PANELS = [
    ("owners", "/ui"),
    ("timeline", f"/ui/owners/{USER}/timeline"),
    ("timeline as of", f"/ui/owners/{USER}/timeline?as_of=2023-11-14T23%3A00%3A00Z"),
    ("timeline page 50", f"/ui/owners/{USER}/timeline?page=50"),
    ("persona", f"/ui/owners/{USER}/persona"),
    ("graph", f"/ui/owners/{USER}/graph"),
    ("query", f"/ui/owners/{USER}/query?q=Why+did+I+go+hiking+with+my+sister%3F&top_k=10"),
    ("views", f"/ui/owners/{USER}/views"),
]
"""Each panel timed: its name and its page (the synthetic messages are 1 s apart from 2023-11-14T22:13:20Z)."""


def panels_for(messages: int) -> list[tuple[str, str]]:
    """``PANELS`` for an owner of ``messages`` messages: the timeline's page 50, or its last page when it has fewer."""
    from adamem.api.routes.ui import PAGE_ROWS

    last = max(1, -(-messages // PAGE_ROWS))
    page = min(50, last)
    return [
        (f"timeline page {page}", f"/ui/owners/{USER}/timeline?page={page}")
        if name == "timeline page 50"
        else (name, p)
        for name, p in PANELS
    ]


_TIMING = """
const n = performance.getEntriesByType('navigation')[0];
const p = performance.getEntriesByName('first-contentful-paint')[0];
return {ttfb: n.responseStart - n.startTime, last_byte: n.responseEnd - n.startTime,
        dom: n.domContentLoadedEventEnd - n.startTime, fcp: p ? p.startTime : null,
        bytes: n.transferSize, status: n.responseStatus};
"""


def _build(folder: Path, messages: int) -> None:
    from bench.scale import build

    print(f"building {messages} messages of one owner in {folder} ...", file=sys.stderr, flush=True)
    print(json.dumps(build(str(folder), 1, messages, 19)), file=sys.stderr)


LOG_USER = "user-0000"
"""The owner of ``--with-log`` (``bench/fold_speed.py``'s first)."""


def _build_logged(folder: Path, messages: int) -> None:
    """``bench/fold_speed.py``'s analyses of one owner on an embedded log under ``folder``, projected into its store."""
    import asyncio

    from adamem.projections.folds.apply import Positioned
    from adamem.projections.projector import Projector
    from adamem.projections.store.factory import open_store
    from adamem.schemas.serde import decode_event, encode_event
    from adamem.settings import Settings
    from adamem.streams.factory import open_log
    from adamem.streams.generations import generation_record
    from adamem.streams.keys import keystore_for
    from adamem.streams.log import OutgoingRecord
    from bench.fold_speed import synthetic

    print(f"building {messages} analysed messages of one owner on a log in {folder} ...", file=sys.stderr, flush=True)
    settings = Settings(log_url=str(folder / "log"), store_url=str(folder / "store"), fsync=False)
    events = synthetic(1, messages, 384, 7)

    async def build() -> None:
        log = open_log(settings.log_url, settings)
        await log.start()
        topic = settings.topic("analyses")
        await log.append(topic, [OutgoingRecord(p.event.user_id, encode_event(p.event)) for p in events])
        projector, keys = Projector(open_store(settings.store)), keystore_for(log, settings)
        projector.store.bind(log.partitions(topic))
        projector.store.record_generation(generation_record(settings))
        batch: list[Positioned] = []
        async for rec in log.read(topic):
            batch.append(Positioned(decode_event(rec.value, keys), rec.topic, rec.partition, rec.offset))
            if len(batch) == 2_000:
                projector.apply_batch(rec.partition, topic, batch)
                batch = []
        if batch:
            projector.apply_batch(batch[0].partition, topic, batch)
        projector.store.optimize()
        await log.stop()

    asyncio.run(build())


def _logged_panels(messages: int) -> list[tuple[str, str]]:
    """The panels timed with ``--with-log``: the persona now and at two past points."""
    from adamem.events import MessageAnalyzed, ms_to_iso
    from bench.fold_speed import synthetic

    halfway = synthetic(1, messages, 384, 7)[messages // 2].event
    assert isinstance(halfway, MessageAnalyzed)
    at = ms_to_iso(halfway.message.occurred_at).replace(":", "%3A")
    base = f"/ui/owners/{LOG_USER}"
    return [
        ("timeline", f"{base}/timeline"),
        ("persona", f"{base}/persona"),
        ("persona as of a time", f"{base}/persona?as_of={at}"),
        ("persona as of an offset", f"{base}/persona?as_of=offset%3A{messages * 3 // 4}"),
    ]


def _visit(chrome: Any, url: str) -> dict[str, Any]:
    chrome.get("about:blank")
    chrome.get(url)
    timing: dict[str, Any] = chrome.execute_script(_TIMING)
    for _ in range(40):  # the paint entry may come after the load event that ends ``get``
        if timing["fcp"] is not None:
            break
        time.sleep(0.05)
        timing = chrome.execute_script(_TIMING)
    return {k: round(v, 1) if isinstance(v, float) else v for k, v in timing.items()}


def _median(runs: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in runs if r.get(key) is not None]
    return round(statistics.median(values), 1) if values else None


def run(store: str | None, messages: int = 10_000, runs: int = 5, with_log: bool = False) -> dict[str, Any]:
    """Build or reuse the store, serve it, time every panel cold and ``runs`` times warm.

    ``with_log``: ``store`` is the folder of the log and the store (``_build_logged``).
    """
    from bench.ui_screenshots import headless_chrome, start_inspector, stop  # selenium: a dev dependency

    with tempfile.TemporaryDirectory(prefix="adamem-ui-render-") as tmp:
        folder = Path(store) if store else Path(tmp) / "store"
        if with_log:
            if not (folder / "store" / "views").exists():
                _build_logged(folder, messages)
            env: dict[str, str | None] = {"ADAMEM_STORE": str(folder / "store"), "ADAMEM_LOG": str(folder / "log")}
            inspector = start_inspector(Path(tmp), env, ["--read-only"])
            panels = _logged_panels(messages)
        else:
            if not (folder / "views").exists():
                _build(folder, messages)
            inspector = start_inspector(Path(tmp), {"ADAMEM_STORE": str(folder), "ADAMEM_LOG": None})
            panels = panels_for(messages)
        chrome = headless_chrome()
        try:
            results = []
            for name, path in panels:
                cold = _visit(chrome, inspector.url + path)
                if cold["status"] != 200:
                    raise RuntimeError(f"{path} answered {cold['status']}")
                warm = [_visit(chrome, inspector.url + path) for _ in range(runs)]
                results.append(
                    {
                        "panel": name,
                        "path": path,
                        "cold": cold,
                        "warm_median": {k: _median(warm, k) for k in ("ttfb", "last_byte", "dom", "fcp")},
                        "warm_runs": warm,
                        "bytes": warm[-1]["bytes"] if warm else cold["bytes"],
                    }
                )
        finally:
            chrome.quit()
            stop(inspector.process)
    layers = (
        "every layer, folded from bench/fold_speed.py's analyses on an embedded log"
        if with_log
        else "messages only (bench/scale.py build)"
    )
    return {
        "owner": {"user_id": LOG_USER if with_log else USER, "messages": messages, "layers": layers},
        "viewport": "1280x800, headless Chromium",
        "metrics": "ms from the start of the navigation: ttfb = first byte of the page, last_byte, dom = "
        "DOMContentLoaded, fcp = first contentful paint; cold = the panel's first request since the service "
        f"started (the first panel also loads the owner), warm = median of {runs} visits",
        "panels": results,
    }


def print_report(r: dict[str, Any]) -> None:
    """The table."""
    print_table(
        ["panel", "cold TTFB ms", "cold FCP ms", "warm TTFB ms", "warm FCP ms", "warm DOM ms", "KiB"],
        [
            [
                p["panel"],
                p["cold"]["ttfb"],
                p["cold"]["fcp"],
                p["warm_median"]["ttfb"],
                p["warm_median"]["fcp"],
                p["warm_median"]["dom"],
                round((p["bytes"] or 0) / 1024, 1),
            ]
            for p in r["panels"]
        ],
    )


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The benchmark's options."""
    p.add_argument("--store", help="the synthetic store's folder (built when missing; default: a temporary one)")
    p.add_argument("--messages", type=int, default=10_000, help="messages of the owner (default 10000)")
    p.add_argument("--runs", type=int, default=5, help="warm visits per panel (default 5)")
    p.add_argument(
        "--with-log",
        action="store_true",
        help="an owner of every layer on an embedded log, the persona timed at past points (see above)",
    )
    p.add_argument("--json", dest="out", help="result file (default bench/results/ui_render.json)")


def execute(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """Run and record."""
    return measure_and_record(
        "ui_render", argv, args.out, lambda: run(args.store, args.messages, args.runs, args.with_log), print_report
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bench.ui_render``."""
    return standalone_main("ui_render", __doc__, add_arguments, execute, argv)


if __name__ == "__main__":
    raise SystemExit(main())
