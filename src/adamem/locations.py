"""Where the event log and the projection store live, parsed once from their URLs.

``Settings.log`` and ``Settings.store`` hold these values; the adapters' factories, the
commands and the services read their fields instead of parsing the URL text again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from adamem.errors import ConfigError

__all__ = ["LogLocation", "StoreLocation"]


@dataclass(frozen=True, slots=True)
class LogLocation:
    """An event log: an embedded folder (``./data/log``, ``file://…``), ``kafka://host:port`` or ``memory://``."""

    url: str
    kind: Literal["embedded", "kafka", "memory"]
    folder: Path | None = None  # embedded
    bootstrap: str = ""  # kafka: host:port[,host:port…]

    @classmethod
    def parse(cls, url: str) -> LogLocation:
        """The location of ``url``; ``ConfigError`` for a scheme no adapter reads, or a Kafka URL with no broker."""
        if url.startswith("kafka://"):
            bootstrap = url.removeprefix("kafka://").rstrip("/")
            if not bootstrap:
                raise ConfigError(f"log URL {url!r} names no broker; use kafka://127.0.0.1:9092")
            return cls(url, "kafka", bootstrap=bootstrap)
        if url.startswith("memory://"):
            return cls(url, "memory")
        if "://" in url and not url.startswith("file://"):
            raise ConfigError(f"log URL {url!r} is not kafka://host:port, memory:// or a folder path")
        return cls(url, "embedded", folder=Path(url.removeprefix("file://")))

    @property
    def projected_here(self) -> bool:
        """Whether a writer projects the log itself (embedded, in memory) rather than waiting for workers (Kafka)."""
        return self.kind != "kafka"

    def __str__(self) -> str:
        return self.url


@dataclass(frozen=True, slots=True)
class StoreLocation:
    """A projection store: a LanceDB folder (``./data/store``, ``lancedb://…``), ``s3://bucket/prefix`` or
    ``memory://``, with the object store's options (endpoint, region, keys) for ``s3://``."""

    url: str
    kind: Literal["lance", "s3", "memory"]
    root: str = ""  # the folder, or s3://bucket/prefix
    options: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, url: str, options: Mapping[str, str] | None = None) -> StoreLocation:
        """The location of ``url``; ``ConfigError`` for a scheme no adapter reads."""
        if url.startswith("memory://"):
            return cls(url, "memory")
        if url.startswith("s3://"):
            return cls(url, "s3", url, dict(options or {}))
        if "://" in url and not url.startswith(("file://", "lancedb://")):
            raise ConfigError(
                f"store URL {url!r} is not memory://, s3://BUCKET/PREFIX, lancedb://PATH or a folder path"
            )
        return cls(url, "lance", url.removeprefix("lancedb://").removeprefix("file://"))

    @property
    def folder(self) -> Path | None:
        """The local folder of a LanceDB store; None for an object store or an in-memory one."""
        return Path(self.root) if self.kind == "lance" else None

    def __str__(self) -> str:
        return self.url
