"""What the integration tests share: a store built by the real pipeline from the bundled sample.

Each test module gets its own store (``built``): the tests remember and forget, so they change it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from adamem.memory import Memory
from adamem.settings import Settings
from tests.api.conftest import build_store


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """An embedded log and a LanceDB store holding the sample's owners and one owner each of acme and globex."""
    return build_store(tmp_path_factory.mktemp("agents"))


@pytest.fixture(scope="module")
def memory(built: Settings) -> Iterator[Memory]:
    """An ``Memory`` over ``built`` (remember/forget are projected in-process)."""
    handle = Memory(built)
    try:
        yield handle
    finally:
        handle.close()
