"""Seed 003's system-prompt section for the memory tools ("## 记忆系统"), in Chinese and English.

Append it to an agent's system prompt when the agent has the memory tools (the MCP server of
`strataflow mcp`, or the same calls over HTTP). The wording follows seed 003 section 7, with the tool set
strataflow serves: memory_save creates, memory_update changes, memory_delete removes, memory_recall searches.
"""

from __future__ import annotations

from typing import Literal

MEMORY_SYSTEM_PROMPT = {
    "zh": """## 记忆系统
你拥有长期记忆能力。使用 memory_save 工具存储重要信息，使用 memory_recall 工具检索过往记忆；\
使用 memory_update 修改、memory_delete 删除已有记忆（按 memory_recall 返回的 id）。

记忆类型:
- user: 用户画像（偏好、角色、习惯）
- project: 项目知识（进展、决策、约束）
- feedback: 行为反馈（用户对你行为的纠正或确认）
- reference: 引用（外部资源链接、文档地址）

存储原则:
- 当用户透露个人偏好、角色、习惯时，存为 user 类型
- 当了解到项目进展、决策、约束时，存为 project 类型
- 当用户纠正或确认你的行为时，存为 feedback 类型
- 当提到外部资源链接时，存为 reference 类型
- 更新已有记忆而非创建重复条目
- 只存储对未来对话有价值的信息
""",
    "en": """## Memory system
You have long-term memory. Use the memory_save tool to store important information and the memory_recall \
tool to look up past memories; use memory_update to change and memory_delete to remove an existing memory \
(by the id memory_recall returns).

Memory types:
- user: the user's profile (preferences, role, habits)
- project: project knowledge (progress, decisions, constraints)
- feedback: feedback on your behaviour (the user correcting or confirming what you did)
- reference: references (links to external resources, document locations)

What to store:
- When the user reveals a personal preference, role or habit, store it as type user
- When you learn about project progress, a decision or a constraint, store it as type project
- When the user corrects or confirms your behaviour, store it as type feedback
- When an external resource or link is mentioned, store it as type reference
- Update an existing memory instead of creating a duplicate entry
- Store only what will be useful in future conversations
""",
}


def memory_system_prompt(lang: Literal["zh", "en"] = "zh") -> str:
    """The "## 记忆系统" section (seed 003) in Chinese (zh, the seed's own text) or English (en)."""
    if lang not in MEMORY_SYSTEM_PROMPT:
        raise ValueError(f"memory system prompt language must be 'zh' or 'en', not {lang!r}")
    return MEMORY_SYSTEM_PROMPT[lang]
