"""Chinese first-person statements: attributes (喜欢, 讨厌, 过敏, 最喜欢的…) and facts (住在, 公司在, 体检…).

Every pattern is anchored on the speaker (我), except the company's location (公司在海淀), which
in a first-person message is the speaker's company. Keys are the English ones used for English
statements; values and contents stay in Chinese.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from adamem.analysis.lexicon import PLACES_ZH
from adamem.events import ExtractedAttribute, ExtractedFact

__all__ = ["chinese_attributes", "chinese_facts", "chinese_names"]

_ADV = (
    r"(?:很|非常|特别|超级|超|真的|真|最|也|还|还是|一直|都|挺|蛮|比较|更|依然|仍然|确实|其实|就|向来|从小就|从小"
    r"|本来就|一向|十分|相当|好|太|可能|也许|或许|大概|应该|估计)*"
)
_CLAUSE = r"[^，。！？；、,.!?;~～…\s]"
_STOP_START = ("你", "他", "她", "它", "这", "那", "的", "了", "上")
_TRAILING = re.compile(r"(?:了|啦|呀|啊|哦|呢|吧|嘛|哈|的)+$")
_PLACE_END = r"(?=[，。！？；、,.!?;\s]|$|了|的|工作|上班|生活|住|来|去|读|念|发展|定居|之后|以后|附近|这边|那边|一带)"
_PLACE = rf"(?P<place>[\u4e00-\u9fff]{{2,8}}?){_PLACE_END}"
_PLACE_NAMES = frozenset(PLACES_ZH.split("|"))


def _conf(base: float, hedge: float) -> float:
    return round(min(1.0, base * hedge), 2)


def _value(raw: str) -> str | None:
    value = _TRAILING.sub("", raw.strip())
    if not value or len(value) > 12 or value.startswith(_STOP_START):
        return None
    return value


_LIKES = re.compile(
    rf"我{_ADV}(?P<verb>热爱|喜爱|钟爱|偏爱|迷上了|喜欢|爱)(?:上了)?(?:吃|喝|玩|看|听|去)?(?P<obj>{_CLAUSE}+)"
)
_DISLIKES = re.compile(
    rf"我{_ADV}(?P<verb>讨厌|厌恶|受不了|不太喜欢|不怎么喜欢|不喜欢|不爱)(?:吃|喝|玩|看|听|去)?(?P<obj>{_CLAUSE}+)"
)
_ESPECIALLY = re.compile(rf"(?:尤其是|特别是|尤其)(?:吃|喝)?(?P<obj>{_CLAUSE}+)")
_FAVOURITE = re.compile(rf"我最(?:喜欢|爱)的(?P<thing>[^，。！？；、,.!?;是]{{1,8}})是(?P<obj>{_CLAUSE}+)")
_ALLERGY = re.compile(rf"我{_ADV}(?:对(?P<obj>{_CLAUSE}{{1,12}}?)|有?(?P<obj2>[^，。！？；、,.!?;对我]{{1,8}}?))过敏")
_DIET = re.compile(
    r"我(?:是|也是|一直是|现在是)(?:一个|一名|一位|个|名)?(?P<obj>素食者|素食主义者|吃素的人|纯素食者|严格素食者)"
    r"|我(?:一直|现在|也)?(?P<obj2>吃素|吃全素)"
)
_TRAIT = re.compile(
    rf"我{_ADV}(?:是)?(?:一个|一名|个)?(?:{_ADV})(?P<obj>内向的人|外向的人|夜猫子|早起的人|完美主义者|工作狂|吃货|宅男"
    r"|宅女|路痴|社恐|内向|外向|害羞|开朗|乐观|悲观)"
)
_THINGS = {
    "食物": "food", "菜": "food", "吃的": "food", "运动": "sport", "颜色": "colour", "电影": "movie", "书": "book",
    "音乐": "music", "歌": "song", "歌手": "singer", "城市": "city", "水果": "fruit", "饮料": "drink",
    "动物": "animal", "季节": "season", "游戏": "game", "作家": "writer", "乐队": "band", "地方": "place",
}  # fmt: skip


def chinese_attributes(sentence: str, hedge: float) -> list[ExtractedAttribute]:
    """Attributes of the speaker stated in one Chinese sentence."""
    found: list[ExtractedAttribute] = []
    for pattern, key in ((_LIKES, "likes"), (_DISLIKES, "dislikes")):
        for m in pattern.finditer(sentence):
            value = _value(m["obj"])
            if value is None:
                continue
            base = 0.9 if m["verb"] in ("热爱", "爱", "讨厌", "厌恶", "受不了") else 0.85
            found.append(ExtractedAttribute(key, value, _conf(base, hedge)))
            tail = _ESPECIALLY.search(sentence, m.end())
            extra = _value(tail["obj"]) if tail else None
            if extra:
                found.append(ExtractedAttribute(key, extra, _conf(base - 0.05, hedge)))
    for m in _FAVOURITE.finditer(sentence):
        value = _value(m["obj"])
        if value:
            key = "favourite_" + _THINGS.get(m["thing"], m["thing"])
            found.append(ExtractedAttribute(key, value, _conf(0.9, hedge)))
    for m in _ALLERGY.finditer(sentence):
        value = _value(m["obj"] or m["obj2"] or "")
        if value:
            found.append(ExtractedAttribute("allergy", value, _conf(0.9, hedge)))
    for m in _DIET.finditer(sentence):
        found.append(ExtractedAttribute("diet", m["obj"] or m["obj2"], _conf(0.85, hedge)))
    for m in _TRAIT.finditer(sentence):
        found.append(ExtractedAttribute("trait", m["obj"], _conf(0.85, hedge)))
    return found


# --- facts -------------------------------------------------------------------------------------

_JOBS = (
    r"程序员|工程师|医生|护士|老师|教师|学生|研究生|大学生|博士生|设计师|律师|会计|厨师|司机|经理|销售|记者|作家|画家"
    r"|研究员|分析师|教授|公务员|警察|演员|歌手|摄影师|建筑师|咨询师|顾问|创业者|主管|总监|编辑|翻译|药剂师|牙医"
    r"|兽医|快递员|外卖员|店员|服务员|产品经理|架构师|科学家|运营|会计师|实习生"
)
_RELATIONS = {
    "姐姐": "sister", "妹妹": "sister", "哥哥": "brother", "弟弟": "brother", "妈妈": "mother", "母亲": "mother",
    "爸爸": "father", "父亲": "father", "老公": "husband", "丈夫": "husband", "老婆": "wife", "妻子": "wife",
    "男朋友": "boyfriend", "女朋友": "girlfriend", "儿子": "son", "女儿": "daughter", "朋友": "friend",
    "好朋友": "friend", "闺蜜": "best_friend", "同事": "colleague", "老板": "boss", "室友": "roommate",
    "爷爷": "grandfather", "奶奶": "grandmother", "外公": "grandfather", "外婆": "grandmother",
}  # fmt: skip
_UNIQUE = frozenset({"husband", "wife", "boyfriend", "girlfriend", "mother", "father", "boss", "best_friend"})
_NAME_END = r"(?=[，。！？；、,.!?;\s]|$|也|是|在|会|要|刚|很|最|和|跟|下|上|这|今|明|昨|去|来)"
_HEALTH_SUFFIX = re.compile(r"(?:有点|有些|稍微|略)?(?:偏高|偏低|过高|过低|升高|降低|较高|较低|超标|异常|正常|高|低)$")

FactBuilder = Callable[[re.Match[str], str, float], list[ExtractedFact]]


def _moved(m: re.Match[str], name: str, hedge: float) -> list[ExtractedFact]:
    origin = f"（从{m['origin']}搬来）" if m["origin"] else ""
    return [ExtractedFact(f"{name}住在{m['place']}{origin}", _conf(0.9, hedge), "location", "lives_in")]


def _lives(m: re.Match[str], name: str, hedge: float) -> list[ExtractedFact]:
    return [ExtractedFact(f"{name}住在{m['place']}", _conf(0.9, hedge), "location", "lives_in")]


def _origin(m: re.Match[str], name: str, hedge: float) -> list[ExtractedFact]:
    place = m["place"]
    if place not in _PLACE_NAMES and not place.endswith(("省", "市", "县", "区", "镇", "村")):
        return []
    return [ExtractedFact(f"{name}来自{place}", _conf(0.9, hedge), "location", "from")]


def _works_at(m: re.Match[str], name: str, hedge: float) -> list[ExtractedFact]:
    org = m["org"]
    if org in _PLACE_NAMES:
        return [ExtractedFact(f"{name}在{org}工作", _conf(0.8, hedge), "work", "company_location")]
    return [ExtractedFact(f"{name}在{org}工作", _conf(0.85, hedge), "work", "works_at")]


def _job(m: re.Match[str], name: str, hedge: float) -> list[ExtractedFact]:
    return [ExtractedFact(f"{name}是{m['job']}", _conf(0.85, hedge), "work", "job")]


def _company_location(m: re.Match[str], name: str, hedge: float) -> list[ExtractedFact]:
    return [ExtractedFact(f"{name}的公司在{m['place']}", _conf(0.8, hedge), "work", "company_location")]


def _relation(m: re.Match[str], name: str, hedge: float) -> list[ExtractedFact]:
    rel = _RELATIONS[m["rel"]]
    key = rel if rel in _UNIQUE else f"{rel}:{m['person']}"
    return [ExtractedFact(f"{name}的{m['rel']}叫{m['person']}", _conf(0.85, hedge), "relationship", key)]


def _pet(m: re.Match[str], name: str, hedge: float) -> list[ExtractedFact]:
    kind, pet = m["kind"], m["pet"]
    if pet:
        return [ExtractedFact(f"{name}养了一只{kind}，叫{pet}", _conf(0.85, hedge), "pet", f"pet:{pet}")]
    return [ExtractedFact(f"{name}养了{kind}", _conf(0.85, hedge), "pet", f"pets:{kind}")]


def _health_report(m: re.Match[str], name: str, hedge: float) -> list[ExtractedFact]:
    condition = m["cond"]
    slot = _HEALTH_SUFFIX.sub("", condition) or condition
    return [ExtractedFact(f"{name}的{m['source']}显示{condition}", _conf(0.85, hedge), "health", f"health:{slot}")]


def _health_condition(m: re.Match[str], name: str, hedge: float) -> list[ExtractedFact]:
    return [ExtractedFact(f"{name}患有{m['cond']}", _conf(0.85, hedge), "health", f"health:{m['cond']}")]


_ANY = r"[^，。！？；,.!?;从]{0,6}?"
_REL_ALT = "|".join(sorted(_RELATIONS, key=len, reverse=True))
_PET_KINDS = "猫咪|狗狗|猫|狗|兔子|仓鼠|鹦鹉|金鱼|乌龟"
_MOVED_FROM = rf"我{_ANY}从(?P<origin>[\u4e00-\u9fff]{{2,8}}?)搬(?:家)?(?:到|去|来)了?{_PLACE}"
_MOVED_TO = rf"我{_ANY}搬(?:家)?(?:到|去)了?{_PLACE}(?P<origin>)"
_LIVES = rf"我{_ANY}(?:住在|定居在|生活在){_PLACE}"
_FROM = r"我(?:是|来自)(?P<place>[\u4e00-\u9fff]{2,6}?)人?(?=[，。！？；,.!?;\s]|$)"
_HOMETOWN = rf"我的?老家(?:是|在){_PLACE}"
_WORKS_AT = r"我[^，。！？；,.!?;]{0,4}?在(?P<org>[\u4e00-\u9fffA-Za-z0-9]{2,12}?)(?:工作|上班|任职)"
_JOB = (
    rf"我(?:现在|目前|也|是)?(?:是|当)(?:一名|一个|一位|个|名|位)?(?P<job>[\u4e00-\u9fff]{{0,6}}?(?:{_JOBS}))"
    r"(?=[，。！？；,.!?;\s]|$)"
)
_JOB_IS = rf"我的?工作是(?P<job>[\u4e00-\u9fff]{{0,6}}?(?:{_JOBS}))"
_COMPANY = rf"(?:我们|我的|我)?公司(?:就)?(?:在|位于){_PLACE}"
_RELATION = rf"我的?(?P<rel>{_REL_ALT})(?:叫|名叫|的名字叫|的名字是)(?P<person>[\u4e00-\u9fff]{{2,3}}?){_NAME_END}"
_PET = (
    rf"我(?:家)?(?:有|养了?|养着)(?:一只|一条|两只|三只|只|条|一个)?(?:小)?(?P<kind>{_PET_KINDS})"
    rf"(?:，?它?(?:叫|名叫)(?P<pet>[\u4e00-\u9fffA-Za-z]{{1,4}}?){_NAME_END})?"
)
_REPORT = (
    r"(?P<source>体检报告|体检结果|体检|检查报告|检查结果|化验单|化验结果|验血结果)(?:显示|发现|说|表明|提示)"
    r"我?(?:有)?(?P<cond>[^，。！？；,.!?;]{2,12})"
)
_CONDITION = (
    r"我(?:被)?(?:诊断出|确诊了?|查出|得了|患有|有)(?P<cond>糖尿病|高血压|哮喘|高血脂|抑郁症|焦虑症|失眠|胃病"
    r"|过敏性鼻炎|脂肪肝|贫血|关节炎|颈椎病|腰椎间盘突出|偏头痛)"
)
_FACTS: tuple[tuple[re.Pattern[str], FactBuilder], ...] = tuple(
    (re.compile(pattern), build)
    for pattern, build in (
        (_MOVED_FROM, _moved),
        (_MOVED_TO, _moved),
        (_LIVES, _lives),
        (_FROM, _origin),
        (_HOMETOWN, _origin),
        (_WORKS_AT, _works_at),
        (_JOB, _job),
        (_JOB_IS, _job),
        (_COMPANY, _company_location),
        (_RELATION, _relation),
        (_PET, _pet),
        (_REPORT, _health_report),
        (_CONDITION, _health_condition),
    )
)
_NAMES = re.compile(
    rf"我的?(?:{_REL_ALT})(?:叫|名叫|的名字叫|的名字是)(?P<person>[\u4e00-\u9fff]{{2,3}}?){_NAME_END}"
    rf"|(?:{_PET_KINDS})，?它?(?:叫|名叫)(?P<pet>[\u4e00-\u9fffA-Za-z]{{1,4}}?){_NAME_END}"
)


def chinese_facts(sentence: str, name: str, hedge: float) -> list[ExtractedFact]:
    """Facts about the speaker ``name`` stated in one Chinese sentence (clauses split at ，are kept together)."""
    found: list[ExtractedFact] = []
    for pattern, build in _FACTS:
        for m in pattern.finditer(sentence):
            found.extend(build(m, name, hedge))
    return found


def chinese_names(sentence: str) -> list[str]:
    """Names of people and pets introduced with 叫 (我姐姐叫小红, 我的猫叫咪咪)."""
    return [m["person"] or m["pet"] for m in _NAMES.finditer(sentence)]
