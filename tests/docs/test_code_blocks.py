"""The README's and the documentation site's code, run as written.

Every ```python block runs in a fresh interpreter in a folder holding ``./data/log`` and
``./data/store`` built from the bundled sample (as ``deploy/demo.sh`` leaves them), with an
``adamem serve`` answering on that folder; the blocks show it at ``127.0.0.1:8000``, and the test
points them at the port it got. Every ``adamem`` command line of a ```bash block is parsed by the
command's own parser, so a renamed command or option fails here.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import adamem
from adamem.cli.main import build_parser
from bench.common import wait_healthy
from tests.api.conftest import build_store, free_port
from tests.conftest import REPO, stop_process

PAGES = sorted([REPO / "README.md", *(REPO / "docs").rglob("*.md")])
SHOWN_PORT = "127.0.0.1:8000"


def _blocks(page: Path, lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```$", page.read_text(encoding="utf-8"), flags=re.S | re.M)


PYTHON = [(page, n, code) for page in PAGES for n, code in enumerate(_blocks(page, "python"), 1)]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, int]]:
    """A folder as ``deploy/demo.sh`` leaves it, and an ``adamem serve`` writing it (the embedded default)."""
    root = tmp_path_factory.mktemp("docs")
    settings = build_store(root / "data")
    port = free_port()
    env = {**_env(), "ADAMEM_PORT": str(port)}
    log_file = root / "serve.log"
    with log_file.open("wb") as out:
        process = subprocess.Popen(
            [str(Path(sys.executable).with_name("adamem")), "serve"],
            cwd=root,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_healthy(f"http://127.0.0.1:{port}", process, 120, log_file)
        assert Path(settings.log_url).is_relative_to(root)
        yield root, port
    finally:
        stop_process(process)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ADAMEM_")}
    return {**env, "PYTHONPATH": str(REPO), "ADAMEM_FSYNC": "false", "COLUMNS": "100"}


def test_the_pages_hold_code_to_run() -> None:
    assert len(PYTHON) >= 5, [f"{p.name}:{n}" for p, n, _ in PYTHON]


@pytest.mark.parametrize(("page", "n", "code"), PYTHON, ids=[f"{p.relative_to(REPO)}:{n}" for p, n, _ in PYTHON])
def test_every_python_block_runs(served: tuple[Path, int], page: Path, n: int, code: str) -> None:
    root, port = served
    code = code.replace(SHOWN_PORT, f"127.0.0.1:{port}")  # the port this test's service got
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", code], cwd=root, env=_env(), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"{page.relative_to(REPO)} block {n}:\n{code}\n--- stderr:\n{done.stderr[-4000:]}"


def test_the_http_guides_add_example_finds_the_message_it_added_first(served: tuple[Path, int]) -> None:
    """The mem0-style example of the HTTP guide, run twice: the home it just added is the first item both times."""
    root, port = served
    code = next(c for p, _, c in PYTHON if p.name == "http.md" and 'm.add("carol"' in c)
    code = code.replace(SHOWN_PORT, f"127.0.0.1:{port}")
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", code], cwd=root, env=_env(), capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-3000:]
        shown = ast.literal_eval(done.stdout.strip().splitlines()[-1])
        assert shown[0] == "I moved to Lisbon last month.", shown
        assert shown.count("I moved to Lisbon last month.") == 1, shown


def _command_lines(block: str) -> Iterator[list[str]]:
    """Each ``adamem …`` command of a shell block, as words (placeholders such as ``<event id>`` made one word)."""
    text = re.sub(r"\\\n\s*", " ", block)
    for line in text.splitlines():
        line = re.sub(r"<[^<>\n]+>", "PLACEHOLDER", line.strip().removeprefix("$ "))
        lexer = shlex.shlex(line, posix=True, punctuation_chars="|&;()")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        command: list[str] = []
        for word in [*lexer, ";"]:
            if word and set(word) <= set("|&;()"):
                while command and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", command[0]):
                    command.pop(0)  # VAR=value before the command
                if command[:1] == ["adamem"]:
                    yield command[1:]
                command = []
            else:
                command.append(word)


SHELL = [
    (page, words)
    for page in PAGES
    for lang in ("bash", "sh", "console")
    for block in _blocks(page, lang)
    for words in _command_lines(block)
]


def test_the_pages_show_commands() -> None:
    assert len(SHELL) >= 40


def test_every_command_shown_parses() -> None:
    wrong = []
    for page, words in SHELL:
        parser = build_parser(bench=words[:1] == ["bench"])
        with contextlib.redirect_stderr(io.StringIO()) as err, contextlib.redirect_stdout(io.StringIO()):
            try:
                parser.parse_args(words)
            except SystemExit as exc:
                if exc.code not in (0, None):
                    wrong.append(f"{page.relative_to(REPO)}: adamem {shlex.join(words)}\n  {err.getvalue().strip()}")
    assert not wrong, "\n".join(wrong)


def test_a_wrong_option_is_caught() -> None:
    """The check above can fail: a command with an option that does not exist does not parse."""
    (words,) = _command_lines("adamem query alice 'hi' --no-such-option  # comment")
    with contextlib.redirect_stderr(io.StringIO()), pytest.raises(SystemExit):
        build_parser().parse_args(words)


def test_the_python_reference_documents_every_public_name() -> None:
    page = (REPO / "docs" / "reference" / "python.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^::: adamem\.(\w+)$", page, flags=re.M))
    assert documented == set(adamem.__all__)


def test_every_public_name_and_method_has_a_docstring() -> None:
    missing = []
    for name in adamem.__all__:
        value = getattr(adamem, name)
        if not (value.__doc__ or "").strip():
            missing.append(name)
        if isinstance(value, type) and not issubclass(value, BaseException):
            for attr, member in vars(value).items():
                if attr.startswith("_") or (not callable(member) and not isinstance(member, property)):
                    continue
                if not (getattr(member, "__doc__", None) or "").strip():
                    missing.append(f"{name}.{attr}")
    assert not missing


def test_the_readme_three_lines_print_the_message_just_added(tmp_path: Path) -> None:
    """The README's first example, run twice in an empty folder: the first item is the message, kept once."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## In three lines", 1)[1].split("\n## ", 1)[0]
    [code] = re.findall(r"^```python\n(.*?)^```$", section, flags=re.S | re.M)
    for _ in range(2):  # and run again in the same folder
        done = subprocess.run(
            [sys.executable, "-W", "error", "-c", code], cwd=tmp_path, env=_env(), capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "I moved to Lisbon last week.", done.stdout
    count = 'from adamem import Memory\nwith Memory() as m:\n    print(len(m.working("alice")))'
    done = subprocess.run([sys.executable, "-c", count], cwd=tmp_path, env=_env(), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1", "the second run stored the message again"


def test_the_readme_http_example_runs_as_printed(tmp_path: Path) -> None:
    """The README's shell blocks under "Over HTTP": a service in one terminal, a message and a question in another."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Over HTTP", 1)[1].split("\n## ", 1)[0]
    serve, ask = re.findall(r"^```bash\n(.*?)^```$", section, flags=re.S | re.M)
    assert shlex.split(serve, comments=True) == ["adamem", "serve"]
    port = free_port()
    env = {**_env(), "ADAMEM_PORT": str(port), "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    log_file = tmp_path / "serve.log"
    with log_file.open("wb") as out:
        process = subprocess.Popen(["adamem", "serve"], cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_healthy(f"http://127.0.0.1:{port}", process, 120, log_file)
        script = ask.replace("localhost:8000", f"localhost:{port}")
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        stop_process(process)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout[done.stdout.index("{") :])
    assert "Mia starts school" in answer["items"][0]["content"]


def test_the_readme_is_a_front_door() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) < 250
    assert "bash deploy/demo.sh" in readme and "bash deploy/test.sh" in readme
