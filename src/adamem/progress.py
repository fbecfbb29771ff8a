"""Progress of long commands, on stderr only: a bar on a terminal, a one-line status otherwise.

On a terminal, a tqdm bar with the count, the rate and the ETA (when the total is known: the
commands take it from the log's end offsets). When stderr is not a terminal (a log file, CI, a
pipe), one line every ``every`` seconds (``ADAMEM_PROGRESS_SECONDS``), and a last line when the
work took long enough to have printed one. ``quiet`` prints nothing. Nothing is written to stdout,
which scripts parse.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, TextIO

__all__ = ["Progress", "status_line"]


def _duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def status_line(desc: str, done: int, total: int | None, unit: str, elapsed: float) -> str:
    """``desc: done/total unit (pct), rate unit/s, ETA …`` (without a total: the count and the rate)."""
    rate = done / elapsed if elapsed > 0 else 0.0
    if total:
        pct = 100.0 * done / total
        left = (total - done) / rate if rate > 0 else None
        eta = f", ETA {_duration(left)}" if left is not None and done < total else ""
        return f"{desc}: {done}/{total} {unit} ({pct:.0f}%), {rate:.1f} {unit}/s{eta}, {_duration(elapsed)} elapsed"
    return f"{desc}: {done} {unit}, {rate:.1f} {unit}/s, {_duration(elapsed)} elapsed"


class Progress:
    """How far a long command is: ``update(n)`` as work is done, ``close()`` (or ``with``) at the end."""

    def __init__(
        self,
        desc: str,
        total: int | None = None,
        *,
        unit: str = "ev",
        quiet: bool = False,
        every: float = 5.0,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.desc, self.total, self.unit, self.quiet, self.every = desc, total, unit, quiet, every
        self.stream = stream if stream is not None else sys.stderr
        self.clock = clock
        self.done = 0
        self.started = self.last = clock()
        self.lines = 0
        self._bar: Any = None
        if not quiet and self.stream.isatty():
            from tqdm import tqdm

            self._bar = tqdm(total=total, unit=unit, desc=desc, file=self.stream, dynamic_ncols=True)

    def update(self, n: int = 1) -> None:
        """Count ``n`` more done; on a terminal the bar moves, otherwise a line when ``every`` seconds passed."""
        self.done += n
        if self.total is not None and self.done > self.total:
            self.set_total(None)  # more arrived than there was (``project --follow``): a count and a rate from here
        if self.quiet:
            return
        if self._bar is not None:
            self._bar.update(n)
            return
        now = self.clock()
        if now - self.last >= self.every:
            self.last = now
            self._write(now)

    def set_total(self, total: int | None) -> None:
        """The total became known (or grew, e.g. while following the log)."""
        self.total = total
        if self._bar is not None:
            self._bar.total = total
            self._bar.refresh()

    def close(self) -> None:
        """Finish: close the bar, or print the last line (when a line was printed before)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        elif not self.quiet and self.lines:
            self._write(self.clock())

    def _write(self, now: float) -> None:
        self.stream.write(status_line(self.desc, self.done, self.total, self.unit, now - self.started) + "\n")
        self.stream.flush()
        self.lines += 1

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
