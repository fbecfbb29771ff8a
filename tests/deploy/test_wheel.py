"""The built wheel, installed into a fresh virtual environment, is one import package: ``adamem``.

The wheel is built from a copy of the checkout (the package is ``src/adamem``; the design card's
top-level folders are links into it, and the wheel must hold real files, once). The fresh
environment gets the wheel alone (``--no-deps``); the third-party dependencies are borrowed from the
test environment through a path file, whose own path files (the editable install of this checkout)
are not processed, so the ``adamem`` that runs there can only be the one from the wheel.
"""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LAYERS = ("schemas", "streams", "projections", "retrieval", "api", "integrations", "cli")

_PROBE = """
import importlib.metadata as md, json, adamem, adamem.streams.log
dist = md.distribution("adamem-stream")
files = [str(f) for f in dist.files or []]
print(json.dumps({
    "adamem": adamem.__file__,
    "tops": sorted({f.split("/")[0] for f in files if not f.startswith("..") and ".dist-info" not in f.split("/")[0]}),
    "top_level": (dist.read_text("top_level.txt") or "").split(),
    "files": files,
}))
"""


def _run(args: list[str | Path], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=600, check=False, **kw)  # type: ignore[call-overload, no-any-return]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel of the checkout, built without build isolation (no registry at test time)."""
    src = tmp_path_factory.mktemp("src") / "adamem-stream"
    shutil.copytree(
        REPO,
        src,
        symlinks=True,
        ignore=shutil.ignore_patterns(".git", ".venv", ".kafka", "data", "build", "dist", "*.egg-info", "__pycache__"),
    )
    out = tmp_path_factory.mktemp("dist")
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", out, src])
    assert built.returncode == 0, built.stderr[-3000:]
    (path,) = out.glob("adamem_stream-*.whl")
    return path


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Iterator[Path]:
    """A new virtual environment with the wheel installed and nothing else of this project."""
    venv = tmp_path_factory.mktemp("venv") / "fresh"
    made = _run([sys.executable, "-m", "venv", venv])
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    site = Path(_run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    (site / "borrowed_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    installed = _run([python, "-m", "pip", "install", "--no-deps", "--no-index", "-q", wheel])
    assert installed.returncode == 0, installed.stderr[-3000:]
    yield venv


def _env(venv: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ADAMEM_", "PYTHON", "VIRTUAL_ENV"))}
    return {**env, "PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"}


def test_the_wheel_holds_real_files_of_every_layer_and_no_results(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        infos = {i.filename: i for i in zf.infolist()}
    tops = {name.split("/")[0] for name in infos if ".dist-info/" not in name}
    assert tops == {"adamem"}
    for layer in LAYERS:
        assert f"adamem/{layer}/__init__.py" in infos, layer
    assert infos["adamem/streams/log.py"].file_size > 1000  # the module itself, not a link to it
    assert "adamem/schemas/chat_message.avsc" in infos and "adamem/samples/sample_conversation.jsonl" in infos
    assert {f"adamem/packs/{name}.toml" for name in ("medical", "ecommerce", "customer-service", "education")} <= set(
        infos
    )  # the shipped domain packs, loadable by name
    assert not [n for n in infos if "/results/" in n or n.endswith((".png", ".json"))]
    assert not [n for n in infos if n.startswith(("adamem/bench/", "bench/"))]  # the benchmarks stay in the checkout


def test_the_license_is_an_spdx_expression_with_its_file(wheel: Path) -> None:
    """PEP 639 metadata: ``License-Expression`` and the license text in the wheel (no deprecated table)."""
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        (meta,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        metadata = zf.read(meta).decode()
    assert "License-Expression: Apache-2.0" in metadata.splitlines()
    assert "License-File: LICENSE" in metadata.splitlines()
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)


def test_building_the_metadata_warns_nothing(tmp_path: Path) -> None:
    """What ``pip install -e .`` runs first prints no deprecation (the issue saw four BuildBackendWarnings)."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(REPO / name, src / name)
    (src / "src" / "adamem").mkdir(parents=True)
    (src / "src" / "adamem" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "meta").mkdir()
    code = "import setuptools.build_meta as b; b.prepare_metadata_for_build_wheel('../meta')"
    built = _run([sys.executable, "-W", "always", "-c", code], cwd=src)
    assert built.returncode == 0, built.stderr[-3000:]
    assert "Warning" not in built.stderr, built.stderr[-3000:]


def test_only_adamem_is_installed_at_the_top_level(fresh: Path, tmp_path: Path) -> None:
    probe = _run([fresh / "bin" / "python", "-c", _PROBE], cwd=tmp_path, env=_env(fresh))
    assert probe.returncode == 0, probe.stderr
    facts = json.loads(probe.stdout)
    assert facts["tops"] == ["adamem"] and facts["top_level"] == ["adamem"]
    assert Path(facts["adamem"]).is_relative_to(fresh)  # the wheel's copy, not the checkout
    assert "adamem/projections/store/factory.py" in facts["files"]


def test_the_command_and_the_demo_run_from_the_wheel(fresh: Path, tmp_path: Path) -> None:
    exe = fresh / "bin" / "adamem"
    helped = _run([exe, "--help"], cwd=tmp_path, env=_env(fresh))
    assert helped.returncode == 0, helped.stderr
    assert "publish" in helped.stdout and "bench" in helped.stdout
    bench = _run([exe, "bench", "locomo"], cwd=tmp_path, env=_env(fresh))
    assert bench.returncode == 2 and "source checkout" in bench.stderr, bench.stderr[-3000:]
    demo = _run([exe, "demo", "--no-serve"], cwd=tmp_path, env=_env(fresh))
    assert demo.returncode == 0, demo.stderr[-3000:]
    assert "xiaoming" in demo.stdout and "persona" in demo.stdout
    assert (tmp_path / "data" / "store").is_dir() and (tmp_path / "data" / "log").is_dir()


def test_the_readme_three_lines_run_in_the_fresh_environment(fresh: Path, tmp_path: Path) -> None:
    """``pip install .`` and then the README's library example, as written, in an empty folder."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    code = readme.split("## In three lines", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    env = {**_env(fresh), "ADAMEM_HOME": str(tmp_path / "home"), "ADAMEM_FSYNC": "false"}
    ran = _run([fresh / "bin" / "python", "-W", "error", "-c", code], cwd=tmp_path, env=env)
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "Lisbon" in ran.stdout
    assert (tmp_path / "data" / "log").is_dir() and (tmp_path / "data" / "store").is_dir()


def test_the_docker_build_context_keeps_every_file_the_wheel_needs(wheel: Path) -> None:
    """The image runs ``pip install /app``: nothing the wheel holds may be left out of the context."""
    patterns = [
        line.strip().rstrip("/")
        for line in (REPO / ".dockerignore").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    with zipfile.ZipFile(wheel) as zf:
        names = [n for n in zf.namelist() if ".dist-info/" not in n]
    ignored = []
    for name in names:
        repo_path = f"src/{name}".split("/")
        prefixes = ["/".join(repo_path[: i + 1]) for i in range(len(repo_path))]
        if any(fnmatch.fnmatch(prefix, pattern) for prefix in prefixes for pattern in patterns):
            ignored.append(name)
    assert ignored == []
