"""``adamem bench report``: ``bench/results/README.md`` and the plots, from the latest result files.

Reads ``bench/results/{locomo,ingest,replay,latency,footprint}.json`` (whichever exist), compares the
figures with the project's targets, draws ``recall_per_category.png`` and ``latency_percentiles.png``
(matplotlib, if installed) and points to the hand-written analysis, ``bench/results/notes.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common import RESULTS
from bench.metrics import CATEGORIES

__all__ = ["main", "render", "targets"]

ROUTES = ("semantic", "persona", "graph")


def _load(folder: Path, name: str) -> dict[str, Any] | None:
    path = folder / f"{name}.json"
    if not path.exists():
        return None
    doc: dict[str, Any] = json.loads(path.read_text())
    return doc


def _fmt(v: Any, digits: int = 1) -> str:
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:,.{digits if abs(v) >= 10 else 2}f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(_fmt(c) for c in row) + " |" for row in rows]
    return out


def _verdict(value: float | None, target: float, higher: bool) -> str:
    if value is None:
        return "not measured"
    ok = value >= target if higher else value <= target
    if ok:
        return "**met**"
    if higher:
        gap = target - value
        return f"**missed** by {gap:,.1f} ({gap / target * 100:.1f} % short)"
    return f"**missed** by {value - target:,.1f} ms ({value / target:.1f}× the target)"


def targets(res: dict[str, dict[str, Any] | None]) -> list[list[Any]]:
    """Rows: figure, target, measured, verdict."""
    rows: list[list[Any]] = []
    loc = res.get("locomo")
    full = (loc or {}).get("systems", {}).get("full", {}).get("recall", {}).get("10", {})
    for label, key, target in (
        ("LoCoMo dev evidence R@10, categories 1–4", "1-4", 70.0),
        ("multi-hop R@10", "1", 45.0),
        ("temporal R@10", "2", 80.0),
    ):
        v = full.get(key)
        rows.append([label, f"≥ {target:.0f}", v, _verdict(v, target, True)])
    ing = res.get("ingest")
    share = 100 * ing["ratio_to_embedder"] if ing else None
    rows.append(
        ["end-to-end ingest, % of the embedder's standalone rate", "≥ 50 %", share, _verdict(share, 50.0, True)]
    )
    rep = res.get("replay")
    ratio = rep["ratio_replay_to_live"] if rep else None
    rate = rep["replay"]["events_per_s"] if rep else None
    rows.append(["replay of all layers, × live ingest", "≥ 10×", ratio, _verdict(ratio, 10.0, True)])
    rows.append(["replay of all layers, events/s", "≥ 5,000", rate, _verdict(rate, 5000.0, True)])
    lat = (res.get("latency") or {}).get("stores", {}).get("one-10k")
    for route, target in (("semantic", 50.0), ("graph", 150.0)):
        for phase in ("cold", "warm"):
            v = lat["in_process"][route][phase].get("p95") if lat else None
            rows.append(
                [
                    f"query p95 in-process, 10k-message owner, {route} route ({phase})",
                    f"≤ {target:.0f} ms",
                    v,
                    _verdict(v, target, False),
                ]
            )
    for name, label in (("one-10k", "10k-message owner"), ("many-1000x100", "1,000 owners × 100")):
        entry = (res.get("latency") or {}).get("stores", {}).get(name)
        if not entry or "http" not in entry:
            continue
        for phase in ("cold", "warm"):
            worst = max(entry["http"][r][phase]["p95"] for r in ROUTES)
            rows.append(
                [
                    f"query p95 over HTTP, 8 clients, {label}, worst route ({phase})",
                    "≤ 100 ms",
                    worst,
                    _verdict(worst, 100.0, False),
                ]
            )
    return rows


def plots(res: dict[str, dict[str, Any] | None], folder: Path) -> list[str]:
    """Draw the PNGs; returns their file names (none without matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    made: list[str] = []
    loc = res.get("locomo")
    if loc:
        systems = list(loc["systems"])
        cats = [*[str(c) for c in (1, 2, 3, 4)], "1-4", "5"]
        labels = [f"{c} {CATEGORIES[int(c)]}" if c.isdigit() else "1–4" for c in cats]
        fig, ax = plt.subplots(figsize=(11, 4.5))
        width = 0.8 / len(systems)
        for i, name in enumerate(systems):
            row = loc["systems"][name]["recall"].get("10", {})
            ax.bar([x + i * width for x in range(len(cats))], [row.get(c) or 0 for c in cats], width, label=name)
        ax.set_xticks([x + width * (len(systems) - 1) / 2 for x in range(len(cats))], labels)
        ax.axhline(70, color="k", ls=":", lw=0.8)
        ax.set_ylabel("evidence recall@10 (%)")
        ax.set_title("LoCoMo dev: evidence recall@10 per category (dotted: target 70 over 1–4)")
        ax.legend(fontsize=8, ncol=4)
        fig.tight_layout()
        fig.savefig(folder / "recall_per_category.png", dpi=110)
        plt.close(fig)
        made.append("recall_per_category.png")
    lat = res.get("latency")
    if lat:
        stores = list(lat["stores"])
        fig, axes = plt.subplots(1, len(stores), figsize=(6 * len(stores), 4.5), squeeze=False)
        for ax, name in zip(axes[0], stores, strict=True):
            entry = lat["stores"][name]
            bars: list[tuple[str, dict[str, Any]]] = []
            for where, short in (("in_process", "in-proc"), ("http", "HTTP")):
                if where in entry:
                    for route in ROUTES:
                        for phase in ("cold", "warm"):
                            bars.append((f"{short}\n{route[:5]}\n{phase}", entry[where][route][phase]))
            xs = range(len(bars))
            for j, (pct, color) in enumerate((("p50", "tab:green"), ("p95", "tab:orange"), ("p99", "tab:red"))):
                ax.bar(
                    [x + (j - 1) * 0.27 for x in xs], [b[1].get(pct) or 0 for b in bars], 0.27, label=pct, color=color
                )
            ax.set_xticks(list(xs), [b[0] for b in bars], fontsize=6)
            lines = (
                (50, ":", "target 50 ms (semantic, in-process)"),
                (100, "--", "target 100 ms (HTTP)"),
                (150, "-.", "target 150 ms (graph, in-process)"),
            )
            for y, style, label in lines:
                ax.axhline(y, color="grey", ls=style, lw=0.8, label=label)
            ax.set_yscale("log")
            ax.set_ylabel("ms (log)")
            ax.set_title(f"query latency, {name}")
            ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(folder / "latency_percentiles.png", dpi=110)
        plt.close(fig)
        made.append("latency_percentiles.png")
    return made


def _machine(doc: dict[str, Any]) -> str:
    m = doc.get("machine", {})
    git = doc.get("git", {})
    dirty = " + local changes" if git.get("dirty") else ""
    return (
        f"{m.get('date', '')}, {m.get('cores')} cores, {m.get('ram_mb', 0) / 1024:.0f} GB RAM, Python "
        f"{m.get('python')}, load average at start {m.get('loadavg')} (1/5/15 min), 1-min load during the "
        f"run {doc.get('load_during')}, commit {git.get('commit', '')[:10]}{dirty}"
    )


def render(folder: Path = RESULTS) -> str:
    """The Markdown summary."""
    from bench.footprint import disk_table, index_table
    from bench.latency import latency_table, sweep_table

    res = {n: _load(folder, n) for n in ("locomo", "ingest", "replay", "latency", "footprint")}
    made = plots(res, folder)
    md: list[str] = [
        "# Benchmark results",
        "",
        "Generated by `adamem bench report` from the JSON files in this folder; the analysis at the "
        "end points to the analysis written by hand (`notes.md`). Every figure comes from the code path users run.",
        "",
    ]
    md += ["## Targets", ""]
    md += _table(["figure", "target", "measured", "verdict"], targets(res))
    md += ["", "## Machine and commands", ""]
    for doc in res.values():
        if doc:
            md.append(f"- `{doc['command']}` — {_machine(doc)}")
    loc = res["locomo"]
    if loc:
        md += [
            "",
            "## Retrieval quality: LoCoMo",
            "",
            f"Data `{loc['data']}`: {loc['conversations']} conversations, {loc['messages']} turns; questions "
            f"{loc['questions']}; routes of the full system {loc['routes_full']}.",
            "",
        ]
        for k in loc["ks"]:
            md += [f"Evidence recall@{k} (%):", ""]
            rows = [
                [name, *[s["recall"][str(k)].get(str(c)) for c in CATEGORIES], s["recall"][str(k)].get("1-4")]
                for name, s in loc["systems"].items()
            ]
            md += [*_table(["system", *[f"{c} {n}" for c, n in CATEGORIES.items()], "**1–4**"], rows), ""]
        for k in loc["ks"]:
            md += [f"Answer-token coverage@{k} (%):", ""]
            rows = [
                [name, *[s["coverage"][str(k)].get(str(c)) for c in (1, 2, 3, 4)], s["coverage"][str(k)].get("1-4")]
                for name, s in loc["systems"].items()
            ]
            md += [*_table(["system", *[f"{c} {CATEGORIES[c]}" for c in (1, 2, 3, 4)], "**1–4**"], rows), ""]
        if "recall_per_category.png" in made:
            md += ["![recall per category](recall_per_category.png)", ""]
    ing = res["ingest"]
    if ing:
        e = ing["end_to_end"]
        md += [
            "## Ingest through Kafka",
            "",
            f"{ing['messages']:,} messages ({ing['bytes']:,} bytes) over {ing['owners']} owners, "
            f"{ing['partitions']} partitions, worker micro-batch {ing['worker_batch']}.",
            "",
        ]
        md += _table(
            ["path", "seconds", "msg/s", "share of the faster embedder-alone run"],
            [
                [
                    "raw aiokafka produce + consume",
                    ing["raw_kafka"]["produce_s"] + ing["raw_kafka"]["consume_s"],
                    ing["raw_kafka"]["msg_per_s"],
                    None,
                ],
                ["e5 embedder alone, before", ing["embedder"]["seconds"], ing["embedder"]["msg_per_s"], None],
                *(
                    [
                        [
                            "e5 embedder alone, after",
                            ing["embedder_after"]["seconds"],
                            ing["embedder_after"]["msg_per_s"],
                            None,
                        ]
                    ]
                    if "embedder_after" in ing
                    else []
                ),
                [
                    "end to end: publish → adamem worker → LanceDB",
                    e["seconds"],
                    e["msg_per_s"],
                    f"{100 * ing['ratio_to_embedder']:.0f} %",
                ],
            ],
        )
        md += [
            "",
            f"Worker start-up (first message analysed and projected): {e.get('startup_s')} s; worker peak RSS "
            f"{e.get('worker_rss_peak_mb')} MB; dead-lettered {e.get('dead_lettered')}.",
            "",
        ]
    rep = res["replay"]
    if rep:
        md += ["## Replay", ""]
        md += _table(
            [
                "messages",
                "live ingest (events/s)",
                "replay events",
                "replay s",
                "replay events/s",
                "replay / live",
                "rebuilt rows equal live",
            ],
            [
                [
                    rep["messages"],
                    rep["live"]["events_per_s"],
                    rep["replay"]["events"],
                    rep["replay"]["seconds"],
                    rep["replay"]["events_per_s"],
                    rep["ratio_replay_to_live"],
                    rep["replay"]["rows_equal_to_live"],
                ]
            ],
        )
        if rep.get("profile_top"):
            md += [
                "",
                "Top functions by own time in a profiled rebuild (cProfile, main thread; LanceDB's Rust "
                "threads show up as lock waits):",
                "",
            ]
            md += _table(
                ["function", "calls", "own s", "share"],
                [
                    [p["function"], p["calls"], p["tottime_s"], f"{100 * p['share_of_own_time']:.1f} %"]
                    for p in rep["profile_top"][:15]
                ],
            )
        md.append("")
    lat = res["latency"]
    if lat:
        md += [
            "## Query latency",
            "",
            "cold = each (owner, question) asked for the first time in that process (semantic answer cache "
            "misses); warm = the same list again (the answer cache answers). In-process: one query at a time; "
            f"HTTP: `adamem serve`, {lat['connections']} concurrent clients (wrk), every request sent once.",
            "",
        ]
        for name, entry in lat["stores"].items():
            b = entry["build"]
            md += [
                f"**{name}** ({entry['owners']:,} owners, {b['messages']:,} messages; built in {b['pipeline_s']} s "
                f"by the pipeline, e5 vectors of repeated texts memoised: {b['embedder_cache']}); first in-process "
                f"query (loads the owner's snapshot): {entry['in_process'].get('first_query_ms', '–')} ms",
                "",
            ]
            md += [*_table(*latency_table(entry)), ""]
            emb = entry["in_process"].get("embed_query_alone_ms")
            if emb:
                md += [
                    f"Of which the question's e5 embedding alone (same questions, same process): p50 "
                    f"{emb.get('p50')} ms, p95 {emb.get('p95')} ms, p99 {emb.get('p99')} ms.",
                    "",
                ]
            stages = {r: entry["in_process"][r]["cold"].get("stage_mean_ms") for r in ROUTES}
            md += [f"Mean in-process stage times, cold (ms): {stages}.", ""]
            if "http" in entry:
                h = entry["http"]
                md += [f"Service RSS idle {h.get('rss_idle')}, after the load {h.get('rss_after')}.", ""]
            headers, rows = sweep_table(entry)
            if rows:
                md += ["Semantic route over HTTP by number of concurrent clients (a fresh service per level):", ""]
                md += [*_table(headers, rows), ""]
        if "latency_percentiles.png" in made:
            md += ["![latency percentiles](latency_percentiles.png)", ""]
    fp = res["footprint"]
    if fp:
        md += ["## Footprint", ""]
        for name, entry in fp["stores"].items():
            d = entry["disk"]
            md += [f"**{name}**: bytes on disk per message ({d['messages']:,} messages):", ""]
            md += [*_table(*disk_table(d)), ""]
            c = entry["compression"]
            per_vector = c["raw_vector_bytes"] / c["rows"]
            md += [
                f"Vector index on the {c['rows']:,} message vectors (float32: {per_vector:.0f} "
                f"B/vector), recall@{c['k']} against exact search for {c['queries']} LoCoMo questions, "
                f"nprobes {c['nprobes']}:",
                "",
            ]
            md += [*_table(*index_table(c)), ""]
            s = entry["service_rss"]
            md += [f"`adamem serve` on {name}: RSS idle {s['idle']}, after {s['queries']} queries {s['after']}.", ""]
        for what, v in fp["rss"].items():
            md.append(f"- {what}: {v}")
        md.append("")
    if (folder / "notes.md").exists():
        md += ["## Analysis", "", "Where the time and the recall go, and how each figure was reached: `notes.md`.", ""]
    return "\n".join(md) + "\n"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``adamem bench report``."""
    p.add_argument("--results", default=str(RESULTS), help="folder of the result JSON files")


def execute(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """Write README.md (and the plots) into the results folder."""
    folder = Path(args.results)
    text = render(folder)
    (folder / "README.md").write_text(text)
    print(f"wrote {folder / 'README.md'}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bench.report``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(prog="adamem bench report", description=__doc__)
    add_arguments(p)
    return execute(p.parse_args(argv), ["report", *argv])


if __name__ == "__main__":
    sys.exit(main())
