"""Work spread over processes on one machine: replay's folds and reanalysis, partition by partition.

A job runs in a process of its own: this interpreter running this module (``-m``) with the name of
an async function (``module:function``), so a process imports only what its work needs, never the
caller's main script. Parent and process talk through the process's stdin and stdout in frames
(a 4-byte length, then a pickle), so one killed in the middle of a frame takes nothing of the
others' with it:

* the parent sends the job first;
* the process sends *notes* (``("note", …)``, e.g. a committed batch), *calls* (``("call", …)``,
  answered by the parent with one frame: the log appends of a process that may not write the log
  itself), then ``("done", result)`` or ``("failed", message)``.

A process that dies without ``done`` (killed, out of memory) is started again with the same job, up
to ``RESTARTS`` times: jobs are written to go on from where their durable state says they were
(store checkpoints, resume points on the log). A process that fails with an error is not: the
error would happen again, and is raised.

Starting a process costs about a second before it can work (importing LanceDB), so a caller can
start processes before it knows their jobs (``Started``): each imports its entry's module and runs
the module's ``prepare()``, if it has one, while the caller gets ready, then waits for its job.
``run_jobs`` hands every process its job before it returns control to a caller that works in the
meantime (``handed``), so a job never waits for the caller's next pause.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import pickle
import struct
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, BinaryIO

from adamem.errors import AdaMemError

__all__ = ["RESTARTS", "Channel", "JobFailed", "Started", "reopenable", "run_jobs"]

RESTARTS = 3
"""Times a process that died (killed, out of memory) is started again before the work gives up."""

_HEADER = struct.Struct(">I")


class JobFailed(AdaMemError):
    """A job's process failed with an error, or died more than ``RESTARTS`` times."""


def reopenable(log_url: str, store: object) -> bool:
    """Whether a process can open this log and store again: by location, not held in this process.

    ``store`` is a location (a URL or ``StoreLocation``) or a catalog object; ``memory://`` is neither.
    """
    from adamem.locations import StoreLocation

    return isinstance(store, str | StoreLocation) and not log_url.startswith("memory:")


def _frame(message: Any) -> bytes:
    data = pickle.dumps(message)
    return _HEADER.pack(len(data)) + data


async def _read_frame(stream: asyncio.StreamReader) -> Any | None:
    """The next frame, or None at the end of the stream (or in a frame cut short)."""
    try:
        head = await stream.readexactly(_HEADER.size)
        return pickle.loads(await stream.readexactly(_HEADER.unpack(head)[0]))  # written by our own process
    except asyncio.IncompleteReadError:
        return None


async def _spawn(entry: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        __name__,
        entry,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        limit=2**26,
    )


class Started:
    """Processes of ``entry`` started ahead of their jobs; each preparing (imports) until it gets one.

    ``run_jobs(..., started=)`` gives them their jobs; ``close`` ends the ones no job took (they read
    the end of their input and exit).
    """

    def __init__(self, entry: str) -> None:
        self.entry = entry
        self._idle: list[asyncio.subprocess.Process] = []

    async def start(self, count: int, pids: set[int] | None = None) -> None:
        """Start ``count`` more processes (their ids into ``pids``)."""
        for _ in range(count):
            proc = await _spawn(self.entry)
            self._idle.append(proc)
            if pids is not None:
                pids.add(proc.pid)

    def take(self) -> asyncio.subprocess.Process | None:
        """A started process that has no job yet, or None."""
        return self._idle.pop(0) if self._idle else None

    async def close(self, pids: set[int] | None = None) -> None:
        """End the processes no job took."""
        idle, self._idle = self._idle, []
        for proc in idle:
            if proc.stdin is not None:
                proc.stdin.close()
        for proc in idle:
            try:
                await asyncio.wait_for(proc.wait(), 10)
            except TimeoutError:
                proc.kill()
                await proc.wait()
            if pids is not None:
                pids.discard(proc.pid)


