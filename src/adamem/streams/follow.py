"""The write path inside a long-running process: the in-process pipeline in a background thread.

``adamem serve`` on the embedded log ingests, analyses and projects in one process: the service
appends messages to the log, and a ``Follower`` runs the very pipeline ``adamem project --follow``
runs (``run_pipeline``, one pass at a time) over the same log object, in a thread with an event
loop of its own, so that analysing (the embedder) and folding (LanceDB commits) never hold up the
service's requests. A pass starts ``poll_s`` after the last one, or at once when a publish wakes it
(``wake``), so a message does not wait for the next poll.

The embedded log has one writer process: the follower takes the log's writer lock when it starts,
so a second writer is refused at once, naming the folder, instead of at its first append. A pass
that fails (a log or store error) is logged and kept (``status().last_error``) until a pass
succeeds; the next pass starts again from the log and the store's checkpoint, so nothing is lost
or applied twice. Stopping ends the pass under way; one still running after ``stop``'s timeout is
left to die with the process, which the log and the store survive as they survive a crash
(``tests/streams/test_crash_safety.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from adamem.analysis.agent import MemoryAgent
from adamem.errors import AdaMemError
from adamem.projections.projector import Projector
from adamem.projections.store.factory import open_store
from adamem.settings import Settings
from adamem.streams.generations import resolve, resolve_on_log
from adamem.streams.log import EventLog
from adamem.streams.pipeline import run_pipeline

__all__ = ["Follower", "FollowerStatus"]

log = logging.getLogger("adamem.follow")


@dataclass(frozen=True)
class FollowerStatus:
    """Whether the follower runs, and why its last pass failed (None: it succeeded, or none ran yet)."""

    running: bool
    last_error: str | None


class Follower:
    """Analyse and project what is appended to ``log`` into ``settings.store_url``, in a background thread."""

    def __init__(
        self,
        log_: EventLog,
        settings: Settings,
        agent_factory: Callable[[Settings], MemoryAgent],
        *,
        poll_s: float = 1.0,
        retry_s: float = 2.0,
    ) -> None:
        """``log_`` is shared with the caller (who appends to it); ``agent_factory`` builds the Memory Agent."""
        self.log = log_
        self.settings = settings
        self._agent_factory = agent_factory
        self._poll_s = poll_s
        self._retry_s = retry_s
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._started_error: BaseException | None = None
        self._error: str | None = None

    def start(self) -> None:
        """Take the log's writer lock, open the store and start following; errors of the start are raised here."""
        self.log.hold_writer_lock()  # the embedded log: its one writer from now on, or refused now naming the folder
        self._thread = threading.Thread(target=self._run, name="adamem-follow", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._started_error is not None:
            self._thread.join()
            raise self._started_error

    def wake(self) -> None:
        """Start the next pass now (called by a publisher after it appended); safe from any thread."""
        loop, event = self._loop, self._wake
        if loop is not None and event is not None and not loop.is_closed():
            loop.call_soon_threadsafe(event.set)

    def stop(self, timeout_s: float = 30.0) -> bool:
        """End the pass under way and the thread; False when it was still running after ``timeout_s``."""
        loop, event, thread = self._loop, self._stop, self._thread
        if thread is None:
            return True
        if loop is not None and event is not None and not loop.is_closed():
            loop.call_soon_threadsafe(event.set)
            self.wake()
        thread.join(timeout_s)
        if thread.is_alive():
            log.warning(
                "the write path was still busy %.0f s after the stop; it resumes from the log and the store's "
                "checkpoint at the next start",
                timeout_s,
            )
            return False
        return True

    def status(self) -> FollowerStatus:
        """Running or not, and the failure of the last pass."""
        return FollowerStatus(self._thread is not None and self._thread.is_alive(), self._error)

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # a failure before the ready signal is the caller's to raise
            if not self._ready.is_set():
                self._started_error = exc
                self._ready.set()
            else:
                log.exception("the write path stopped")
                self._error = f"{type(exc).__name__}: {exc}"

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._wake, self._stop = asyncio.Event(), asyncio.Event()
        store = open_store(self.settings.store)
        try:
            await resolve_on_log(self.settings, store, self.log)
            projector = Projector(store)  # one for the whole run: it keeps the owners' states between passes
            agent: MemoryAgent | None = None
            generation = ""
            self._ready.set()
            while not self._stop.is_set():
                self._wake.clear()  # before the pass: a publish during it sets it again
                try:
                    settings = resolve(self.settings, store)  # each pass: the active view may have switched
                    if agent is None or settings.generation != generation:
                        agent, generation = self._agent_factory(settings), settings.generation
                    await run_pipeline(self.log, projector, agent, settings)
                    self._error, nap = None, self._poll_s
                except AdaMemError as exc:
                    self._error, nap = f"{type(exc).__name__}: {exc}", self._retry_s
                    log.warning("the write path failed, retrying in %.0f s: %s", nap, exc)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), nap)
        finally:
            store.close()
