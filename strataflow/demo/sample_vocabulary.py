"""The word tables the sample generator draws from (strataflow.demo.sample for the dialogs and asset files,
strataflow.demo.sample_statements for what subjects state): invented schools, majors, jobs, cities,
immigration programs and consultant lines for the Chinese consulting dialogs; invented people, projects,
roles, decisions and components for the English team chats. No real personal data.

The generator picks from these with one seeded random generator, so the order of every list is part of the
sample's determinism: changing or reordering an entry changes the files a given seed writes.
"""

from __future__ import annotations

SCHOOLS = [
    ("浙大", "浙江大学"),
    ("复旦", "复旦大学"),
    ("北大", "北京大学"),
    ("清华", "清华大学"),
    ("港大", "香港大学"),
    ("中科大", "中国科学技术大学"),
    ("武汉大学", "武汉大学"),
    ("同济", "同济大学"),
]
MAJORS = ["计算机科学", "金融", "电子工程", "市场营销", "数学", "会计", "软件工程", "生物医学"]
JOBS = ["前端开发工程师", "数据分析师", "产品经理", "投资经理", "算法工程师", "财务经理", "后端开发工程师"]
CITIES = ["杭州", "上海", "深圳", "北京", "广州", "成都", "南京"]
PROGRAMS = [
    ("优才计划", "QMAS"),
    ("高才通", "TTPS"),
    ("专才计划", "ASMTP"),
    ("IANG", "IANG"),
    ("投资移民", "CIES"),
]
CN_NUM = {1: "一", 2: "两", 3: "三"}
GREETINGS_ZH = [
    "您好，我想咨询一下香港身份的事情。",
    "你好，之前约了今天聊一下移民方案。",
    "顾问您好，又来打扰了。",
]
ASKS = {
    "age": "请问您今年多大？",
    "education": "方便说一下您的学历和毕业院校吗？",
    "job_title": "您现在做什么工作，工作几年了？",
    "annual_income": "大概的收入水平是多少？",
    "location": "目前在哪个城市生活？",
    "marital_status": "家庭情况方便介绍一下吗？",
    "target_programs": "您比较倾向哪个计划？",
    "": "您对办理时间或者沟通方式有什么要求吗？",
}
CONSULTANT_NOTES = [
    "好的，我记下了。",
    "明白，这个条件对申请很有帮助。",
    "收到，我稍后整理一份材料清单给您。",
    "根据您的情况，{program}的通过率会比较高。",
    "没问题，下次我们再细聊时间安排。",
]
FILLER_ZH = [
    "最近工作有点忙，周末才有空看材料。",
    "好的，谢谢您！",
    "材料大概需要准备多久？",
    "我再和家里人商量一下。",
]

PEOPLE = [
    "Avery",
    "Blake",
    "Casey",
    "Devon",
    "Emery",
    "Finley",
    "Harper",
    "Jordan",
    "Kendall",
    "Logan",
    "Morgan",
    "Parker",
    "Quinn",
    "Riley",
    "Rowan",
    "Sawyer",
]
PROJECTS = ["atlas", "beacon", "cobalt", "delta", "ember", "falcon"]
ROLES = ["tech lead", "product manager", "designer", "QA engineer", "backend engineer", "data engineer"]
DECISIONS = [
    ("database", "PostgreSQL", "it already runs our analytics"),
    ("ci", "GitHub Actions", "it is cheaper"),
    ("frontend", "React", "the team knows it best"),
    ("queue", "Redis", "it keeps the stack small"),
    ("deploys", "weekly releases", "QA needs a full day per release"),
    ("hosting", "Kubernetes", "we need autoscaling"),
]
COMPONENTS = ["login page", "billing API", "search service", "mobile app", "data pipeline", "admin dashboard"]
FILLER_EN = [
    "Morning all!",
    "Can someone share the meeting link?",
    "I'll look into it after lunch.",
    "Thanks, that helps.",
    "Any blockers today?",
    "Let's sync tomorrow at 10.",
]
