"""Domain packs end to end through ``Memory``: recorded per tenant in the generation, used by analysis,
folds and retrieval — in English and Chinese."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from adamem import Answer, Memory, Settings
from adamem.projections.folds.rows import GraphEdgeRow, GraphNodeRow
from adamem.retrieval.config import BUILT_IN_EDGES
from adamem.streams.generations import settings_for

MEDICAL = {
    "en": [
        ("c1", "2026-03-02T09:00:00Z", "I've had a bad headache and nausea since Monday."),
        ("c1", "2026-03-02T09:02:00Z", "My sister Ana plays the cello in an orchestra."),
        ("c1", "2026-03-02T09:03:00Z", "We are repainting the kitchen a pale yellow."),
        ("c1", "2026-03-02T09:04:00Z", "The train to work was late again this morning."),
        ("c2", "2026-03-03T10:00:00Z", "The doctor said it is a migraine."),
        ("c2", "2026-03-03T10:01:00Z", "The clinic had a new coffee machine in the lobby."),
        ("c2", "2026-03-03T10:05:00Z", "She gave me ibuprofen."),
    ],
    "zh": [
        ("c1", "2026-03-02T09:00:00Z", "我这几天一直头痛，还有点恶心。"),
        ("c1", "2026-03-02T09:02:00Z", "我妹妹在乐团里拉大提琴。"),
        ("c1", "2026-03-02T09:03:00Z", "我们把厨房刷成了淡黄色。"),
        ("c1", "2026-03-02T09:04:00Z", "今天早上去上班的地铁又晚点了。"),
        ("c2", "2026-03-03T10:00:00Z", "医生说是偏头痛。"),
        ("c2", "2026-03-03T10:01:00Z", "诊所大厅里新放了一台咖啡机。"),
        ("c2", "2026-03-03T10:05:00Z", "医生给我开了布洛芬。"),
    ],
}
WHY = {"en": "Why was I given ibuprofen?", "zh": "为什么给我开布洛芬？"}

SHOP = {
    "en": [
        ("c1", "2026-03-02T09:00:00Z", "My sister Mia loves cashmere and green is her favourite colour."),
        ("c1", "2026-03-02T09:02:00Z", "The weather has been rainy all week."),
        ("c1", "2026-03-02T09:03:00Z", "I finished reading a novel about sailors."),
        ("c2", "2026-03-05T10:00:00Z", "I was comparing scarves online during lunch."),
        ("c2", "2026-03-05T10:01:00Z", "My manager moved our meeting to Friday."),
        ("c2", "2026-03-05T10:05:00Z", "I ordered the green cashmere scarf for her birthday."),
    ],
    "zh": [
        ("c1", "2026-03-02T09:00:00Z", "我妹妹米娅很喜欢羊绒，最爱绿色。"),
        ("c1", "2026-03-02T09:02:00Z", "这周一直在下雨。"),
        ("c1", "2026-03-02T09:03:00Z", "我看完了一本关于水手的小说。"),
        ("c2", "2026-03-05T10:00:00Z", "午饭时我在网上比较了几条围巾。"),
        ("c2", "2026-03-05T10:01:00Z", "经理把我们的会挪到了周五。"),
        ("c2", "2026-03-05T10:05:00Z", "我下单了那条绿色羊绒围巾，给她当生日礼物。"),
    ],
}
BOUGHT = {"en": "What did I buy for my sister?", "zh": "我给妹妹买了什么？"}


def settings(root: Path, packs: str) -> Settings:
    return Settings(
        log_url=str(root / "log"), store_url=str(root / "store"), home=str(root / "home"), packs=packs, progress=False
    )


def remember(m: Memory, dialogue: list[tuple[str, str, str]], tenant: str) -> None:
    for conversation, at, text in dialogue:
        m.add("alice", text, occurred_at=at, conversation_id=conversation, tenant=tenant)


def edges(m: Memory, tenant: str) -> set[tuple[str, str, str]]:
    """(edge type, source text, target text) of the owner's message-to-message relation edges."""
    rows = m.store.load_owner(m.owner("alice", tenant))
    labels = {r.id: r.label for r in rows if isinstance(r, GraphNodeRow) and r.node_type == "message"}
    return {
        (r.edge_type, labels[r.src], labels[r.dst])
        for r in rows
        if isinstance(r, GraphEdgeRow) and r.edge_type not in BUILT_IN_EDGES
    }


