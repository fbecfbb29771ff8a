"""``adamem bench``: the benchmarks live in the source checkout's ``bench/``, not in the installed package.

An editable install (``deploy/setup.sh``, ``pip install -e .``) finds them beside ``src/``; an
install from a wheel has none and says where to get them.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from adamem.errors import ConfigError

__all__ = ["HELP", "checkout", "register"]

HELP = "benchmarks: retrieval quality, throughput, latency, footprint (from a source checkout)"
"""The one-line help of ``adamem bench``."""


def checkout() -> Path | None:
    """The source checkout this package runs from (``<checkout>/src/adamem``), if it has the benchmarks."""
    root = Path(__file__).resolve().parents[3]
    return root if (root / "bench" / "cli.py").is_file() and (root / "src" / "adamem").is_dir() else None


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``bench`` and its subcommands (``bench.cli``) to the ``adamem`` parser."""
    root = checkout()
    if root is None:
        raise ConfigError(
            "the benchmarks are not installed with the package: they run from a source checkout "
            "(clone the repository, `bash deploy/setup.sh --extras bench`, then `adamem bench …` there)"
        )
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    importlib.import_module("bench.cli").register(sub)
