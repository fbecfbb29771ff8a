"""Bilingual word lists for the rule extractor: topics, sentiment, place names.

English and Chinese keywords map to the same topic labels ("健身" and "gym" both give
``fitness``). Everything is compiled once at import; the functions are pure.
"""

from __future__ import annotations

import re

__all__ = ["PLACES_EN", "PLACES_ZH", "TOPIC_LABELS", "sentiment_of", "topics_of", "zh_places_in"]

_TOPICS: dict[str, tuple[str, str]] = {
    # label: (English keywords, Chinese keywords); "|"-separated, English matched as whole words.
    "food": (
        "food|foods|spicy|hotpot|hot pot|eat|eating|ate|dinner|lunch|breakfast|restaurant|restaurants|cook|cooking"
        "|cooked|recipe|recipes|dish|dishes|meal|meals|snack|snacks|dessert|desserts|pizza|noodles|sushi|fried"
        "|peanut|peanuts|vegetarian|vegan|bake|baking|baked|cake|cakes|cookies|ice cream|icecream|chocolate"
        "|delicious|tasty|kitchen|cuisine|flavor|flavors|flavour|flavours",
        "美食|食物|吃饭|吃辣|爱吃|喜欢吃|好吃|吃的|吃了|辣|川菜|湘菜|湖南菜|粤菜|菜|火锅|餐厅|做饭|饮食|早餐|午饭|晚饭"
        "|零食|甜点|蛋糕|咖啡|花生|素食|烘焙",
    ),
    "health": (
        "health|healthy|doctor|doctors|hospital|check-up|checkup|check up|blood|lipids|cholesterol|blood pressure"
        "|allergy|allergies|allergic|sick|illness|medicine|medication|diagnosed|diagnosis|surgery|injury|injured"
        "|pain|therapy|therapist|mental health|anxiety|depression|insomnia|clinic|symptoms|diabetes|asthma"
        "|accident|recovery|recovering",
        "健康|体检|医生|医院|血脂|血压|血糖|胆固醇|过敏|生病|感冒|吃药|药|治疗|失眠|焦虑|抑郁|身体|手术|受伤|看病",
    ),
    "fitness": (
        "gym|gyms|workout|workouts|working out|work out|worked out|exercise|exercises|exercising|fitness|running"
        "|jogging|5k|10k|marathon|half marathon|yoga|pilates|weightlifting|lifting|cardio|cycling|swimming"
        "|stronger|training|personal trainer",
        "健身|健身房|跑步|跑完|公里|锻炼|运动|瑜伽|游泳|马拉松|减肥|撸铁|骑行",
    ),
    "work": (
        "work|working|job|jobs|company|office|boss|colleague|colleagues|coworker|coworkers|startup|career|engineer"
        "|meeting|meetings|promotion|business|client|clients|project|projects|interview|hired|manager|employer"
        "|internship",
        "工作|公司|上班|同事|老板|职业|加班|面试|程序员|工程师|项目|新工作|实习|创业|升职|辞职",
    ),
    "family": (
        "family|fam|sister|sisters|brother|brothers|mom|mum|mother|dad|father|parents|kids|kid|children|child|son"
        "|daughter|grandma|grandpa|grandmother|grandfather|cousin|aunt|uncle|niece|nephew|siblings",
        "家人|家里|姐姐|妹妹|哥哥|弟弟|妈妈|母亲|爸爸|父亲|父母|孩子|儿子|女儿|爷爷|奶奶|外婆|外公|亲戚",
    ),
    "relationships": (
        "boyfriend|girlfriend|partner|husband|wife|dating|marriage|married|wedding|friend|friends|friendship"
        "|breakup|broke up|divorce|romance",
        "男朋友|女朋友|老公|老婆|丈夫|妻子|朋友|约会|结婚|婚礼|分手|恋爱",
    ),
    "pets": (
        "pet|pets|dog|dogs|cat|cats|puppy|puppies|kitten|kittens|vet|bunny|hamster|parrot|turtle|turtles",
        "宠物|猫|狗|猫咪|狗狗|兔子|仓鼠|鹦鹉|乌龟",
    ),
    "travel": (
        "travel|traveling|travelling|traveled|travelled|trip|trips|road trip|vacation|holiday|holidays|flight|flew"
        "|abroad|tour|hotel|passport|sightseeing",
        "旅行|旅游|出差|机票|酒店|度假|出国|自驾",
    ),
    "housing": (
        "moved|moving to|apartment|house|rent|flat|neighborhood|neighbourhood|landlord|mortgage|relocate"
        "|relocated|new place",
        "搬家|搬到|搬去|搬来|住在|居住|房子|租房|公寓|房租|小区",
    ),
    "finance": (
        "money|salary|budget|savings|saving money|invest|investing|investment|stock|stocks|loan|debt|bank"
        "|expensive|afford|finance|finances|financial|rent money",
        "钱|工资|存钱|投资|股票|理财|房贷|贷款|省钱|收入",
    ),
    "music": (
        "music|song|songs|sing|singing|sang|band|concert|concerts|guitar|piano|violin|drums|album|playlist"
        "|musician|melody",
        "音乐|唱歌|吉他|钢琴|演唱会|歌曲|听歌|乐队",
    ),
    "art": (
        "art|arts|painting|paintings|paint|painted|drawing|drawings|draw|sketch|sketching|pottery|sculpture"
        "|museum|gallery|artist|artwork|canvas|photography|photographs",
        "画画|绘画|艺术|展览|博物馆|美术馆|摄影|陶艺",
    ),
    "reading": (
        "book|books|reading|novel|novels|author|library|poetry|poem|poems|bookstore",
        "读书|看书|小说|书店|图书馆|这本书|诗",
    ),
    "movies": (
        "movie|movies|film|films|cinema|tv|netflix|actor|actress|tv show|documentary",
        "电影|电视剧|看剧|综艺|纪录片",
    ),
    "education": (
        "school|college|university|class|classes|course|courses|study|studying|studies|degree|exam|exams|student"
        "|students|teacher|homework|graduate|graduated|graduation|lecture|semester",
        "学校|大学|上课|考试|学习|毕业|课程|学生|老师|读研|读博|作业",
    ),
    "sports": (
        "basketball|football|soccer|tennis|baseball|volleyball|hockey|golf|badminton|tournament|coach|league",
        "篮球|足球|网球|羽毛球|乒乓球|比赛|球队",
    ),
    "outdoors": (
        "hiking|hike|hiked|camping|camp|camped|beach|nature|mountain|mountains|park|trail|trails|ocean|lake"
        "|forest|sunset|sunrise|outdoors",
        "爬山|徒步|露营|海边|公园|大自然|登山",
    ),
    "gaming": ("video games|video game|gaming|gamer|xbox|playstation|nintendo|console", "游戏|打游戏|电竞"),
    "identity": (
        "lgbtq|lgbt|transgender|trans|gender|pride|identity|coming out|queer|gay|lesbian",
        "性别|同性恋|身份认同",
    ),
    "community": (
        "volunteer|volunteering|volunteered|charity|community|fundraiser|donate|donated|donation|nonprofit"
        "|activism|activist",
        "志愿者|公益|慈善|社区|捐款",
    ),
}
TOPIC_LABELS: tuple[str, ...] = tuple(_TOPICS)


