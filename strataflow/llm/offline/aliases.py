"""The offline provider's alias dictionary: common abbreviations -> canonical names.

- Universities: a Chinese abbreviation maps to the full Chinese name (浙大 -> 浙江大学), an English one to the
  full English name (MIT -> Massachusetts Institute of Technology). Full names pass through unchanged.
- Cities: nicknames and abbreviations map to the city's usual name (魔都 -> 上海, NYC -> New York).
- Immigration programs, named in Chinese or English, map to their official abbreviations
  (优才 -> QMAS, 高才通 -> TTPS, 专才 -> ASMTP, IANG, 投资移民 -> CIES, 科技人才入境计划 -> TECHTAS: seed
  000's category enum spells it TECHTAS, so the value and the item's category agree).

Only well-known abbreviations are listed. A few common ones are ambiguous and resolved by the words
around them (AMBIGUOUS_ZH): 交大 is 上海交通大学 unless 西安 / 北京 / 西南 names another, 中大 is
香港中文大学 (the Hong Kong reading) unless 广州 / 广东 / 中山 points to 中山大学. A Chinese abbreviation
never matches inside a longer name (南大 in 湖南大学, 中大 in 中大型). Add entries here, never in the
rules. Technologies may carry a version ("PostgreSQL 16", "Python 3.11", "Vue3" -> "Vue 3"); see tech_in.
"""

from __future__ import annotations

import re

# fmt: off
UNIVERSITIES_ZH: dict[str, str] = {
    "浙大": "浙江大学", "北大": "北京大学", "清华": "清华大学", "复旦": "复旦大学", "上交": "上海交通大学",
    "上海交大": "上海交通大学", "西交": "西安交通大学", "西安交大": "西安交通大学", "南大": "南京大学",
    "中科大": "中国科学技术大学", "人大": "中国人民大学", "北航": "北京航空航天大学",
    "北理工": "北京理工大学", "北理": "北京理工大学", "哈工大": "哈尔滨工业大学", "武大": "武汉大学",
    "华科": "华中科技大学", "华中科大": "华中科技大学", "港大": "香港大学", "港中文": "香港中文大学",
    "港中大": "香港中文大学", "港科大": "香港科技大学", "港科技": "香港科技大学", "港城大": "香港城市大学",
    "城大": "香港城市大学", "港理工": "香港理工大学", "理大": "香港理工大学", "同济": "同济大学",
    "川大": "四川大学", "山大": "山东大学", "厦大": "厦门大学", "南开": "南开大学", "天大": "天津大学",
    "华师大": "华东师范大学", "华东师大": "华东师范大学", "北师大": "北京师范大学", "北邮": "北京邮电大学",
    "西电": "西安电子科技大学", "电子科大": "电子科技大学", "成电": "电子科技大学", "吉大": "吉林大学",
    "大工": "大连理工大学", "华南理工": "华南理工大学", "华工": "华南理工大学", "上财": "上海财经大学",
    "央财": "中央财经大学", "贸大": "对外经济贸易大学", "北外": "北京外国语大学", "上外": "上海外国语大学",
    "浙工大": "浙江工业大学", "杭电": "杭州电子科技大学", "深大": "深圳大学", "南科大": "南方科技大学",
    "中山大学": "中山大学", "新国大": "新加坡国立大学", "南洋理工": "南洋理工大学", "哥大": "哥伦比亚大学",
    "斯坦福": "斯坦福大学", "哈佛": "哈佛大学", "麻省理工": "麻省理工学院", "牛津": "牛津大学",
    "剑桥": "剑桥大学", "帝国理工": "帝国理工学院", "多大": "多伦多大学", "墨大": "墨尔本大学",
    "悉大": "悉尼大学", "港浸会": "香港浸会大学", "浸大": "香港浸会大学", "北交": "北京交通大学",
    "北交大": "北京交通大学", "东北大": "东北大学", "重大": "重庆大学", "湖大": "湖南大学",
    "港城市": "香港城市大学", "岭南": "岭南大学", "教大": "香港教育大学", "都大": "香港都会大学",
    "港中深": "香港中文大学（深圳）", "港科广": "香港科技大学（广州）", "上科大": "上海科技大学",
    "国科大": "中国科学院大学", "北科大": "北京科技大学", "华理": "华东理工大学", "西工大": "西北工业大学",
    "南航": "南京航空航天大学", "南理工": "南京理工大学", "哈工深": "哈尔滨工业大学（深圳）",
    "中农": "中国农业大学", "苏大": "苏州大学", "暨大": "暨南大学", "华政": "华东政法大学",
    "中财": "中央财经大学", "西南交大": "西南交通大学", "中传": "中国传媒大学",
    "北大医学部": "北京大学医学部",
    "新大": "新加坡国立大学", "宾大": "宾夕法尼亚大学", "康奈尔": "康奈尔大学", "卡梅": "卡内基梅隆大学",
    "卡内基梅隆": "卡内基梅隆大学", "伯克利": "加州大学伯克利分校", "伦敦政经": "伦敦政治经济学院",
    "伦敦大学学院": "伦敦大学学院", "爱丁堡": "爱丁堡大学", "曼大": "曼彻斯特大学", "华威": "华威大学",
    "新南威尔士": "新南威尔士大学", "新南": "新南威尔士大学", "莫纳什": "蒙纳士大学", "蒙纳士": "蒙纳士大学",
    "麦吉尔": "麦吉尔大学", "滑铁卢": "滑铁卢大学", "约翰霍普金斯": "约翰斯·霍普金斯大学", "杜克": "杜克大学",
    "普林斯顿": "普林斯顿大学", "耶鲁": "耶鲁大学", "芝大": "芝加哥大学", "东大": "东京大学",
    "交大": "上海交通大学", "中大": "香港中文大学",
}
# Ambiguous abbreviations: (alias, a pattern of the words that point elsewhere, the other full name).
AMBIGUOUS_ZH: tuple[tuple[str, str, str], ...] = (
    ("交大", "西安", "西安交通大学"),
    ("交大", "北京|北交", "北京交通大学"),
    ("交大", "西南|成都", "西南交通大学"),
    ("中大", "广州|广东|中山|珠海", "中山大学"),
    ("东大", "南京|东南", "东南大学"),
    ("东大", "沈阳|东北", "东北大学"),
)

