"""Choose the event-log adapter for a URL: the one place that names the adapters of the log port.

The port (``log.py``) never imports its adapters; each adapter is imported only when its URL is
opened, so an embedded user never loads the Kafka client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from adamem.locations import LogLocation

if TYPE_CHECKING:
    from adamem.settings import Settings
    from adamem.streams.log import EventLog

__all__ = ["open_log"]


def open_log(where: str | LogLocation, settings: Settings) -> EventLog:
    """The log adapter for a location (``settings.log``) or URL: ``kafka://host:port``, ``memory://``, or a folder."""
    location = where if isinstance(where, LogLocation) else LogLocation.parse(where)
    if location.kind == "kafka":
        from adamem.streams.kafka_log import KafkaLog

        return KafkaLog(location.bootstrap, settings)
    if location.kind == "memory":
        from adamem.streams.memory_log import InMemoryLog

        return InMemoryLog(settings)
    from adamem.streams.embedded_log import EmbeddedLog

    assert location.folder is not None
    return EmbeddedLog(str(location.folder), settings)
