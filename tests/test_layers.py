"""The package's layers, read from its import graph: what a reader of the folders is promised.

Bottom to top: the domain core (``adamem``'s own modules and the Memory Agent's ports) and the event
schemas; the projections; the log and the retrieval, side by side; the application core that wires
them (the one write path, the retriever); the HTTP service; the library's facade (``adamem.memory``:
``Memory``, which goes through a running service when one writes the log); the agent integrations
(MCP, LangChain/LangGraph, hybrid queries: they check the service's tenant keys, so they sit above
it); the command line. The benchmarks are the checkout's, not the package's. A module imports only
its own layer or lower ones (lazy imports inside functions count too), ports never name their
adapters, and nothing imports the CLI. The package's own ``__init__`` is its public face: it names
the facade's classes (loaded on first use), so it alone may point up.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterator
from pathlib import Path

import networkx as nx
import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "src" / "adamem"

LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"adamem"}),
    frozenset({"adamem.schemas"}),
    frozenset({"adamem.projections"}),
    frozenset({"adamem.streams", "adamem.retrieval"}),
    frozenset({"adamem.core"}),
    frozenset({"adamem.api"}),
    frozenset({"adamem.memory"}),
    frozenset({"adamem.integrations"}),
    frozenset({"adamem.cli"}),
)
"""Each layer may import the layers before it; the two of one rank do not import each other."""

PORTS: dict[str, tuple[str, ...]] = {
    "adamem.streams.log": ("adamem.streams.kafka_log", "adamem.streams.embedded_log", "adamem.streams.memory_log"),
    "adamem.projections.store.base": ("adamem.projections.store.lance", "adamem.projections.store.memory"),
    "adamem.projections.store.ports": (
        "adamem.projections.store.lance",
        "adamem.projections.store.lance_tables",
        "adamem.projections.store.lance_reads",
        "adamem.projections.store.lance_writes",
        "adamem.projections.store.lance_views",
        "adamem.projections.store.memory",
    ),
    "adamem.analysis": ("adamem.analysis.rules", "adamem.analysis.e5", "adamem.analysis.llm"),
    "adamem.analysis.agent": ("adamem.analysis.rules", "adamem.analysis.e5", "adamem.analysis.llm"),
}
"""A port module and the adapters it must never import (its factory module names them)."""


def _modules() -> Iterator[tuple[str, Path]]:
    paths = (Path(root, name) for root, _, names in os.walk(PACKAGE) for name in names)
    for path in sorted(p for p in paths if p.suffix == ".py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        yield ".".join(parts[:-1] if parts[-1] == "__init__" else parts), path


def _imports(module: str, path: Path) -> set[str]:
    """Every ``adamem`` module named by an import anywhere in the file (relative ones resolved)."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".") if is_package else module.split(".")[:-1]
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
    known = {m for m, _ in _modules()}
    return {name for name in found if name in known}


GRAPH: nx.DiGraph = nx.DiGraph()
for _module, _path in _modules():
    GRAPH.add_node(_module)
    GRAPH.add_edges_from((_module, target) for target in _imports(_module, _path) if target != _module)


def _layer(module: str) -> int:
    """The index of the layer a module belongs to (the longest matching package wins)."""
    best, rank = "", -1
    for index, layer in enumerate(LAYERS):
        for top in layer:
            if (module == top or module.startswith(top + ".")) and len(top) > len(best):
                best, rank = top, index
    assert rank >= 0, module
    return rank


def _top(module: str) -> str:
    """The layer package of a module (``adamem.streams.log`` -> ``adamem.streams``)."""
    return max((t for layer in LAYERS for t in layer if module == t or module.startswith(t + ".")), key=len)


def test_the_graph_sees_every_layer() -> None:
    tops = {_top(m) for m in GRAPH}
    assert tops == {t for layer in LAYERS for t in layer}
    assert GRAPH.number_of_edges() > 200


def test_no_module_imports_a_layer_above_its_own() -> None:
    upward = [(a, b) for a, b in GRAPH.edges if _layer(b) > _layer(a) and a != "adamem"]
    assert upward == []


