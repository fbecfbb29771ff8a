"""The error tree: each class carries the HTTP answer and exit code every entry point gives it."""

from __future__ import annotations

import importlib
import typing
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from adamem import errors
from adamem.api.client import ServiceError, ServiceNotFound
from adamem.api.models import ErrorKind
from adamem.cli.errors import EXIT_CODES, exit_code
from adamem.errors import AdaMemError

# Modules whose own error classes join the tree: imported so that ``__subclasses__`` sees them.
_HOLDERS = (
    "adamem.api.app",
    "adamem.api.provenance",
    "adamem.memory",
    "adamem.projections.store.lance",
    "adamem.projections.folds.state",
)


def _tree() -> list[type[AdaMemError]]:
    for name in _HOLDERS:
        importlib.import_module(name)
    found, todo = [], [AdaMemError]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return found


def test_every_error_class_answers_with_a_documented_kind_status_and_exit_code() -> None:
    kinds = set(typing.get_args(ErrorKind))
    codes = {code for code, _ in EXIT_CODES}
    classes = _tree()
    assert len(classes) > 20  # the tree and the classes elsewhere were all found
    for cls in classes:
        assert cls.kind in kinds, cls
        assert 400 <= cls.http_status <= 599, cls
        assert cls.exit_code in codes, cls


@pytest.mark.parametrize(
    ("error", "status", "kind", "code"),
    [
        (errors.InputError(["line 1: bad"]), 400, "invalid_messages", 4),
        (errors.UnknownOwner("t:alice", "/s", ["t:bob"]), 404, "unknown_user", 3),
        (errors.NotFound("no log at /x"), 404, "not_found", 3),
        (errors.NotVisible("behind"), 409, "not_visible", 5),
        (errors.NotWritten("past the end"), 409, "not_written", 3),
        (errors.Forbidden("other tenant"), 403, "forbidden", 2),
        (errors.BrokerUnavailable("no broker"), 503, "log_unavailable", 5),
        (errors.StoreFenced("newer writer"), 503, "unavailable", 5),
        (errors.MalformedModelAnswer("not JSON"), 503, "unavailable", 6),
        (errors.DecodeError("bad bytes"), 503, "unavailable", 4),
        (errors.ConfigError("bad URL"), 503, "unavailable", 2),
        (ServiceError(502, "unavailable", "upstream"), 502, "unavailable", 5),
        (ServiceError(422, "invalid_request", "bad"), 422, "invalid_request", 2),
        (ServiceNotFound(404, "unknown_user", "no memory for user 'x'"), 404, "unknown_user", 3),
    ],
)
def test_an_error_carries_its_status_kind_and_exit_code(error: AdaMemError, status: int, kind: str, code: int) -> None:
    assert (error.http_status, error.kind, exit_code(error)) == (status, kind, code)


def test_the_service_answers_every_error_from_its_class(tmp_path: Path) -> None:
    """One handler: an unknown owner's answer names nothing of other owners; a failure names its class."""
    from adamem.api.app import create_app
    from adamem.projections.store.factory import open_store
    from adamem.retrieval.service import Retriever
    from adamem.settings import Settings
    from tests.api.conftest import embedder

    store = open_store(f"lancedb://{tmp_path}/store")
    app = create_app(Settings(store_url=store.url), Retriever(store, embedder()), None, api_keys="")

    @app.get("/raise/{which}")
    async def raising(which: str) -> None:
        raise {
            "owner": errors.UnknownOwner("t:alice", "/s", ["t:bob"]),
            "store": errors.StoreError("the table is gone"),
            "visible": errors.NotVisible("behind"),
        }[which]

    with TestClient(app, raise_server_exceptions=False) as client:
        owner = client.get("/raise/owner")
        assert (owner.status_code, owner.json()) == (
            404,
            {"error": "unknown_user", "detail": "no memory for user 'alice'"},
        )
        assert "bob" not in owner.text
        store = client.get("/raise/store")
        assert (store.status_code, store.json()["error"]) == (503, "unavailable")
        assert store.json()["detail"] == "StoreError: the table is gone"
        visible = client.get("/raise/visible")
        assert (visible.status_code, visible.json()) == (409, {"error": "not_visible", "detail": "behind"})
