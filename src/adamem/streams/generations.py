"""Analysis generations: which analyzer a store's rows come from, and which analyses topic feeds it.

A *generation* is one complete analysis of the message log by one analyzer (extractor +
embedder). The first is ``g1`` on ``<prefix>.analyses``; ``adamem reanalyze`` writes ``g2``,
``g3`` … on topics of their own (``<prefix>.analyses.g2``) and projects each into a view of its
own, so two analyses of the same messages never mix in one projection.

The store records its generation (a view's ``meta.json`` for LanceDB). The write path — the
in-process pipeline, the Faust worker, replay — takes the generation and its analyzer *from the
store's active view*, not from the environment: ``ADAMEM_EXTRACTOR``/``ADAMEM_EMBEDDER`` only
choose the analyzer of a store's first generation. Changing the analyzer of a running memory is
a reanalysis, never a silent switch halfway through a log. The same holds for the domain packs
(``ADAMEM_PACKS``): a generation records each tenant's packs with their text and digest, and its
analysis and folds use the recorded packs, so an edited pack file changes nothing until
``adamem reanalyze --packs`` writes a generation with it.
"""

from __future__ import annotations

import dataclasses
import logging
import re

from adamem.errors import ConfigError, SchemaError
from adamem.packs import PackSelection
from adamem.projections.folds.params import SEED_DEFAULT
from adamem.projections.packs import pack_parameters
from adamem.projections.store.ports import MemoryStore
from adamem.settings import Settings
from adamem.streams.log import EventLog

__all__ = [
    "FIRST",
    "active",
    "analyzer_summary",
    "embedder_named",
    "generation_record",
    "logged_embedder",
    "next_generation",
    "resolve",
    "resolve_on_log",
    "settings_for",
]

log = logging.getLogger("adamem.generations")

FIRST = "g1"
_NAME = re.compile(r"^g([1-9][0-9]*)$")

# The settings an analyzer is made from; recorded with the generation so it is rebuilt the same way.
_ANALYZER_FIELDS = ("extractor", "embedder", "llm_model", "embed_model")


def generation_record(settings: Settings) -> dict[str, str]:
    """What a store records of the generation ``settings`` analyze with."""
    record = {"name": settings.generation, "topic": settings.topic("analyses")}
    for name in _ANALYZER_FIELDS:
        value = getattr(settings, name)
        if value:
            record[name] = str(value)
    if settings.embed_dim:
        record["embed_dim"] = str(settings.embed_dim)
    selection = PackSelection.chosen(settings.packs, settings.packs_record)
    if selection.by_tenant:
        pack_parameters(selection, SEED_DEFAULT)  # a bad [pace] fails here, before the generation is recorded
        record["packs"] = settings.packs
        record["packs_digest"] = selection.digest
        record["packs_content"] = selection.to_record()
    return record


def analyzer_summary(record: dict[str, str]) -> str:
    """``extractor=rules, embedder=e5, packs=…`` of a generation record, in its order: the packs' text is left out
    and their digest shortened."""
    shown = []
    for key, value in record.items():
        if key in ("name", "topic", "packs_content"):
            continue
        shown.append(f"{key}={value[:12] if key == 'packs_digest' else value}")
    return ", ".join(shown)


def settings_for(settings: Settings, record: dict[str, str]) -> Settings:
    """``settings`` with the generation and analyzer of a recorded generation (endpoints stay as set)."""
    name = record.get("name", FIRST)
    if not _NAME.match(name):
        raise ConfigError(f"the store records an unknown analysis generation {name!r}")
    changes: dict[str, object] = {"generation": name}
    for field in _ANALYZER_FIELDS:
        if field in record:
            changes[field] = record[field]
    if "embed_dim" in record:
        changes["embed_dim"] = int(record["embed_dim"])
    # A generation without packs analyses without them, whatever ADAMEM_PACKS says now.
    changes["packs"] = record.get("packs", "")
    changes["packs_record"] = record.get("packs_content", "")
    return dataclasses.replace(settings, **changes)  # type: ignore[arg-type]


