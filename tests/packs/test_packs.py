"""Domain packs: the file format, its validation, term expansion, typed mentions, per-tenant selection."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from adamem.errors import ConfigError
from adamem.packs import SHIPPED, PackSelection, Relation, load_pack, parse_pack
from adamem.projections.folds.params import SEED_DEFAULT
from adamem.projections.packs import pack_parameters

MINIMAL = """
name = "vet"
[terms.en]
BID = "twice a day"
[terms.zh]
BID = "每天两次"
[lexicon.sign]
en = ["limping"]
zh = ["跛行"]
[lexicon.remedy]
en = ["cast"]
zh = ["石膏"]
[[relations]]
from = "sign"
to = "remedy"
name = "relieved_by"
[pace]
persona_min_evidence = 4
add_threshold = 0.6
"""


def test_every_shipped_pack_loads_by_name() -> None:
    for name in SHIPPED:
        assert load_pack(name).name == name
    medical = load_pack("medical")
    assert {k for k, _, _ in medical.lexicon} == {"symptom", "diagnosis", "test", "treatment"}
    assert Relation("symptom", "diagnosis", "indicates", 0.85) in medical.relations
    assert dict(load_pack("customer-service").pace)["persona_min_evidence"] < SEED_DEFAULT.persona_min_evidence
    assert dict(load_pack("education").pace)["persona_min_evidence"] > SEED_DEFAULT.persona_min_evidence


def test_a_users_pack_loads_from_its_file(tmp_path: Path) -> None:
    path = tmp_path / "vet.toml"
    path.write_text(MINIMAL, encoding="utf-8")
    pack = load_pack(str(path))
    assert pack.name == "vet"
    assert pack.relations == (Relation("sign", "remedy", "relieved_by", 0.8),)
    assert dict(pack.pace) == {"persona_min_evidence": 4, "add_threshold": 0.6}
    assert pack.digest == load_pack(str(path)).digest
    path.write_text(MINIMAL.replace("limping", "lameness"), encoding="utf-8")
    assert load_pack(str(path)).digest != pack.digest


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("persona_min_evidence = 4", 'persona_min_evidence = "4"'), r"pace\.persona_min_evidence: must be a number"),
        (('to = "remedy"', 'to = "cure"'), r"relations\[0\]\.to: 'cure' is not a type"),
        (('name = "relieved_by"', 'name = "Relieved By"'), r"relations\[0\]\.name"),
        (('zh = ["石膏"]', 'zh = ["跛行"]'), r"lexicon\.sign: '跛行' is also a term of lexicon\.remedy"),
        (('name = "vet"', 'name = "vet"\n[extras]\nx = 1'), r"extras: unknown section"),
        (("[terms.zh]", "[terms.fr]"), r"terms\.fr: terms are given per language"),
        (('name = "vet"', 'name = "vet" = 2'), r"not valid TOML"),
        (('name = "vet"', ""), r"name: required"),
    ],
)
def test_a_bad_pack_is_refused_naming_its_file_and_key(tmp_path: Path, change: tuple[str, str], message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(MINIMAL.replace(*change, 1), encoding="utf-8")
    with pytest.raises(ConfigError, match=message) as caught:
        load_pack(str(path))
    assert str(path) in str(caught.value)


def test_an_unknown_pack_name_is_refused() -> None:
    with pytest.raises(ConfigError, match="neither a shipped pack"):
        load_pack("astrology")
    with pytest.raises(ConfigError, match="cannot be read"):
        load_pack("/nonexistent/pack.toml")


def test_terms_expand_whole_words_only_with_case_rules_for_latin_and_per_language() -> None:
    medical = load_pack("medical")
    assert medical.expand("My BP was high; the CXR was clear.", False) == (
        "My blood pressure was high; the chest X-ray was clear."
    )
    # whole words only, and an all-capital abbreviation matches its own case only
    assert medical.expand("BPM, GPS and bp stay as they are.", False) == "BPM, GPS and bp stay as they are."
    # a key with lower-case letters matches any case
    assert medical.expand("RX and rx", False) == "prescription and prescription"
    # Chinese text takes the Chinese table: the abbreviation between Chinese characters is still a whole word
    assert (
        medical.expand("医生看了我的CXR，BP有点高，怀疑心梗。", True) == "医生看了我的胸片，血压有点高，怀疑心肌梗死。"
    )


def test_mentions_are_typed_in_order_and_longest_terms_win() -> None:
    medical = load_pack("medical")
    assert medical.mentions("A headache, then the doctor said Migraine and gave me ibuprofen after a CT scan.") == [
        ("symptom", "headache"),
        ("diagnosis", "migraine"),
        ("treatment", "ibuprofen"),
        ("test", "CT scan"),
    ]
    # 偏头痛 is a diagnosis, not also the symptom 头痛 inside it
    assert medical.mentions("医生说是偏头痛，我一直头痛，做了CT。") == [
        ("diagnosis", "偏头痛"),
        ("symptom", "头痛"),
        ("test", "CT"),
    ]
    assert medical.mentions("The headaches of management.") == [("symptom", "headaches")]
    assert load_pack("ecommerce").mentions("我下单了那条围巾，她最爱绿色。") == [
        ("purchase", "下单"),
        ("product", "围巾"),
        ("preference", "最爱"),
    ]


def test_a_selection_chooses_packs_per_tenant_with_a_fallback() -> None:
    selection = PackSelection.parse("clinic:medical, shop:ecommerce+customer-service, *:education")
    assert [p.name for p in selection.packs_for("clinic")] == ["medical"]
    assert [p.name for p in selection.packs_for("shop")] == ["ecommerce", "customer-service"]
    assert [p.name for p in selection.packs_for("school")] == ["education"]
    assert PackSelection.parse("").by_tenant == ()
    assert PackSelection.parse("").digest == ""
    params = pack_parameters(selection, SEED_DEFAULT)
    assert params["shop"].persona_min_evidence == 2  # customer-service's, the later pack
    assert params["shop"].persona_stable_strength == 0.5
    assert ("preference", "purchase", "motivated", 0.8) in params["shop"].relations
    assert params["*"].persona_min_evidence == 5 and params["*"].relations == ()
    assert params["clinic"].persona_min_evidence == SEED_DEFAULT.persona_min_evidence
    assert SEED_DEFAULT.relations == ()  # the preset is copied, never changed


@pytest.mark.parametrize("spec", ["medical", ":medical", "a:medical,a:ecommerce", "a:"])
def test_a_malformed_selection_is_refused(spec: str) -> None:
    with pytest.raises(ConfigError, match="ADAMEM_PACKS"):
        PackSelection.parse(spec)


def test_a_recorded_selection_is_rebuilt_from_its_text_not_from_files(tmp_path: Path) -> None:
    path = tmp_path / "vet.toml"
    path.write_text(MINIMAL, encoding="utf-8")
    selection = PackSelection.parse(f"farm:{path}+medical")
    recorded = selection.to_record()
    path.write_text(MINIMAL.replace("limping", "lameness"), encoding="utf-8")  # the file changes afterwards
    again = PackSelection.from_record(recorded)
    assert again.digest == selection.digest
    assert again.packs_for("farm")[0].mentions("limping") == [("sign", "limping")]
    assert PackSelection.parse(f"farm:{path}+medical").digest != selection.digest
    with pytest.raises(ConfigError, match="unreadable domain packs"):
        PackSelection.from_record("{not json")


def test_a_pack_parsed_from_text_names_its_origin_in_errors() -> None:
    with pytest.raises(ConfigError, match=r"domain pack inline: pace\.add_threshold: must not be negative"):
        parse_pack('name = "x"\n[pace]\nadd_threshold = -1\n', "inline")


@pytest.mark.parametrize(
    ("pace", "message"),
    [
        ("working_speed = 3", r"domain pack vet: pace\.working_speed: not a memory parameter"),
        ("persona_min_evidence = 2.5", r"domain pack vet: pace\.persona_min_evidence: must be an integer"),
    ],
)
def test_pace_keys_are_checked_against_the_memory_parameters(pace: str, message: str) -> None:
    pack = parse_pack(MINIMAL.replace("persona_min_evidence = 4", pace), "vet.toml")
    with pytest.raises(ConfigError, match=message):
        pack_parameters(PackSelection((("farm", (pack,)),)), SEED_DEFAULT)


def test_the_guides_examples_are_valid_packs_and_the_excerpts_agree_with_the_shipped_ones() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "guides" / "domain-packs.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```toml\n(.*?)^```$", page, flags=re.S | re.M)
    packs = [parse_pack(block, f"guide example {n}") for n, block in enumerate(blocks, 1)]
    assert [p.name for p in packs] == ["vet", "medical", "ecommerce"]
    for excerpt in packs[1:]:
        shipped = load_pack(excerpt.name)
        kinds = {w: k for k, en, zh in shipped.lexicon for w in (*en, *zh)}
        assert all(kinds[w] == k for k, en, zh in excerpt.lexicon for w in (*en, *zh))
        assert set(excerpt.relations) <= set(shipped.relations)
        assert set(excerpt.terms_en) <= set(shipped.terms_en) and set(excerpt.terms_zh) <= set(shipped.terms_zh)
        assert set(excerpt.pace) <= set(shipped.pace)
    vet = packs[0]
    assert vet.expand("Give it BID after the XR.", False) == "Give it twice a day after the X-ray."
    assert vet.mentions("狗狗跛行，医生打了石膏。") == [("sign", "跛行"), ("remedy", "石膏")]


def test_a_generation_is_shown_with_its_packs_but_without_their_text() -> None:
    from adamem.settings import Settings
    from adamem.streams.generations import analyzer_summary, generation_record

    record = generation_record(Settings(packs="clinic:medical"))
    shown = analyzer_summary(record)
    digest = record["packs_digest"][:12]
    assert shown == f"extractor=rules, embedder=e5-pair, packs=clinic:medical, packs_digest={digest}"
    assert analyzer_summary(generation_record(Settings())) == "extractor=rules, embedder=e5-pair"
