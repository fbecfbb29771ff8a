"""The one exception tree of AdaMem Stream.

    AdaMemError
    ├── ConfigError             bad settings or an unusable log/store URL
    ├── SchemaError             Avro schemas and the single-object framing
    │   ├── UnknownSchemaError  a fingerprint no schema in the repo has
    │   └── DecodeError         bytes that are not a valid event
    ├── InputError              a message batch that fails validation (nothing is published)
    ├── LogError                the event log (embedded files or Kafka) cannot do what was asked
    │   ├── BrokerUnavailable   no Kafka broker answers at the bootstrap address
    │   └── LogFenced           a newer worker owns a partition's transactions; this one may no longer publish
    ├── StoreError              a projection store cannot do what was asked
    │   └── StoreFenced         a newer writer owns the shard; this one may no longer commit to it
    ├── ServiceUnavailable      a query service (``--url``) cannot be reached or does not answer
    ├── NotFound                a log, store, file, item or message that was named does not exist
    │   └── UnknownOwner        a query named an owner with no memory (HTTP 404)
    └── ModelError              an extractor or embedder model failed
        ├── ModelUnavailable    an OpenAI-compatible endpoint could not be reached or kept failing
        └── MalformedModelAnswer  an endpoint answered with something that is not the requested JSON

Every error names the ids involved and says what to do. Adapters translate third-party
errors with ``raise ... from exc``.
"""

from __future__ import annotations

__all__ = [
    "AdaMemError",
    "BrokerUnavailable",
    "ConfigError",
    "DecodeError",
    "InputError",
    "LogError",
    "LogFenced",
    "MalformedModelAnswer",
    "ModelError",
    "ModelUnavailable",
    "NotFound",
    "SchemaError",
    "ServiceUnavailable",
    "StoreError",
    "StoreFenced",
    "UnknownOwner",
    "UnknownSchemaError",
]


class AdaMemError(Exception):
    """Root of every error raised by AdaMem Stream."""


class ConfigError(AdaMemError):
    """A setting or URL is missing or malformed."""


class SchemaError(AdaMemError):
    """An Avro schema or its framing is wrong."""


class UnknownSchemaError(SchemaError):
    """Bytes were written with a schema whose fingerprint is not in the registry."""


class DecodeError(SchemaError):
    """Bytes are not a valid single-object-encoded event."""


class InputError(AdaMemError):
    """Input messages failed validation; the whole batch was rejected."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        shown = "\n  ".join(problems[:20])
        more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
        super().__init__(
            f"{len(problems)} invalid record(s); nothing was published. Fix them and publish again:\n  {shown}{more}"
        )


class LogError(AdaMemError):
    """The event log failed."""


class BrokerUnavailable(LogError):
    """No Kafka broker could be reached."""


class LogFenced(LogError):
    """A newer worker claimed the partition's transactional producer: this worker's transaction was refused.

    The worker lost the partition (a rebalance, or it was paused past its session timeout);
    nothing of the refused transaction is visible to readers (``read_committed``), and the new
    owner analyses those messages.
    """


class StoreError(AdaMemError):
    """A projection store failed."""


class StoreFenced(StoreError):
    """A newer writer claimed the shard (its owner epoch is higher): this writer's commit was refused.

    The worker that owned the partition lost it (a rebalance, or it was paused past its session
    timeout); nothing of the refused commit is visible, and the new owner rolls back any table
    version the old one wrote after the claim.
    """


class ServiceUnavailable(AdaMemError):
    """A query service named by its URL (``--url``, the Python client) cannot be reached or does not answer."""


class ModelError(AdaMemError):
    """An extractor or embedder model failed."""


class ModelUnavailable(ModelError):
    """An OpenAI-compatible endpoint could not be reached or kept failing."""


class MalformedModelAnswer(ModelError):
    """An OpenAI-compatible endpoint answered with something that is not the requested JSON."""


class NotFound(AdaMemError):
    """A log, store, input file, memory owner, item or message that was named does not exist."""


class UnknownOwner(NotFound):
    """A query named a memory owner the store holds no memory for."""

    def __init__(self, owner_id: str, store_url: str, known: list[str]) -> None:
        self.owner_id = owner_id
        self.tenant, sep, self.user_id = owner_id.partition(":")
        if not sep:
            self.tenant, self.user_id = "", owner_id
        shown = ", ".join(known[:10]) + (f" and {len(known) - 10} more" if len(known) > 10 else "")
        super().__init__(
            f"no memory for user {self.user_id!r} of tenant {self.tenant!r} in {store_url}; known owners "
            f"(tenant:user_id): {shown or 'none'}. Check the user_id and --tenant, or publish and project "
            "that user's messages first"
        )
