"""What ``--help`` and ``--version`` tell a new user: every option explained, the installed version."""

from __future__ import annotations

import argparse
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from adamem.cli.main import build_parser

EXE = Path(sys.executable).with_name("adamem")


def _options(parser: argparse.ArgumentParser, command: str) -> list[tuple[str, argparse.Action]]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += _options(sub, f"{command} {name}".strip())
        elif action.option_strings:
            found.append((command, action))
    return found


def test_every_option_of_every_command_says_what_it_does() -> None:
    options = _options(build_parser(bench=True), "")
    assert any("--top-k" in a.option_strings for _, a in options)
    missing = [f"adamem {c} {a.option_strings[-1]}" for c, a in options if not a.help]
    assert missing == [], missing


def test_version_is_the_installed_distribution() -> None:
    done = subprocess.run([str(EXE), "--version"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == f"adamem {metadata.version('adamem-stream')}", done
