"""The event log port and its adapters: embedded Avro files, Kafka, and in-memory for unit tests."""

from adamem.streams.factory import open_log
from adamem.streams.log import EventLog, LogRecord, partition_for

__all__ = ["EventLog", "LogRecord", "open_log", "partition_for"]
