"""The sensitive-data filter of shared answers: e-mail, phone, ID and card numbers, health terms (EN and ZH)."""

from __future__ import annotations

import pytest

from adamem.api.sensitive import luhn_valid, mainland_id_valid, mask, mask_json


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("Mail me at alice.w@example.com.", "Mail me at [email]."),
        ("邮箱是zhang.san@qq.com，谢谢", "邮箱是[email]，谢谢"),
        ("Call me at 13812345678 tomorrow.", "Call me at [phone] tomorrow."),
        ("我的电话13812345678，或者+86 139 1234 5678", "我的电话[phone]，或者[phone]"),
        ("座机 010-12345678", "座机 [phone]"),
        ("Call +1 (555) 123-4567 or 555-123-4567 or +44 20 7946 0958.", "Call [phone] or [phone] or [phone]."),
        ("身份证号11010519491231002X请保密", "身份证号[id]请保密"),
        ("SSN 123-45-6789", "SSN [id]"),
        ("My card is 4111 1111 1111 1111.", "My card is [card]."),
        ("卡号4111111111111111", "卡号[card]"),
        ("I was diagnosed with Diabetes and take insulin.", "I was [health] with [health] and take [health]."),
        ("医生诊断我有高血压，需要吃药物。", "医生[health]我有[health]，需要吃[health]。"),
    ],
)
def test_each_kind_is_masked_in_english_and_chinese(text: str, masked: str) -> None:
    assert mask(text) == masked


@pytest.mark.parametrize(
    "text",
    [
        "I love sailing in 2024 with 3 friends.",
        "我周末去公园散步，走了10000步。",
        "event 5f0f3c1e-6a3b-4c59-9d1e-ada0e0000001 at 2024-02-01T10:00:00Z",
        "11010519491231002Y is no ID and 4111 1111 1111 1112 fails Luhn",
        "110105194912310021",  # 18 digits whose last is not the check digit
    ],
)
def test_ordinary_text_dates_ids_and_numbers_that_fail_their_checks_stay(text: str) -> None:
    assert mask(text) == text


def test_the_checks() -> None:
    assert mainland_id_valid("11010519491231002X") and mainland_id_valid("11010519491231002x")
    assert not mainland_id_valid("110105194912310021") and not mainland_id_valid("1101051949123100")
    assert luhn_valid("4111111111111111") and not luhn_valid("4111111111111112") and not luhn_valid("")


def test_json_answers_keep_ids_and_vocabulary_and_mask_free_text() -> None:
    answer = {
        "id": "13812345678",
        "layer": "episodic",
        "source_message_ids": ["13812345678"],
        "items": [{"content": "call 13812345678", "speaker": "alice@example.com", "score": 0.5}],
    }
    assert mask_json(answer) == {
        "id": "13812345678",
        "layer": "episodic",
        "source_message_ids": ["13812345678"],
        "items": [{"content": "call [phone]", "speaker": "[email]", "score": 0.5}],
    }
