"""The one settings object: every field with its environment variable, default and a one-line doc.

No other module reads ``os.environ``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, replace
from functools import cached_property
from typing import Any

from adamem.errors import ConfigError
from adamem.locations import LogLocation, StoreLocation

__all__ = ["Settings"]


def _env(name: str, default: Any, doc: str) -> Any:
    return field(default=default, metadata={"env": name, "doc": doc})


@dataclass(frozen=True)
class Settings:
    """Runtime settings; build with ``Settings.from_env()`` and vary with ``dataclasses.replace``."""

    log_url: str = _env("ADAMEM_LOG", "./data/log", "Event log: a local folder (embedded) or kafka://host:port.")
    store_url: str = _env("ADAMEM_STORE", "./data/store", "Projection store: a folder (LanceDB) or memory://.")
    topic_prefix: str = _env("ADAMEM_TOPIC_PREFIX", "adamem", "Prefix of every topic name.")
    partitions: int = _env("ADAMEM_PARTITIONS", 4, "Partitions of every co-partitioned Kafka topic.")
    embedded_partitions: int = _env("ADAMEM_EMBEDDED_PARTITIONS", 1, "Partitions of the embedded log's topics.")
    max_text_bytes: int = _env("ADAMEM_MAX_TEXT_BYTES", 32_768, "Largest message text accepted, in UTF-8 bytes.")
    default_tenant: str = _env("ADAMEM_TENANT", "default", "Tenant given to messages that name none.")
    publish_batch: int = _env("ADAMEM_PUBLISH_BATCH", 500, "Messages per publish batch.")
    fsync: bool = _env("ADAMEM_FSYNC", True, "fsync the embedded log after every append.")
    keystore: str = _env(
        "ADAMEM_KEYSTORE",
        "",
        "Folder of the message keys (crypto-shredding); default: <log folder>.keys beside an embedded log, "
        "$ADAMEM_HOME/keys/<topic prefix> for Kafka.",
    )
    home: str = _env(
        "ADAMEM_HOME", "~/.adamem", "The user's adamem folder: the Kafka deployments' keystores live here."
    )
    kafka_timeout_s: float = _env("ADAMEM_KAFKA_TIMEOUT", 15.0, "Seconds to wait for the broker before failing.")
    extractor: str = _env(
        "ADAMEM_EXTRACTOR", "rules", "First-generation extractor of a store: rules, openai, none or pkg.mod:factory."
    )
    embedder: str = _env(
        "ADAMEM_EMBEDDER",
        "e5-pair",
        "Embedder of a new store's first generation: e5-pair (offline, multilingual e5 beside English e5-small-v2), "
        "e5 (offline, multilingual e5 alone) or openai.",
    )
    llm_url: str = _env("ADAMEM_LLM_URL", "", "Base URL of an OpenAI-compatible endpoint (extractor=openai).")
    llm_model: str = _env("ADAMEM_LLM_MODEL", "", "Chat model of the OpenAI-compatible extractor.")
    llm_api_key: str = _env("ADAMEM_LLM_API_KEY", "", "API key of the OpenAI-compatible endpoint, if it needs one.")
    embed_url: str = _env("ADAMEM_EMBED_URL", "", "Base URL of an OpenAI-compatible embeddings endpoint.")
    embed_model: str = _env("ADAMEM_EMBED_MODEL", "", "Model of the OpenAI-compatible embedder.")
    embed_dim: int = _env("ADAMEM_EMBED_DIM", 0, "Vector dimension of the OpenAI-compatible embedder.")
    api_keys: str = _env("ADAMEM_API_KEYS", "", "Query service keys as tenant:key,tenant:key; empty runs it open.")
    api_key: str = _env(
        "ADAMEM_API_KEY",
        "",
        "Key the commands with --url send to the query service; empty: the tenant's key in ADAMEM_API_KEYS, if any.",
    )
    host: str = _env("ADAMEM_HOST", "127.0.0.1", "Address the query service listens on.")
    port: int = _env("ADAMEM_PORT", 8000, "Port the query service listens on.")
    store_endpoint: str = _env(
        "ADAMEM_STORE_ENDPOINT", "", "Object-store endpoint of an s3:// store (MinIO, SeaweedFS, ...); empty: AWS."
    )
    store_region: str = _env("ADAMEM_STORE_REGION", "us-east-1", "Region of an s3:// store.")
    store_access_key: str = _env(
        "ADAMEM_STORE_ACCESS_KEY", "", "Access key of an s3:// store (empty: AWS's own chain)."
    )
    store_secret_key: str = _env("ADAMEM_STORE_SECRET_KEY", "", "Secret key of an s3:// store.")
    store_allow_http: bool = _env("ADAMEM_STORE_ALLOW_HTTP", False, "Let an s3:// store's endpoint be plain http.")
    worker_session_timeout_s: float = _env(
        "ADAMEM_WORKER_SESSION_TIMEOUT", 10.0, "Seconds before the group drops a dead worker and rebalances."
    )
    metrics: bool = _env("ADAMEM_METRICS", True, "The query service records Prometheus metrics and serves /metrics.")
    health_interval_s: float = _env(
        "ADAMEM_HEALTH_INTERVAL", 60.0, "Seconds between the query service's memory-health computations (0: never)."
    )
    query_memory_mb: int = _env(
        "ADAMEM_QUERY_MEMORY",
        2048,
        "Megabytes of owner snapshots a query process keeps loaded; the least frequently used are evicted.",
    )
    hot_messages: int = _env(
        "ADAMEM_HOT_MESSAGES",
        2000,
        "Newest messages of an owner a query process holds; older ones are read through the store's indexes (0: all).",
    )
    cold_index_mb: int = _env(
        "ADAMEM_COLD_INDEX_MEMORY",
        512,
        "Megabytes an owner's older messages may take when read into the query process after its first question "
        "(about 2.4 KB a message), to be searched there; a larger part stays in the store (0: always).",
    )
    metrics_interval_s: float = _env(
        "ADAMEM_METRICS_INTERVAL", 5.0, "Seconds between a worker's consumer-lag measurements."
    )
    worker_batch: int = _env("ADAMEM_WORKER_BATCH", 256, "Messages per micro-batch in the worker's analyze agent.")
    worker_transactions: bool = _env(
        "ADAMEM_WORKER_TRANSACTIONS",
        True,
        "The worker commits each partition's analyses with its input offsets in one Kafka transaction.",
    )
    change_feed: bool = _env(
        "ADAMEM_CHANGE_FEED",
        True,
        "The projection publishes each committed batch's memory changes on the changes topic.",
    )
    compression: str = _env(
        "ADAMEM_COMPRESSION",
        "off",
        "After each projected batch, distil clusters of related records into summaries: off, rules or openai.",
    )
    progress: bool = _env(
        "ADAMEM_PROGRESS", True, "Show progress (bars, status lines) on stderr; --quiet turns it off."
    )
    progress_seconds: float = _env(
        "ADAMEM_PROGRESS_SECONDS", 5.0, "Seconds between progress/status lines on stderr when it is not a terminal."
    )
    packs: str = _env(
        "ADAMEM_PACKS",
        "",
        "Domain packs of a new store's first generation, per tenant: tenant:pack[+pack],... (* = any tenant); "
        "a pack is a shipped name (medical, ecommerce, customer-service, education) or a .toml file.",
    )
    # Not an environment variable: the analysis generation is a property of the store's active view
    # (``streams.generations.resolve``); ``adamem reanalyze`` makes new ones.
    generation: str = field(default="g1", metadata={"env": None, "doc": "Analysis generation (from the store)."})
    # Not an environment variable: the packs (with their text) a store's generation recorded, which its
    # analysis and folds use instead of reading ``packs`` files again.
    packs_record: str = field(default="", metadata={"env": None, "doc": "Recorded domain packs (from the store)."})

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None, **overrides: Any) -> Settings:
        """Read every field from its environment variable, then apply explicit overrides."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in fields(cls):
            if f.metadata["env"] is None:
                continue
            raw = env.get(f.metadata["env"])
            if raw is None:
                continue
            values[f.name] = _coerce(f.name, f.metadata["env"], raw, type(f.default))
        settings = cls(**values)
        given = {k: v for k, v in overrides.items() if v is not None}
        return replace(settings, **given) if given else settings

    @classmethod
    def describe(cls) -> list[tuple[str, str, Any, str]]:
        """(field, env var, default, doc) for every setting, for the README and --help."""
        return [(f.name, f.metadata["env"], f.default, f.metadata["doc"]) for f in fields(cls) if f.metadata["env"]]

    def store_options(self) -> dict[str, str]:
        """Lance/LanceDB storage options of an object-store store (``s3://bucket/prefix``)."""
        options = {"region": self.store_region}
        if self.store_endpoint:
            options["endpoint"] = self.store_endpoint
        if self.store_access_key:
            options["access_key_id"] = self.store_access_key
            options["secret_access_key"] = self.store_secret_key
        if self.store_allow_http:
            options["allow_http"] = "true"
        return options

    @cached_property
    def log(self) -> LogLocation:
        """``log_url``, parsed (once per settings object)."""
        return LogLocation.parse(self.log_url)

    @cached_property
    def store(self) -> StoreLocation:
        """``store_url``, parsed, with ``store_options`` for an object store (once per settings object)."""
        return StoreLocation.parse(self.store_url, self.store_options())

    def topic(self, name: str) -> str:
        """Full topic name of ``messages``, ``analyses``, ``control``, ``deadletter``, ``changes`` or ``audit``.

        Each analysis generation has its own analyses topic: ``<prefix>.analyses`` for the first
        (``g1``), ``<prefix>.analyses.<generation>`` for the later ones.
        """
        if name == "analyses" and self.generation != "g1":
            return f"{self.topic_prefix}.analyses.{self.generation}"
        return f"{self.topic_prefix}.{name}"


def _coerce(name: str, var: str, raw: str, kind: type) -> Any:
    try:
        if kind is bool:
            if raw.lower() in {"1", "true", "yes", "on"}:
                return True
            if raw.lower() in {"0", "false", "no", "off"}:
                return False
            raise ValueError(raw)
        return kind(raw)
    except ValueError:
        raise ConfigError(f"{var}={raw!r} is not a valid {kind.__name__} for setting {name}") from None
