"""Bilingual (English / Chinese) word lists and text normalisation used by the folds.

Everything here is a pure function of its arguments. The lists are small on purpose: they cover
the common cases of the seed document (likes vs dislikes, "Sichuan / Hunan food → strong
flavours", "gym every Wednesday evening") and are the place to extend for a domain.

- ``preference_polarity`` maps attribute keys such as ``likes``/``喜欢`` and ``dislikes``/``讨厌``
  (or any ``not_<key>``) to ``likes`` / ``dislikes``; opposite polarities of the same value conflict.
- ``SINGLE_VALUED_KEYS``: attribute keys that hold one value at a time (a new value conflicts).
- ``PREFERENCE_CLUSTERS``: cluster label → terms; a preference value containing a term joins the
  cluster (English terms match whole words, Chinese terms match substrings). Values no term
  matches are clustered by token overlap in ``persona`` (see ``tokens``).
- ``ACTIVITIES``: activity label → terms, used to recognise recurring events (habits).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

__all__ = [
    "ACTIVITIES",
    "ACTIVITY_LABELS_ZH",
    "CLUSTER_LABELS_ZH",
    "PREFERENCE_CLUSTERS",
    "SINGLE_VALUED_KEYS",
    "activity_of",
    "is_single_valued",
    "lexicon_cluster",
    "normalize",
    "opposite_polarity",
    "preference_polarity",
    "tokens",
]

_POSITIVE = {
    "likes",
    "like",
    "loves",
    "love",
    "enjoys",
    "enjoy",
    "prefers",
    "prefer",
    "favorite",
    "favourite",
    "fond_of",
    "喜欢",
    "爱",
    "喜爱",
    "爱吃",
    "偏好",
    "热爱",
}
_NEGATIVE = {
    "dislikes",
    "dislike",
    "hates",
    "hate",
    "avoids",
    "avoid",
    "detests",
    "不喜欢",
    "讨厌",
    "不爱",
    "不爱吃",
    "厌恶",
    "反感",
}

SINGLE_VALUED_KEYS = frozenset(
    {
        "lives_in",
        "city",
        "location",
        "residence",
        "hometown",
        "occupation",
        "job",
        "job_title",
        "employer",
        "company",
        "age",
        "name",
        "gender",
        "birthday",
        "marital_status",
        "relationship_status",
        "居住地",
        "住在",
        "城市",
        "职业",
        "工作",
        "公司",
        "年龄",
        "名字",
        "姓名",
        "性别",
        "生日",
        "婚姻状况",
    }
)
"""Attribute keys holding a single value: a different value for the same key conflicts."""

PREFERENCE_CLUSTERS: dict[str, tuple[str, ...]] = {
    "strong flavours": (
        "sichuan",
        "hunan",
        "spicy",
        "chili",
        "chilli",
        "chilies",
        "hotpot",
        "hot pot",
        "mala",
        "szechuan",
        "川菜",
        "湘菜",
        "湖南菜",
        "四川菜",
        "辣",
        "火锅",
        "麻辣",
        "重口味",
    ),
    "sweets": (
        "dessert",
        "desserts",
        "cake",
        "cakes",
        "chocolate",
        "candy",
        "ice cream",
        "sweets",
        "pastry",
        "甜食",
        "甜点",
        "蛋糕",
        "巧克力",
        "冰淇淋",
        "糖果",
    ),
    "light food": ("salad", "salads", "steamed", "bland", "light food", "清淡", "沙拉", "蒸菜"),
    "coffee and tea": ("coffee", "latte", "espresso", "cappuccino", "tea", "咖啡", "拿铁", "茶"),
    "fitness": (
        "gym",
        "workout",
        "running",
        "jogging",
        "yoga",
        "swimming",
        "fitness",
        "cycling",
        "hiking",
        "健身",
        "跑步",
        "瑜伽",
        "游泳",
        "骑行",
        "徒步",
        "运动",
    ),
    "reading": ("books", "book", "novels", "novel", "reading", "阅读", "看书", "小说", "读书"),
    "travel": ("travel", "travelling", "traveling", "trips", "trip", "旅行", "旅游"),
    "films and series": ("movies", "movie", "films", "film", "cinema", "series", "电影", "电视剧", "美剧"),
    "music": ("music", "songs", "concerts", "jazz", "rock", "piano", "guitar", "音乐", "歌", "演唱会", "钢琴", "吉他"),
}
"""Preference cluster label → terms (first matching cluster wins, in this order)."""

CLUSTER_LABELS_ZH: dict[str, str] = {
    "strong flavours": "重口味",
    "sweets": "甜食",
    "light food": "清淡饮食",
    "coffee and tea": "咖啡和茶",
    "fitness": "运动健身",
    "reading": "阅读",
    "travel": "旅行",
    "films and series": "影视",
    "music": "音乐",
}
"""Each cluster label in Chinese: the value a cluster shows when its members were said in Chinese."""

ACTIVITIES: dict[str, tuple[str, ...]] = {
    "gym": ("gym", "workout", "work out", "worked out", "weightlifting", "健身", "健身房", "撸铁"),
    "running": ("run", "running", "jog", "jogging", "jogged", "跑步", "慢跑", "夜跑", "晨跑"),
    "swimming": ("swim", "swimming", "swam", "游泳"),
    "yoga": ("yoga", "瑜伽"),
    "cycling": ("cycling", "bike ride", "biking", "骑车", "骑行"),
    "hiking": ("hike", "hiking", "hiked", "爬山", "徒步"),
    "badminton": ("badminton", "羽毛球"),
    "basketball": ("basketball", "篮球"),
    "football": ("football", "soccer", "足球"),
    "tennis": ("tennis", "网球"),
    "cooking": ("cook", "cooking", "cooked", "做饭", "下厨"),
    "piano practice": ("piano", "钢琴"),
}
"""Activity label → terms; an event whose content contains a term is an occurrence of the activity."""

ACTIVITY_LABELS_ZH: dict[str, str] = {
    "gym": "健身",
    "running": "跑步",
    "swimming": "游泳",
    "yoga": "练瑜伽",
    "cycling": "骑行",
    "hiking": "徒步",
    "badminton": "打羽毛球",
    "basketball": "打篮球",
    "football": "踢足球",
    "tennis": "打网球",
    "cooking": "做饭",
    "piano practice": "练钢琴",
}
"""Each activity label in Chinese: what a habit shows when its occurrences were told in Chinese."""

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_CJK_RUN = re.compile(r"[\u3400-\u9fff]+")
_EDGE_PUNCT = " \t\n.,!?;:\"'()[]{}。！？，；：、“”‘’（）【】《》…"
_TOKEN_STOP = {
    "the",
    "and",
    "with",
    "very",
    "really",
    "some",
    "food",
    "foods",
    "dish",
    "dishes",
    "cuisine",
    "style",
    "kind",
    "lot",
    "lots",
    "much",
    "more",
    "most",
    "all",
    "any",
    "for",
    "from",
    "that",
    "this",
}
_ACTIVITY_STOP = {
    "i",
    "we",
    "my",
    "me",
    "our",
    "the",
    "a",
    "an",
    "to",
    "at",
    "on",
    "in",
    "for",
    "of",
    "and",
    "with",
    "went",
    "go",
    "goes",
    "going",
    "gone",
    "did",
    "do",
    "had",
    "have",
    "has",
    "was",
    "were",
    "again",
    "today",
    "yesterday",
    "tomorrow",
    "tonight",
    "last",
    "next",
    "this",
    "that",
    "every",
    "week",
    "weekend",
    "day",
    "days",
    "ago",
    "morning",
    "afternoon",
    "evening",
    "night",
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
    "just",
    "finally",
    "also",
}
_CJK_TIME = re.compile(
    r"(上|下|这|本)?(周|星期|礼拜)[一二三四五六日天末]?|今天|昨天|明天|前天|后天|今晚|昨晚|早上|上午|中午|下午|晚上|"
    r"凌晨|每天|每周|[我你他她们了又也去在过的再]"
)


@lru_cache(maxsize=1 << 16)
def normalize(text: str) -> str:
    """NFKC, case-folded, whitespace-collapsed text without punctuation at either end (memoised: pure)."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split()).strip(_EDGE_PUNCT)