def _alternation(words: dict[str, str]) -> str:
    return "|".join(re.escape(w).replace(r"\ ", r"\s+") for w in sorted(words, key=lambda w: (-len(w), w)))


_EN_TOPIC = {w: label for label, (en, _) in _TOPICS.items() for w in en.split("|")}
_EN_TOPIC_PAIRS = {w for w in _EN_TOPIC if " " in w}
_ZH_TOPIC = {w: label for label, (_, zh) in _TOPICS.items() for w in zh.split("|")}
_ZH_TOPIC_RE = re.compile(_alternation(_ZH_TOPIC))
_TOKEN = re.compile(r"[a-z0-9]+(?:[-'][a-z0-9]+)*")


def topics_of(text: str) -> tuple[str, ...]:
    """Topic labels whose keywords occur in ``text``, in order of first mention."""
    found: dict[str, int] = {}
    tokens = _TOKEN.findall(text.lower())
    i = 0
    while i < len(tokens):
        pair = f"{tokens[i]} {tokens[i + 1]}" if i + 1 < len(tokens) else ""
        if pair in _EN_TOPIC_PAIRS:
            found.setdefault(_EN_TOPIC[pair], i)
            i += 2
            continue
        label = _EN_TOPIC.get(tokens[i])
        if label is not None:
            found.setdefault(label, i)
        i += 1
    if not text.isascii():
        offset = len(tokens)
        for match in _ZH_TOPIC_RE.finditer(text):
            found.setdefault(_ZH_TOPIC[match[0]], offset + match.start())
    return tuple(sorted(found, key=lambda label: found[label]))


