"""A bilingual scenario suite for retrieval's failure classes, written for mechanisms (never tuned on LoCoMo).

Every owner's conversation goes through the real write path (rule extractor, the default embedder, the
folds, LanceDB in a temporary folder); every question through the ``Retriever`` the service uses.
The assertion is the same for every case: a message stating the evidence is among the first three
items. A cause is a chain (a finding, then the advice it led to): either message is the cause.
The classes, each in English and Chinese:

- **cause** — "why did I …?" where the cause was said in an earlier conversation and shares no
  content word with the question; the decision and later events are more similar to it;
- **false friend** — a fitness question whose words, stemmed, match unrelated sentences about a
  job ("working out" is not "work");
- **now** — "where/what … now?" after a change stated with a verb, said in the newest conversation
  (so it is still in working memory and no conflict slot was ever updated); the new statement must
  also rank above the old one;
- **stream** — one long stream without conversation ids: sessions are only visible as gaps in
  ``occurred_at``, and the cause is in an earlier one;
- **when** — "when did …?" answered by the statement that dates the event ("last Saturday", 上周六), while
  later undated mentions of the same thing are more similar to the question.

- **reply** — "what … did I …?" answered by the reply to a turn that asked it, in other words ("Did you end up
  adopting a pet from the shelter?" — "Yes! A three-legged tabby called Biscuit."), while later messages share the
  question's words.

Cases of the same kinds written for the mechanisms rather than for wording: a change of job or diet
said without the question's words (a first day at a company, 离职 … 报到, "plant-based"; a start at a new
company said without a subject, in both languages, after an old job whose records crowd the first
places), and a cause told more than a week before the decision, with unrelated sessions between; a cause that
names neither what was given up nor a topic of it (a warning about the pavement and knee cartilage before giving up
jogging; 水泥路面, 软骨 before 慢跑), and a reply in other words than the question (watercolours for "relax"; 画水彩
for 放松). ``KNOWN_MISSES`` says which still miss, and by how much.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from adamem.analysis import Embedder
from adamem.retrieval import SEED_DEFAULT, Retriever


@dataclass(frozen=True)
class Case:
    """One question: the owner, its sessions (day, lines of (u|a, text)), the question, the evidence."""

    owner: str
    sessions: tuple[tuple[str, tuple[tuple[str, str], ...]], ...]
    question: str
    evidence: str
    older: str = ""  # "now" cases: the old statement, which must rank below the evidence
    also: str = ""  # cause cases: the finding the advice (the evidence) followed, also a cause
    conversation_ids: bool = True


def _lines(case: Case) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for s, (day, lines) in enumerate(case.sessions):
        for n, (who, text) in enumerate(lines, start=1):
            m: dict[str, Any] = {
                "user_id": case.owner,
                "message_id": f"{case.owner}-{s}-{n}",
                "speaker": case.owner.title() if who == "u" else "Assistant",
                "role": "user" if who == "u" else "assistant",
                "text": text,
                "occurred_at": f"{day}T19:{n:02d}:00Z",
            }
            if case.conversation_ids:
                m["conversation_id"] = f"{case.owner}-{day}"
            out.append(m)
    return out


CASES: dict[str, Case] = {
    "cause-en": Case(
        "rhea",
        (
            ("2024-02-05", (("u", "My sister's kids stayed over the weekend, total chaos."), ("a", "Sounds lively!"))),
            (
                "2024-02-12",
                (
                    ("u", "The sleep clinic called with my results: I barely reach deep sleep."),
                    ("a", "What did they recommend?"),
                    ("u", "The specialist thinks the afternoon espressos keep my brain wired at night."),
                    ("u", "Also my team is planning an offsite in March."),
                ),
            ),
            ("2024-02-19", (("u", "I'm learning to knit a scarf for my nephew."), ("a", "What colour?"))),
            (
                "2024-02-26",
                (
                    ("u", "From today I'm off coffee completely, herbal tea only."),
                    ("a", "Big change! How do you feel?"),
                    ("u", "A bit foggy, honestly."),
                ),
            ),
            (
                "2024-03-04",
                (
                    ("u", "Had chamomile at the cafe with Jonas instead of my usual latte."),
                    ("u", "The offsite got moved to April."),
                ),
            ),
        ),
        "Why did I give up coffee?",
        "The specialist thinks the afternoon espressos keep my brain wired at night.",
        also="The sleep clinic called with my results: I barely reach deep sleep.",
    ),
    "cause-zh": Case(
        "ameng",
        (
            ("2024-06-03", (("u", "周末带侄子去了动物园，他特别喜欢熊猫。"), ("a", "真可爱！"))),
            (
                "2024-06-10",
                (
                    ("u", "眼科复查结果出来了，近视又加深了两百度。"),
                    ("a", "医生有什么建议？"),
                    ("u", "她说我每天盯着屏幕太久，眼睛一直得不到休息。"),
                    ("u", "对了，下个月部门要去团建。"),
                ),
            ),
            ("2024-06-17", (("u", "最近在学做寿司，卷得还不太好。"), ("a", "慢慢来！"))),
            (
                "2024-06-24",
                (
                    ("u", "我把手机里的短视频软件全卸载了。"),
                    ("a", "这个决定不容易！"),
                    ("u", "头几天总是忍不住想去找它们。"),
                ),
            ),
            ("2024-07-01", (("u", "昨晚和朋友聊天，一晚上没刷短视频，感觉很轻松。"), ("u", "团建改到八月了。"))),
        ),
        "我为什么卸载了短视频软件？",
        "她说我每天盯着屏幕太久，眼睛一直得不到休息。",
        also="眼科复查结果出来了，近视又加深了两百度。",
    ),
    "false-friend-en": Case(
        "dev",
        (
            (
                "2024-03-04",
                (
                    ("u", "I live near work, so I just walk there in ten minutes."),
                    ("a", "Lucky you!"),
                    ("u", "My workout these days: a 5k run at dawn and kettlebells on Saturdays."),
                ),
            ),
            (
                "2024-03-11",
                (
                    ("u", "Work is hectic this month, two deadlines in a row."),
                    ("a", "Hang in there."),
                    ("u", "My manager asked me to lead the working group on accessibility."),
                    ("u", "Working late again tonight, the office is empty."),
                ),
            ),
        ),
        "How have I been working out lately?",
        "My workout these days: a 5k run at dawn and kettlebells on Saturdays.",
    ),
    "false-friend-zh": Case(
        "xiaoyu",
        (
            (
                "2024-03-04",
                (
                    ("u", "公司就在我家楼下，走路五分钟就到。"),
                    ("a", "太方便了！"),
                    ("u", "现在每天早上跑五公里，周末去攀岩馆练两个小时。"),
                ),
            ),
            (
                "2024-03-11",
                (
                    ("u", "这个月工作特别忙，连着两个项目要交付。"),
                    ("a", "注意身体。"),
                    ("u", "身体有点吃不消，昨天请了半天假。"),
                    ("u", "领导让我负责锻造车间的工作组。"),
                ),
            ),
        ),
        "我最近都是怎么锻炼的？",
        "现在每天早上跑五公里，周末去攀岩馆练两个小时。",
    ),
    "now-job-en": Case(
        "nina",
        (
            (
                "2024-01-08",
                (
                    ("u", "I work as a pharmacist at the Lindenhof pharmacy."),
                    ("a", "That sounds like a steady job."),
                    ("u", "My commute is twenty minutes by tram."),
                ),
            ),
            ("2024-02-05", (("u", "My cousin is getting married in June."), ("a", "Congratulations to them!"))),
            (
                "2024-03-04",
                (
                    ("u", "Monday was my first day at the university hospital's pharmacy."),
                    ("a", "How exciting! How was it?"),
                    ("u", "Busy, but the team is friendly."),
                ),
            ),
        ),
        "Where do I work now?",
        "Monday was my first day at the university hospital's pharmacy.",
        older="I work as a pharmacist at the Lindenhof pharmacy.",
    ),
    "now-city-en": Case(
        "omar",
        (
            (
                "2024-01-08",
                (
                    ("u", "I rent a small flat in Rotterdam, right by the harbour."),
                    ("a", "Rotterdam has great architecture."),
                ),
            ),
            ("2024-02-05", (("u", "I've been reading a lot of poetry lately."), ("a", "Any favourites?"))),
            (
                "2024-03-04",
                (
                    ("u", "We finally did it: packed everything and relocated to Porto last weekend."),
                    ("a", "Wow, congratulations! How is it so far?"),
                    ("u", "Sunny, and the boxes are everywhere."),
                ),
            ),
        ),
        "Which city am I living in now?",
        "We finally did it: packed everything and relocated to Porto last weekend.",
        older="I rent a small flat in Rotterdam, right by the harbour.",
    ),
    "now-job-zh": Case(
        "laoqian",
        (
            (
                "2024-01-08",
                (("u", "我在一家保险公司做理赔。"), ("a", "听起来挺稳定的。"), ("u", "每天坐地铁上班要四十分钟。")),
            ),
            ("2024-02-05", (("u", "表弟六月份结婚。"), ("a", "恭喜他！"))),
            (
                "2024-03-04",
                (
                    ("u", "我换工作了，昨天第一天去一家做无人机的公司上班。"),
                    ("a", "恭喜！感觉怎么样？"),
                    ("u", "节奏很快，同事都挺好相处。"),
                ),
            ),
        ),
        "我现在在哪家公司工作？",
        "我换工作了，昨天第一天去一家做无人机的公司上班。",
        older="我在一家保险公司做理赔。",
    ),
    "now-city-zh": Case(
        "xiaozhou",
        (
            ("2024-01-08", (("u", "我住在南京，离玄武湖很近。"), ("a", "南京很美！"))),
            ("2024-02-05", (("u", "最近在读一本关于宋朝的历史书。"), ("a", "好看吗？"))),
            (
                "2024-03-04",
                (
                    ("u", "我们上周把家搬到了厦门，现在还在拆箱子。"),
                    ("a", "恭喜乔迁！那边天气怎么样？"),
                    ("u", "很暖和，每天都能看到海。"),
                ),
            ),
        ),
        "我现在住在哪个城市？",
        "我们上周把家搬到了厦门，现在还在拆箱子。",
        older="我住在南京，离玄武湖很近。",
    ),
    "stream-en": Case(
        "lena",
        (
            (
                "2024-04-01",
                (
                    ("u", "The vet weighed Biscuit: he is three kilos too heavy and his hips are sore."),
                    ("a", "Poor Biscuit. What did she suggest?"),
                    ("u", "Smaller meals and a lot more exercise for him."),
                ),
            ),
            ("2024-04-03", (("u", "I should call my mom tonight."), ("a", "Say hi from me!"))),
            (
                "2024-04-06",
                (
                    ("u", "Biscuit and I now do a forty-minute loop around the lake every evening."),
                    ("a", "He must love it."),
                ),
            ),
            ("2024-04-08", (("u", "The lake loop was muddy today, Biscuit rolled in it."), ("u", "Mom says hi."))),
        ),
        "Why do Biscuit and I go around the lake every evening?",
        "Smaller meals and a lot more exercise for him.",
        also="The vet weighed Biscuit: he is three kilos too heavy and his hips are sore.",
        conversation_ids=False,
    ),
    "stream-zh": Case(
        "xiaobai",
        (
            (
                "2024-04-01",
                (
                    ("u", "胃镜结果出来了，医生说我有轻度胃炎。"),
                    ("a", "医生怎么说的？"),
                    ("u", "她说主要是长期空腹喝咖啡、不吃早饭造成的。"),
                ),
            ),
            ("2024-04-03", (("u", "晚上要给妈妈打个电话。"), ("a", "替我问好！"))),
            ("2024-04-06", (("u", "从这周起我每天七点起床，给自己做一顿早饭。"), ("a", "坚持下去！"))),
            ("2024-04-08", (("u", "今天早上煎了鸡蛋，还热了牛奶。"), ("u", "妈妈说周末来看我。"))),
        ),
        "我为什么开始每天七点起床？",
        "她说主要是长期空腹喝咖啡、不吃早饭造成的。",
        also="胃镜结果出来了，医生说我有轻度胃炎。",
        conversation_ids=False,
    ),
    # Written for mechanisms, not wording: a change stated without the question's words, and a cause told
    # more than a week before the decision, in conversations of their own (with unrelated sessions between).
    "now-job-unworded-en": Case(
        "tomas",
        (
            (
                "2024-01-08",
                (
                    ("u", "I'm a nurse at St. Mary's, mostly night shifts on the cardiology ward."),
                    ("a", "Night shifts must be tiring."),
                    ("u", "They are, but I like my patients."),
                ),
            ),
            ("2024-02-05", (("u", "My neighbour lent me a ladder to fix the gutter."), ("a", "Handy neighbour!"))),
            (
                "2024-03-04",
                (
                    ("u", "Started at Siemens on Monday, the onboarding is intense."),
                    ("a", "Congratulations! What will you be doing there?"),
                    ("u", "Clinical trials for their imaging devices."),
                ),
            ),
        ),
        "Where do I work now?",
        "Started at Siemens on Monday, the onboarding is intense.",
        older="I'm a nurse at St. Mary's, mostly night shifts on the cardiology ward.",
    ),
    "now-job-unworded-zh": Case(
        "xiaolu",
        (
            (
                "2024-01-08",
                (("u", "我在一家银行当柜员，每天都要数很多钱。"), ("a", "挺辛苦的。"), ("u", "还好，同事人都不错。")),
            ),
            ("2024-02-05", (("u", "周末去爬了香山，红叶还没掉完。"), ("a", "真好！"))),
            (
                "2024-03-04",
                (
                    ("u", "我从原来的单位离职了，下周一去腾讯报到。"),
                    ("a", "恭喜！新岗位是做什么的？"),
                    ("u", "做用户研究。"),
                ),
            ),
        ),
        "我现在在哪里上班？",
        "我从原来的单位离职了，下周一去腾讯报到。",
        older="我在一家银行当柜员，每天都要数很多钱。",
    ),
    "now-job-subjectless-zh": Case(
        "ahui",
        (
            (
                "2024-01-08",
                (
                    ("u", "我在仁济医院工作，我是护士，我喜欢照顾病人。"),
                    ("a", "夜班一定很累吧。"),
                    ("u", "是挺累的，不过病人都很好。"),
                ),
            ),
            ("2024-02-05", (("u", "邻居借给我一把梯子修屋檐。"), ("a", "好邻居！"))),
            (
                "2024-03-04",
                (
                    ("u", "周一去西门子入职了，培训安排得很满。"),
                    ("a", "恭喜！新工作具体做什么？"),
                    ("u", "负责影像设备的临床试验。"),
                ),
            ),
        ),
        "我现在在哪里上班？",
        "周一去西门子入职了，培训安排得很满。",
        older="我在仁济医院工作，我是护士，我喜欢照顾病人。",
    ),
    "when-en": Case(
        "nadia",
        (
            (
                "2024-06-03",
                (
                    ("u", "We brought Pepper home from the shelter last Saturday, she is a tiny terrier."),
                    ("a", "How exciting!"),
                ),
            ),
            (
                "2024-06-20",
                (
                    ("u", "Pepper joined our family walks and she already knows the whole neighbourhood."),
                    ("a", "She sounds like a great addition to your family."),
                    ("u", "The kids adore their new dog Pepper."),
                ),
            ),
        ),
        "When did Pepper join our family?",
        "We brought Pepper home from the shelter last Saturday, she is a tiny terrier.",
    ),
    "when-zh": Case(
        "xiaomei",
        (
            (
                "2024-06-03",
                (("u", "上周六我们从救助站把小狗豆豆接回了家，它是一只小梗犬。"), ("a", "太好了！")),
            ),
            (
                "2024-06-20",
                (
                    ("u", "豆豆已经成了我们家的一员，整个小区它都认识了。"),
                    ("a", "听起来它很适合你们家。"),
                    ("u", "孩子们都特别喜欢家里的新成员豆豆。"),
                ),
            ),
        ),
        "豆豆是什么时候成为我们家的一员的？",
        "上周六我们从救助站把小狗豆豆接回了家，它是一只小梗犬。",
    ),
    "now-diet-en": Case(
        "ingrid",
        (
            (
                "2024-01-08",
                (("u", "I grill a steak almost every evening, it's my ritual."), ("a", "A classic!")),
            ),
            ("2024-02-05", (("u", "The choir is rehearsing for the spring concert."), ("a", "Sounds lovely."))),
            (
                "2024-03-04",
                (
                    ("u", "Since February I'm fully plant-based: no meat, no dairy."),
                    ("a", "How are you finding it?"),
                    ("u", "Lentils everywhere, and I feel lighter."),
                ),
            ),
        ),
        "What do I eat for dinner these days?",
        "Since February I'm fully plant-based: no meat, no dairy.",
        older="I grill a steak almost every evening, it's my ritual.",
    ),
    "cause-late-en": Case(
        "marek",
        (
            (
                "2024-05-02",
                (
                    ("u", "The orthopaedist looked at my scans: my knees can't take the pounding anymore."),
                    ("a", "I'm sorry. What did she suggest?"),
                    ("u", "Something low-impact, she said, and to keep my legs strong."),
                ),
            ),
            ("2024-05-06", (("u", "My daughter starts school in September."), ("a", "Big step!"))),
            ("2024-05-09", (("u", "I repainted the hallway a pale green."), ("a", "Fresh look!"))),
            (
                "2024-05-13",
                (
                    ("u", "Picked up a road bike today and sold my running shoes."),
                    ("a", "Exciting! Where will you ride?"),
                    ("u", "Along the river path, thirty kilometres on Sundays."),
                ),
            ),
        ),
        "Why did I switch from running to cycling?",
        "The orthopaedist looked at my scans: my knees can't take the pounding anymore.",
        also="Something low-impact, she said, and to keep my legs strong.",
    ),
    "cause-late-zh": Case(
        "laozhang",
        (
            (
                "2024-05-02",
                (
                    ("u", "单位体检报告出来了，查出了中度脂肪肝。"),
                    ("a", "医生怎么说？"),
                    ("u", "医生让我少喝酒，每周至少运动三次。"),
                ),
            ),
            ("2024-05-06", (("u", "女儿九月份要上小学了。"), ("a", "时间过得真快！"))),
            ("2024-05-09", (("u", "把客厅的墙刷成了浅绿色。"), ("a", "看着一定很清爽。"))),
            (
                "2024-05-12",
                (
                    ("u", "今天办了一张健身卡，教练给我定了训练计划。"),
                    ("a", "加油！打算怎么练？"),
                    ("u", "先从快走和器械开始。"),
                ),
            ),
        ),
        "我为什么开始健身？",
        "单位体检报告出来了，查出了中度脂肪肝。",
        also="医生让我少喝酒，每周至少运动三次。",
    ),
    "reply-en": Case(
        "odile",
        (
            ("2024-05-06", (("u", "Work was intense today, three deadlines."), ("a", "Hang in there!"))),
            (
                "2024-05-13",
                (
                    ("a", "Did you end up adopting a pet from the shelter?"),
                    ("u", "Yes! A three-legged tabby called Biscuit."),
                    ("a", "What a lucky cat."),
                ),
            ),
            (
                "2024-05-20",
                (
                    ("u", "My neighbour's dog barked all night."),
                    ("u", "The shelter is raising money for a new roof."),
                    ("a", "Maybe you could donate to the shelter."),
                ),
            ),
            ("2024-05-27", (("u", "Biscuit knocked my plant off the windowsill."), ("a", "Cats will be cats."))),
        ),
        "What pet did I adopt from the shelter?",
        "Yes! A three-legged tabby called Biscuit.",
    ),
    "reply-zh": Case(
        "tingting",
        (
            ("2024-05-06", (("u", "今天加班到九点，好累。"), ("a", "早点休息！"))),
            (
                "2024-05-13",
                (
                    ("a", "你最后从救助站领养宠物了吗？"),
                    ("u", "领了！一只三条腿的橘猫，叫饼干。"),
                    ("a", "它真幸运。"),
                ),
            ),
            (
                "2024-05-20",
                (
                    ("u", "邻居家的狗叫了一整晚。"),
                    ("u", "救助站在筹钱修屋顶。"),
                    ("a", "也许你可以给救助站捐一点。"),
                ),
            ),
            ("2024-05-27", (("u", "饼干把窗台上的花盆打翻了。"), ("a", "猫就是这样。"))),
        ),
        "我从救助站领养了什么宠物？",
        "领了！一只三条腿的橘猫，叫饼干。",
    ),
    "cause-unworded-en": Case(
        "kai",
        (
            ("2024-03-01", (("u", "Went jogging by the river with Sam, lovely morning."), ("a", "Nice!"))),
            (
                "2024-03-08",
                (
                    ("u", "My orthopaedist says the pavement is grinding down my knee cartilage."),
                    ("u", "Also the team lunch was great."),
                ),
            ),
            ("2024-03-15", (("u", "Bought a new jogging jacket, bright yellow."), ("a", "Stylish."))),
            (
                "2024-03-22",
                (
                    ("u", "I've switched from jogging to laps at the pool."),
                    ("a", "How is it going?"),
                    ("u", "The pool was crowded today."),
                ),
            ),
        ),
        "Why did I stop jogging?",
        "My orthopaedist says the pavement is grinding down my knee cartilage.",
    ),
    "cause-unworded-zh": Case(
        "xiaogang",
        (
            ("2024-03-01", (("u", "早上和小山沿着河边慢跑，天气真好。"), ("a", "真不错！"))),
            ("2024-03-08", (("u", "骨科医生说水泥路面在磨损我膝盖的软骨。"), ("u", "另外团队午饭很好吃。"))),
            ("2024-03-15", (("u", "买了一件新的慢跑外套，亮黄色的。"), ("a", "很时髦。"))),
            (
                "2024-03-22",
                (("u", "我已经从慢跑改成去泳池游泳了。"), ("a", "感觉怎么样？"), ("u", "今天泳池人很多。")),
            ),
        ),
        "我为什么不再慢跑了？",
        "骨科医生说水泥路面在磨损我膝盖的软骨。",
    ),
    "reply-unworded-en": Case(
        "priya",
        (
            (
                "2024-02-01",
                (
                    ("a", "What do you do to unwind after work?"),
                    ("u", "I paint watercolour landscapes, it empties my head."),
                ),
            ),
            (
                "2024-02-08",
                (("u", "Work was stressful, the deadline moved again."), ("u", "I need to relax more, my boss says.")),
            ),
            ("2024-02-15", (("u", "Relaxing weekend planned, finally."), ("a", "Enjoy!"))),
        ),
        "What helps me relax?",
        "I paint watercolour landscapes, it empties my head.",
    ),
    "reply-unworded-zh": Case(
        "xiaoqin",
        (
            ("2024-02-01", (("a", "你下班后做什么来放松？"), ("u", "我画水彩风景，脑子一下就空了。"))),
            ("2024-02-08", (("u", "工作压力好大，截止日期又改了。"), ("u", "老板说我需要多放松。"))),
            ("2024-02-15", (("u", "终于计划了一个轻松的周末。"), ("a", "好好享受！"))),
        ),
        "什么能帮我放松？",
        "我画水彩风景，脑子一下就空了。",
    ),
}


@pytest.fixture(scope="module")
def scenarios(
    tmp_path_factory: pytest.TempPathFactory, embedder: Embedder, memory_class: type[Any]
) -> Iterator[tuple[Any, Retriever]]:
    """Every case's owner in one LanceDB store, built by the real pipeline, and a retriever over it."""
    memory = memory_class(Path(tmp_path_factory.mktemp("scenarios")), embedder)
    memory.add([line for case in CASES.values() for line in _lines(case)])
    retriever = Retriever(memory.store, embedder, partitions=memory.partitions)
    yield memory, retriever
    retriever.close()
    memory.store.close()


