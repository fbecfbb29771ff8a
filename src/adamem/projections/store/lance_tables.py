"""The tables of a LanceDB shard beside the memory tables, and small helpers every part of the adapter uses.

A shard (one log partition's LanceDB database) holds the memory tables of ``TABLES``, one
``checkpoints`` table (a single row: the log offsets applied, the version of every table, the
owner epoch; see ``lance_fencing``) and one ``changes`` table (the change log; see ``lance_reads``).
"""

from __future__ import annotations

import os
import socket
from typing import Any

import pyarrow as pa
from lancedb.index import FTS

from adamem.errors import StoreError

__all__ = [
    "CHANGES",
    "CHANGES_SCHEMA",
    "CHECKPOINTS",
    "CHECKPOINT_EMPTY",
    "CHECKPOINT_SCHEMA",
    "FTS_INDEX",
    "LegacyStore",
    "names_owner_by_user_id",
    "quote",
    "vanished",
    "writer_name",
]

CHECKPOINTS = "checkpoints"
CHANGES = "changes"
# ``tokens`` is already lower-cased, stemmed and cut (adamem.text): the index only splits on spaces.
FTS_INDEX = FTS(
    base_tokenizer="whitespace", stem=False, remove_stop_words=False, ascii_folding=False, with_position=False
)
CHECKPOINT_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False, metadata={"lance-schema:unenforced-primary-key": "true"}),
        pa.field("offsets", pa.string()),
        pa.field("versions", pa.string()),
        pa.field("commits", pa.int64()),
        pa.field("epoch", pa.int64()),  # the owner epoch of the writer that wrote it (see Fencing)
        pa.field("writer", pa.string()),  # that writer, host:pid (diagnostics)
    ]
)
CHECKPOINT_EMPTY: dict[str, Any] = {"id": "checkpoint", "offsets": "{}", "versions": "{}", "commits": 0, "epoch": 0}


def writer_name() -> str:
    """This process as a writer names itself in the checkpoints it writes: host:pid."""
    return f"{socket.gethostname()}:{os.getpid()}"


CHANGES_SCHEMA = pa.schema([pa.field("commit", pa.int64(), nullable=False), pa.field("entry", pa.string())])


VANISHED = ("no longer exists", "was not found", "Not found: ", "No such file or directory")
"""What Lance says when the files of a version a reader holds were removed under it (``erase_history``)."""


def vanished(exc: BaseException) -> bool:
    """Whether a Lance error says the files of the version being read were removed."""
    return any(text in str(exc) for text in VANISHED)


def quote(value: str) -> str:
    """A string literal for a Lance filter."""
    return "'" + value.replace("'", "''") + "'"


def names_owner_by_user_id(table: Any) -> bool:
    """Whether a table is one of 0.1's (owner column ``user_id``); a table still being created is not."""
    try:
        return "owner_id" not in table.schema.names
    except ValueError:  # its first version is still being written by the shard's writer
        return False


class LegacyStore(StoreError):
    """A store view written before owners were ``(tenant, user_id)``: rebuild it from the log."""

    def __init__(self, path: str) -> None:
        super().__init__(
            f"the store view at {path.rsplit('/', 1)[0]} was built by AdaMem Stream 0.1, "
            "whose memory owners were bare user ids; "
            "owners are now (tenant, user_id). Rebuild it from the log, which keeps every tenant: "
            "`adamem replay --log LOG --store STORE` (without --verify: the old view cannot be compared)"
        )
