"""What the chat model is told when a question and its answer become memories, in the
question's language (a Chinese instruction for Chinese, so memories stay in Chinese).

EXTRACTION replaces mem0's own extraction instructions (about 8,000 tokens: more than the
local model's whole context) for the portal's chat models; it asks for the same JSON that
mem0 reads. CARD_INSTRUCTIONS go to mem0 as `custom_instructions` with every provider.
Model inputs, not interface text: not in the translation catalogues.
"""

from __future__ import annotations

EXTRACTION = {
    "zh": """你是记忆提取器。阅读“New Messages”里用户和助手的新一轮对话，提取以后值得记住的关于用户的信息：
用户的偏好和习惯、身份和职责、团队和地点、提到的人、正在做的项目、做出的决定和计划。
要求：
1. 每条记忆是一句独立、完整的中文陈述，以“用户”开头，例如：用户喜欢用表格形式的回答。
2. 只从 New Messages 中提取；“Existing Memories”里已经有的内容不要重复。
3. 寒暄、客套、一次性的问题本身和文档里的普通知识不要提取。没有值得记住的内容时输出 {"memory": []}。
只输出一个 JSON 对象：{"memory": [{"id": "0", "text": "用户……", "attributed_to": "user"}]}

例子：
用户：我在上海做财务，以后请用简短的要点回答。报销要多久？
助手：报销一般在五个工作日内到账 [1]。
输出：{"memory": [{"id": "0", "text": "用户在上海做财务工作", "attributed_to": "user"},
{"id": "1", "text": "用户希望回答用简短的要点", "attributed_to": "user"}]}
用户：年假有几天？
助手：年假为十天 [1]。
输出：{"memory": []}""",
    "en": """You extract memories. Read the new turn between the user and the assistant under "New Messages" and extract
what is worth remembering about the user later: preferences and habits, role and duties, team and location, people
they mention, projects they work on, decisions and plans.
1. Each memory is one standalone, complete sentence in English that starts with "User", e.g.: User prefers answers
   as tables.
2. Extract only from New Messages; do not repeat what "Existing Memories" already hold.
3. Skip small talk, pleasantries, the one-off question itself and general knowledge from the documents. When
   nothing is worth remembering, output {"memory": []}.
Output only one JSON object: {"memory": [{"id": "0", "text": "User ...", "attributed_to": "user"}]}

Examples:
user: I run finance in the Shanghai office; from now on answer in short bullet points. How long do refunds take?
assistant: Refunds arrive within five working days [1].
Output: {"memory": [{"id": "0", "text": "User runs finance in the Shanghai office", "attributed_to": "user"},
{"id": "1", "text": "User wants answers in short bullet points", "attributed_to": "user"}]}
user: How many days of annual leave do we get?
assistant: Annual leave is ten days [1].
Output: {"memory": []}""",
}

CARD_INSTRUCTIONS = {
    "zh": "用中文记录。保留长期有用的事实：用户的偏好、涉及的人、项目、决定和计划；忽略寒暄和闲聊。",
    "en": "Write in English. Keep durable facts: the user's preferences, people, projects, decisions and plans; "
    "skip small talk.",
}

# A card stored as it is, when the model could not extract (see service.remember).
CARD = {"zh": "问：{question}\n答：{answer}", "en": "Q: {question}\nA: {answer}"}