async def run_jobs(
    entry: str,
    jobs: Sequence[Any],
    *,
    on_note: Callable[[int, Any], None] | None = None,
    on_call: Callable[[int, Any], Awaitable[Any]] | None = None,
    pids: set[int] | None = None,
    started: Started | None = None,
    handed: asyncio.Event | None = None,
) -> tuple[list[Any], int]:
    """Run ``entry`` (``module:function``) once per job, each in a process, side by side.

    ``on_note(job, note)`` hears the processes' notes; ``on_call(job, call)`` answers their calls.
    ``pids`` holds the running processes' ids. ``started``: processes of the same entry started
    earlier, taken first. ``handed`` is set once every job's first process has its job. Returns
    each job's result, in order, and how many processes were started again after dying.
    """
    running = pids if pids is not None else set()
    if started is not None and started.entry != entry:
        raise ValueError(f"processes started for {started.entry} cannot run {entry}")
    waiting = [len(jobs)]

    def one_handed() -> None:
        waiting[0] -= 1
        if not waiting[0] and handed is not None:
            handed.set()

    async def one(index: int) -> tuple[Any, int]:
        job = _frame(jobs[index])
        for attempt in range(RESTARTS + 1):
            proc = (started.take() if started is not None and not attempt else None) or await _spawn(entry)
            running.add(proc.pid)
            outcome: tuple[str, Any] | None = None
            try:
                assert proc.stdin is not None and proc.stdout is not None
                with contextlib.suppress(ConnectionError):  # it died before reading its job: started again below
                    proc.stdin.write(job)
                    await proc.stdin.drain()
                if not attempt:
                    one_handed()
                while (message := await _read_frame(proc.stdout)) is not None:
                    kind, body = message
                    if kind == "note" and on_note is not None:
                        on_note(index, body)
                    elif kind == "call":
                        if on_call is None:
                            raise JobFailed(f"{entry} made a call, and nothing answers calls")
                        try:
                            answer: tuple[str, Any] = ("ok", await on_call(index, body))
                        except AdaMemError as exc:
                            answer = ("error", f"{type(exc).__name__}: {exc}")
                        with contextlib.suppress(ConnectionError):
                            proc.stdin.write(_frame(answer))
                            await proc.stdin.drain()
                    elif kind in ("done", "failed"):
                        outcome = (kind, body)
                await proc.wait()
            finally:
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()
                running.discard(proc.pid)
            if outcome is not None and outcome[0] == "done" and proc.returncode == 0:
                return outcome[1], attempt
            if outcome is not None and outcome[0] == "failed":
                raise JobFailed(str(outcome[1]))
            # it died (killed, out of memory): again, from where its durable state says it was
        raise JobFailed(f"its process died {RESTARTS + 1} times")

    if not jobs and handed is not None:
        handed.set()
    tasks = [asyncio.ensure_future(one(i)) for i in range(len(jobs))]
    try:
        results = await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return [r for r, _ in results], sum(n for _, n in results)


class Channel:
    """A process's side: notes and calls to the parent (on stdout), answers from it (on stdin)."""

    def __init__(self, reader: asyncio.StreamReader, out: BinaryIO) -> None:
        self._reader, self._out = reader, out

    def send(self, kind: str, body: Any) -> None:
        self._out.write(_frame((kind, body)))
        self._out.flush()

    def note(self, body: Any) -> None:
        """Tell the parent something (it does not answer)."""
        self.send("note", body)

    async def call(self, body: Any) -> Any:
        """Ask the parent; its answer, or its error raised here."""
        self.send("call", body)
        answer = await _read_frame(self._reader)
        if answer is None:
            raise AdaMemError("the parent process went away")
        kind, value = answer
        if kind == "error":
            raise AdaMemError(str(value))
        return value


async def _child(entry: str) -> int:
    module_name, _, name = entry.partition(":")
    module = importlib.import_module(module_name)
    function = getattr(module, name)
    if (prepare := getattr(module, "prepare", None)) is not None:
        prepare()  # while the parent gets its job ready
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=2**26)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    out = sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print must not land in the frames
    channel = Channel(reader, out)
    job = await _read_frame(reader)
    if job is None:
        return 1
    try:
        result = await function(job, channel)
    except Exception as exc:  # reported, not retried: an error would happen again
        channel.send("failed", f"{type(exc).__name__}: {exc}")
        return 1
    channel.send("done", result)
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(_child(sys.argv[1])))
