"""Benchmarks of AdaMem Stream (issue 6): retrieval quality on LoCoMo, ingest and replay throughput,
query latency and footprint. Run them with ``adamem bench …`` (or ``python -m adamem.bench.cli …``);
each prints a table and writes JSON under ``bench/results/``.
"""
