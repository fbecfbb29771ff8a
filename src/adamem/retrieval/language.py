"""Whether a question is in a language the analyzers read (English, Chinese), and the notice when it is not.

The rule extractor, the router's cues, time expressions, whose-memory and the full-text tokens read
English and Chinese. A question in another language is still embedded (multilingual-e5) and ranked
by meaning, but none of the rest takes part, and an answer says so. Decided from the text alone:

* letters of other scripts (Cyrillic, Arabic, Devanagari, Hangul, kana, …) outnumber Latin and Han
  letters together, or
* a Latin-script question of three or more words has no English stop word (``adamem.text``'s:
  "is", "the", "do", "I", …), no Han characters, and letters outside English's alphabet (é, ü, ñ,
  ß, …) in a lower-case word or in two words (one capitalised word may be a name: "Zoë").
  Words in plain ASCII without a stop word may be English keywords ("birthday party date"), and a
  Latin-script language without such letters cannot be told from them, so these get no notice.
"""

from __future__ import annotations

import re
import unicodedata

from adamem.text import is_stop_word_en

__all__ = ["language_notice"]

_LATIN_WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?")
NOTICE = (
    "the question does not look like English or Chinese: memory is analysed in English and Chinese, so it "
    "was matched by meaning only (no routing cues, time expressions, names or full-text terms)"
)


def _script(ch: str) -> str:
    if "\u3400" <= ch <= "\u4dbf" or "\u4e00" <= ch <= "\u9fff":
        return "han"
    name = unicodedata.name(ch, "")
    return "latin" if name.startswith("LATIN") else "other"


def language_notice(question: str) -> str | None:
    """The notice for a question in neither English nor Chinese; None for one in either."""
    counts = {"han": 0, "latin": 0, "other": 0}
    for ch in question:
        if ch.isalpha():
            counts[_script(ch)] += 1
    if counts["other"] > counts["han"] + counts["latin"]:
        return NOTICE
    if counts["han"]:
        return None
    words = [w.lower() for w in _LATIN_WORD.findall(question)]
    found = [w for w in _LATIN_WORD.findall(question) if not w.isascii()]
    accented = len(found) >= 2 or any(w.islower() for w in found)
    if accented and len(words) >= 3 and not any(is_stop_word_en(w) for w in words):
        return NOTICE
    return None
