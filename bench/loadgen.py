"""HTTP load generation for the latency benchmark: ``wrk`` (Debian package) with a generated Lua script,
or an asyncio ``httpx`` generator when ``wrk`` is not installed. Loopback only, bounded request count.

Both send each request of a list exactly once (the list is split between the clients), so a "cold"
run asks only questions the service has not seen, and report latency percentiles and throughput.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.metrics import summary_ms

__all__ = ["Request", "run_load", "wrk_plan", "wrk_script"]

Request = tuple[str, str]  # (path, JSON body) of a POST


def _lua_str(s: str) -> str:
    level = "=" * 4
    while f"]{level}]" in s:
        level += "="
    return f"[{level}[{s}]{level}]"


def wrk_script(slices: Sequence[Sequence[Request]], limits: Sequence[int]) -> str:
    """A wrk Lua script: thread i sends its own slice in order and stops after ``limits[i]`` responses."""
    tables = ",\n".join(
        "{" + ",".join("{" + _lua_str(p) + "," + _lua_str(b) + "}" for p, b in sl) + "}" for sl in slices
    )
    return f"""
local slices = {{
{tables}
}}
local limits = {{{",".join(str(x) for x in limits)}}}
local counter = 0
function setup(thread)
  counter = counter + 1
  thread:set("tid", counter)
end
function init(args)
  mine = slices[tid]
  limit = limits[tid]
  nxt = 0
  got = 0
  wrk.headers["Content-Type"] = "application/json"
end
function request()
  nxt = nxt + 1
  local r = mine[((nxt - 1) % #mine) + 1]
  return wrk.format("POST", r[1], nil, r[2])
end
function response(status, headers, body)
  got = got + 1
  if status ~= 200 then bad = (bad or 0) + 1 end
  if got == limit then
    io.stderr:write("WRK_THREAD_DONE\\n")  -- wrk runs for its duration: the parent interrupts it when all are done
    wrk.thread:stop()
  end
end
function done(summary, latency, requests)
  local out = string.format('{{"requests": %d, "duration_us": %d, "errors_status": %d, "errors_connect": %d, '
    .. '"errors_read": %d, "errors_timeout": %d, "mean_us": %.1f, "max_us": %d, "p50_us": %d, "p95_us": %d, '
    .. '"p99_us": %d}}',
    summary.requests, summary.duration, summary.errors.status, summary.errors.connect, summary.errors.read,
    summary.errors.timeout, latency.mean, latency.max, latency:percentile(50), latency:percentile(95),
    latency:percentile(99))
  io.write("WRK_JSON " .. out .. "\\n")
end
"""


def _split(requests: Sequence[Request], parts: int) -> list[list[Request]]:
    return [list(requests[i::parts]) for i in range(parts)]


def wrk_plan(requests: Sequence[Request], connections: int, threads: int) -> tuple[int, list[list[Request]], list[int]]:
    """wrk threads (never more than connections: wrk refuses that), each one's requests, and its response limit.

    Each thread keeps ``connections / threads`` requests in flight, so it stops after as many
    responses as its slice has requests minus the ones it may still have in flight.
    """
    threads = max(1, min(threads, connections))
    per_thread = max(1, connections // threads)
    slices = _split(requests, threads)
    return threads, slices, [max(1, len(s) - (per_thread - 1)) for s in slices]


def run_wrk(
    base_url: str,
    requests: Sequence[Request],
    *,
    connections: int = 8,
    threads: int = 2,
    timeout_s: int = 60,
    deadline_s: float = 1800,
) -> dict[str, Any]:
    """Send every request once with ``wrk`` (``connections`` clients); latency percentiles in ms and QPS.

    Each thread keeps ``connections / threads`` requests in flight; it stops after as many responses
    as its slice has requests minus the ones still in flight, so no request is ever sent twice.
    """
    threads, slices, limits = wrk_plan(requests, connections, threads)
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as fo:
        fo.write(wrk_script(slices, limits))
        script = fo.name
    try:
        proc = subprocess.Popen(
            [
                "wrk",
                "-t",
                str(threads),
                "-c",
                str(connections),
                "-d",
                "3600s",
                "--timeout",
                f"{timeout_s}s",
                "-s",
                script,
                base_url,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stderr is not None

        # A request that times out never reaches response(): interrupt wrk at the deadline in any case.
        def interrupt() -> None:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)

        watchdog = threading.Timer(deadline_s, interrupt)
        watchdog.start()
        finished = 0
        errors: list[str] = []
        for err_line in proc.stderr:  # each thread says when it has all its responses
            if err_line.startswith("WRK_THREAD_DONE"):
                finished += 1
                if finished == threads:
                    proc.send_signal(signal.SIGINT)  # wrk then prints its summary for the time actually run
                    break
            else:
                errors.append(err_line)
        stdout, stderr = proc.communicate(timeout=120)
        watchdog.cancel()
    finally:
        Path(script).unlink(missing_ok=True)
    line = next((x for x in stdout.splitlines() if x.startswith("WRK_JSON ")), None)
    if line is None:
        raise RuntimeError(f"wrk failed ({proc.returncode}): {stdout[-2000:]} {''.join(errors)[-2000:]} {stderr}")
    raw = json.loads(line.removeprefix("WRK_JSON "))
    seconds = raw["duration_us"] / 1e6
    return {
        "tool": "wrk",
        "connections": connections,
        "threads": threads,
        "n": raw["requests"],
        "errors": raw["errors_status"] + raw["errors_connect"] + raw["errors_read"] + raw["errors_timeout"],
        "mean": round(raw["mean_us"] / 1000, 3),
        "p50": round(raw["p50_us"] / 1000, 3),
        "p95": round(raw["p95_us"] / 1000, 3),
        "p99": round(raw["p99_us"] / 1000, 3),
        "max": round(raw["max_us"] / 1000, 3),
        "seconds": round(seconds, 2),
        "qps": round(raw["requests"] / seconds, 2) if seconds else None,
    }


async def _httpx_load(base_url: str, requests: Sequence[Request], connections: int) -> dict[str, Any]:
    import httpx

    queue: asyncio.Queue[Request] = asyncio.Queue()
    for r in requests:
        queue.put_nowait(r)
    latencies: list[float] = []
    errors = 0

    async def client(http: httpx.AsyncClient) -> None:
        nonlocal errors
        while True:
            try:
                path, body = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            t = time.perf_counter()
            resp = await http.post(path, content=body, headers={"content-type": "application/json"})
            latencies.append((time.perf_counter() - t) * 1000)
            if resp.status_code != 200:
                errors += 1

    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    async with httpx.AsyncClient(base_url=base_url, limits=limits, timeout=120) as http:
        t0 = time.perf_counter()
        await asyncio.gather(*(client(http) for _ in range(connections)))
        seconds = time.perf_counter() - t0
    return {
        "tool": "httpx",
        "connections": connections,
        "errors": errors,
        **summary_ms(latencies),
        "seconds": round(seconds, 2),
        "qps": round(len(latencies) / seconds, 2) if seconds else None,
    }


def run_load(base_url: str, requests: Sequence[Request], *, connections: int = 8) -> dict[str, Any]:
    """Every request once, ``connections`` at a time: wrk if installed, else httpx."""
    if shutil.which("wrk"):
        return run_wrk(base_url, requests, connections=connections)
    return asyncio.run(_httpx_load(base_url, requests, connections))
