"""The one exception tree of AdaMem Stream.

    AdaMemError
    ├── ConfigError             bad settings or an unusable log/store URL
    ├── SchemaError             Avro schemas and the single-object framing
    │   ├── UnknownSchemaError  a fingerprint no schema in the repo has
    │   └── DecodeError         bytes that are not a valid event
    ├── InputError              a message batch that fails validation (nothing is published)
    ├── InvalidArgument         a call's arguments do not make sense together (nothing was written)
    ├── Forbidden               the caller's key may not do this (another tenant's memory)
    ├── LogError                the event log (embedded files or Kafka) cannot do what was asked
    │   ├── BrokerUnavailable   no Kafka broker answers at the bootstrap address
    │   ├── LogFenced           a newer worker owns a partition's transactions; this one may no longer publish
    │   └── NotVisible          written events were not in memory within the wait (ask again to wait longer)
    ├── StoreError              a projection store cannot do what was asked
    │   └── StoreFenced         a newer writer owns the shard; this one may no longer commit to it
    ├── ServiceUnavailable      a query service (``--url``) cannot be reached or does not answer
    ├── NotFound                a log, store, file, item or message that was named does not exist
    │   ├── UnknownOwner        a query named an owner with no memory (HTTP 404)
    │   │   └── ItemNotFound    the owner's memory holds no item with that id (HTTP 404)
    │   └── NotWritten          a log position that holds no message: waiting for it would not help
    └── ModelError              an extractor or embedder model failed
        ├── ModelUnavailable    an OpenAI-compatible endpoint could not be reached or kept failing
        └── MalformedModelAnswer  an endpoint answered with something that is not the requested JSON

Every error names the ids involved and says what to do. Adapters translate third-party
errors with ``raise ... from exc``.

Each class carries what every entry point needs to answer it: ``http_status`` and ``kind`` (the
HTTP answer ``{"error": kind, "detail": ...}``, mapped by the service's one handler), and
``exit_code`` (the ``adamem`` command's, the table of ``adamem --help``). Subclasses elsewhere
inherit them: ``retrieval``'s and the API's item errors, the HTTP client's ``ServiceError``
(which carries the status the service answered), the store's ``LegacyStore``.
"""

from __future__ import annotations

__all__ = [
    "AdaMemError",
    "BrokerUnavailable",
    "ConfigError",
    "DecodeError",
    "Forbidden",
    "InputError",
    "InvalidArgument",
    "ItemNotFound",
    "LogError",
    "LogFenced",
    "MalformedModelAnswer",
    "ModelError",
    "ModelUnavailable",
    "NotFound",
    "NotVisible",
    "NotWritten",
    "SchemaError",
    "ServiceUnavailable",
    "StoreError",
    "StoreFenced",
    "UnknownOwner",
    "UnknownSchemaError",
]


class AdaMemError(Exception):
    """Root of every error raised by AdaMem Stream.

    An error with no closer class is the service's failure (HTTP 503 ``unavailable``) and a usage
    error of the command (exit 2).
    """

    http_status: int = 503
    kind: str = "unavailable"
    exit_code: int = 2

    def public_detail(self) -> str:
        """What an HTTP answer says of it: the message, named by its class where the status is a failure."""
        return f"{type(self).__name__}: {self}" if self.http_status >= 500 else str(self)


class ConfigError(AdaMemError):
    """A setting or URL is missing or malformed."""


class SchemaError(AdaMemError):
    """An Avro schema or its framing is wrong."""

    exit_code = 4


class UnknownSchemaError(SchemaError):
    """Bytes were written with a schema whose fingerprint is not in the registry."""


class DecodeError(SchemaError):
    """Bytes are not a valid single-object-encoded event."""


class InputError(AdaMemError):
    """Input messages failed validation; the whole batch was rejected."""

    http_status, kind, exit_code = 400, "invalid_messages", 4

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        shown = "\n  ".join(problems[:20])
        more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
        super().__init__(
            f"{len(problems)} invalid record(s); nothing was published. Fix them and publish again:\n  {shown}{more}"
        )


class InvalidArgument(AdaMemError):
    """A call's arguments do not make sense together (nothing was written)."""

    http_status, kind, exit_code = 422, "invalid_request", 2


class Forbidden(AdaMemError):
    """The caller's key may not do this: it acts for its own tenant only."""

    http_status, kind, exit_code = 403, "forbidden", 2


class LogError(AdaMemError):
    """The event log failed."""

    kind, exit_code = "log_unavailable", 5

    def public_detail(self) -> str:
        """The message alone: it says which log and what to do."""
        return str(self)


class BrokerUnavailable(LogError):
    """No Kafka broker could be reached."""


class LogFenced(LogError):
    """A newer worker claimed the partition's transactional producer: this worker's transaction was refused.

    The worker lost the partition (a rebalance, or it was paused past its session timeout);
    nothing of the refused transaction is visible to readers (``read_committed``), and the new
    owner analyses those messages.
    """


class NotVisible(LogError):
    """Written events (or log positions asked for) were not in memory within the wait.

    The projections are behind or stopped (on Kafka: the workers); asking again waits longer.
    """

    http_status, kind = 409, "not_visible"


class StoreError(AdaMemError):
    """A projection store failed."""

    exit_code = 5


class StoreFenced(StoreError):
    """A newer writer claimed the shard (its owner epoch is higher): this writer's commit was refused.

    The worker that owned the partition lost it (a rebalance, or it was paused past its session
    timeout); nothing of the refused commit is visible, and the new owner rolls back any table
    version the old one wrote after the claim.
    """


class ServiceUnavailable(AdaMemError):
    """A query service named by its URL (``--url``, the Python client) cannot be reached or does not answer."""

    exit_code = 5


class ModelError(AdaMemError):
    """An extractor or embedder model failed."""

    exit_code = 6


class ModelUnavailable(ModelError):
    """An OpenAI-compatible endpoint could not be reached or kept failing."""


class MalformedModelAnswer(ModelError):
    """An OpenAI-compatible endpoint answered with something that is not the requested JSON."""


class NotFound(AdaMemError):
    """A log, store, input file, memory owner, item or message that was named does not exist."""

    http_status, kind, exit_code = 404, "not_found", 3


class UnknownOwner(NotFound):
    """A query named a memory owner the store holds no memory for.

    Over HTTP it names the user only: the known owners it lists here are other people's.
    """

    kind = "unknown_user"

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

    def public_detail(self) -> str:
        """The user asked for, and nothing of other owners."""
        return f"no memory for user {self.user_id!r}"


class ItemNotFound(UnknownOwner):
    """No memory item with that id for the owner (answered as 404)."""

    kind = "unknown_item"

    def __init__(self, owner_id: str, item: str) -> None:
        self.owner_id = owner_id
        self.tenant, _, self.user_id = owner_id.partition(":")
        AdaMemError.__init__(self, f"user {self.user_id!r} has no memory item {item!r}")

    def public_detail(self) -> str:
        """The item asked for: it names nothing of other owners."""
        return str(self)


class NotWritten(NotFound):
    """Log positions asked for hold no message (no such partition, or past its end): waiting would not help."""

    http_status, kind = 409, "not_written"