UNIVERSITIES_EN: dict[str, str] = {
    "MIT": "Massachusetts Institute of Technology", "CMU": "Carnegie Mellon University",
    "UCLA": "University of California, Los Angeles", "UC Berkeley": "University of California, Berkeley",
    "Berkeley": "University of California, Berkeley", "UCSD": "University of California, San Diego",
    "Stanford": "Stanford University", "Harvard": "Harvard University", "Yale": "Yale University",
    "Princeton": "Princeton University", "Columbia": "Columbia University", "Cornell": "Cornell University",
    "NYU": "New York University", "USC": "University of Southern California",
    "UIUC": "University of Illinois Urbana-Champaign", "Georgia Tech": "Georgia Institute of Technology",
    "Caltech": "California Institute of Technology", "UPenn": "University of Pennsylvania",
    "UMich": "University of Michigan", "UT Austin": "University of Texas at Austin",
    "HKU": "The University of Hong Kong", "CUHK": "The Chinese University of Hong Kong",
    "HKUST": "The Hong Kong University of Science and Technology", "CityU": "City University of Hong Kong",
    "PolyU": "The Hong Kong Polytechnic University", "NUS": "National University of Singapore",
    "NTU": "Nanyang Technological University", "LSE": "London School of Economics and Political Science",
    "UCL": "University College London", "Imperial": "Imperial College London",
    "Oxford": "University of Oxford", "Cambridge": "University of Cambridge",
    "UofT": "University of Toronto", "U of T": "University of Toronto",
    "UBC": "University of British Columbia", "ANU": "Australian National University", "ETH": "ETH Zurich",
    "Tsinghua": "Tsinghua University", "PKU": "Peking University", "ZJU": "Zhejiang University",
    "Fudan": "Fudan University", "SJTU": "Shanghai Jiao Tong University",
    "USTC": "University of Science and Technology of China", "Duke": "Duke University",
    "Wharton": "The Wharton School of the University of Pennsylvania", "INSEAD": "INSEAD",
    "HBS": "Harvard Business School", "LBS": "London Business School",
    "Kellogg": "Kellogg School of Management", "HKBU": "Hong Kong Baptist University",
    "EdUHK": "The Education University of Hong Kong", "HKMU": "Hong Kong Metropolitan University",
    "Lingnan": "Lingnan University", "KCL": "King's College London", "Edinburgh": "University of Edinburgh",
    "UNSW": "University of New South Wales", "Monash": "Monash University",
    "UniMelb": "University of Melbourne", "USyd": "University of Sydney", "McGill": "McGill University",
    "Waterloo": "University of Waterloo", "UWaterloo": "University of Waterloo",
    "JHU": "Johns Hopkins University", "Johns Hopkins": "Johns Hopkins University",
    "UChicago": "University of Chicago", "Northwestern": "Northwestern University",
    "UW": "University of Washington", "Purdue": "Purdue University",
    "UCSB": "University of California, Santa Barbara", "UCI": "University of California, Irvine",
    "TUM": "Technical University of Munich", "EPFL": "EPFL", "KAIST": "KAIST",
    "SNU": "Seoul National University", "NTHU": "National Tsing Hua University",
    "SMU": "Singapore Management University", "Warwick": "University of Warwick",
    "Manchester": "University of Manchester", "HIT": "Harbin Institute of Technology",
    "CUHK-Shenzhen": "The Chinese University of Hong Kong, Shenzhen",
    "CUHKSZ": "The Chinese University of Hong Kong, Shenzhen", "BUAA": "Beihang University",
    "Peking": "Peking University", "Jiao Tong": "Shanghai Jiao Tong University",
    "Zhejiang": "Zhejiang University",
}

