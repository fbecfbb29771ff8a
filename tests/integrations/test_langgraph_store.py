"""The LangGraph store: one contract, run against LangGraph's own ``InMemoryStore`` and ``AdaMemStore``.

LangGraph ships no conformance suite for stores (its package holds the base class and the
in-memory reference, no tests), so the contract is written from ``BaseStore``'s documented
behaviour and proven against the reference first: a case that the reference fails is a wrong
case, not a wrong adapter. Each case runs sync and async. Then what only ``AdaMemStore`` does:
items are memory (recalled, ranked by retrieval), per-owner namespaces, tenants apart.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from langgraph.store.base import BaseStore, InvalidNamespaceError
from langgraph.store.memory import InMemoryStore

from adamem.integrations.langgraph_store import AdaMemStore
from adamem.memory import Memory


@pytest.fixture(params=["reference", "adamem"])
def store(request: pytest.FixtureRequest, memory: Memory) -> Iterator[BaseStore]:
    yield InMemoryStore() if request.param == "reference" else AdaMemStore(memory)


def _user() -> str:
    return f"u{uuid.uuid4().hex[:8]}"


def test_put_get_update_delete(store: BaseStore) -> None:
    user = _user()
    ns = (user, "memories")
    assert store.get(ns, "k1") is None
    store.put(ns, "k1", {"text": "likes green tea", "n": 1})
    item = store.get(ns, "k1")
    assert item is not None and item.value == {"text": "likes green tea", "n": 1}
    assert item.key == "k1" and item.namespace == ns and item.created_at <= item.updated_at
    store.put(ns, "k1", {"text": "likes black tea", "n": 2})
    again = store.get(ns, "k1")
    assert again is not None and again.value == {"text": "likes black tea", "n": 2}
    assert [i.value["n"] for i in store.search(ns)] == [2]  # one version per key
    store.delete(ns, "k1")
    assert store.get(ns, "k1") is None and store.search(ns) == []
    assert store.get((user, "other"), "k1") is None


def test_search_by_prefix_filter_limit_offset(store: BaseStore) -> None:
    user = _user()
    for i in range(5):
        store.put((user, "notes", "a" if i < 3 else "b"), f"n{i}", {"text": f"note {i}", "i": i, "even": i % 2 == 0})
    assert {i.key for i in store.search((user,))} == {f"n{i}" for i in range(5)}
    assert {i.key for i in store.search((user, "notes", "b"))} == {"n3", "n4"}
    assert {i.key for i in store.search((user, "notes"), filter={"even": True})} == {"n0", "n2", "n4"}
    assert {i.key for i in store.search((user,), filter={"i": {"$gte": 3}})} == {"n3", "n4"}
    page = store.search((user,), limit=2)
    rest = store.search((user,), limit=10, offset=2)
    assert len(page) == 2 and len(rest) == 3 and {i.key for i in page + rest} == {f"n{i}" for i in range(5)}
    assert all(i.score is None for i in page)  # no query: nothing ranked


def test_list_namespaces(store: BaseStore) -> None:
    user = _user()
    for ns in [(user, "a", "x"), (user, "a", "y"), (user, "b", "x")]:
        store.put(ns, "k", {"text": "v"})
    assert store.list_namespaces(prefix=(user,)) == [(user, "a", "x"), (user, "a", "y"), (user, "b", "x")]
    assert store.list_namespaces(prefix=(user, "a")) == [(user, "a", "x"), (user, "a", "y")]
    assert store.list_namespaces(prefix=(user,), suffix=("x",)) == [(user, "a", "x"), (user, "b", "x")]
    assert store.list_namespaces(prefix=(user,), max_depth=2) == [(user, "a"), (user, "b")]
    assert store.list_namespaces(prefix=(user,), limit=1, offset=1) == [(user, "a", "y")]


def test_owners_do_not_see_each_other(store: BaseStore) -> None:
    one, two = _user(), _user()
    store.put((one, "m"), "k", {"text": "one's"})
    store.put((two, "m"), "k", {"text": "two's"})
    assert [i.value for i in store.search((one,))] == [{"text": "one's"}]
    item = store.get((two, "m"), "k")
    assert item is not None and item.value == {"text": "two's"}


def test_invalid_namespaces_are_refused(store: BaseStore) -> None:
    for bad in [(), ("langgraph", "x"), (_user(), "a.b"), (_user(), "")]:
        with pytest.raises(InvalidNamespaceError):
            store.put(bad, "k", {"text": "v"})


async def test_the_same_contract_async(store: BaseStore) -> None:
    user = _user()
    ns = (user, "memories")
    await store.aput(ns, "k1", {"text": "plays chess"})
    item = await store.aget(ns, "k1")
    assert item is not None and item.value == {"text": "plays chess"}
    await store.aput(ns, "k2", {"text": "plays go"})
    assert {i.key for i in await store.asearch((user,))} == {"k1", "k2"}
    assert await store.alist_namespaces(prefix=(user,)) == [ns]
    await store.adelete(ns, "k1")
    assert await store.aget(ns, "k1") is None
    assert [i.key for i in await store.asearch(ns)] == ["k2"]


# -- what only AdaMemStore does ---------------------------------------------------------------


def test_items_are_memory_ranked_by_retrieval(memory: Memory) -> None:
    store, user = AdaMemStore(memory), _user()
    store.put((user, "facts"), "pet", {"text": "My cat Luna is afraid of thunderstorms."})
    store.put((user, "facts"), "job", {"text": "I work as a structural engineer in Porto."})
    store.put((user, "facts"), "food", {"text": "I cannot eat gluten."})
    ranked = store.search((user,), query="What is my cat scared of?")
    assert ranked[0].key == "pet" and ranked[0].score is not None and ranked[0].score > 0
    recalled = memory.recall(user, "Where do I work?")  # the LangGraph item is this owner's memory
    assert any("Porto" in i.content for i in recalled.items)


def test_tenants_are_kept_apart(memory: Memory) -> None:
    user = _user()
    acme, globex = AdaMemStore(memory, tenant="acme"), AdaMemStore(memory, tenant="globex")
    acme.put((user, "m"), "k", {"text": "acme's"})
    assert globex.get((user, "m"), "k") is None and globex.search((user,)) == []
    assert user not in {ns[0] for ns in globex.list_namespaces()}
    item = acme.get((user, "m"), "k")
    assert item is not None and item.value == {"text": "acme's"}