_POSITIVE_EN = (
    "love|loved|loves|liked|enjoy|enjoyed|adore|great|good|happy|glad|awesome|amazing|wonderful|fantastic"
    "|excited|exciting|fun|nice|beautiful|proud|grateful|thankful|thanks|thank|best|better|cool|lovely|fortunate"
    "|stronger|inspiring|inspired|powerful|peaceful|relaxing|delicious|perfect|incredible|congrats|congratulations"
    "|blessed|support|supportive|brilliant|favorite|favourite|helpful|hope|hopeful|welcome|success|successful"
    "|joy|enjoyable|fulfilling|rewarding|motivated|passionate|glorious|thrilled|calm|cute|sweet|positive"
)
_NEGATIVE_EN = (
    "hate|hated|dislike|bad|sad|angry|upset|terrible|awful|horrible|worried|worrying|worry|stress|stressed"
    "|stressful|tired|exhausted|sick|pain|painful|lonely|afraid|scared|anxious|depressed|disappointed"
    "|disappointing|frustrated|frustrating|annoying|annoyed|tough|difficult|struggle|struggling|struggled"
    "|sorry|miss|missed|lost|fail|failed|failure|worse|worst|packed|rough|bummer|unfortunately|setback"
    "|setbacks|hurt|injured|allergic|rejection|rejected|negative|cry|cried|fear|overwhelmed|swamped"
)
_POSITIVE_ZH = (
    "喜欢|爱|开心|高兴|快乐|幸福|满意|不错|很好|太好|棒|厉害|舒服|享受|期待|感谢|谢谢|好吃|美味|兴奋|欢迎|顺利|轻松"
    "|放松|喜爱|热爱|感动|自豪|骄傲|成功|美好|有趣|好玩|漂亮|健康|精彩|满足|强壮"
)
_NEGATIVE_ZH = (
    "讨厌|难过|伤心|生气|烦|累|担心|害怕|焦虑|痛苦|失望|郁闷|压力|糟糕|难受|辛苦|孤独|生病|偏高|偏低|超标|过敏|不舒服"
    "|麻烦|紧张|失败|后悔|委屈|崩溃|无聊|头疼|疼|挤"
)
_NEGATORS_EN = frozenset({"not", "no", "never", "hardly", "barely", "nothing", "without"})
_INTENSIFIERS_EN = frozenset({"very", "so", "really", "super", "extremely", "totally", "absolutely", "truly"})
_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")
_POS_EN = frozenset(_POSITIVE_EN.split("|"))
_NEG_EN = frozenset(_NEGATIVE_EN.split("|"))
_ZH_SENTIMENT = {w: 1 for w in _POSITIVE_ZH.split("|")} | {w: -1 for w in _NEGATIVE_ZH.split("|")}
_ZH_SENTIMENT_RE = re.compile(_alternation({w: "" for w in _ZH_SENTIMENT}))


def sentiment_of(text: str) -> float:
    """Lexicon sentiment in [-1, 1]: (positive - negative) / (positive + negative + 1), negation-aware."""
    positive = negative = 0.0
    words = _WORD.findall(text.lower())
    for i, word in enumerate(words):
        polarity = 1 if word in _POS_EN else -1 if word in _NEG_EN else 0
        if not polarity:
            continue
        before = words[max(0, i - 3) : i]
        if any(w in _NEGATORS_EN or w.endswith("n't") for w in before):
            polarity = -polarity
        weight = 1.5 if before and before[-1] in _INTENSIFIERS_EN else 1.0
        if polarity > 0:
            positive += weight
        else:
            negative += weight
    if not text.isascii():
        for match in _ZH_SENTIMENT_RE.finditer(text):
            polarity = _ZH_SENTIMENT[match[0]]
            prefix = text[max(0, match.start() - 2) : match.start()]
            if prefix.endswith(("不", "没", "别", "不太", "没有")) and not match[0].startswith("不"):
                polarity = -polarity
            weight = 1.5 if prefix.endswith(("很", "非常", "特别", "超", "太", "好")) else 1.0
            if polarity > 0:
                positive += weight
            else:
                negative += weight
    return round((positive - negative) / (positive + negative + 1.0), 3)


_PLACES_EN_WORDS = (
    "Beijing Shanghai Haidian Chaoyang Pudong Sichuan Hunan Guangdong Guangzhou Shenzhen Hangzhou Chengdu Chongqing"
    " Nanjing Wuhan Xian Tianjin Suzhou Xiamen Qingdao Yunnan Tibet Taiwan Macau China Japan Korea India Thailand"
    " Vietnam Singapore Malaysia Indonesia Australia Canada Mexico Brazil Argentina France Germany Italy Spain"
    " Portugal Greece Ireland Scotland England Britain London Paris Berlin Rome Madrid Tokyo Kyoto Osaka Seoul"
    " Bangkok Sydney Melbourne Toronto Vancouver Montreal America USA Boston Chicago Seattle Texas California"
    " Florida Hawaii Alaska Miami Denver Atlanta Portland Austin Sweden Norway Denmark Finland Russia Egypt"
    " Kenya Nigeria Africa Europe Asia Switzerland Netherlands Amsterdam Dubai Iceland Peru Chile Colombia"
)
PLACES_EN = frozenset(_PLACES_EN_WORDS.split())
PLACES_ZH = (
    "北京|上海|海淀|朝阳|浦东|中关村|四川|湖南|湖北|广东|广州|深圳|杭州|成都|重庆|南京|武汉|西安|天津|苏州|厦门|青岛"
    "|大连|长沙|郑州|济南|沈阳|哈尔滨|昆明|云南|贵州|广西|浙江|江苏|山东|河南|河北|福建|新疆|西藏|海南|三亚|香港"
    "|澳门|台湾|中国|美国|日本|韩国|英国|法国|德国|加拿大|澳大利亚|新加坡|纽约|伦敦|巴黎|东京|首尔|洛杉矶|旧金山"
)
_ZH_PLACES_RE = re.compile(_alternation({w: "" for w in PLACES_ZH.split("|")}))


def zh_places_in(text: str) -> list[str]:
    """Chinese place names from the small gazetteer, in text order."""
    return _ZH_PLACES_RE.findall(text)
