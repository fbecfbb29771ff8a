"""Commands with ``--url`` against a running query service: one line and the table's exit code for every failure."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from adamem.api.app import create_app
from adamem.cli import main
from adamem.cli.commands import build_retriever
from adamem.settings import Settings
from tests.conftest import serving

EXE = Path(sys.executable).with_name("adamem")
KEY = "default-key-0003-0003"


@pytest.fixture(scope="module")
def store(sample_built: tuple[Path, Path]) -> Path:
    return sample_built[1]


@pytest.fixture(scope="module")
def keyed(store: Path) -> Iterator[str]:
    """A read-only service over the store that checks keys (the default tenant's is ``KEY``): its URL."""
    settings = Settings(store_url=str(store), metrics=False)
    with serving(create_app(settings, build_retriever(settings), api_keys=f"default:{KEY}")) as client:
        yield str(client.base_url).rstrip("/")


@pytest.fixture(autouse=True)
def _no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ADAMEM_API_KEY", "ADAMEM_API_KEYS", "ADAMEM_LOG", "ADAMEM_STORE"):
        monkeypatch.delenv(name, raising=False)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nothing listens once the socket is closed


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize(
    "argv",
    [
        ["query", "alice", "What food do I like?"],
        ["research", "alice", "What food do I like?"],
        ["add", "alice", "I moved to Lisbon."],
        ["memory", "alice"],
        ["memory", "alice", "--layer", "persona"],
    ],
    ids=lambda a: a[0],
)
def test_no_service_at_the_url_is_one_line_and_exit_5(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    code, out, err = _run(capsys, *argv, "--url", url)
    assert code == 5 and out == "", (code, out)
    assert err.splitlines() == [err.strip()] and f"cannot reach {url}: is `adamem serve` running?" in err, err


def test_no_service_prints_no_traceback() -> None:
    """The console script, as a user runs it: the one line, no httpx traceback."""
    url = f"http://127.0.0.1:{_closed_port()}"
    done = subprocess.run(
        [str(EXE), "add", "alice", "I moved to Lisbon.", "--url", url], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 5 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith(f"adamem: error: cannot reach {url}: is `adamem serve` running?"), done.stderr


def test_an_unknown_owner_over_http_exits_3_as_in_process(
    store: Path, keyed: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(capsys, "query", "nobody", "What food do I like?", "--store", str(store))
    assert code == 3, err
    code, _, err = _run(capsys, "query", "nobody", "What food do I like?", "--url", keyed, "--api-key", KEY)
    assert code == 3 and "unknown_user" in err and "'nobody'" in err, err


def test_api_key_from_the_option_or_the_environment(
    keyed: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    question = ["query", "alice", "What food do I like?", "--url", keyed, "--json"]
    code, _, err = _run(capsys, *question)
    assert code == 2 and "401" in err and "API key" in err, err  # a setting the user has to give
    for argv in (["research", "alice", "What food do I like?", "--url", keyed], question):
        code, out, err = _run(capsys, *argv, "--api-key", KEY)
        assert code == 0 and out, err
    monkeypatch.setenv("ADAMEM_API_KEY", KEY)
    code, out, err = _run(capsys, *question)
    assert code == 0 and '"items"' in out, err


def test_memory_over_http_shows_what_it_shows_in_process(
    store: Path, keyed: str, capsys: pytest.CaptureFixture[str]
) -> None:
    remote = ["--url", keyed, "--api-key", KEY]
    for layer in ("persona", "working", "graph"):
        _, here, _ = _run(capsys, "memory", "xiaoming", "--layer", layer, "--store", str(store))
        code, there, err = _run(capsys, "memory", "xiaoming", "--layer", layer, *remote)
        assert code == 0 and there == here and here, (layer, err)
        _, here_json, _ = _run(capsys, "memory", "xiaoming", "--layer", layer, "--json", "--store", str(store))
        _, there_json, _ = _run(capsys, "memory", "xiaoming", "--layer", layer, "--json", *remote)
        assert json.loads(there_json) == json.loads(here_json), layer
    code, out, err = _run(capsys, "memory", "xiaoming", "--json", *remote)
    counts = json.loads(out)["rows"]
    assert code == 0 and counts["persona"] > 0 and counts["archive"] >= counts["working"] > 0, err
    code, _, err = _run(capsys, "memory", "nobody", "--layer", "persona", *remote)
    assert code == 3 and "unknown_user" in err, err