def active(settings: Settings, store: MemoryStore) -> Settings:
    """The settings of the generation ``store``'s view was built by (``settings`` for a store with no record).

    What a reader needs on every request (its analyses topic, its embedder); ``resolve`` is the
    same for the processes that start up on a store, and says when the environment disagrees.
    """
    record = store.generation()
    return settings_for(settings, record) if record else settings


def embedder_named(model: str) -> str | None:
    """The ``ADAMEM_EMBEDDER`` value of the offline embedder that names its vectors ``model`` (``None``: another)."""
    if model.startswith("multilingual-e5-small"):
        return "e5-pair" if "+e5-small-v2" in model else "e5"
    return None


async def logged_embedder(event_log: EventLog, settings: Settings) -> str | None:
    """The offline embedder the first analysis on the first generation's analyses topic names (``None``: no
    analysis yet, or another embedder's). A log analysed before the default embedder changed keeps its embedder."""
    from adamem.events import MessageAnalyzed
    from adamem.schemas.serde import decode_event

    first = dataclasses.replace(settings, generation=FIRST)
    async for record in event_log.read(first.topic("analyses")):
        try:
            event = decode_event(record.value)
        except SchemaError:  # an undecodable record is the pipeline's to dead-letter
            continue
        if isinstance(event, MessageAnalyzed):
            return embedder_named(event.embedding.model)
    return None


async def resolve_on_log(settings: Settings, store: MemoryStore, event_log: EventLog) -> Settings:
    """``resolve`` for the write path over ``event_log`` (started): a store with no record yet records the embedder
    of the log's analyses when it has some, whatever ``ADAMEM_EMBEDDER`` says — the store is rebuilt from a log whose
    vectors are made already, and new ones must fit them — and ``settings``' otherwise."""
    if not store.generation():
        logged = await logged_embedder(event_log, settings)
        if logged and logged != settings.embedder:
            if settings.embedder != Settings.__dataclass_fields__["embedder"].default:
                log.warning(
                    "the log's analyses were embedded with embedder=%s; the store records it, not the configured %s",
                    logged,
                    settings.embedder,
                )
            settings = dataclasses.replace(settings, embedder=logged)
    return resolve(settings, store, record_if_missing=True)


def resolve(settings: Settings, store: MemoryStore, *, record_if_missing: bool = False) -> Settings:
    """The settings of the generation ``store`` projects: its recorded analyzer wins over the environment.

    A store with no record yet is generation ``g1`` analysed as ``settings`` say; with
    ``record_if_missing`` (the write path) that is recorded, so later runs cannot drift.
    """
    record = store.generation()
    if not record:
        if record_if_missing:
            store.record_generation(generation_record(settings))
        return settings
    resolved = settings_for(settings, record)
    for field in ("extractor", "embedder"):
        configured = getattr(settings, field)
        # Only a value someone set is worth a warning, not the default of an unset variable.
        if configured != getattr(resolved, field) and configured != Settings.__dataclass_fields__[field].default:
            log.warning(
                "the store's generation %s was analysed with %s=%s; ignoring the configured %s=%s "
                "(run `adamem reanalyze --%s %s` to analyse the log again with it)",
                resolved.generation,
                field,
                getattr(resolved, field),
                field,
                configured,
                field,
                configured,
            )
    if settings.packs and not settings.packs_record:
        try:
            configured = PackSelection.parse(settings.packs).digest
        except ConfigError as exc:  # the store's record decides: a stale setting is worth a warning, not a failure
            configured = f"unreadable: {exc}"
        if configured != record.get("packs_digest", ""):
            log.warning(
                "the store's generation %s was analysed with domain packs %r; ignoring ADAMEM_PACKS=%r, whose "
                "packs differ (run `adamem reanalyze --packs %s` to analyse the log again with them)",
                resolved.generation,
                resolved.packs,
                settings.packs,
                settings.packs,
            )
    return resolved


def generation_number(name: str) -> int:
    """2 for ``g2``; a clear error for anything else."""
    match = _NAME.match(name)
    if not match:
        raise ConfigError(f"{name!r} is not a generation name (g1, g2, ...)")
    return int(match.group(1))


def next_generation(taken: list[str]) -> str:
    """The generation after every one in ``taken``."""
    return f"g{max([generation_number(n) for n in taken] + [1]) + 1}"