def path_to(answer: Answer, text: str) -> list[str]:
    item = next(i for i in answer.items if i.content == text)
    return [step.edge_type for step in item.hop_path]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_why_was_i_given_a_treatment_reaches_the_symptom_through_the_medical_edges(tmp_path: Path, lang: str) -> None:
    dialogue = MEDICAL[lang]
    symptom, diagnosis, treatment = dialogue[0][2], dialogue[4][2], dialogue[6][2]
    with Memory(settings(tmp_path / "with", "clinic:medical")) as m:
        remember(m, dialogue, "clinic")
        assert {("indicates", symptom, diagnosis), ("treated_with", diagnosis, treatment)} <= edges(m, "clinic")
        answer = m.query("alice", WHY[lang], tenant="clinic", top_k=5)
        assert answer.items[0].content == treatment
        assert path_to(answer, symptom) == ["", "treated_with", "indicates"]
        assert path_to(answer, diagnosis) == ["", "treated_with"]
    # the same dialogue in a tenant without packs: no relation edges, the symptom message is no graph hit
    with Memory(settings(tmp_path / "without", "clinic:medical")) as m:
        remember(m, dialogue, "other")
        assert edges(m, "other") == set()
        answer = m.query("alice", WHY[lang], tenant="other", top_k=5)
        assert all("indicates" not in [s.edge_type for s in i.hop_path] for i in answer.items)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_what_did_i_buy_for_my_sister_finds_the_purchase_linked_to_her_preference(tmp_path: Path, lang: str) -> None:
    dialogue = SHOP[lang]
    preference, browsing, purchase = dialogue[0][2], dialogue[3][2], dialogue[5][2]
    with Memory(settings(tmp_path, "shop:ecommerce")) as m:
        remember(m, dialogue, "shop")
        assert {("motivated", preference, purchase), ("purchased", browsing, purchase)} <= edges(m, "shop")
        answer = m.query("alice", BOUGHT[lang], tenant="shop", top_k=5)
        assert purchase in [i.content for i in answer.items]
        # the read side folds as-of views and sessions with the tenant's recorded pace too
        assert m.retriever.params_for(m.owner("alice", "shop")).persona_min_evidence == 2
        assert m.retriever.params_for(m.owner("alice", "other")).persona_min_evidence == 3


def test_the_generation_records_the_packs_and_a_changed_setting_changes_nothing_silently(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with Memory(settings(tmp_path, "clinic:medical")) as m:
        m.add("alice", "The doctor said it is a migraine.", tenant="clinic", occurred_at="2026-03-03T10:00:00Z")
        record = m.store.generation()
        assert record is not None and record["packs"] == "clinic:medical" and len(record["packs_digest"]) == 64
    assert settings_for(Settings(), record).packs_record == record["packs_content"]
    # the environment now asks for another pack: the store's generation keeps analysing with medical
    with (
        caplog.at_level(logging.WARNING, logger="adamem.generations"),
        Memory(settings(tmp_path, "clinic:ecommerce")) as m,
    ):
        m.add("alice", "She gave me ibuprofen.", tenant="clinic", occurred_at="2026-03-03T10:05:00Z")
        assert m.store.generation() == record
        assert ("treated_with", "The doctor said it is a migraine.", "She gave me ibuprofen.") in edges(m, "clinic")
    assert "adamem reanalyze --packs clinic:ecommerce" in caplog.text


def test_a_replay_with_packs_equals_live_and_keeps_the_relation_edges(tmp_path: Path) -> None:
    with Memory(settings(tmp_path, "clinic:medical")) as m:
        remember(m, MEDICAL["en"], "clinic")
        live = edges(m, "clinic")
        report = m.replay(verify=True)
        assert report.verified is True
        assert edges(m, "clinic") == live and len(live) == 2
        # and one owner rebuilt in place
        assert m.replay("alice", tenant="clinic").events == len(MEDICAL["en"])
        assert edges(m, "clinic") == live


def test_an_unreadable_pack_setting_on_a_recorded_store_is_a_warning_not_a_failure(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with Memory(settings(tmp_path, "clinic:medical")) as m:
        m.add("alice", "The doctor said it is a migraine.", tenant="clinic", occurred_at="2026-03-03T10:00:00Z")
    with (
        caplog.at_level(logging.WARNING, logger="adamem.generations"),
        Memory(settings(tmp_path, f"clinic:{tmp_path / 'gone.toml'}")) as m,
    ):
        m.add("alice", "She gave me ibuprofen.", tenant="clinic", occurred_at="2026-03-03T10:05:00Z")
        assert ("treated_with", "The doctor said it is a migraine.", "She gave me ibuprofen.") in edges(m, "clinic")
    assert "ignoring ADAMEM_PACKS" in caplog.text
