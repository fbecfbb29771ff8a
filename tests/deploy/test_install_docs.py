"""What the README and the commands tell a new user to install or download exists outside this machine."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ADVICE = [REPO / "README.md", REPO / "cli" / "main.py", REPO / "bench" / "__init__.py"]


def _quickstart() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    start = text.index("\n## Quickstart\n")
    return text[start : text.index("\n## ", start + 1)]


def test_no_install_advice_names_a_package_index_does_not_serve() -> None:
    """``adamem-stream`` is on no index: install it from a checkout (``pip install -e``) or a built wheel."""
    for path in ADVICE:
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"pip install '?adamem-stream", text), path
    readme = ADVICE[0].read_text(encoding="utf-8")
    assert "pip install -e '.[mcp]'" in readme and "pip wheel --no-deps -w dist ." in readme


def test_the_quickstart_publishes_files_it_ships_or_says_where_they_come_from() -> None:
    quickstart = _quickstart()
    assert "../shared" not in quickstart  # this machine's layout, not a new user's
    for name in re.findall(r"^adamem publish (\S+)", quickstart, re.M):
        if name == "-" or (REPO / name).is_file():
            continue
        assert name == "locomo10.json" and "https://github.com/snap-research/LoCoMo" in quickstart, name
