"""Avro schemas of every event on the log, and the single-object codec that frames them."""

from adamem.schemas.codec import MAGIC, SchemaRegistry, default_registry, fingerprint_of

__all__ = ["MAGIC", "SchemaRegistry", "default_registry", "fingerprint_of"]
