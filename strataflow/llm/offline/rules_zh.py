"""Chinese extraction rules: one function per field, each returning Findings for one sentence.

Patterns are general (a verb or marker, then the value), never phrasings of one sample. Numbers go through
numbers.parse_quantity (ranges stay strings), names through the alias dictionary. The engine applies the
guards (question, negation, someone else, plan, past) and keeps the user's clause as the statement.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from strataflow.llm.offline import aliases
from strataflow.llm.offline.numbers import NUMBER, parse_quantity
from strataflow.llm.offline.text import (
    CURRENT_FACT_GUARDS,
    INTENT_GUARDS,
    Finding,
    cut,
)
from strataflow.textsearch import CJK

Rule = Callable[[str], Iterator[Finding]]

PRE = r"(?:大概|大约|约|差不多|将近|接近|快|近|估计|大致|不到|超过|超|不止|少于)?"
NUMQ = rf"(?:{NUMBER})(?:多|几|来|余)?(?:\s*(?:-|~|到|至)\s*(?:{NUMBER}))?"
STOP_TOKENS = frozenset(
    "我 你 他 她 在 于 从 是 的 了 读 念 上 考 进 去 毕业 就读 就 也 都 和 跟 一所 一个 所 这 那 个 "
    "现在 目前 本科 硕士 博士 研究生 学士 专业 我们 以前 之前 还 又 已经 刚 后来 然后 所以 但是 "
    "而且 做 当 学 学的 读的 大学 学院 毕业于".split()
)
DEGREES = (
    ("博士", "博士"),
    ("硕士", "硕士"),
    ("研究生", "硕士"),
    ("EMBA", "硕士"),
    ("MBA", "硕士"),
    ("MPA", "硕士"),
    ("本科", "本科"),
    ("学士", "本科"),
    ("大专", "大专"),
    ("专科", "大专"),
    ("高中", "高中"),
    ("中专", "中专"),
)
DEGREE_WORD = r"(?:博士(?!后)|硕士|研究生|EMBA|MBA|MPA|本科|学士|大专|专科|高中|中专)"
TITLE_SUFFIX = (
    "工程师|开发者|开发|程序员|产品经理|项目经理|经理|总监|主管|设计师|分析师|架构师|科学家|研究员|顾问|老师|教师|讲师|"
    "教授|医生|护士|律师|会计师|会计|销售|运营|产品|测试|专员|助理|主任|总裁|总经理|合伙人|创始人|记者|编辑|司机|厨师|"
    "药剂师|公务员|警察|建筑师|咨询师|精算师|翻译|文员|店长|主播|设计|算法|运维|前端|后端|全栈|财务|人事|行政|法务|"
    "客服|审计|投资|负责人|组长|全职妈妈|全职太太|家庭主妇|自由职业|CEO|CTO|COO|CFO|VP|HR|PM|UI|UX|医师|技术员|学生|博士生|研究生|交易员|工人|农民|"
    "自由职业者|创业者|老板|主编|策划|猎头|咨询|质检|采购|保安|保洁|导游|护工|保姆|月嫂|电工|焊工|木工|中介|文案|剪辑|"
    "主持人|模特|歌手|博主|骑手|快递|外卖员|程序猿|码农|"
    "(?<![会成党团学队人委社])员|(?<![大法祖牧巫])师"  # 消防员, 理发师: a job by its ending (not 会员, 大师)
)
TITLE_BODY = rf"(?:(?![的在和是了我他她你从做当干，,。])[{CJK}A-Za-z])"
INTENT_CUE = re.compile(r"(想|打算|计划|准备|考虑|希望|申请|目标|办理|要办|走|冲|递交|提交|倾向|偏向|优先)")
HOLD_CUE = re.compile(r"(拿到|拿了|获批|持有|已经是|已获|批了|下签|拿的是)")
TIME_WORDS = (
    r"((?:明年|今年|后年)(?:上半年|下半年|年初|年底|年中|底|初)?|下半年|上半年|年底|年初|年内|下个月|这个月|月底|尽快|马上|"
    rf"(?:20\d\d|二零[一二三][{'零一二三四五六七八九'}])年(?:[上下]半年|底|初|内)?|{NUMBER}个?(?:月|年)内|半年内)(?:之前|以前|前)?"
)
CHANNELS = {
    "邮件": "email",
    "邮箱": "email",
    "email": "email",
    "电话": "phone",
    "微信": "wechat",
    "短信": "sms",
    "视频": "video call",
    "whatsapp": "whatsapp",
    "语音": "voice",
    "线上": "online",
    "线下": "in person",
    "面谈": "in person",
    "见面": "in person",
}


def _find(pattern: str, sentence: str) -> Iterator[re.Match[str]]:
    return re.finditer(pattern, sentence)


def trailing_words(text: str, max_tokens: int = 3, cities: bool = False) -> str:
    """The content words at the end of text (jieba), stopping at a function word: left edge of a phrase.
    A university name always stops it; a city stops it unless cities (杭州电子科技大学 keeps its city)."""
    words: list[str] = []
    for token in reversed(cut(text)):
        if token in STOP_TOKENS or not re.fullmatch(rf"[{CJK}A-Za-z0-9+#]+", token):
            break
        if aliases.UNIVERSITY_ZH_ALIAS.fullmatch(token) or token.endswith(("大学", "学院")):
            break
        if aliases.CITY_ZH.fullmatch(token) and not cities:
            break
        words.insert(0, token)
        if len(words) >= max_tokens:
            break
    return "".join(words)


def age(sentence: str) -> Iterator[Finding]:
    patterns = (
        rf"(?P<q>{PRE}\s*{NUMQ})\s*周?岁(?P<post>左右|上下|出头)?(?!时|那年|的时候|前|以前|之前|起|开始|就|的孩子|的儿子|的女儿)",
        rf"今年(?:已经|刚|刚刚|就)?\s*(?P<q>{PRE}\s*{NUMQ})(?P<post>左右|上下|出头)?(?![0-9万千百亿元块月号日年个次%kKwW.岁])",
        rf"年龄(?:是|为|:|：)?\s*(?P<q>{PRE}\s*{NUMQ})(?P<post>左右|上下|出头)?",
        r"(?P<q>[二三四五六七八]十)(?P<post>出头)",
    )
    for pattern in patterns:
        for match in _find(pattern, sentence):
            post = match.group("post") or ""
            if post == "出头":
                base = parse_quantity(match.group("q"))
                if base and isinstance(base.value, int):
                    yield Finding(
                        "fact", "age", f"early {base.value // 10 * 10}s", match.span(), category="basic"
                    )
                continue
            quantity = parse_quantity(match.group("q") + post)
            if quantity is None or (
                isinstance(quantity.value, int | float) and not 1 <= quantity.value <= 120
            ):
                continue
            if post == "上下" and isinstance(quantity.value, int):  # 五十岁上下: above or below, a range
                quantity = type(quantity)(f"{quantity.value - 5}-{quantity.value + 5}", False)
            yield Finding("fact", "age", quantity.value, match.span(), quantity.approximate, category="basic")


def education(sentence: str) -> Iterator[Finding]:
    """The highest degree first (本科在上交，硕士在港大 -> 硕士): the engine keeps the first that stands."""
    candidates: list[tuple[int, Finding]] = []
    for clause_match in re.finditer(r"[^，,;；]+", sentence):
        clause = clause_match.group(0)
        found = [m for m in re.finditer(DEGREE_WORD, clause)]
        school_named = aliases.UNIVERSITY_ZH_ALIAS.search(clause) or re.search(r"(大学|学院)", clause)
        if not found or not (
            school_named or re.search(r"(毕业|学历|学位|在读|读|念|拿|是|获得|文凭|出身|修)", clause)
        ):
            continue
        best = None
        for match in found:
            word = match.group(0)
            if word in ("高中", "中专") and not re.search(word + r"(毕业|学历)", clause):
                continue
            rank = next(i for i, (name, _) in enumerate(DEGREES) if name == word)
            if best is None or rank < best[0]:
                best = (rank, match)
        if best:
            match = best[1]
            start = clause_match.start() + match.start()
            span = (start, start + len(match.group(0)))
            finding = Finding("fact", "education", DEGREES[best[0]][1], span, category="career")
            candidates.append((best[0], finding))
    for _, finding in sorted(candidates, key=lambda pair: pair[0]):
        yield finding


SCHOOL_CONTEXT = re.compile(
    r"(毕业|读|念|学|本科|硕士|博士|研究生|学历|校友|专业|学位|留学|上学|考上|考入|录取|在读|出身)"
)
WORK_CONTEXT = re.compile(r"(工作|上班|任职|就职|教书|当老师|做老师)")


def _degree_rank_near(sentence: str, position: int) -> int:
    """Rank (0 = 博士) of the highest degree in the clause at position; 99 when it names none."""
    start = max(sentence.rfind(mark, 0, position) for mark in "，,;；") + 1
    ends = [i for i in (sentence.find(mark, position) for mark in "，,;；") if i >= 0]
    clause = sentence[start : min(ends) if ends else len(sentence)]
    ranks = [i for i, (word, _) in enumerate(DEGREES) if word in clause]
    return min(ranks, default=99)


def university(sentence: str) -> Iterator[Finding]:
    """A school the user studied at (the highest degree's first), or an employer when they work there."""
    hits: list[tuple[int, int, str]] = []
    for match in aliases.UNIVERSITY_ZH_ALIAS.finditer(sentence):
        hits.append((match.start(), match.end(), aliases.university_name(match.group(0), sentence)))
    for match in aliases.UNIVERSITY_EN_ALIAS.finditer(sentence):
        hits.append((match.start(), match.end(), aliases.university_name(match.group(0))))
    for match in _find(rf"(?<![{CJK}])?(?:大学|学院)", sentence):
        left = trailing_words(sentence[: match.start()], max_tokens=3, cities=True)
        if left and not any(s <= match.start() - len(left) < e for s, e, _ in hits):
            hits.append((match.start() - len(left), match.end(), left + match.group(0)))
    for start, end, name in sorted(hits, key=lambda hit: _degree_rank_near(sentence, hit[0])):
        clause = re.split(r"[，,;；]", sentence[start:])[0] + sentence[max(0, start - 12) : start]
        if WORK_CONTEXT.search(clause) and not SCHOOL_CONTEXT.search(clause):
            yield Finding(
                "fact", "company", name, (start, end), category="career", guards=CURRENT_FACT_GUARDS
            )
        elif SCHOOL_CONTEXT.search(clause) or re.match(rf"[{CJK}]{{0,6}}{DEGREE_WORD}", sentence[end:]):
            yield Finding("fact", "university", name, (start, end), category="career")


def major(sentence: str) -> Iterator[Finding]:
    for match in _find(
        rf"(?:专业是|专业为|主修|学的是|读的是|念的是|修的是|学的|读的)\s*(?P<m>[{CJK}A-Za-z]{{2,12}})",
        sentence,
    ):
        words = [t for t in cut(match.group("m"))]
        picked: list[str] = []
        for token in words:
            school = aliases.UNIVERSITY_ZH_ALIAS.fullmatch(token) or token.endswith(("大学", "学院"))
            if (
                token in STOP_TOKENS
                or re.fullmatch(DEGREE_WORD, token)
                or token in ("专业", "系", "方向")
                or school
            ):
                break
            picked.append(token)
        value = "".join(picked)
        if (
            len(value) >= 2
            and not aliases.UNIVERSITY_ZH_ALIAS.match(value)
            and not aliases.CITY_ZH.fullmatch(value)
        ):
            yield Finding(
                "fact", "major", value, (match.start("m"), match.start("m") + len(value)), category="career"
            )
    for match in _find(
        rf"(?:专业|(?<![联关体派维])系)(?!课|老师)|{DEGREE_WORD}(?=毕业|学历|学位|在读|出身)|(?<=[{CJK}]){DEGREE_WORD}",
        sentence,
    ):
        left = trailing_words(sentence[: match.start()], max_tokens=2)
        if re.search(r"(很|真|非常|太|挺|特别|比较|不|够|更|最|蛮|超)$", sentence[: match.start()]):
            continue  # 很专业 is praise, not a major
        if len(left) >= 2 and not re.fullmatch(DEGREE_WORD, left) and not re.search(r"(大学|学院)$", left):
            yield Finding(
                "fact", "major", left, (match.start() - len(left), match.start()), category="career"
            )


SURNAMES = (
    "王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘于蒋蔡余杜叶程苏魏吕丁"
    "任沈姚卢姜崔钟谭陆汪范金石廖贾夏韦方白邹孟熊秦邱江尹薛段雷侯龙史陶黎贺顾毛郝龚邵万钱严武戴莫孔向汤"
)
PERSON_ADDRESS = re.compile(rf"[{SURNAMES}](?:经理|老师|医生|律师|总|主任|工|教授|总监|主管|顾问)")


def job_title(sentence: str) -> Iterator[Finding]:
    pattern = (
        rf"(?:做|当|是|担任|从事|干|任|作为|职位是|岗位是|职业是|工作是|身份是)(?:了)?"
        rf"(?:{NUMQ}\s*年(?:多)?(?:的)?)?\s*(?:一名|一个|一位|个|名|位)?\s*"
        rf"(?P<t>{TITLE_BODY}{{0,8}}(?:{TITLE_SUFFIX}))"
    )
    for match in _find(pattern, sentence):
        title = match.group("t")
        if re.fullmatch(DEGREE_WORD, title) or PERSON_ADDRESS.fullmatch(title) or len(title) < 2:
            continue  # 王经理 / 李老师 address a person, they are not the user's title
        if re.search(r"(万|千|元|块|港币|港元|美元|美金|人民币|钱)\s*$", sentence[: match.start()]):
            continue  # 拿出2000万做投资: what the money is for, not a job
        yield Finding(
            "fact", "job_title", title, match.span("t"), category="career", guards=CURRENT_FACT_GUARDS
        )
    for match in _find(rf"从事(?P<x>{TITLE_BODY}{{2,8}}?)(?P<w>行业|领域|工作)", sentence):
        key = "job_title" if match.group("w") == "工作" else "industry"
        yield Finding(
            "fact", key, match.group("x"), match.span("x"), category="career", guards=CURRENT_FACT_GUARDS
        )


GENERIC_ORG = re.compile(
    r"^(一家|一个|家|某|这|那|国企|外企|私企|公司|单位|家里|本地|当地|老家|学校|这边|那边|国内|国外|海外)"
)


def company(sentence: str) -> Iterator[Finding]:
    patterns = (
        rf"(?:在|于)\s*(?P<c>(?:(?![在是我，,。])[{CJK}A-Za-z0-9&]){{2,16}}?)\s*(?:工作|上班|任职|就职|实习|供职|做|当|担任|干)",
        rf"(?:是|在)(?P<c>(?:(?![在是我，,。的])[{CJK}A-Za-z0-9&]){{2,16}}?)的(?:员工|职员|雇员)",
        rf"(?:就职于|任职于|供职于|效力于|入职了?|加入了?|跳槽到了?|跳到了?)\s*(?P<c>(?:(?![在是我，,。])[{CJK}A-Za-z0-9&]){{2,16}})",
        # 我离开了美的，去了格力 / 从美团离职了，上个月去了京东: where the user went after leaving
        rf"(?:离开了?|离职了?|辞职了?|辞掉了?[^，,。]{{0,6}})[^，,。]{{0,12}}[，,]\s*(?:现在|目前|后来|然后|又|已经)?"
        rf"(?:上个月|这个月|上周|最近|刚|今年|去年)?(?:去了|到了|进了|换到了?)\s*(?P<c>(?:(?![在是我，,。])[{CJK}A-Za-z0-9&]){{2,16}})",
    )
    for pattern in patterns:
        for match in _find(pattern, sentence):
            name = match.group("c")
            parts = name.split("的")
            if len(parts) > 1 and aliases.CITY_ZH.fullmatch(parts[0]):
                name = parts[-1]
            city = aliases.CITY_ZH.match(name)
            if city and len(name) > city.end() + 1:
                name = name[city.end() :]
            industry = re.fullmatch(rf"一家(?P<i>[{CJK}A-Za-z]{{2,8}}?)(?:公司|企业|机构)", name)
            if industry:
                yield Finding(
                    "fact",
                    "industry",
                    industry.group("i"),
                    match.span("c"),
                    category="career",
                    guards=CURRENT_FACT_GUARDS,
                )
                continue
            if re.search(r"一家|一个|一所|某", name[1:]):
                continue  # 在顺德一家工厂上班: a place, then a kind of workplace, no name
            if (
                aliases.CITY_ZH.fullmatch(name)
                or GENERIC_ORG.match(name)
                or name.endswith(("市", "省", "区", "县"))
                or aliases.UNIVERSITY_ZH_ALIAS.fullmatch(name)
                or "大学" in name
            ):
                continue
            yield Finding(
                "fact",
                "company",
                aliases.company_name(name),
                match.span("c"),
                category="career",
                guards=CURRENT_FACT_GUARDS,
            )


def location(sentence: str) -> Iterator[Finding]:
    city = aliases.CITY_ZH.pattern
    pattern = (
        rf"(?:在|住在|住|生活在|定居在?|定居于|人在|坐标|base在?|现居|居住在|待在|呆在|搬到了?|搬去了?|"
        rf"移居到?|落户|调到了?)\s*(?P<city>{city}|[{CJK}]{{2,3}}(?=市))(?!交大|[{CJK}]{{0,4}}(?:大学|学院))"
    )  # 在西安交大读的硕士 names a school, not where the user lives
    for match in _find(pattern, sentence):
        yield Finding(
            "fact",
            "location",
            aliases.city_name(match.group("city")),
            match.span("city"),
            category="basic",
            guards=CURRENT_FACT_GUARDS,
        )
    for match in _find(
        rf"(?:住在|生活在|定居在?|定居于|现居|居住在|搬到了?|搬去了?|现在在|目前在|人在|家在|家住在?)"
        rf"\s*(?P<place>[{CJK}]{{2,4}})",
        sentence,
    ):  # a place the city list lacks, when jieba tags it as one (昆山, 威海): 我现在在昆山
        place = _place_token(match.group("place"))
        if place and not aliases.CITY_ZH.match(match.group("place")):
            start = match.start("place")
            yield Finding(
                "fact",
                "location",
                place,
                (start, start + len(place)),
                category="basic",
                guards=CURRENT_FACT_GUARDS,
            )
    for match in _find(
        rf"(?:我是|老家是?|来自|老家在)\s*(?:[{CJK}]{{2}}省?)?(?P<city>{city})(?:人)?", sentence
    ):
        yield Finding(
            "fact", "hometown", aliases.city_name(match.group("city")), match.span("city"), category="basic"
        )
    for match in _find(
        rf"(?:想|打算|计划|准备|希望|考虑)(?:要)?(?:去|到|在|移民到?|搬到)\s*(?P<city>{city})", sentence
    ):
        yield Finding(
            "intent",
            "target_city",
            aliases.city_name(match.group("city")),
            match.span("city"),
            category="immigration",
            guards=INTENT_GUARDS,
        )


def _place_token(text: str) -> str | None:
    """The first jieba word of text when jieba tags it a place name (ns), else None."""
    import jieba.posseg as posseg

    words = posseg.lcut(text)
    if words and words[0].flag == "ns" and len(words[0].word) >= 2:
        return str(words[0].word)
    return None


def years_of_experience(sentence: str) -> Iterator[Finding]:
    patterns = (
        rf"(?:工作|上班|从业|入行|工龄|干|做|当)(?:了|有)?(?:已经)?\s*(?P<q>{PRE}\s*{NUMQ})\s*(?:个)?年(?P<more>多|半)?(?:了)?(?!后|以后|之后|内|前)",
        rf"(?P<q>{PRE}\s*{NUMQ})\s*年(?P<more>多|半)?(?:的)?(?:工作|从业|行业|相关|开发|管理)?经验",
        rf"工作经验(?:有|是|:|：)?\s*(?P<q>{PRE}\s*{NUMQ})\s*年(?P<more>多|半)?",
    )
    for pattern in patterns:
        for match in _find(pattern, sentence):
            more = match.group("more")
            quantity = parse_quantity(match.group("q") + ("多" if more == "多" else ""))
            if quantity is not None and more == "半" and isinstance(quantity.value, int):  # 两年半 = 2.5
                quantity = type(quantity)(quantity.value + 0.5, quantity.approximate)
            if quantity is None or (
                isinstance(quantity.value, int | float) and not 0 <= quantity.value <= 60
            ):
                continue
            yield Finding(
                "fact",
                "years_of_experience",
                quantity.value,
                match.span(),
                quantity.approximate,
                category="career",
            )


RULES: tuple[Rule, ...] = (
    age,
    education,
    university,
    major,
    job_title,
    company,
    location,
    years_of_experience,
)
