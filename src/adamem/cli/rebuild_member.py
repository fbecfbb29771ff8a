"""``adamem worker --rebuild VIEW``: a member of the group that shares a rebuild begun by ``adamem replay --group``."""

from __future__ import annotations

import sys

from adamem.errors import ConfigError
from adamem.settings import Settings

__all__ = ["run_rebuild_member"]


async def run_rebuild_member(settings: Settings, view: str, *, quiet: bool = False) -> int:
    """Fold the partitions the group assigns this member until the rebuild of ``view`` is done (``replay_group``)."""
    from adamem.streams.replay_group import run_member

    if settings.log.kind != "kafka":
        raise ConfigError(f"a rebuild member needs the Kafka log (kafka://host:port), not {settings.log_url!r}")

    def heard(partition: int, events: int) -> None:
        if not quiet:
            print(f"p{partition}: committed {events} event(s)", file=sys.stderr, flush=True)

    report = await run_member(settings, settings.log.bootstrap, settings.store, view, on_batch=heard)
    if report.already_done:
        print(f"view {view}: every partition has reached its target already; nothing to fold")
    else:
        held = ", ".join(f"p{p}" for p in report.partitions) or "none"
        print(
            f"view {view}: done; this member folded {report.events} event(s) in {report.batches} commit(s) "
            f"(partitions held: {held})"
        )
    return 0
