"""The projector folds each tenant with the pace and relations of the packs its store's generation records."""

from __future__ import annotations

from adamem.packs import PackSelection
from adamem.projections.folds.apply import Positioned
from adamem.projections.folds.rows import PersonaRow
from adamem.projections.folds.testing import DAY, T0, Chat, attr
from adamem.projections.projector import Projector
from adamem.projections.store.memory import InMemoryStore

TOPIC = "adamem.analyses"


def likes_tea_twice(tenant: str) -> list[Positioned]:
    chat = Chat(tenant=tenant)
    return [
        chat.say("I like green tea.", at=T0, conv="c1", attributes=[attr("likes", "green tea", 0.9)]),
        chat.say("Green tea again for me.", at=T0 + DAY, conv="c2", attributes=[attr("likes", "green tea", 0.9)]),
        chat.say("Hello.", at=T0 + 2 * DAY, conv="c3"),  # closes c2: its attribute is consolidated
    ]


def stable_traits(store: InMemoryStore, tenant: str) -> list[tuple[str, int]]:
    rows = store.load_owner(f"{tenant}:alice")
    return [(r.value, r.mention_count) for r in rows if isinstance(r, PersonaRow) and r.stable]


def project(record: dict[str, str]) -> InMemoryStore:
    store = InMemoryStore()
    store.bind(1)
    store.record_generation(record)
    events = [*likes_tea_twice("helpdesk"), *likes_tea_twice("school"), *likes_tea_twice("plain")]
    Projector(store).apply_batch(0, TOPIC, [Positioned(p.event, TOPIC, 0, i) for i, p in enumerate(events)])
    return store


def test_a_customer_service_tenant_forms_persona_faster_than_the_others() -> None:
    selection = PackSelection.parse("helpdesk:customer-service,school:education")
    store = project({"name": "g1", "topic": TOPIC, "packs_content": selection.to_record()})
    assert stable_traits(store, "helpdesk") == [("green tea", 2)]  # two mentions are enough there
    assert stable_traits(store, "school") == []
    assert stable_traits(store, "plain") == []  # the seed's three mentions


def test_without_recorded_packs_every_tenant_has_the_seed_pace() -> None:
    store = project({"name": "g1", "topic": TOPIC})
    assert stable_traits(store, "helpdesk") == []
