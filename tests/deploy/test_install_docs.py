"""What the README and the commands tell a new user to install or download exists outside this machine."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS = sorted((REPO / "docs").rglob("*.md"))
ADVICE = [REPO / "README.md", *DOCS, REPO / "src" / "adamem" / "cli" / "main.py", REPO / "bench" / "__init__.py"]


def _quickstart() -> str:
    """The command-line guide: the commands a new user runs first, task by task."""
    return (REPO / "docs" / "guides" / "command-line.md").read_text(encoding="utf-8")


def test_no_install_advice_names_a_package_index_does_not_serve() -> None:
    """``adamem-stream`` is on no index: install it from a checkout (``pip install -e``) or a built wheel."""
    for path in ADVICE:
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"pip install '?adamem-stream", text), path
    start = (REPO / "docs" / "getting-started.md").read_text(encoding="utf-8")
    assert "pip install -e '.[mcp]'" in start and "pip wheel --no-deps -w dist ." in start


def test_the_quickstart_publishes_files_it_ships_or_says_where_they_come_from() -> None:
    quickstart = _quickstart()
    assert "../shared" not in quickstart  # this machine's layout, not a new user's
    for name in re.findall(r"^adamem publish (\S+)", quickstart, re.M):
        if name == "-" or (REPO / name).is_file():
            continue
        assert name == "locomo10.json" and "https://github.com/snap-research/LoCoMo" in quickstart, name


def _setup(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """deploy/setup.sh run in a copy whose interpreter only records what pip is asked to install."""
    (tmp_path / "deploy").mkdir(parents=True)
    shutil.copy(REPO / "deploy" / "setup.sh", tmp_path / "deploy" / "setup.sh")
    python = tmp_path / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f'#!/bin/sh\necho "$*" >> "{tmp_path}/asked"\n')
    python.chmod(0o755)
    env = {**os.environ, "ADAMEM_PYTHON": str(python)}
    done = subprocess.run(
        ["bash", str(tmp_path / "deploy" / "setup.sh"), *args], capture_output=True, text=True, env=env, timeout=60
    )
    asked = (tmp_path / "asked").read_text().splitlines() if (tmp_path / "asked").exists() else []
    return done, [line for line in asked if line.startswith("-m pip install") and " -e " in line]


def test_setup_installs_the_extras_it_is_asked_for(tmp_path: Path) -> None:
    done, installs = _setup(tmp_path / "a", "--extras", "mcp,langchain")
    assert done.returncode == 0 and installs[-1].endswith("-e .[mcp,langchain]"), (done.stderr, installs)
    done, installs = _setup(tmp_path / "b", "--dev")
    assert done.returncode == 0 and installs[-1].endswith("-e .[dev]"), (done.stderr, installs)
    done, installs = _setup(tmp_path / "c")
    assert done.returncode == 0 and installs[-1].endswith("-e ."), (done.stderr, installs)
    done, _ = _setup(tmp_path / "d", "--with-everything")
    assert done.returncode == 2 and "unknown option --with-everything" in done.stderr
