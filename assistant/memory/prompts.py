"""What the chat model is told when what the user said about themselves becomes memories, in
the user's language (a Chinese instruction for Chinese, so memories stay in Chinese).

EXTRACTION replaces mem0's own extraction instructions (about 8,000 tokens: more than the
local model's whole context) for the portal's chat models; it asks for the same JSON that
mem0 reads. CARD_INSTRUCTIONS go to mem0 as `custom_instructions` with every provider.
Model inputs, not interface text: not in the translation catalogues.
"""

from __future__ import annotations

EXTRACTION = {
    "zh": """你是记忆提取器。“New Messages”里是用户刚说的关于自己的话。把其中以后值得记住的关于用户的信息写成记忆：
身份和职责、团队和地点、偏好和习惯、正在做的项目、做出的决定和计划，以及对以前信息的更正。
要求：
1. 每条记忆是一句独立、完整的中文陈述，以“用户”开头，例如：用户喜欢用表格形式的回答。
2. 只写用户自己说过的内容，不要补充、推测或编造；问题本身不是记忆，不要写“用户询问……”。
3. 只从 New Messages 中提取；“Existing Memories”里已经有的内容不要重复。没有值得记住的内容时输出 {"memory": []}。
只输出一个 JSON 对象：{"memory": [{"id": "0", "text": "用户……", "attributed_to": "user"}]}

例子：
用户：我在上海做财务，以后请用简短的要点回答。
输出：{"memory": [{"id": "0", "text": "用户在上海做财务工作", "attributed_to": "user"},
{"id": "1", "text": "用户希望回答用简短的要点", "attributed_to": "user"}]}
用户：我从西安调到杭州了。
输出：{"memory": [{"id": "0", "text": "用户调到杭州工作", "attributed_to": "user"}]}""",
    "en": """You extract memories. "New Messages" holds what the user just said about themselves. Write what is worth
remembering about the user later: role and duties, team and location, preferences and habits, projects they work on,
decisions and plans, and corrections of what they said before.
1. Each memory is one standalone, complete sentence in English that starts with "User", e.g.: User prefers answers
   as tables.
2. Write only what the user said; do not add, guess or invent. A question is not a memory: never write "User asks ...".
3. Extract only from New Messages; do not repeat what "Existing Memories" already hold. When nothing is worth
   remembering, output {"memory": []}.
Output only one JSON object: {"memory": [{"id": "0", "text": "User ...", "attributed_to": "user"}]}

Examples:
user: I run finance in the Shanghai office; from now on answer in short bullet points.
Output: {"memory": [{"id": "0", "text": "User runs finance in the Shanghai office", "attributed_to": "user"},
{"id": "1", "text": "User wants answers in short bullet points", "attributed_to": "user"}]}
user: I moved from the Berlin office to Munich.
Output: {"memory": [{"id": "0", "text": "User works in the Munich office", "attributed_to": "user"}]}""",
}

# Which earlier memories a correction makes wrong, when it does not name the old value
# (service.remember; revisions.replaced_value handles "从西安调到杭州").
OUTDATED = {
    "zh": """下面是关于用户的旧记忆和用户刚说的新信息。哪些旧记忆因为新信息已经不再正确（被新信息取代）？
只输出一个 JSON 对象，例如 {"outdated": [1]}；没有被取代的旧记忆时输出 {"outdated": []}。""",
    "en": """Below are old memories about the user and what the user just said. Which old memories are no longer true
because of the new information (it replaces them)? Output only one JSON object, e.g. {"outdated": [1]}; when none
is replaced, output {"outdated": []}.""",
}

CARD_INSTRUCTIONS = {
    "zh": "用中文记录。保留长期有用的事实：用户的偏好、涉及的人、项目、决定和计划；忽略寒暄和闲聊。",
    "en": "Write in English. Keep durable facts: the user's preferences, people, projects, decisions and plans; "
    "skip small talk.",
}

# What the user said, stored as it is when the model could not extract (see service.remember).
CARD = {"zh": "用户说：{said}", "en": "User said: {said}"}