CITIES_ZH: dict[str, str] = {
    "魔都": "上海", "沪": "上海", "帝都": "北京", "鹏城": "深圳", "羊城": "广州", "春城": "昆明",
    "泉城": "济南", "星城": "长沙", "江城": "武汉", "山城": "重庆", "雾都": "重庆", "蓉城": "成都",
    "榕城": "福州", "鹭岛": "厦门", "杭城": "杭州", "金陵": "南京", "姑苏": "苏州", "帝都北京": "北京",
    "香港特区": "香港", "湾区": "湾区",
}
# Cities recognised by name (the suffix 市 is dropped). Overseas cities keep their usual Chinese names.
CITY_NAMES_ZH: tuple[str, ...] = (
    "北京", "上海", "广州", "深圳", "杭州", "南京", "苏州", "成都", "重庆", "武汉", "西安", "天津", "长沙",
    "郑州", "青岛", "济南", "厦门", "福州", "合肥", "宁波", "无锡", "东莞", "佛山", "珠海", "大连", "沈阳",
    "哈尔滨", "长春", "昆明", "贵阳", "南宁", "南昌", "石家庄", "太原", "兰州", "乌鲁木齐", "呼和浩特",
    "海口", "三亚", "温州", "绍兴", "嘉兴", "金华", "常州", "南通", "徐州", "扬州", "烟台", "潍坊", "泉州",
    "惠州", "中山", "香港", "澳门", "台北", "新加坡", "伦敦", "纽约", "多伦多", "温哥华", "悉尼", "墨尔本",
    "东京", "首尔", "洛杉矶", "旧金山", "西雅图", "波士顿", "芝加哥", "巴黎", "柏林", "迪拜", "硅谷",
    "吉隆坡", "曼谷", "奥克兰", "洛阳", "拉萨", "银川", "西宁",
)

CITIES_EN: dict[str, str] = {
    "NYC": "New York", "New York City": "New York", "SF": "San Francisco", "San Fran": "San Francisco",
    "LA": "Los Angeles", "HK": "Hong Kong", "SG": "Singapore", "DC": "Washington, D.C.",
    "Philly": "Philadelphia", "Vegas": "Las Vegas", "the Bay Area": "San Francisco Bay Area",
    "Bay Area": "San Francisco Bay Area", "NOLA": "New Orleans", "KL": "Kuala Lumpur", "BJ": "Beijing",
    "SH": "Shanghai", "SZ": "Shenzhen", "GZ": "Guangzhou", "HZ": "Hangzhou",
}

# Programs in Chinese (short and long names) or English -> official abbreviation; a few non-HK ones too.
PROGRAMS: dict[str, str] = {
    "优秀人才入境计划": "QMAS", "优才计划": "QMAS", "优才": "QMAS",
    "Quality Migrant Admission Scheme": "QMAS", "QMAS": "QMAS", "高端人才通行证计划": "TTPS",
    "高才通计划": "TTPS", "高才通": "TTPS", "高才": "TTPS", "Top Talent Pass Scheme": "TTPS",
    "Top Talent Pass": "TTPS", "TTPS": "TTPS", "输入内地人才计划": "ASMTP", "专才计划": "ASMTP",
    "专才": "ASMTP", "Admission Scheme for Mainland Talents and Professionals": "ASMTP", "ASMTP": "ASMTP",
    "一般就业政策": "GEP", "General Employment Policy": "GEP", "GEP": "GEP",
    "非本地毕业生留港/回港就业安排": "IANG", "非本地毕业生留港就业安排": "IANG", "留港就业安排": "IANG",
    "Immigration Arrangements for Non-local Graduates": "IANG", "IANG": "IANG",
    "新资本投资者入境计划": "CIES", "资本投资者入境计划": "CIES", "投资移民": "CIES", "资本投资者": "CIES",
    "Capital Investment Entrant Scheme": "CIES", "New Capital Investment Entrant Scheme": "CIES",
    "CIES": "CIES", "科技人才入境计划": "TECHTAS", "Technology Talent Admission Scheme": "TECHTAS",
    "TechTAS": "TECHTAS", "输入中国籍香港永久性居民第二代计划": "ASSPRC", "ASSPRC": "ASSPRC",
    "EB-5": "EB-5", "EB5": "EB-5", "EB-1A": "EB-1A", "NIW": "NIW", "H-1B": "H-1B", "H1B": "H-1B",
    "O-1": "O-1", "Express Entry": "Express Entry", "快速通道": "Express Entry",
}

