"""Screenshots of the memory inspector's panels (docs/ui/*.png), and what its browser tests and timings share.

``python -m bench.ui_screenshots [--out docs/ui]`` starts ``adamem serve`` (the embedded default) in
a temporary folder, posts the bundled sample conversation and three messages of an owner who moves
house (so that a record is superseded), reanalyses it without an extractor into view ``g2`` (to
compare with the active one), and saves one 1280x800 PNG per page in headless Chromium.
Chromium and its driver come from the system (Debian: ``apt-get install chromium chromium-driver``);
Selenium talks to them, and nothing is downloaded.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import httpx
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

from bench.common import REPO, free_port, wait_healthy

__all__ = ["OMAR", "Inspector", "headless_chrome", "load_sample", "main", "start_inspector", "with_generation"]

OMAR = [
    {"user_id": "omar", "speaker": "Omar", "text": text, "occurred_at": at}
    for text, at in (
        ("I live in Lisbon and work as a chef.", "2024-01-01T10:00:00Z"),
        ("I moved to Porto last month, I live in Porto now.", "2024-02-01T10:00:00Z"),
        ("The weather is nice today.", "2024-03-01T10:00:00Z"),
    )
]
"""An owner whose "lives in Lisbon" record is superseded by "lives in Porto" (three sessions, so both are folded)."""

WIDTH, HEIGHT = 1280, 800
ADAMEM = str(Path(sys.executable).with_name("adamem"))


@dataclass
class Inspector:
    """A running ``adamem serve`` and where it writes its output."""

    url: str
    process: subprocess.Popen[bytes]
    output: Path


def _binary(*names: str) -> str | None:
    return next((found for name in names if (found := shutil.which(name)) is not None), None)


def headless_chrome(width: int = WIDTH, height: int = HEIGHT) -> webdriver.Chrome:
    """Headless Chromium with a ``width`` x ``height`` viewport, through the system's chromedriver.

    ``RuntimeError`` naming the packages to install when the browser or its driver is missing.
    """
    browser = _binary("chromium", "chromium-browser", "google-chrome")
    driver = _binary("chromedriver")
    if browser is None or driver is None:
        raise RuntimeError(
            "headless Chromium and chromedriver are needed (Debian: apt-get install -y chromium chromium-driver; "
            "deploy/test.sh installs them)"
        )
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--lang=en-US"):
        options.add_argument(arg)
    options.add_argument(f"--window-size={width},{height}")
    chrome = webdriver.Chrome(options=options, service=Service(executable_path=driver))
    metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}
    chrome.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
    return chrome


def start_inspector(folder: Path, env: Mapping[str, str | None] | None = None, flags: Sequence[str] = ()) -> Inspector:
    """``adamem serve`` on the embedded log and store under ``folder`` (open: no keys), once it answers.

    ``env``: settings of the service on top of those (None removes one: ``{"ADAMEM_LOG": None}`` serves a
    store alone, read-only). ``flags``: more options of ``adamem serve`` (``--read-only``).
    """
    port = free_port()
    clean = _environment(folder, env)
    clean.update(ADAMEM_HOST="127.0.0.1", ADAMEM_PORT=str(port))
    output = folder / "serve.out"
    with output.open("wb") as out:
        process = subprocess.Popen(
            [ADAMEM, "serve", "--no-access-log", *flags],
            cwd=folder,
            env=clean,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, process, 180, output)
    except BaseException:
        stop(process)
        raise
    return Inspector(url, process, output)


def _environment(folder: Path, env: Mapping[str, str | None] | None = None) -> dict[str, str]:
    """The process environment of an ``adamem`` command on the log and store under ``folder``."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ADAMEM_")}
    clean.update(ADAMEM_LOG=str(folder / "log"), ADAMEM_STORE=str(folder / "store"), ADAMEM_FSYNC="false")
    for name, value in (env or {}).items():
        if value is None:
            clean.pop(name, None)
        else:
            clean[name] = value
    return clean


def with_generation(inspector: Inspector, folder: Path) -> Inspector:
    """Stop the service, reanalyse its log without an extractor into view ``g2`` (not switched to), serve again.

    The embedded log takes one writing process at a time, so the reanalysis runs while the service is
    stopped; the active view stays ``main`` and ``g2`` is there to compare with it.
    """
    stop(inspector.process)
    done = subprocess.run(
        [ADAMEM, "reanalyze", "--extractor", "none", "--quiet"],
        cwd=folder,
        env=_environment(folder),
        capture_output=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"adamem reanalyze failed: {done.stderr.decode(errors='replace')[-2000:]}")
    return start_inspector(folder)


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after 30 s."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(30)


def load_sample(url: str) -> None:
    """Post the bundled sample conversation and ``OMAR``, and wait until memory holds them."""
    sample = resources.files("adamem.samples").joinpath("sample_conversation.jsonl").read_text(encoding="utf-8")
    messages: list[dict[str, Any]] = [json.loads(line) for line in sample.splitlines() if line.strip()]
    with httpx.Client(base_url=url, timeout=120) as client:
        for batch in (messages, OMAR):
            posted = client.post("/v1/messages", json={"messages": batch})
            posted.raise_for_status()
            for _ in range(20):  # each wait is at most 5 s: ask again while the projections catch up
                seen = client.post("/v1/visible", json={"positions": posted.json()["positions"], "wait_ms": 5000})
                if seen.status_code == 200:
                    break
            seen.raise_for_status()


PAGES = [
    ("owners", "/ui"),
    ("timeline", "/ui/owners/alice/timeline"),
    ("timeline_as_of", "/ui/owners/omar/timeline?as_of=2024-01-15T00:00:00Z"),
    ("timeline_superseded", "/ui/owners/omar/timeline#records"),
    ("persona", "/ui/owners/alice/persona"),
    ("persona_as_of", "/ui/owners/alice/persona?as_of=2024-03-20T00:00:00Z"),
    ("graph", "/ui/owners/alice/graph"),
    ("query", "/ui/owners/alice/query?q=Why+did+Alice+start+going+to+the+gym%3F&top_k=5"),
    ("views", "/ui/owners/alice/views?compare=g2"),
    ("chinese", "/ui/owners/xiaoming/timeline"),
]
"""Each screenshot: its file name and the page."""


def shoot(chrome: webdriver.Chrome, url: str, out: Path) -> list[Path]:
    """One PNG per page of ``PAGES`` under ``out``, plus the confirmation page of a forget."""
    out.mkdir(parents=True, exist_ok=True)
    saved = []
    for name, path in PAGES:
        chrome.get(url + path)
        target = out / f"{name}.png"
        chrome.save_screenshot(str(target))
        saved.append(target)
    chrome.get(url + "/ui/owners/alice/timeline")
    chrome.find_element("css selector", "table.messages a.danger").click()
    target = out / "forget_confirm.png"
    chrome.save_screenshot(str(target))
    saved.append(target)
    return saved


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.ui_screenshots", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=str(REPO / "docs" / "ui"), help="folder of the PNGs (default docs/ui)")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="adamem-ui-") as tmp:
        inspector = start_inspector(Path(tmp))
        try:
            load_sample(inspector.url)
            inspector = with_generation(inspector, Path(tmp))
            chrome = headless_chrome()
            try:
                for path in shoot(chrome, inspector.url, Path(args.out)):
                    print(path)
            finally:
                chrome.quit()
        finally:
            stop(inspector.process)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