def test_the_package_face_names_only_the_facade_and_the_ground_floor() -> None:
    assert {b for a, b in GRAPH.edges if a == "adamem"} <= {
        "adamem.errors",
        "adamem.settings",
        "adamem.memory",
        "adamem.retrieval.answer",
        "adamem.retrieval.research",
    }


def test_the_log_and_the_retrieval_do_not_import_each_other() -> None:
    sideways = [(a, b) for a, b in GRAPH.edges if _layer(a) == _layer(b) and _top(a) != _top(b)]
    assert sideways == []


def test_nothing_imports_the_command_line() -> None:
    into_cli = [(a, b) for a, b in GRAPH.edges if _top(b) == "adamem.cli" and _top(a) != "adamem.cli"]
    assert into_cli == []


def test_the_package_imports_no_benchmark() -> None:
    """The benchmarks are the checkout's (``bench/``): ``adamem bench`` finds them by path, nothing imports them."""
    named = set()
    for _, path in _modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                named.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and not node.level:
                named.add(node.module or "")
    assert sorted(n for n in named if n == "bench" or n.startswith(("bench.", "adamem.bench"))) == []


def test_the_folders_are_the_package_and_the_design_cards_folders_point_into_it() -> None:
    links = [p for p in PACKAGE.rglob("*") if p.is_symlink()]
    assert links == []
    for name in ("streams", "schemas", "projections"):
        top = REPO / name
        assert top.is_symlink() and top.resolve() == (PACKAGE / name).resolve(), name


@pytest.mark.parametrize("port", sorted(PORTS))
def test_a_port_never_imports_its_adapters(port: str) -> None:
    assert port in GRAPH
    reached = nx.descendants(GRAPH, port)
    assert [a for a in PORTS[port] if a in reached] == []


def test_the_only_import_circles_are_package_facades() -> None:
    """A package's ``__init__`` may re-export its modules; no other modules import each other in a ring."""
    modules = GRAPH.subgraph(m for m in GRAPH if not (PACKAGE.parent / (m.replace(".", "/") + "/__init__.py")).exists())
    assert [sorted(c) for c in nx.simple_cycles(modules)] == []


def drawing() -> str:
    """The layers as floors, top to bottom, and which package imports which.

    A Mermaid flowchart (GitHub and MkDocs draw it); ``docs/layers.md`` holds it, and the test below
    keeps it current: ``python -m tests.test_layers > docs/layers.md`` writes it again.
    """
    counts: dict[tuple[str, str], int] = {}
    for a, b in GRAPH.edges:
        ta, tb = _top(a), _top(b)
        if ta != tb and a != "adamem":
            counts[ta, tb] = counts.get((ta, tb), 0) + 1
    lines = [
        "# The import graph, by layer",
        "",
        "Each box is a package of `adamem`, each row a layer (top: the command line; bottom: the domain",
        "core). An arrow says that modules of one package import modules of the other. Every arrow points",
        "down: the log and the retrieval, side by side, import neither each other. Drawn from the code by",
        "`tests/test_layers.py`, which fails when this page is out of date (`python -m tests.test_layers",
        "> docs/layers.md` redraws it).",
        "",
        "```mermaid",
        "flowchart TB",
    ]
    for index, layer in reversed(list(enumerate(LAYERS))):
        lines.append(f"  subgraph floor{index}[ ]")
        lines.extend(f'    {top.replace(".", "_")}["{top}"]' for top in sorted(layer))
        lines.append("  end")
    for ta, tb in sorted(counts, key=lambda pair: (-_layer(pair[0]), pair)):
        lines.append(f"  {ta.replace('.', '_')} --> {tb.replace('.', '_')}")
    lines.append("```")
    return "\n".join(lines) + "\n"


def test_the_drawing_of_the_layers_is_current() -> None:
    assert (REPO / "docs" / "layers.md").read_text(encoding="utf-8") == drawing()


if __name__ == "__main__":
    print(drawing(), end="")
