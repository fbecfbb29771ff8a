"""Domain packs: data that adapts analysis and the memory folds to a domain, without a code fork.

A pack is a TOML file (``docs/guides/domain-packs.md`` documents the format) with four optional
parts:

- ``[terms.en]`` / ``[terms.zh]``: abbreviations expanded in a message's text before extraction
  (``BP`` → ``blood pressure``; ``BP`` → ``血压`` in Chinese text). Latin keys match whole words
  only; an all-capital key matches its own case only, any other key any case.
- ``[lexicon.<type>]`` with ``en``/``zh`` term lists: mentions of a domain entity type
  (``symptom``, ``diagnosis``, ``product`` …), recorded in the analysis as typed mentions.
- ``[[relations]]``: ``from``/``to`` entity types and an edge ``name`` (and ``weight``); the graph
  fold links a message mentioning one end with the owner's newest earlier message mentioning the
  other end.
- ``[pace]``: overrides of ``MemoryParameters`` fields (how fast persona forms, the ADD threshold …).

Packs are chosen per tenant (``ADAMEM_PACKS``) and recorded, with their text, in the analysis
generation (``streams.generations``): the folds read the recorded packs, never a file, so replay
equals live, and a changed pack is a reanalysis.
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Any

from adamem.errors import ConfigError

__all__ = [
    "SHIPPED",
    "TERM_PREFIX",
    "DomainPack",
    "PackSelection",
    "Relation",
    "load_pack",
    "parse_pack",
]

TERM_PREFIX = "term:"
"""Fact type prefix of a pack's typed mentions (``term:symptom``): they mark a message for relation edges
and never become episodic records."""

SHIPPED = ("medical", "ecommerce", "customer-service", "education")
"""The packs shipped inside the package, loadable by name."""

_TYPE = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
_LATIN = re.compile(r"^[\x20-\x7e]+$")


@dataclass(frozen=True, slots=True)
class Relation:
    """A typed edge between messages mentioning entities of two types (``symptom`` → ``diagnosis``)."""

    from_type: str
    to_type: str
    name: str
    weight: float = 0.8


@dataclass(frozen=True)
class DomainPack:
    """One parsed, validated pack; ``source`` is its TOML text (what a generation records)."""

    name: str
    source: str
    description: str
    terms_en: tuple[tuple[str, str], ...]
    terms_zh: tuple[tuple[str, str], ...]
    lexicon: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...]  # (type, English terms, Chinese terms)
    relations: tuple[Relation, ...]
    pace: tuple[tuple[str, int | float], ...]

    @property
    def digest(self) -> str:
        """SHA-256 of the pack's text: a changed file is a different pack."""
        return hashlib.sha256(self.source.encode()).hexdigest()

    @cached_property
    def _term_patterns(self) -> tuple[re.Pattern[str] | None, re.Pattern[str] | None]:
        return _terms_pattern(self.terms_en), _terms_pattern(self.terms_zh)

    def expand(self, text: str, chinese: bool) -> str:
        """``text`` with the pack's terms of its language replaced by their expansions."""
        pattern = self._term_patterns[1 if chinese else 0]
        if pattern is None:
            return text
        table = self.terms_zh if chinese else self.terms_en
        by_key = {k: v for k, v in table}
        folded = {k.lower(): v for k, v in table if not k.isupper()}
        return pattern.sub(lambda m: by_key.get(m[0]) or folded[m[0].lower()], text)

    @cached_property
    def _lexicon_pattern(self) -> tuple[re.Pattern[str] | None, dict[str, tuple[str, str]]]:
        kinds = {w.lower(): (kind, w) for kind, en, zh in self.lexicon for w in (*en, *zh)}
        # One alternation, longest term first: 偏头痛 (a diagnosis) is not also read as 头痛 (a symptom).
        words = sorted(kinds, key=lambda w: (-len(w), w))
        alternation = "|".join(_whole(w) if _LATIN.match(w) else re.escape(w) for w in words)
        return (re.compile(alternation, re.I) if alternation else None), kinds

    def mentions(self, text: str) -> list[tuple[str, str]]:
        """``(type, term)`` for each lexicon term in ``text`` (as the lexicon spells it), in order, without repeats."""
        pattern, kinds = self._lexicon_pattern
        if pattern is None:
            return []
        return list(dict.fromkeys(kinds[m[0].lower()] for m in pattern.finditer(text)))