def _texts(answer: Any, memory: Any, owner: str) -> list[str]:
    """Each item's first evidence message's text, in rank order."""
    text_of = {m.message_id: m.text for m in memory.store.rows("messages", owner)}
    return [" | ".join(text_of.get(p.message_id, "") for p in item.provenance) for item in answer.items]


KNOWN_MISSES: dict[str, str] = {
    "cause-unworded-en": "4th with e5 and with e5-pair: the finding names neither jogging nor a topic the decision has "
    "(pavement, knee cartilage), and the two jogging messages rank above it",
    "cause-unworded-zh": "4th with e5 and with e5-pair, as in English: the decision and the two 慢跑 messages first",
    "reply-unworded-en": "5th with e5 and with e5-pair: the later messages that say relax, and the turn that asked, "
    "rank above the reply",
}
"""Cases that still miss, each with what was measured; strict: a case that starts passing fails here until moved."""


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.xfail(reason=KNOWN_MISSES[n], strict=True)) if n in KNOWN_MISSES else n
        for n in sorted(CASES)
    ],
)
def test_the_evidence_is_in_the_top_3(scenarios: tuple[Any, Retriever], name: str) -> None:
    memory, retriever = scenarios
    case = CASES[name]
    owner = f"default:{case.owner}"
    answer = retriever.query(owner, case.question, top_k=10)
    texts = _texts(answer, memory, owner)
    ranks = [i for i, t in enumerate(texts) if case.evidence in t or (case.also and case.also in t)]
    assert ranks and ranks[0] < 3, (name, answer.route.reason, texts)
    if case.older:
        older = [i for i, t in enumerate(texts) if case.older in t]
        assert not older or older[0] > ranks[0], (name, texts)  # the newest statement first


