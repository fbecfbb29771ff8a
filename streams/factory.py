"""Choose the event-log adapter for a URL: the one place that names the adapters of the log port.

The port (``log.py``) never imports its adapters; each adapter is imported only when its URL is
opened, so an embedded user never loads the Kafka client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from adamem.errors import ConfigError

if TYPE_CHECKING:
    from adamem.settings import Settings
    from adamem.streams.log import EventLog

__all__ = ["open_log"]


def open_log(url: str, settings: Settings) -> EventLog:
    """The log adapter for ``url``: ``kafka://host:port``, ``memory://``, or a folder path."""
    if url.startswith("kafka://"):
        from adamem.streams.kafka_log import KafkaLog

        bootstrap = url[len("kafka://") :].rstrip("/")
        if not bootstrap:
            raise ConfigError(f"log URL {url!r} names no broker; use kafka://127.0.0.1:9092")
        return KafkaLog(bootstrap, settings)
    if url.startswith("memory://"):
        from adamem.streams.memory_log import InMemoryLog

        return InMemoryLog(settings)
    if "://" in url and not url.startswith("file://"):
        raise ConfigError(f"log URL {url!r} is not kafka://host:port, memory:// or a folder path")
    from adamem.streams.embedded_log import EmbeddedLog

    return EmbeddedLog(url.removeprefix("file://"), settings)
