"""``adamem add``: one message in, and back only once the memory reflects it (the mem0-style entry point)."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from adamem.errors import ConfigError, LogError
from adamem.settings import Settings

__all__ = ["run_add"]


def _record(
    user: str,
    text: str,
    *,
    tenant: str,
    speaker: str | None,
    role: str,
    at: str | None,
    conversation: str | None,
    message_id: str | None = None,
) -> dict[str, Any]:
    from adamem.ingest import stated_time

    when: int | str
    if at is None:
        when = int(time.time() * 1000)  # the command stamps the message; the folds never read a clock
    else:
        try:  # a time with an offset stays on that clock: the speaker's, which answers show
            when = int(at) if at.lstrip("-").isdigit() else stated_time(at)
        except ValueError as exc:
            raise ConfigError(f"--at {at!r}: {exc}; give an RFC 3339 time or milliseconds since the epoch") from exc
    record: dict[str, Any] = {
        "user_id": user,
        "speaker": speaker or user,
        "role": role,
        "text": text,
        "occurred_at": when,
        "tenant": tenant,
    }
    if conversation is not None:
        record["conversation_id"] = conversation
    if message_id is not None:
        record["message_id"] = message_id
    return record


async def _in_process(settings: Settings, record: dict[str, Any], wait_s: float) -> dict[str, Any]:
    """Publish to the log and return once memory reflects it (``adamem.core``'s write path)."""
    from adamem.core import publish_and_wait
    from adamem.ingest import messages_from_records
    from adamem.streams.factory import open_log

    messages = messages_from_records([record], settings, "adamem add")
    log = open_log(settings.log, settings)
    await log.start()
    started = time.monotonic()
    try:
        report = await publish_and_wait(log, None, settings, messages, timeout_s=wait_s)
    except LogError as exc:
        if "another process is writing" in str(exc):
            raise LogError(
                f"{exc} (an `adamem serve` on this log is its writer: add through it with "
                f"--url http://{settings.host}:{settings.port})"
            ) from exc
        raise
    finally:
        await log.stop()
    return {
        "event_id": messages[0].event_id,
        "positions": [{"partition": p, "offset": o} for p, o in sorted(report.last.items())],
        "topic": report.topic,
        "waited_ms": round((time.monotonic() - started) * 1000, 1),
    }


async def run_add(
    settings: Settings,
    user: str,
    text: str,
    *,
    tenant: str,
    speaker: str | None,
    role: str,
    at: str | None,
    conversation: str | None,
    url: str | None,
    wait_s: float,
    as_json: bool,
    message_id: str | None = None,
) -> int:
    """Add one message of ``tenant``'s ``user`` and wait until the memory reflects it; print where it went."""
    if not 0 < wait_s <= 30:
        raise ConfigError(f"--wait {wait_s:g}: give a number of seconds above 0, at most 30")
    record = _record(
        user, text, tenant=tenant, speaker=speaker, role=role, at=at, conversation=conversation, message_id=message_id
    )
    if url is None:
        from adamem.cli.remote import serving_url

        url = serving_url(settings)  # the folder's one writer is a running `adamem serve`: through it
        if url is not None:
            print(f"adamem add: an adamem serve writes {settings.log_url}; adding through it at {url}", file=sys.stderr)
    if url is not None:
        from adamem.api.client import AsyncMemoryClient
        from adamem.cli.remote import service_key

        async with AsyncMemoryClient(url, service_key(settings, tenant), tenant=tenant, timeout=wait_s + 30) as client:
            out = await client.add(
                user,
                text,
                speaker=record["speaker"],
                role=role,
                occurred_at=record["occurred_at"],
                conversation_id=conversation,
                message_id=message_id,
                wait_ms=int(wait_s * 1000),
            )
    else:
        out = await _in_process(settings, record, wait_s)
    if as_json:
        print(json.dumps(out, ensure_ascii=False, indent=1))
        return 0
    where = ", ".join(f"p{p['partition']}:{p['offset']}" for p in out["positions"])
    print(
        f"added {out['event_id']} for {user} of tenant {tenant} at {out['topic']} {where}; "
        f"in memory after {out['waited_ms']:.0f} ms",
        file=sys.stdout,
    )
    return 0
