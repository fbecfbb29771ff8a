"""Turn input files into validated ``ChatMessage`` events, all or nothing.

Two formats: JSON Lines (one message per line) and LoCoMo JSON (each conversation becomes one
memory owner; session dates become ``occurred_at``; ``dia_id`` is kept as the message id).
Every problem is collected and reported with its line or record; if there is any, the whole
batch is rejected and nothing is published.

A JSON Lines message::

    {"user_id": "alice", "speaker": "Alice", "role": "user", "text": "I love hiking",
     "occurred_at": "2024-03-01T09:30:00Z", "conversation_id": "s1", "message_id": "m1",
     "tenant": "default", "event_id": "…optional uuid…", "metadata": {"k": "v"}}

``speaker`` may also be an object ``{"role": …, "name": …}``. ``occurred_at`` is ISO-8601
(naive means UTC), integer milliseconds since the epoch, or LoCoMo's "1:56 pm on 8 May, 2023".
The offset an ISO-8601 time states (``+08:00``, ``-05:00``, ``Z``) is kept as the message's
``utc_offset_minutes``, and answers show the time on that clock; a time without one (naive ISO,
milliseconds, LoCoMo, RFC 3339's "unknown" ``-00:00``) keeps none and is shown in UTC. With
milliseconds, an optional ``utc_offset_minutes`` (an integer) states the offset instead.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from adamem.errors import InputError, NotFound
from adamem.events import ChatMessage, Speaker, message_event_id, ms_to_iso
from adamem.settings import Settings

__all__ = [
    "MAX_UTC_OFFSET_MINUTES",
    "detect_format",
    "load_messages",
    "messages_from_records",
    "parse_jsonl",
    "parse_locomo",
    "parse_time",
    "parse_time_offset",
    "stated_time",
]

ROLES = ("user", "assistant", "other")
_LOCOMO_TIME = re.compile(r"^\s*(\d{1,2}):(\d{2})\s*([ap]m)\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})\s*$", re.I)
_MONTHS = {
    m: i
    for i, m in enumerate(
        [
            "january",
            "february",
            "march",
            "april",
            "may",
            "june",
            "july",
            "august",
            "september",
            "october",
            "november",
            "december",
        ],
        start=1,
    )
}


MAX_UTC_OFFSET_MINUTES = 23 * 60 + 59
"""The largest offset from UTC a time may state (RFC 3339's -23:59 to +23:59)."""
_UNKNOWN_OFFSET = re.compile(r"-00:?00$")


def parse_time(value: Any) -> int:
    """Milliseconds since the epoch from ISO-8601, integer ms, or LoCoMo's date format."""
    return parse_time_offset(value)[0]


def parse_time_offset(value: Any) -> tuple[int, int | None]:
    """Milliseconds since the epoch, and the UTC offset in minutes the time states (None: it states none).

    ``"2024-03-01T09:00:00+08:00"`` gives ``(1709254800000, 480)``, ``"…Z"`` an offset of 0; integer
    ms, a naive ISO time, LoCoMo's format and RFC 3339's "local offset unknown" ``-00:00`` give None.
    """
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a time")
    if isinstance(value, int):
        return value, None
    if isinstance(value, float) and value.is_integer():
        return int(value), None
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a time (use ISO-8601 or integer milliseconds)")
    m = _LOCOMO_TIME.match(value)
    if m:
        hour, minute, ampm, day, month_name, year = m.groups()
        month = _MONTHS.get(month_name.lower()) or _MONTHS.get(_full_month(month_name.lower()), 0)
        if not month:
            raise ValueError(f"unknown month {month_name!r} in {value!r}")
        h = int(hour) % 12 + (12 if ampm.lower() == "pm" else 0)
        when = dt.datetime(int(year), month, int(day), h, int(minute), tzinfo=dt.UTC)
        return int(when.timestamp() * 1000), None
    try:
        parsed = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{value!r} is not ISO-8601, integer milliseconds or 'H:MM pm on D Month, YYYY'") from None
    offset = parsed.utcoffset()
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    ms = int(parsed.timestamp() * 1000)
    if offset is None or _UNKNOWN_OFFSET.search(value.strip()):
        return ms, None
    minutes, rest = divmod(offset, dt.timedelta(minutes=1))
    if rest or abs(minutes) > MAX_UTC_OFFSET_MINUTES:
        raise ValueError(f"{value!r} has an offset that is not whole minutes between -23:59 and +23:59")
    return ms, int(minutes)


def stated_time(value: Any) -> int | str:
    """A time as integer ms, or, when it states an offset, as an RFC 3339 string on that clock.

    The form the ingest and the HTTP API both read with the offset kept (``"9:00 am on 1 March, 2024"``
    gives ms; ``"2024-03-01 09:00+08:00"`` gives ``"2024-03-01T09:00:00+08:00"``); ValueError as ``parse_time``.
    """
    ms, offset = parse_time_offset(value)
    return ms if offset is None else ms_to_iso(ms, offset)


def _full_month(prefix: str) -> str:
    return next((m for m in _MONTHS if len(prefix) >= 3 and m.startswith(prefix)), "")


def _check_text(text: Any, where: str, settings: Settings, problems: list[str]) -> str | None:
    if not isinstance(text, str):
        problems.append(f"{where}: 'text' is missing or not a string")
        return None
    if not text.strip():
        problems.append(f"{where}: 'text' is empty")
        return None
    size = len(text.encode("utf-8", errors="surrogatepass"))
    if size > settings.max_text_bytes:
        problems.append(
            f"{where}: 'text' is {size} bytes, over the limit of {settings.max_text_bytes} (ADAMEM_MAX_TEXT_BYTES)"
        )
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        problems.append(f"{where}: 'text' is not valid Unicode (lone surrogate)")
        return None
    return text


def _message_from(obj: Any, where: str, settings: Settings, problems: list[str]) -> ChatMessage | None:
    if not isinstance(obj, dict):
        problems.append(f"{where}: expected a JSON object, got {type(obj).__name__}")
        return None
    before = len(problems)
    owner = obj.get("user_id")
    if not isinstance(owner, str) or not owner.strip():
        problems.append(f"{where}: 'user_id' (the memory owner) is missing or empty")
    speaker = obj.get("speaker")
    role = obj.get("role", "user")
    if isinstance(speaker, dict):
        role = speaker.get("role", role)
        speaker = speaker.get("name")
    if not isinstance(speaker, str) or not speaker.strip():
        problems.append(f"{where}: 'speaker' is missing or empty")
    if role not in ROLES:
        problems.append(f"{where}: 'role' is {role!r}; use one of {', '.join(ROLES)}")
    text = _check_text(obj.get("text"), where, settings, problems)
    occurred_at, offset = 0, None
    if "occurred_at" not in obj:
        problems.append(f"{where}: 'occurred_at' is missing (event time: ISO-8601 or integer ms)")
    else:
        try:
            occurred_at, offset = parse_time_offset(obj["occurred_at"])
        except ValueError as exc:
            problems.append(f"{where}: 'occurred_at' {exc}")
    offset = _utc_offset(obj, offset, where, problems)
    metadata = obj.get("metadata", {})
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        problems.append(f"{where}: 'metadata' must be an object of strings")
    event_id = obj.get("event_id")
    if event_id is not None:
        try:
            event_id = str(uuid.UUID(str(event_id)))
        except ValueError:
            problems.append(f"{where}: 'event_id' {event_id!r} is not a UUID")
    if len(problems) > before:
        return None
    assert isinstance(owner, str) and isinstance(speaker, str) and text is not None
    tenant = str(obj.get("tenant") or settings.default_tenant)
    conversation = str(obj.get("conversation_id") or "default")
    message_id = obj.get("message_id")
    if message_id is None:
        digest = hashlib.sha1(f"{speaker}\x1f{occurred_at}\x1f{text}".encode()).hexdigest()[:16]
        message_id = f"m-{digest}"
    message_id = str(message_id)
    return ChatMessage(
        event_id=event_id or message_event_id(tenant, owner, conversation, message_id),
        tenant=tenant,
        user_id=owner,
        conversation_id=conversation,
        message_id=message_id,
        speaker=Speaker(role=role, name=speaker),
        text=text,
        occurred_at=occurred_at,
        metadata=dict(metadata),
        utc_offset_minutes=offset,
    )


def _utc_offset(obj: dict[str, Any], stated: int | None, where: str, problems: list[str]) -> int | None:
    """The speaker's UTC offset: the one ``occurred_at`` states, or the record's ``utc_offset_minutes``."""
    given = obj.get("utc_offset_minutes")
    if given is None:
        return stated
    if isinstance(given, bool) or not isinstance(given, int) or abs(given) > MAX_UTC_OFFSET_MINUTES:
        problems.append(
            f"{where}: 'utc_offset_minutes' {given!r} is not a whole number of minutes "
            f"between -{MAX_UTC_OFFSET_MINUTES} and {MAX_UTC_OFFSET_MINUTES}"
        )
        return None
    if stated is not None and stated != given:
        problems.append(
            f"{where}: 'utc_offset_minutes' {given} disagrees with the offset 'occurred_at' states ({stated}); "
            "give one of them"
        )
        return None
    return given


def parse_jsonl(data: bytes, settings: Settings, source: str = "<input>") -> list[ChatMessage]:
    """Messages from JSON Lines bytes; raises ``InputError`` naming every bad line."""
    problems: list[str] = []
    messages: list[ChatMessage] = []
    for number, raw in enumerate(data.splitlines(), start=1):
        where = f"{source}:{number}"
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            problems.append(f"{where}: not valid UTF-8 (byte {exc.start})")
            continue
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append(f"{where}: not JSON ({exc.msg} at column {exc.colno})")
            continue
        msg = _message_from(obj, where, settings, problems)
        if msg is not None:
            messages.append(msg)
    if problems:
        raise InputError(problems)
    return messages


def messages_from_records(
    records: Sequence[Mapping[str, Any]], settings: Settings, source: str = "<input>"
) -> list[ChatMessage]:
    """Validated messages from records already parsed (the API's bodies, the clients' and CLI's calls).

    The same checks as ``parse_jsonl``, record ``i`` named ``source:i`` (from 1); raises
    ``InputError`` naming every bad record.
    """
    problems: list[str] = []
    messages: list[ChatMessage] = []
    for number, obj in enumerate(records, start=1):
        msg = _message_from(dict(obj) if isinstance(obj, Mapping) else obj, f"{source}:{number}", settings, problems)
        if msg is not None:
            messages.append(msg)
    if problems:
        raise InputError(problems)
    return messages


def parse_locomo(doc: Any, settings: Settings, source: str = "<input>") -> list[ChatMessage]:
    """Messages from a LoCoMo-format document (a list of samples, or one sample)."""
    samples = doc if isinstance(doc, list) else [doc]
    problems: list[str] = []
    messages: list[ChatMessage] = []
    for index, sample in enumerate(samples):
        conv = sample.get("conversation") if isinstance(sample, dict) else None
        if not isinstance(conv, dict):
            problems.append(f"{source}: sample {index} has no 'conversation' object")
            continue
        owner = str(sample.get("sample_id") or f"conv-{index}")
        speaker_a = conv.get("speaker_a")
        sessions = sorted((int(k.split("_")[1]), k) for k in conv if re.fullmatch(r"session_\d+", k))
        for number, key in sessions:
            stamp_key = f"{key}_date_time"
            try:
                start = parse_time(conv.get(stamp_key))
            except ValueError as exc:
                problems.append(f"{source}: {owner} {stamp_key}: {exc}")
                continue
            for turn_index, turn in enumerate(conv[key] or []):
                where = f"{source}: {owner} {key} turn {turn_index}"
                if not isinstance(turn, dict):
                    problems.append(f"{where}: not an object")
                    continue
                meta = {k: str(turn[k]) for k in ("img_url", "blip_caption", "query") if turn.get(k)}
                obj = {
                    "user_id": owner,
                    "tenant": settings.default_tenant,
                    "conversation_id": f"{owner}/session_{number}",
                    "message_id": turn.get("dia_id") or f"D{number}:{turn_index + 1}",
                    "speaker": turn.get("speaker"),
                    "role": "user" if turn.get("speaker") == speaker_a else "other",
                    "text": turn.get("text"),
                    # Turns carry no time of their own: one second apart keeps their order in time.
                    "occurred_at": start + turn_index * 1000,
                    "metadata": meta,
                }
                msg = _message_from(obj, where, settings, problems)
                if msg is not None:
                    messages.append(msg)
    if problems:
        raise InputError(problems)
    return messages


def detect_format(data: bytes) -> str:
    """``locomo`` if the bytes are one JSON document shaped like LoCoMo, else ``jsonl``."""
    head = data.lstrip()[:1]
    if head == b"[":
        return "locomo"
    if head == b"{":
        try:
            doc = json.loads(data)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return "jsonl"
        return "locomo" if isinstance(doc, dict) and "conversation" in doc else "jsonl"
    return "jsonl"


def load_messages(data: bytes, settings: Settings, source: str = "<input>", fmt: str = "auto") -> list[ChatMessage]:
    """Validated messages from input bytes in ``jsonl``, ``locomo`` or ``auto``-detected format."""
    kind = detect_format(data) if fmt == "auto" else fmt
    if kind == "jsonl":
        return parse_jsonl(data, settings, source)
    if kind == "locomo":
        try:
            doc = json.loads(data.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise InputError([f"{source}: not valid UTF-8 (byte {exc.start})"]) from exc
        except json.JSONDecodeError as exc:
            raise InputError([f"{source}: not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"]) from exc
        return parse_locomo(doc, settings, source)
    raise InputError([f"{source}: unknown format {fmt!r}; use jsonl, locomo or auto"])


def read_input(path: str) -> tuple[bytes, str]:
    """Bytes of a file, or of standard input for ``-``; with a name for error messages."""
    import sys

    if path == "-":
        return sys.stdin.buffer.read(), "<stdin>"
    p = Path(path)
    if not p.is_file():
        raise NotFound(f"{path}: no such file (to read standard input, give -)")
    return p.read_bytes(), str(p)


def iter_batches(items: list[ChatMessage], size: int) -> Iterable[list[ChatMessage]]:
    """Consecutive batches of at most ``size`` messages."""
    for i in range(0, len(items), size):
        yield items[i : i + size]
