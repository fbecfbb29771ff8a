"""Earlier versions of the Avro schemas, still read: the readers resolve old events to the current records."""