COMPANIES_ZH: dict[str, str] = {
    "阿里": "阿里巴巴", "鹅厂": "腾讯", "字节": "字节跳动", "度厂": "百度", "菊厂": "华为", "猪厂": "网易",
    "狗厂": "京东", "蚂蚁": "蚂蚁集团", "微软中国": "微软",
}

# Technologies and tools recognised by name (case-insensitive, whole words); value = how it is written.
TECH_NAMES: tuple[str, ...] = (
    "Python", "Java", "JavaScript", "TypeScript", "Golang", "Rust", "C++", "C#", "Ruby", "PHP", "Kotlin",
    "Swift", "Scala", "SQL", "React", "Vue", "Angular", "Svelte", "Node.js", "Django", "Flask", "FastAPI",
    "Spring", "PostgreSQL", "Postgres", "MySQL", "SQLite", "MongoDB", "Redis", "Kafka", "Spark", "Hadoop",
    "Airflow", "Prefect", "dbt", "Snowflake", "BigQuery", "Databricks", "Docker", "Kubernetes", "k8s",
    "Terraform", "AWS", "GCP", "Azure", "Linux", "Git", "GitHub Actions", "GitHub", "GitLab", "Excel",
    "Tableau", "Power BI",
    "Looker", "Figma", "Sketch", "Photoshop", "Jira", "Notion", "Slack", "TensorFlow", "PyTorch", "pandas",
    "NumPy", "Elasticsearch", "GraphQL", "Flutter", "Unity", "SAP", "Salesforce", "MATLAB", "Jenkins",
    "Ansible", "Grafana", "Prometheus", "Next.js", "Tailwind", "Webpack", "Vite", "Rails", "Laravel",
    ".NET", "Android", "iOS", "ClickHouse", "DuckDB", "Pinecone", "pgvector", "LangChain", "Stripe",
    "Vercel", "Heroku", "Go", "Hive", "Flink", "Node", "Spring Boot", "Nginx", "RabbitMQ", "Celery",
    "Pydantic", "Ubuntu", "CentOS", "Debian", "Windows", "macOS", "JDK", "Oracle", "SQL Server", "Dart",
    "Perl", "Julia", "Elixir", "Haskell", "Lua", "Bash", "PowerShell", "OpenShift", "Helm",
    "Istio", "Consul", "Vault", "Nomad", "Cassandra", "DynamoDB", "Aurora", "Lambda", "Kibana", "Logstash",
    "Splunk", "Datadog", "Sentry", "Jupyter", "scikit-learn", "Keras", "XGBoost", "LightGBM", "CUDA",
    "OpenCV", "Hugging Face", "Transformers", "LlamaIndex", "Superset", "Metabase", "Redshift", "Trino",
    "Presto", "Iceberg", "Delta Lake", "Nuxt", "Remix", "Express", "NestJS", "Gin", "Echo", "Laravel",
    "Symfony", "Qt", "Electron", "React Native", "SwiftUI", "Jetpack Compose", "Xcode", "VS Code",
    "IntelliJ", "PyCharm", "Vim", "Emacs", "Confluence", "Trello", "Asana", "Linear", "Airtable",
)
# fmt: on
TECH_CANONICAL = {
    "postgres": "PostgreSQL",
    "k8s": "Kubernetes",
    "golang": "Go",
    "node": "Node.js",
    "jdk": "Java",
}


_NOT_AFTER_LATIN = r"(?<![A-Za-z0-9])"
_NOT_BEFORE_LATIN = r"(?![A-Za-z0-9])"


def _alternation(names: list[str], latin_bounded: bool) -> re.Pattern[str]:
    body = "|".join(re.escape(name) for name in sorted(names, key=len, reverse=True))
    if latin_bounded:
        return re.compile(f"{_NOT_AFTER_LATIN}(?:{body}){_NOT_BEFORE_LATIN}")
    return re.compile(f"(?:{body})")


