"""Sensitive data in shared results: found by pattern and masked, in English and Chinese.

``mask(text)`` replaces each span with its kind in brackets, so the rest of the text still reads:

- ``[email]``: e-mail addresses;
- ``[id]``: mainland resident ID numbers (18 characters, the last a check digit or ``X``, checked
  with the GB 11643 checksum) and US social security numbers (``123-45-6789``);
- ``[card]``: payment card numbers, 13 to 19 digits (spaces or hyphens between groups allowed)
  that pass the Luhn check;
- ``[phone]``: mainland mobile numbers (``1[3-9]`` and 9 digits, ``+86`` optional), mainland
  landlines (``010-12345678``), international numbers written with ``+`` and North American ones
  (``(555) 123-4567``, ``555-123-4567``);
- ``[health]``: health terms from a small fixed list (``HEALTH_TERMS_EN``, ``HEALTH_TERMS_ZH``):
  diagnoses, conditions, treatments. It is a privacy filter, not a classifier: a term not on the
  list is not masked.

Digit runs are bounded by "not a digit" rather than ``\\b``, since a Chinese character counts as a
word character and ``电话13812345678`` has no word boundary before the number. ``mask_json``
masks every string of a JSON value except ids and the fixed vocabulary of the answers (layer,
kind, role, topic names on the log).
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["HEALTH_TERMS_EN", "HEALTH_TERMS_ZH", "luhn_valid", "mainland_id_valid", "mask", "mask_json"]

HEALTH_TERMS_EN = (
    "diabetes|diabetic|cancer|tumou?r|leukemia|hiv|aids|hepatitis|depression|depressed|anxiety disorder|"
    "bipolar|schizophrenia|asthma|hypertension|high blood pressure|heart disease|heart attack|stroke|"
    "pregnancy|pregnant|miscarriage|abortion|diagnosis|diagnosed|prescription|prescribed|medication|"
    "chemotherapy|insulin|antidepressants?|surgery|fever|cough|migraine|allergy|allergic|symptoms?"
)
"""English health terms masked as ``[health]`` (whole words, any case)."""

HEALTH_TERMS_ZH = (
    "糖尿病|癌症|癌|肿瘤|白血病|艾滋病|乙肝|肝炎|抑郁症|抑郁|焦虑症|双相|精神分裂|哮喘|高血压|心脏病|"
    "心肌梗死|中风|怀孕|流产|堕胎|诊断|确诊|处方|药物|用药|化疗|胰岛素|手术|发烧|发热|咳嗽|偏头痛|过敏|症状"
)
"""Chinese health terms masked as ``[health]`` (longest first within the alternation's order)."""

_NOT_DIGIT_BEFORE, _NOT_DIGIT_AFTER = r"(?<![0-9A-Za-z])", r"(?![0-9A-Za-z])"
_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
_MAINLAND_ID = re.compile(_NOT_DIGIT_BEFORE + r"\d{17}[\dXx]" + _NOT_DIGIT_AFTER)
_SSN = re.compile(_NOT_DIGIT_BEFORE + r"\d{3}-\d{2}-\d{4}" + _NOT_DIGIT_AFTER)
_CARD = re.compile(_NOT_DIGIT_BEFORE + r"\d(?:[ -]?\d){12,18}" + _NOT_DIGIT_AFTER)
_PHONES = (
    re.compile(r"(?<![0-9A-Za-z+])(?:\+?86[ -]?)?1[3-9]\d(?:[ -]?\d{4}){2}" + _NOT_DIGIT_AFTER),  # mainland mobile
    re.compile(_NOT_DIGIT_BEFORE + r"0\d{2,3}-\d{7,8}" + _NOT_DIGIT_AFTER),  # mainland landline
    re.compile(r"\+\d{1,3}[ .-]?(?:\(\d{1,4}\)[ .-]?)?\d{1,4}(?:[ .-]?\d{2,4}){1,4}" + _NOT_DIGIT_AFTER),
    re.compile(r"(?<![0-9A-Za-z(])(?:\(\d{3}\)\s?|\d{3}[ .-])\d{3}[ .-]\d{4}" + _NOT_DIGIT_AFTER),
)
_HEALTH = re.compile(rf"(?i)\b(?:{HEALTH_TERMS_EN})\b|{HEALTH_TERMS_ZH}")

_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_ID_CHECK = "10X98765432"

# Keys whose strings are ids or a fixed vocabulary, never free text: masking them would break links.
_PLAIN_KEYS = frozenset(
    {
        "id",
        "tenant",
        "user_id",
        "layer",
        "kind",
        "role",
        "type",
        "status",
        "node_type",
        "edge_type",
        "direction",
        "source_topic",
        "topic",
        "analyzer",
        "generation",
        "embedding_model",
        "config",
        "router",
        "certainty",
        "dialog_act",
        "node",
        "src",
        "dst",
        "item",
        "current",
        "earlier",
    }
)


def mainland_id_valid(number: str) -> bool:
    """Whether 18 characters are a mainland resident ID number: its last character is the GB 11643 check."""
    if len(number) != 18 or not number[:17].isdigit():
        return False
    total = sum(int(d) * w for d, w in zip(number[:17], _ID_WEIGHTS, strict=True))
    return _ID_CHECK[total % 11] == number[17].upper()


def luhn_valid(digits: str) -> bool:
    """Whether a run of digits passes the Luhn check (payment card numbers do)."""
    total = 0
    for i, d in enumerate(reversed(digits)):
        n = int(d) * (2 if i % 2 else 1)
        total += n - 9 if n > 9 else n
    return bool(digits) and total % 10 == 0


def _id(match: re.Match[str]) -> str:
    return "[id]" if mainland_id_valid(match.group(0)) else match.group(0)


def _card(match: re.Match[str]) -> str:
    digits = re.sub(r"[ -]", "", match.group(0))
    return "[card]" if 13 <= len(digits) <= 19 and luhn_valid(digits) else match.group(0)


def mask(text: str) -> str:
    """``text`` with every e-mail address, ID, card and phone number and health term replaced by its kind."""
    if not text:
        return text
    text = _EMAIL.sub("[email]", text)
    text = _MAINLAND_ID.sub(_id, text)
    text = _SSN.sub("[id]", text)
    text = _CARD.sub(_card, text)
    for phone in _PHONES:
        text = phone.sub("[phone]", text)
    return _HEALTH.sub("[health]", text)


def _plain(key: str) -> bool:
    return key in _PLAIN_KEYS or key.endswith(("_id", "_ids"))


def mask_json(value: Any, key: str = "") -> Any:
    """A JSON value with ``mask`` applied to every free-text string (ids and fixed vocabulary kept)."""
    if isinstance(value, str):
        return value if _plain(key) else mask(value)
    if isinstance(value, dict):
        return {k: mask_json(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [mask_json(v, key) for v in value]
    return value