def _both_ways(scenarios: tuple[Any, Retriever], name: str, **changes: Any) -> tuple[list[str], list[str]]:
    """A case's question asked with the shipped config changed by ``changes``, then as shipped: each answer's texts."""
    memory, shipped = scenarios
    case = CASES[name]
    owner = f"default:{case.owner}"
    changed = Retriever(memory.store, shipped.embedder, replace(SEED_DEFAULT, **changes), partitions=shipped.partitions)
    try:
        answers = [_texts(r.query(owner, case.question, top_k=10), memory, owner) for r in (changed, shipped)]
        return answers[0], answers[1]
    finally:
        changed.close()


@pytest.mark.parametrize("name", ["now-job-unworded-en", "now-job-subjectless-zh"])
def test_the_newest_change_window_counts_shown_items(scenarios: tuple[Any, Retriever], name: str) -> None:
    """Counted in rows, the old job's records use up the window and the old job stays first; counted in shown items,
    the new job (a subjectless statement, still an extracted event) goes ahead. Asked without ``similar`` edges:
    in the Chinese case the new job's link in meaning to the old job's message brings it first counted either way."""
    rows, shown = _both_ways(scenarios, name, newest_first_shown=False, similar_hops=0)
    assert CASES[name].older in rows[0], (name, rows)
    assert CASES[name].evidence in shown[0], (name, shown)


@pytest.mark.parametrize("name", ["when-en", "when-zh"])
def test_a_time_question_puts_the_dated_statement_first(scenarios: tuple[Any, Retriever], name: str) -> None:
    """Without a temporal score for dated items a "when" question ranks the later, undated mentions first."""
    undated, dated = _both_ways(scenarios, name, dated_when=0.0)
    assert CASES[name].evidence not in undated[0], (name, undated)
    assert CASES[name].evidence in dated[0], (name, dated)


@pytest.mark.parametrize("name", ["reply-en", "reply-zh"])
def test_a_reply_is_found_by_the_words_of_the_turn_that_asked_it(scenarios: tuple[Any, Retriever], name: str) -> None:
    """The answer is the reply to a turn that asked it, in other words: scored by its words alone it is not among the
    first three; with the words of the turn before it (``context_words``) it is."""
    evidence = CASES[name].evidence
    ranks = [
        next((i for i, t in enumerate(texts) if evidence in t), 10)
        for texts in _both_ways(scenarios, name, context_words=False)
    ]
    assert ranks[1] < 3 <= ranks[0], (name, ranks)