# A Chinese alias ending in 大 never runs into 学 / 型 (南大 in 湖南大学, 中大 in 中大型企业).
UNIVERSITY_ZH_ALIAS = re.compile(
    "(?:"
    + "|".join(
        re.escape(name) + ("(?![学型小])" if name.endswith("大") else "")
        for name in sorted(UNIVERSITIES_ZH, key=len, reverse=True)
    )
    + ")"
)
UNIVERSITY_EN_ALIAS = _alternation(list(UNIVERSITIES_EN), latin_bounded=True)
CITY_ZH = _alternation([*CITIES_ZH, *CITY_NAMES_ZH], latin_bounded=False)
CITY_EN_ALIAS = _alternation(list(CITIES_EN), latin_bounded=True)
PROGRAM_PATTERN = re.compile(
    "|".join(
        (re.escape(name) if not name.isascii() else rf"(?<![A-Za-z0-9]){re.escape(name)}(?![A-Za-z0-9])")
        for name in sorted(PROGRAMS, key=len, reverse=True)
    ),
    re.IGNORECASE,
)


# A version right after a name: "PostgreSQL 16", "Python 3.11", "Vue3", "Node v20"; never a count of
# years, months or people ("Java 5年", "Python 3 years").
VERSION = (
    r"(?:\s?v?(?P<v{i}>\d{{1,4}}(?:\.\d{{1,4}}){{0,2}}(?:\.x)?)(?![\d.]*\s*(?:年|个|月|天|人|%|万|"
    r"(?i:k\b|w\b|years?|yrs?|months?|days?|weeks?|hours?|people|times|engineers|devs|developers|users|"
    r"servers|nodes|instances|services|GB|TB|MB|ms\b|s\b))))?"
)
_TECH_ORDER = sorted(TECH_NAMES, key=len, reverse=True)


def _tech_alternative(name: str, index: int) -> str:
    version = VERSION.format(i=index)
    if name == "Go":  # capitalised only: the verb "go" is not a language
        return rf"(?P<t{index}>(?<![A-Za-z0-9#+.])Go(?![A-Za-z+#])(?!\d*[A-Za-z]){version})"
    return rf"(?P<t{index}>(?i:(?<![A-Za-z0-9.]){re.escape(name)}(?![A-Za-z+#])(?!\d*[A-Za-z])){version})"


TECH_PATTERN = re.compile("|".join(_tech_alternative(name, i) for i, name in enumerate(_TECH_ORDER)))


def tech_in(text: str) -> list[str]:
    """The technologies named in text, canonical spelling, with their version when one follows the name
    ("PostgreSQL 16", "Vue 3"), in order, without repeats."""
    found: list[str] = []
    for match in TECH_PATTERN.finditer(text):
        index = int((match.lastgroup or "t0")[1:])
        listed = _TECH_ORDER[index]
        name = TECH_CANONICAL.get(listed.lower(), listed)
        version = match.group(f"v{index}")
        if version:
            name = f"{name} {version}"
        if name not in found:
            found.append(name)
    return found


def versioned(names: list[str]) -> bool:
    """Any of these technology names carries a version ("PostgreSQL 16"): the sentence is about tools."""
    return any(re.search(r"\s\d[\d.x]*$", name) for name in names)


def company_name(text: str) -> str:
    """A company as its usual name: 鹅厂 -> 腾讯, 阿里 -> 阿里巴巴."""
    name = text.strip()
    return COMPANIES_ZH.get(name, name)


def university_name(text: str, context: str = "") -> str:
    """A university as its full name: 浙大 -> 浙江大学, MIT -> Massachusetts Institute of Technology; an
    ambiguous abbreviation (交大, 中大) is resolved by the words of context (its sentence)."""
    name = text.strip()
    for alias, cue, full in AMBIGUOUS_ZH:
        if name == alias and re.search(cue, context):
            return full
    return UNIVERSITIES_ZH.get(name) or UNIVERSITIES_EN.get(name) or name


def city_name(text: str) -> str:
    """A city as its usual name: 魔都 -> 上海, 杭州市 -> 杭州, NYC -> New York."""
    name = text.strip()
    if name in CITIES_ZH:
        return CITIES_ZH[name]
    if name in CITIES_EN:
        return CITIES_EN[name]
    if len(name) > 2 and name.endswith("市"):
        return name[:-1]
    return name


def programs_in(text: str) -> list[str]:
    """The official abbreviations of every program named in text, in order, without repeats."""
    found: list[str] = []
    lowered = {name.lower(): abbr for name, abbr in PROGRAMS.items()}
    for match in PROGRAM_PATTERN.finditer(text):
        abbr = lowered[match.group(0).lower()]
        if abbr not in found:
            found.append(abbr)
    return found
