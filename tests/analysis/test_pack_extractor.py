"""A tenant's domain packs around the rule extractor: expanded terms and typed mentions, English and Chinese."""

from __future__ import annotations

from adamem.analysis.factory import build_extractor
from adamem.analysis.packs import PackExtractor
from adamem.analysis.rules import RuleExtractor
from adamem.events import ChatMessage, ExtractedFact, Speaker
from adamem.packs import PackSelection
from adamem.settings import Settings

T = 1_711_959_300_000  # 2024-04-01T08:15:00Z


def message(text: str, tenant: str = "clinic") -> ChatMessage:
    return ChatMessage("e1", "alice", "c1", "m1", Speaker("user", "Alice"), text, T, tenant=tenant)


def typed(facts: tuple[ExtractedFact, ...]) -> list[tuple[str, str]]:
    return [(f.type, f.content) for f in facts if f.type.startswith("term:")]


EXTRACTOR = PackExtractor(RuleExtractor(), PackSelection.parse("clinic:medical,shop:ecommerce"))


def test_english_terms_are_expanded_before_extraction_and_mentions_are_typed() -> None:
    z = EXTRACTOR.extract(message("I had high BP all week, so the doctor said hypertension and gave me beta blockers."))
    assert "blood pressure" in z.summary and "BP" not in z.summary
    assert typed(z.facts) == [
        ("term:symptom", "high blood pressure"),
        ("term:diagnosis", "hypertension"),
        ("term:treatment", "beta blockers"),
    ]
    assert {"hypertension", "beta blockers"} <= set(z.entities)
    assert all(f.confidence == 0.9 for f in z.facts if f.type.startswith("term:"))


def test_chinese_terms_are_expanded_and_mentions_are_typed() -> None:
    z = EXTRACTOR.extract(message("我BP有点高，医生说是高血压，给我开了降压药。"))
    assert "血压" in z.summary and "BP" not in z.summary
    assert typed(z.facts) == [("term:diagnosis", "高血压"), ("term:treatment", "降压药")]


def test_each_tenant_gets_its_own_packs_and_others_none() -> None:
    shop = EXTRACTOR.extract(message("I ordered the green scarf my sister loves.", tenant="shop"))
    assert typed(shop.facts) == [("term:purchase", "ordered"), ("term:product", "scarf"), ("term:preference", "loves")]
    plain = message("My BP was high and I ordered a scarf.", tenant="elsewhere")
    assert EXTRACTOR.extract(plain) == RuleExtractor().extract(plain)


def test_the_message_recorded_is_the_one_sent_and_the_packs_are_part_of_the_analyzer() -> None:
    text = "The CXR was clear."
    z = EXTRACTOR.extract(message(text))
    assert "chest X-ray" in z.summary
    assert EXTRACTOR.name == "rules"
    assert EXTRACTOR.version.startswith(f"{RuleExtractor.version}+packs.")
    other = PackExtractor(RuleExtractor(), PackSelection.parse("clinic:medical"))
    assert other.version != EXTRACTOR.version


def test_the_factory_wraps_the_extractor_only_when_a_tenant_has_packs() -> None:
    assert isinstance(build_extractor(Settings(packs="clinic:medical")), PackExtractor)
    assert isinstance(build_extractor(Settings()), RuleExtractor)
    recorded = PackSelection.parse("*:ecommerce").to_record()
    # a recorded selection wins over ADAMEM_PACKS: the generation analyses as it recorded
    built = build_extractor(Settings(packs="clinic:medical", packs_record=recorded))
    assert isinstance(built, PackExtractor)
    assert [p.name for p in built.selection.packs_for("clinic")] == ["ecommerce"]
