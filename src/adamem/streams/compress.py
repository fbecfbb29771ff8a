"""Compression on the write path: propose summaries of owners' records and append them to the control topic.

The compressor (``projections.compressor``) reads an owner's committed episodic rows and proposes
``MemoryCompressed`` events; this module appends them to the **control** topic, keyed by owner,
like a forget or a correction. The analyzer forwards control events to the analyses topic in
arrival order (``streams.pipeline``), so the folds meet a compression in the one ordered stream
per owner that replay reads too: replay folds the recorded summary where live projection folded
it, and never runs the compressor. Appending to the analyses topic directly would bypass the
analyzer's progress accounting (the ``adamem-resume`` headers there are the analyzer's own), and
a Faust worker forwards control events the same way, so one path serves both runners. Both
runners propose too: the in-process pipeline appends through its log (``compress_owners``), the
Faust worker sends the same records (``compressions``, ``control_records``) through its producer, after each
committed batch of a partition it still holds (``streams.worker_state``).

The event is sealed under the keys of all its source messages (``schemas.sealing``), so
forgetting any of them erases the summary's text from the log as it erases the message's.
A proposal is made from committed rows only and folds whole or not at all
(``projections.folds.compressed``): proposing the same cluster twice gives the same event id, and a
proposal that went stale before it was folded (a record superseded or forgotten since) changes
nothing.
"""

from __future__ import annotations

from collections.abc import Iterable

from adamem.errors import ConfigError
from adamem.events import MemoryCompressed
from adamem.projections.compressor import RULES, Compressor, propose
from adamem.projections.folds.params import SEED_DEFAULT, MemoryParameters
from adamem.projections.folds.rows import EpisodicRow, MessageRow
from adamem.projections.store.ports import StoreReader
from adamem.schemas.serde import encode_event
from adamem.settings import Settings
from adamem.streams.keys import KeyRingLike, keystore_for
from adamem.streams.log import EventLog, OutgoingRecord

__all__ = ["compress_owners", "compressions", "compressor_for", "control_records"]


def compressor_for(settings: Settings) -> Compressor:
    """The compressor ``ADAMEM_COMPRESSION`` names: rules, or openai (the OpenAI-compatible endpoint's model)."""
    if settings.compression == "rules":
        return RULES
    if settings.compression == "openai":
        from adamem.projections.compressor_llm import OpenAICompatibleCompressor

        if not settings.llm_url or not settings.llm_model:
            raise ConfigError("ADAMEM_COMPRESSION=openai needs ADAMEM_LLM_URL and ADAMEM_LLM_MODEL")
        return OpenAICompatibleCompressor(settings.llm_url, settings.llm_model, settings.llm_api_key or None)
    raise ConfigError(f"ADAMEM_COMPRESSION={settings.compression!r} is not one of: off, rules, openai")


def compressions(
    store: StoreReader,
    params: MemoryParameters = SEED_DEFAULT,
    compressor: Compressor = RULES,
    owners: Iterable[str] | None = None,
) -> list[MemoryCompressed]:
    """The compressions proposed for ``owners`` (default: every owner of the store), from their committed rows.

    Reads the store (and, for ``openai``, calls the model): a runner on an event loop calls it in a thread.
    """
    out: list[MemoryCompressed] = []
    for owner in sorted(owners) if owners is not None else store.owners():
        rows = [r for r in store.rows("episodic", owner) if isinstance(r, EpisodicRow)]
        topics = (
            {m.id: m.topics for m in store.rows("messages", owner) if isinstance(m, MessageRow)}
            if params.compression_by_topic
            else None
        )
        out.extend(propose(owner, rows, params, compressor, topics))
    return out


def control_records(events: Iterable[MemoryCompressed], keys: KeyRingLike) -> list[OutgoingRecord]:
    """The control-topic records of compressions, keyed by owner, each sealed under its source messages' keys.

    ``keys`` hold those keys already (the messages were read), so there is nothing to flush.
    """
    return [OutgoingRecord(e.user_id, encode_event(e, keys)) for e in events]


async def compress_owners(
    log: EventLog,
    store: StoreReader,
    settings: Settings,
    params: MemoryParameters = SEED_DEFAULT,
    compressor: Compressor = RULES,
    owners: Iterable[str] | None = None,
) -> int:
    """Propose the compressions of ``owners`` (default: every owner of the store), append them; how many."""
    keys = keystore_for(log, settings)  # sealed under the source messages' keys: a forget of any erases it
    out = control_records(compressions(store, params, compressor, owners), keys)
    if out:
        await log.append(settings.topic("control"), out)
    return len(out)
