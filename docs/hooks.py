"""MkDocs hooks: the reference pages are generated from the code at build time, so they cannot drift.

A page holds a marker comment, replaced when the site is built:

- ``<!-- adamem:http -->`` — every route of the HTTP API and every schema, from its OpenAPI description;
- ``<!-- adamem:cli -->`` — ``adamem --help`` and each command's ``--help``, as argparse prints them;
- ``<!-- adamem:settings -->`` — every setting with its environment variable, default and meaning.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
from collections.abc import Callable, Iterator
from typing import Any

WIDTH = "100"  # the terminal width argparse formats the help for


def _cell(text: object) -> str:
    """``text`` safe inside one Markdown table cell."""
    return str(text).replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;").replace("\n", " ")


def _type(schema: dict[str, Any]) -> str:
    """A JSON schema's type in a few words (``string``, ``array of Message``, ``integer or null``)."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{name.lower()})"
    if "anyOf" in schema:
        return " or ".join(_type(s) for s in schema["anyOf"])
    if schema.get("type") == "array":
        return f"array of {_type(schema.get('items', {}))}"
    if "enum" in schema:
        return " \\| ".join(f"`{v}`" for v in schema["enum"])
    return str(schema.get("type", "any"))


def _fields(schema: dict[str, Any]) -> list[str]:
    """A table of an object schema's fields."""
    required = set(schema.get("required", ()))
    rows = ["| field | type | required | meaning |", "|---|---|---|---|"]
    for name, field in schema.get("properties", {}).items():
        default = f" (default `{field['default']}`)" if "default" in field and field["default"] is not None else ""
        rows.append(
            f"| `{name}` | {_type(field)} | {'yes' if name in required else 'no'} "
            f"| {_cell(field.get('description', ''))}{_cell(default)} |"
        )
    return rows if len(rows) > 2 else ["(no fields)"]


def _spec() -> dict[str, Any]:
    """The service's OpenAPI description, from an app over an empty in-memory store."""
    from adamem.api.app import create_app
    from adamem.projections.store.factory import open_store
    from adamem.retrieval.service import Retriever
    from adamem.settings import Settings

    return create_app(Settings(), Retriever(open_store("memory://docs"), None)).openapi()  # type: ignore[arg-type]


def http_reference() -> str:
    """Every route (parameters, body, answers), then every schema, as Markdown."""
    spec = _spec()
    out = [f"The service describes itself at `/openapi.json` (OpenAPI {spec['openapi']}) and `/docs`.", ""]
    for path, operations in spec["paths"].items():
        for method, op in operations.items():
            out += [f"## `{method.upper()} {path}`", "", op.get("summary", ""), ""]
            if op.get("description"):
                out += [op["description"], ""]
            params = op.get("parameters", [])
            if params:
                out += ["| parameter | in | type | required | meaning |", "|---|---|---|---|---|"]
                for p in params:
                    out.append(
                        f"| `{p['name']}` | {p['in']} | {_type(p.get('schema', {}))} | "
                        f"{'yes' if p.get('required') else 'no'} | {_cell(p.get('description', ''))} |"
                    )
                out.append("")
            body = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
            if body:
                out += [f"Body: {_type(body)}", ""]
            out += ["| status | meaning | body |", "|---|---|---|"]
            for status, answer in op.get("responses", {}).items():
                media: list[dict[str, Any]] = list(answer.get("content", {}).values())
                schema = media[0].get("schema", {}) if media else {}
                out.append(f"| {status} | {_cell(answer.get('description', ''))} | {_type(schema) if schema else ''} |")
            out.append("")
    out += ["## Schemas", ""]
    for name, schema in sorted(spec["components"]["schemas"].items()):
        out += [f"### {name}", "", _cell(schema.get("description", "")), "", *_fields(schema), ""]
    return "\n".join(out)


@contextlib.contextmanager
def _columns() -> Iterator[None]:
    """argparse formats for ``COLUMNS``; fix it, so the page is the same on every terminal."""
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        yield
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """A parser's subcommands by name (none when it has none)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def cli_reference() -> str:
    """``adamem --help``, then each command's (and each subcommand's) help, as argparse prints it."""
    from adamem.cli.main import build_parser

    out: list[str] = []

    def show(title: str, parser: argparse.ArgumentParser, level: int) -> None:
        out.extend([f"{'#' * level} `{title}`", "", "```text", parser.format_help().rstrip(), "```", ""])
        for name, sub in _commands(parser).items():
            show(f"{title} {name}", sub, min(level + 1, 4))

    with _columns(), contextlib.redirect_stdout(io.StringIO()):
        show("adamem", build_parser(bench=True), 2)
    return "\n".join(out)


def settings_reference() -> str:
    """Every setting: its environment variable, default and meaning."""
    from adamem.settings import Settings

    rows = ["| variable | default | meaning |", "|---|---|---|"]
    for _field, env, default, doc in Settings.describe():
        shown = f"`{default}`" if default not in ("", None) else "–"
        rows.append(f"| `{env}` | {shown} | {_cell(doc)} |")
    return "\n".join(rows)


GENERATED: dict[str, Callable[[], str]] = {
    "<!-- adamem:http -->": http_reference,
    "<!-- adamem:cli -->": cli_reference,
    "<!-- adamem:settings -->": settings_reference,
}


def on_page_markdown(markdown: str, **_: Any) -> str:
    """Replace each marker on a page by what it names."""
    for marker, make in GENERATED.items():
        if marker in markdown:
            markdown = markdown.replace(marker, make())
    return markdown
