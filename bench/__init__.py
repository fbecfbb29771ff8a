"""Benchmarks of AdaMem Stream: retrieval quality on LoCoMo, ingest and replay throughput, query
latency and footprint. Run them from the source checkout with ``adamem bench …`` (or ``python -m
bench.cli …`` in its folder); each prints a table and writes JSON under ``bench/results/``.

This package is the checkout's, not the installed library's: nothing in ``adamem`` imports it, and
``adamem bench`` finds it beside ``src/``. Its plots need the ``bench`` extra (matplotlib).
"""

HELP = "benchmarks: retrieval quality, throughput, latency, footprint"
"""The one-line help of ``adamem bench``."""

__all__ = ["HELP"]
