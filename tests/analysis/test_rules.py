"""The rule extractor as a specification, in English and Chinese."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from adamem.analysis import Extraction, Extractor
from adamem.analysis.rules import RULES_VERSION, RuleExtractor, split_sentences
from adamem.analysis.timecalc import day_ms
from adamem.events import ChatMessage, Speaker

SAMPLE = Path(__file__).resolve().parents[2] / "src" / "adamem" / "samples" / "sample_conversation.jsonl"
EXTRACTOR = RuleExtractor()


def ms(iso: str) -> int:
    return int(dt.datetime.fromisoformat(iso).timestamp() * 1000)


def day(iso_date: str) -> int:
    return day_ms(dt.date.fromisoformat(iso_date))


def message(text: str, speaker: str = "Alice", at: str = "2024-04-01T08:15:00+00:00", **metadata: str) -> ChatMessage:
    return ChatMessage(
        event_id="e1",
        user_id="alice",
        conversation_id="c1",
        message_id="m1",
        speaker=Speaker(role="user", name=speaker),
        text=text,
        occurred_at=ms(at),
        metadata=dict(metadata),
    )


def extract(text: str, speaker: str = "Alice", at: str = "2024-04-01T08:15:00+00:00", **metadata: str) -> Extraction:
    return EXTRACTOR.extract(message(text, speaker, at, **metadata))


def attrs(e: Extraction) -> dict[tuple[str, str], float]:
    return {(a.key, a.value): a.confidence for a in e.attributes}


def facts(e: Extraction) -> dict[str, tuple[str, str]]:
    return {f.key: (f.content, f.type) for f in e.facts}


def test_is_an_extractor_with_a_recorded_identity() -> None:
    extractor: Extractor = RuleExtractor()
    assert (extractor.name, extractor.version, extractor.model) == ("rules", RULES_VERSION, "")


# --- facts: where the speaker lives, works, who they know --------------------------------------


def test_moving_from_a_to_b_means_living_in_b() -> None:
    e = extract("I moved from Shanghai to Beijing")
    assert facts(e) == {"lives_in": ("Alice lives in Beijing (moved from Shanghai)", "location")}
    assert e.facts[0].confidence >= 0.8
    assert e.entities == ("Shanghai", "Beijing")


def test_chinese_moving_means_living_in_the_destination() -> None:
    e = extract("我从上海搬到北京", speaker="小明")
    assert facts(e) == {"lives_in": ("小明住在北京（从上海搬来）", "location")}
    assert e.facts[0].confidence >= 0.8
    assert e.entities == ("上海", "北京")


@pytest.mark.parametrize(
    ("text", "speaker", "expected"),
    [
        ("I live in New York.", "Alice", {"lives_in": ("Alice lives in New York", "location")}),
        ("我现在住在上海。", "小明", {"lives_in": ("小明住在上海", "location")}),
        ("I'm from Sweden.", "Alice", {"from": ("Alice is from Sweden", "location")}),
        ("我是四川人。", "小明", {"from": ("小明来自四川", "location")}),
        (
            "I'm a data engineer at a startup.",
            "Alice",
            {"job": ("Alice is a data engineer", "work"), "works_at": ("Alice works at a startup", "work")},
        ),
        (
            "I work at Google as an engineer.",
            "Alice",
            {"works_at": ("Alice works at Google", "work"), "job": ("Alice is an engineer", "work")},
        ),
        ("我在字节跳动工作。", "小明", {"works_at": ("小明在字节跳动工作", "work")}),
        ("我是程序员。", "小明", {"job": ("小明是程序员", "work")}),
        (
            "The company is in Haidian, Beijing.",
            "Alice",
            {"company_location": ("Alice's company is in Haidian, Beijing", "work")},
        ),
        ("公司在海淀。", "小明", {"company_location": ("小明的公司在海淀", "work")}),
        ("My husband Tom is a chef.", "Alice", {"husband": ("Alice's husband is Tom", "relationship")}),
        ("My sister Emma is visiting.", "Alice", {"sister:emma": ("Alice's sister is Emma", "relationship")}),
        ("我姐姐叫小红，她是护士。", "小明", {"sister:小红": ("小明的姐姐叫小红", "relationship")}),
        ("My dog Max is sick.", "Alice", {"pet:max": ("Alice has a dog named Max", "pet")}),
        ("我养了一只猫，叫咪咪。", "小明", {"pet:咪咪": ("小明养了一只猫，叫咪咪", "pet")}),
        ("I have asthma.", "Alice", {"health:asthma": ("Alice has asthma", "health")}),
        ("我被诊断出高血压。", "小明", {"health:高血压": ("小明患有高血压", "health")}),
    ],
)
def test_facts_about_the_speaker(text: str, speaker: str, expected: dict[str, tuple[str, str]]) -> None:
    e = extract(text, speaker=speaker)
    assert facts(e) == expected
    assert all(f.confidence > 0.7 for f in e.facts)


def test_check_up_results_are_a_health_fact_in_english_and_chinese() -> None:
    en = extract("My annual check-up report showed high blood lipids")
    zh = extract("体检报告显示我血脂偏高", speaker="小明")
    assert facts(en) == {"health:blood lipids": ("Alice's annual check-up report showed high blood lipids", "health")}
    assert facts(zh) == {"health:血脂": ("小明的体检报告显示血脂偏高", "health")}
    assert "health" in en.topics
    assert "health" in zh.topics


def test_same_slot_means_conflicting_facts() -> None:
    first = extract("I live in Shanghai.")
    later = extract("I moved to Beijing.")
    assert first.facts[0].key == later.facts[0].key == "lives_in"
    assert first.facts[0].content != later.facts[0].content


# --- attributes: preferences and traits --------------------------------------------------------


def test_likes_in_english_and_chinese_pass_the_add_threshold() -> None:
    assert attrs(extract("I love spicy food")) == {("likes", "spicy food"): 0.9}
    assert attrs(extract("我喜欢吃辣的川菜", speaker="小明")) == {("likes", "辣的川菜"): 0.85}


def test_likes_value_is_normalised_and_especially_adds_a_second() -> None:
    e = extract("I love spicy food, especially Sichuan hotpot.")
    assert attrs(e) == {("likes", "spicy food"): 0.9, ("likes", "sichuan hotpot"): 0.85}
    assert attrs(extract("Honestly I love spicy food more than anything, even after the check-up.")) == {
        ("likes", "spicy food"): 0.9
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I'm allergic to peanuts, so I have to read every label.", {("allergy", "peanuts")}),
        ("I have a peanut allergy.", {("allergy", "peanut")}),
        ("我对花生过敏。", {("allergy", "花生")}),
        ("I hate mushrooms.", {("dislikes", "mushrooms")}),
        ("I don't like horror movies.", {("dislikes", "horror movies")}),
        ("我讨厌香菜。", {("dislikes", "香菜")}),
        ("我不喜欢吃辣。", {("dislikes", "辣")}),
        ("My favourite food is dumplings.", {("favourite_food", "dumplings")}),
        ("My favorite color is blue.", {("favourite_colour", "blue")}),
        ("我最喜欢的运动是跑步。", {("favourite_sport", "跑步")}),
        ("Hunan dishes are my new favourite.", {("likes", "hunan dishes")}),
        ("I'm a vegetarian and an introvert.", {("diet", "vegetarian"), ("trait", "introvert")}),
        ("我是素食者。", {("diet", "素食者")}),
        ("我很内向。", {("trait", "内向")}),
        ("I'm a big fan of pottery - it is calming.", {("likes", "pottery")}),
        ("My hobbies are hiking, chess and baking.", {("hobby", "hiking"), ("hobby", "chess"), ("hobby", "baking")}),
    ],
)
def test_attributes_of_the_speaker(text: str, expected: set[tuple[str, str]]) -> None:
    e = extract(text, speaker="小明" if not text.isascii() else "Alice")
    assert set(attrs(e)) == expected
    assert all(a.confidence >= 0.8 for a in e.attributes)


def test_hedged_statements_get_lower_confidence() -> None:
    possible = extract("Maybe I like jazz.")
    guess = extract("I guess I like jazz.")
    zh = extract("我可能喜欢爵士乐。", speaker="小明")
    assert (possible.certainty, attrs(possible)) == ("possible", {("likes", "jazz"): 0.59})
    assert (guess.certainty, attrs(guess)) == ("guess", {("likes", "jazz"): 0.47})
    assert (zh.certainty, attrs(zh)) == ("possible", {("likes", "爵士乐"): 0.59})


@pytest.mark.parametrize(
    "text",
    [
        "Do you like jazz?",
        "What do you love about it?",
        "Do I like spicy food?",
        "你喜欢吃辣吗？",
        "我喜欢什么？",
        "I love that!",
        "I love how you paint.",
        "You love spicy food.",
        "She lives in Paris.",
    ],
)
def test_questions_and_other_peoples_statements_give_nothing_about_the_speaker(text: str) -> None:
    e = extract(text)
    assert (e.attributes, e.facts) == ((), ())


# --- events: bounded in time, resolved against occurred_at -------------------------------------


def test_past_action_with_a_time_expression_is_an_event() -> None:
    e = extract("I went to the gym yesterday", at="2024-04-01T08:15:00+00:00")
    assert [(v.content, v.when, v.when_text) for v in e.events] == [
        ("Alice went to the gym yesterday", day("2024-03-31"), "yesterday")
    ]
    assert e.events[0].confidence > 0.7
    assert "fitness" in e.topics


def test_chinese_past_action_is_an_event() -> None:
    e = extract("我昨天去了健身房，人很多。", speaker="小明", at="2024-06-03T09:00:00+08:00")
    assert [(v.content, v.when, v.when_text) for v in e.events] == [
        ("小明昨天去了健身房，人很多。", day("2024-06-02"), "昨天")
    ]
    assert "fitness" in e.topics


def test_two_weeks_ago_in_chinese() -> None:
    e = extract("两周前我第一次跑完了五公里。", speaker="小明", at="2024-06-03T09:02:00+08:00")
    assert [(v.when, v.when_text) for v in e.events] == [(day("2024-05-20"), "两周前")]
    assert e.topics == ("fitness",)


def test_decisions_are_events_without_a_time() -> None:
    en = extract("I decided to start working out three times a week.")
    zh = extract("我决定开始健身，每周三晚上去健身房。", speaker="小明")
    assert [(v.content, v.when, v.confidence) for v in en.events] == [
        ("Alice decided to start working out three times a week.", None, 0.8)
    ]
    assert [(v.content, v.when) for v in zh.events] == [("小明决定开始健身，每周三晚上去健身房。", None)]


def test_subjectless_past_gets_the_speaker_as_subject() -> None:
    e = extract("Went to the gym again on Wednesday evening, feeling stronger.", at="2024-04-15T21:00:00+00:00")
    assert [(v.content, v.when) for v in e.events] == [
        ("Alice went to the gym again on Wednesday evening, feeling stronger.", day("2024-04-10"))
    ]


def test_local_day_comes_from_the_utc_offset_metadata() -> None:
    late = "2024-06-02T23:30:00+00:00"  # 07:30 on 3 June in Beijing
    assert extract("我昨天去了健身房。", speaker="小明", at=late).events[0].when == day("2024-06-01")
    beijing = extract("我昨天去了健身房。", speaker="小明", at=late, utc_offset="+08:00")
    assert beijing.events[0].when == day("2024-06-02")


def test_statements_without_action_or_time_are_not_events() -> None:
    assert extract("I love spicy food.").events == ()
    assert extract("我对花生过敏。", speaker="小明").events == ()
    assert extract("Thanks, I will.").events == ()


# --- dialog act, certainty, topics, sentiment, entities, summary -------------------------------


@pytest.mark.parametrize(
    ("text", "act"),
    [
        ("I love hiking.", "statement"),
        ("Did the doctor suggest anything?", "question"),
        ("What is the new job", "question"),
        ("That's great! Where did you go?", "question"),
        ("Can you recommend a restaurant?", "request"),
        ("Please remind me to call my mom.", "request"),
        ("新工作怎么样？", "question"),
        ("你去过北京吗", "question"),
        ("为什么", "question"),
        ("请帮我订一张机票。", "request"),
        ("没什么特别的。", "statement"),
    ],
)
def test_dialog_act(text: str, act: str) -> None:
    assert extract(text).dialog_act == act


def test_topics_share_labels_across_languages() -> None:
    assert extract("I went to the gym").topics == ("fitness",)
    assert extract("我去了健身房", speaker="小明").topics == ("fitness",)
    assert extract("My sister adopted a puppy").topics == ("family", "pets")
    assert extract("我姐姐养了一只小狗", speaker="小明").topics == ("family", "pets")


def test_sentiment_is_lexicon_based_and_bounded() -> None:
    assert extract("I love it, it was amazing and wonderful!").sentiment == 0.75
    assert extract("I am not happy, it was terrible.").sentiment == -0.667
    assert extract("我很开心。", speaker="小明").sentiment == 0.6
    assert extract("我不开心。", speaker="小明").sentiment == -0.5
    assert extract("The meeting is at noon.").sentiment == 0.0


def test_entities_are_names_and_places_not_sentence_starters() -> None:
    assert extract("Good idea. My sister Emma is visiting next weekend.").entities == ("Emma",)
    assert extract("Hey Mel! Harry Potter is my favourite book.").entities == ("Mel", "Harry Potter")
    assert extract("Beijing is huge. Went there with Tom.").entities == ("Beijing", "Tom")


def test_summary_is_the_first_real_sentence_prefixed_with_the_speaker() -> None:
    assert extract("Hi! I just moved from Shanghai to Beijing for a new job.").summary == (
        "Alice: I just moved from Shanghai to Beijing for a new job."
    )
    long = extract("I " + "really " * 40 + "love tea.").summary
    assert long.startswith("Alice: I really really") and long.endswith("…")
    assert len(long) <= len("Alice: ") + 120


def test_split_sentences_in_both_languages() -> None:
    expected = ["Hi!", "I moved.", "Did you?", "我搬家了。", "你呢？"]
    assert split_sentences("Hi! I moved. Did you? 我搬家了。你呢？") == expected
    assert split_sentences("It costs 5.5 dollars.\nOk") == ["It costs 5.5 dollars.", "Ok"]


# --- determinism and the sample conversation ----------------------------------------------------


def test_same_message_twice_gives_the_identical_extraction() -> None:
    text = "I love spicy food, especially Sichuan hotpot. I went to the gym yesterday! 我从上海搬到北京。"
    assert RuleExtractor().extract(message(text)) == RuleExtractor().extract(message(text))


def _sample() -> list[ChatMessage]:
    rows = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [
        ChatMessage(
            event_id=r["message_id"],
            user_id=r["user_id"],
            conversation_id=r["conversation_id"],
            message_id=r["message_id"],
            speaker=Speaker(role=r["role"], name=r["speaker"]),
            text=r["text"],
            occurred_at=ms(r["occurred_at"].replace("Z", "+00:00")),
        )
        for r in rows
    ]


def test_sample_conversation_gives_the_expected_memories() -> None:
    by_id = {m.message_id: EXTRACTOR.extract(m) for m in _sample()}
    assert set(attrs(by_id["s1-4"])) == {("likes", "spicy food"), ("likes", "sichuan hotpot")}
    assert set(attrs(by_id["s3-1"])) == {("likes", "spicy food"), ("likes", "hunan dishes")}
    assert set(attrs(by_id["s2-4"])) == {("allergy", "peanuts")}
    assert set(facts(by_id["s1-1"])) == {"lives_in"}
    assert set(facts(by_id["s1-3"])) == {"job", "works_at", "company_location"}
    assert set(facts(by_id["s2-1"])) == {"health:blood lipids"}
    assert set(facts(by_id["s4-4"])) == {"sister:emma"}
    assert by_id["s4-1"].events[0].when == day("2024-03-31")
    assert by_id["s5-3"].events[0].when == day("2024-04-01")
    assert by_id["s5-2"].certainty == "possible"
    assert set(facts(by_id["z1-1"])) == {"lives_in", "company_location"}
    assert set(attrs(by_id["z1-3"])) == {("likes", "辣的川菜")}
    assert set(facts(by_id["z2-1"])) == {"health:血脂"}
    assert set(attrs(by_id["z2-2"])) == {("allergy", "花生")}
    assert by_id["z4-1"].events[0].when == day("2024-06-02")
    assert by_id["z4-3"].events[0].when == day("2024-05-20")
    for question in ("s1-2", "s2-2", "s3-3", "s4-3", "z1-2"):
        assert by_id[question].dialog_act == "question"
        assert (by_id[question].attributes, by_id[question].facts) == ((), ())
    assert all(e.summary.startswith(("Alice: ", "Assistant: ", "小明: ", "助手: ")) for e in by_id.values())


@pytest.mark.parametrize("text", ["", "   ", "?!", "。。。", "I", "我", "I love", "我喜欢", "😀 🍕", "I love " * 2000])
def test_degenerate_texts_do_not_fail(text: str) -> None:
    e = extract(text)
    assert e.facts == () and -1.0 <= e.sentiment <= 1.0