def _words(norm: str) -> list[str]:
    return _WORD.findall(norm)


@lru_cache(maxsize=1 << 16)
def tokens(text: str) -> frozenset[str]:
    """Content tokens for overlap clustering: English words of 3+ letters, Chinese character bigrams."""
    norm = normalize(text)
    out = {w for w in _words(norm) if len(w) >= 3 and w not in _TOKEN_STOP}
    for run in _CJK_RUN.findall(norm):
        if len(run) == 1:
            out.add(run)
        out.update(run[i : i + 2] for i in range(len(run) - 1))
    return frozenset(out)


@dataclass(frozen=True, slots=True)
class _Terms:
    """A label's terms, grouped by how each matches normalised text."""

    words: frozenset[str]  # English single words: match a whole word
    phrases: tuple[str, ...]  # English multi-word terms: match a run of whole words
    substrings: tuple[str, ...]  # other (Chinese) terms: match anywhere

    @classmethod
    def of(cls, terms: tuple[str, ...]) -> _Terms:
        ascii_terms = [t for t in terms if t.isascii()]
        return cls(
            frozenset(t for t in ascii_terms if " " not in t),
            tuple(f" {t} " for t in ascii_terms if " " in t),
            tuple(t for t in terms if not t.isascii()),
        )

    def found_in(self, norm: str, words: set[str], spaced: str) -> bool:
        """Whether any term occurs in ``norm`` (its words, and them joined by single spaces and padded)."""
        return (
            not self.words.isdisjoint(words)
            or any(p in spaced for p in self.phrases)
            or any(t in norm for t in self.substrings)
        )