def _whole(word: str) -> str:
    """A Latin word (or phrase) matched whole: no letter or digit on either side."""
    return rf"(?<![A-Za-z0-9]){re.escape(word)}(?![A-Za-z0-9])"


def _terms_pattern(table: tuple[tuple[str, str], ...]) -> re.Pattern[str] | None:
    if not table:
        return None
    parts = []
    for key, _ in sorted(table, key=lambda kv: (-len(kv[0]), kv[0])):
        body = _whole(key) if _LATIN.match(key) else re.escape(key)
        parts.append(body if key.isupper() or not _LATIN.match(key) else f"(?i:{body})")
    return re.compile("|".join(parts))


def _fail(origin: str, key: str, why: str) -> ConfigError:
    return ConfigError(f"domain pack {origin}: {key}: {why}")


def _table(data: Mapping[str, Any], key: str, origin: str) -> Mapping[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, Mapping):
        raise _fail(origin, key, "must be a table")
    return value


def _strings(value: Any, origin: str, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise _fail(origin, key, "must be a list of non-empty strings")
    return tuple(v.strip() for v in value)


def _terms(data: Mapping[str, Any], lang: str, origin: str) -> tuple[tuple[str, str], ...]:
    table = _table(_table(data, "terms", origin), lang, origin)
    out = []
    for key, value in table.items():
        if not isinstance(value, str) or not value.strip() or not key.strip():
            raise _fail(origin, f"terms.{lang}.{key}", "must map a term to a non-empty expansion")
        out.append((key.strip(), value.strip()))
    return tuple(sorted(out))


def parse_pack(text: str, origin: str) -> DomainPack:
    """Parse and validate a pack's TOML text; ``origin`` (a file or a name) is named in every error."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"domain pack {origin}: not valid TOML ({exc})") from exc
    known = {"name", "description", "terms", "lexicon", "relations", "pace"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise _fail(origin, unknown[0], f"unknown section; a pack has {', '.join(sorted(known))}")
    name = data.get("name")
    if not isinstance(name, str) or not re.fullmatch(r"[a-z0-9][a-z0-9_-]{0,39}", name):
        raise _fail(origin, "name", "required: lower-case letters, digits, '-' or '_'")
    terms = _table(data, "terms", origin)
    for lang in terms:
        if lang not in ("en", "zh"):
            raise _fail(origin, f"terms.{lang}", "terms are given per language: [terms.en] or [terms.zh]")
    lexicon = []
    for kind, entry in sorted(_table(data, "lexicon", origin).items()):
        if not _TYPE.match(kind):
            raise _fail(origin, f"lexicon.{kind}", "an entity type is a lower-case identifier")
        if not isinstance(entry, Mapping) or set(entry) - {"en", "zh"}:
            raise _fail(origin, f"lexicon.{kind}", "must be a table with en and/or zh lists")
        en = _strings(entry.get("en", []), origin, f"lexicon.{kind}.en")
        zh = _strings(entry.get("zh", []), origin, f"lexicon.{kind}.zh")
        lexicon.append((kind, en, zh))
    types = {k for k, _, _ in lexicon}
    owner: dict[str, str] = {}
    for kind, en, zh in lexicon:
        for word in (*en, *zh):
            if owner.setdefault(word.lower(), kind) != kind:
                raise _fail(origin, f"lexicon.{kind}", f"{word!r} is also a term of lexicon.{owner[word.lower()]}")
    relations = []
    raw_relations = data.get("relations", [])
    if not isinstance(raw_relations, list):
        raise _fail(origin, "relations", "must be an array of tables ([[relations]])")
    for i, rel in enumerate(raw_relations):
        where = f"relations[{i}]"
        if not isinstance(rel, Mapping) or set(rel) - {"from", "to", "name", "weight"}:
            raise _fail(origin, where, "a relation has from, to, name and an optional weight")
        for end in ("from", "to"):
            if rel.get(end) not in types:
                raise _fail(origin, f"{where}.{end}", f"{rel.get(end)!r} is not a type of this pack's [lexicon]")
        if not isinstance(rel.get("name"), str) or not _TYPE.match(rel["name"]):
            raise _fail(origin, f"{where}.name", "required: a lower-case identifier (the edge type)")
        weight = rel.get("weight", 0.8)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0.0 < weight <= 1.0:
            raise _fail(origin, f"{where}.weight", "must be a number in (0, 1]")
        relations.append(Relation(rel["from"], rel["to"], rel["name"], float(weight)))
    pace = []
    for key, value in sorted(_table(data, "pace", origin).items()):
        # which keys exist, and their kinds, is checked against MemoryParameters by ``projections.packs``
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _fail(origin, f"pace.{key}", "must be a number")
        if value < 0:
            raise _fail(origin, f"pace.{key}", "must not be negative")
        pace.append((key, value))
    description = data.get("description", "")
    if not isinstance(description, str):
        raise _fail(origin, "description", "must be a string")
    return DomainPack(
        name,
        text,
        description,
        _terms(data, "en", origin),
        _terms(data, "zh", origin),
        tuple(lexicon),
        tuple(relations),
        tuple(pace),
    )


def load_pack(ref: str) -> DomainPack:
    """A shipped pack by name (``medical``), or a user's pack by the path of its ``.toml`` file."""
    if ref in SHIPPED:
        text = resources.files(__package__).joinpath(f"{ref}.toml").read_text(encoding="utf-8")
        return parse_pack(text, ref)
    path = Path(ref).expanduser()
    if not ref.endswith(".toml"):
        raise ConfigError(f"domain pack {ref!r} is neither a shipped pack ({', '.join(SHIPPED)}) nor a .toml file")
    try:
        return parse_pack(path.read_text(encoding="utf-8"), str(path))
    except OSError as exc:
        raise ConfigError(f"domain pack {path}: cannot be read ({exc})") from exc


@dataclass(frozen=True)
class PackSelection:
    """The packs of each tenant (``*``: every tenant not named), as ``ADAMEM_PACKS`` chose them."""

    by_tenant: tuple[tuple[str, tuple[DomainPack, ...]], ...] = ()

    @classmethod
    def parse(cls, spec: str) -> PackSelection:
        """``tenantA:medical+./my.toml,tenantB:ecommerce`` (``*:medical`` for every tenant); empty: no packs."""
        chosen: dict[str, tuple[DomainPack, ...]] = {}
        for part in (p.strip() for p in spec.split(",")):
            if not part:
                continue
            tenant, sep, refs = part.partition(":")
            if not sep or not tenant.strip() or not refs.strip():
                raise ConfigError(f"ADAMEM_PACKS entry {part!r} is not tenant:pack[+pack...]")
            if tenant.strip() in chosen:
                raise ConfigError(f"ADAMEM_PACKS names tenant {tenant.strip()!r} twice")
            chosen[tenant.strip()] = tuple(load_pack(r.strip()) for r in refs.split("+"))
        return cls(tuple(sorted(chosen.items())))

    @classmethod
    def chosen(cls, spec: str, recorded: str) -> PackSelection:
        """The packs a generation analyses with: those it ``recorded`` (text and all), else ``spec``'s files."""
        return cls.from_record(recorded) if recorded else cls.parse(spec)

    @classmethod
    def from_record(cls, recorded: str) -> PackSelection:
        """The selection a generation recorded (``to_record``), parsed from the recorded pack texts."""
        try:
            data = json.loads(recorded)
            return cls(
                tuple(
                    (tenant, tuple(parse_pack(p["source"], f"{p['name']} (recorded)") for p in packs))
                    for tenant, packs in sorted(data.items())
                )
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ConfigError(f"the store's generation records unreadable domain packs ({exc})") from exc

    def to_record(self) -> str:
        """The selection with every pack's text, as a generation records it (canonical JSON)."""
        data = {t: [{"name": p.name, "source": p.source} for p in packs] for t, packs in self.by_tenant}
        return json.dumps(data, ensure_ascii=False, sort_keys=True, separators=(",", ":"))

    @property
    def digest(self) -> str:
        """SHA-256 of the recorded selection: any change of a tenant's packs or of a pack's text changes it."""
        return hashlib.sha256(self.to_record().encode()).hexdigest() if self.by_tenant else ""

    def packs_for(self, tenant: str) -> tuple[DomainPack, ...]:
        """The packs of ``tenant`` (those of ``*`` when it is not named)."""
        table = dict(self.by_tenant)
        return table.get(tenant, table.get("*", ()))
