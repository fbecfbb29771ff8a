"""Benchmarks of AdaMem Stream (issue 6): retrieval quality on LoCoMo, ingest and replay throughput,
query latency and footprint. Run them with ``adamem bench …`` (or ``python -m bench.cli …``);
each prints a table and writes JSON under ``bench/results/``.

Nothing in the library imports this package; only ``adamem bench`` loads it. Its plots need the
``bench`` extra (``pip install -e '.[bench]'`` in a checkout: matplotlib).
"""

HELP = "benchmarks: retrieval quality, throughput, latency, footprint"
"""The one-line help of ``adamem bench``."""

__all__ = ["HELP"]
