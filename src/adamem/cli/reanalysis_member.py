"""``adamem worker --reanalyze VIEW``: a member of the group sharing a reanalysis (``adamem reanalyze --group``)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys

from adamem.errors import ConfigError
from adamem.settings import Settings

__all__ = ["run_reanalysis_member"]


def run_reanalysis_member(
    settings: Settings, view: str, *, loglevel: str = "info", verbose: bool = False, logfile: str | None = None
) -> int:
    """Analyse the partitions the group assigns this member with the view's generation, until the job is done.

    The worker's ``analyze`` agent alone (``streams.reanalyze_group``); Faust's output goes to
    ``logfile`` (default ``worker-<pid>.log`` here), or to the terminal when ``verbose``.
    """
    if settings.log.kind != "kafka":
        raise ConfigError(f"a reanalysis member needs the Kafka log (kafka://host:port), not {settings.log_url!r}")
    import faust

    from adamem.analysis.factory import build_agent
    from adamem.errors import AdaMemError
    from adamem.projections.projector import Projector
    from adamem.projections.store.factory import open_views
    from adamem.streams.generations import settings_for
    from adamem.streams.kafka_log import KafkaLog
    from adamem.streams.reanalyze_group import POLL_S, is_done, open_reanalysis
    from adamem.streams.worker import create_app

    job, store = open_reanalysis(open_views(settings.store), view)
    ours = settings_for(settings, store.generation())
    bootstrap = settings.log.bootstrap
    reader = KafkaLog(bootstrap, ours)  # reads only: a consumer for each look
    if asyncio.run(is_done(reader, ours, job)):
        print(f"view {view}: every partition is analysed already; nothing to do")
        return 0

    def no_projection() -> Projector:
        raise AdaMemError("a reanalysis member analyses only; the coordinator folds the view")

    app = create_app(
        ours, bootstrap, lambda: build_agent(ours), no_projection, batch=settings.worker_batch, analyze_only=True
    )
    terminal = os.fdopen(os.dup(sys.stderr.fileno()), "w", buffering=1, encoding="utf-8", errors="replace")
    finished: list[bool] = []

    @app.timer(interval=POLL_S)  # type: ignore[untyped-decorator]
    async def look() -> None:
        if not finished and await is_done(reader, ours, job):
            finished.append(True)
            os.kill(os.getpid(), signal.SIGTERM)  # a graceful stop: Faust commits and leaves the group

    logfile = None if verbose else (logfile or f"worker-{os.getpid()}.log")
    print(
        f"reanalysis member: view {view}, generation {ours.generation} into {ours.topic('analyses')}"
        + (f"; Faust's log: {os.path.abspath(logfile)}" if logfile else ""),
        file=terminal,
        flush=True,
    )
    try:
        faust.Worker(app, loglevel=loglevel, quiet=not verbose, logfile=logfile).execute_from_commandline()
    except SystemExit:
        if not finished:
            raise
    counts = app.adamem_counts  # type: ignore[attr-defined]
    print(f"view {view}: done; this member analysed {counts.get('analyzed', 0)} input record(s)")
    return 0