def _first_label(table: dict[str, _Terms], text: str) -> tuple[str | None, str]:
    """The first label any of whose terms occurs in the text, and the normalised text."""
    norm = normalize(text)
    found = _words(norm)
    words, spaced = set(found), f" {' '.join(found)} "
    return next((label for label, terms in table.items() if terms.found_in(norm, words, spaced)), None), norm


@lru_cache(maxsize=1 << 16)
def preference_polarity(key: str) -> str | None:
    """``likes`` or ``dislikes`` for a preference key (``喜欢``, ``hates``, ``not_likes`` ...), else None."""
    k = normalize(key).replace(" ", "_")
    negated = False
    for prefix in ("not_", "no_", "dont_", "doesnt_"):
        if k.startswith(prefix):
            k, negated = k[len(prefix) :], True
            break
    if k in _POSITIVE:
        polarity = "likes"
    elif k in _NEGATIVE:
        polarity = "dislikes"
    else:
        return None
    return opposite_polarity(polarity) if negated else polarity


def opposite_polarity(polarity: str) -> str:
    """``dislikes`` for ``likes`` and vice versa."""
    return "dislikes" if polarity == "likes" else "likes"


@lru_cache(maxsize=1 << 16)
def is_single_valued(key: str) -> bool:
    """True when the attribute ``key`` holds one value at a time."""
    return normalize(key).replace(" ", "_") in SINGLE_VALUED_KEYS


_CLUSTER_TERMS = {label: _Terms.of(terms) for label, terms in PREFERENCE_CLUSTERS.items()}
_ACTIVITY_TERMS = {label: _Terms.of(terms) for label, terms in ACTIVITIES.items()}


@lru_cache(maxsize=1 << 16)
def lexicon_cluster(value: str) -> str | None:
    """The lexicon's cluster label for a preference value, or None."""
    return _first_label(_CLUSTER_TERMS, value)[0]


@lru_cache(maxsize=1 << 16)
def activity_of(content: str, when_text: str = "") -> str:
    """The activity an event is an occurrence of: a lexicon label, else its content without time words."""
    label, norm = _first_label(_ACTIVITY_TERMS, content)
    if label is not None:
        return label
    if when_text:
        norm = norm.replace(normalize(when_text), " ")
    latin = " ".join(w for w in _words(norm) if w not in _ACTIVITY_STOP)
    cjk = "".join(_CJK_TIME.sub("", run) for run in _CJK_RUN.findall(norm))
    return " ".join(p for p in (latin, cjk) if p)
