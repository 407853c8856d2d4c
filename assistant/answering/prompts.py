"""What the chat model is told, in the question's language (Chinese prompts for Chinese).

These are model inputs, not interface text: they follow the question, not the user's
interface language, so they are not in the translation catalogues.
"""

from __future__ import annotations

from collections.abc import Sequence

from common.language import Language

ROUTER = {
    "zh": """你是问答系统的路由器。根据对话历史和用户的最新问题，选择一种处理策略：
- direct：问题意图和实体都清楚，可以直接检索回答。
- rewrite：问题里有代词（它、这个、那个、他们）、省略或缺少上下文，需要结合对话历史改写。
- multi_step：问题包含先后依赖的多个需求（先找 A，再根据 A 找 B），或需要跨文件比较多个对象。
只输出一个 JSON 对象：{"strategy": "direct|rewrite|multi_step", "reason": "一句话理由"}

例子：
问题：年假有几天？（无历史） → {"strategy": "direct", "reason": "意图和实体清楚"}
历史：年假有几天？ 问题：它可以累积吗？ → {"strategy": "rewrite", "reason": "“它”指代历史中的年假"}
问题：比较 A 产品和 B 产品的保修期 → {"strategy": "multi_step", "reason": "需要分别查两个产品再比较"}
问题：先查报销的负责人，再查他负责的其他制度 → {"strategy": "multi_step", "reason": "第二步依赖第一步的结果"}""",
    "en": """You route questions in a question-answering system. From the conversation history and the
user's latest question, choose one strategy:
- direct: the intent and entities are clear; search and answer as asked.
- rewrite: the question has pronouns (it, that, they, this one), ellipsis or missing context and must be
  rewritten with the history.
- multi_step: the question chains needs (find A, then B about A) or compares several things across files.
Output only one JSON object: {"strategy": "direct|rewrite|multi_step", "reason": "one short sentence"}

Examples:
Question: How many days of annual leave do we get? (no history)
-> {"strategy": "direct", "reason": "clear intent and entities"}
History: How many days of annual leave? Question: Can it be carried over?
-> {"strategy": "rewrite", "reason": "'it' refers to annual leave"}
Question: Compare the warranty of product A and product B
-> {"strategy": "multi_step", "reason": "two lookups, then a comparison"}
Question: Find who owns the expense policy, then list the other policies that person owns
-> {"strategy": "multi_step", "reason": "step two depends on step one"}""",
}

REWRITE = {
    "zh": """根据对话历史，把用户的最新问题改写成一个独立、完整、可以直接检索的问题。
保持用户的真实意图，只补全代词和省略的内容；不要加入历史中与这个问题无关的实体；不要回答问题。
只输出改写后的问题。""",
    "en": """Rewrite the user's latest question as one standalone, complete question that can be searched as is,
using the conversation history. Keep the user's real intent; only resolve pronouns and ellipsis; do not add
entities from the history that the question is not about; do not answer it. Output only the rewritten question.""",
}

PLANNER = {
    "zh": """把用户的问题拆成 2 到 {max_steps} 个按顺序执行的检索步骤，每一步是一个可以单独检索的完整问题，
和用户的意图一一对应（比较两个对象时，每个对象一步）。
只输出一个 JSON 对象：{{"steps": ["第一步的问题", "第二步的问题"]}}""",
    "en": """Split the user's question into 2 to {max_steps} search steps, in order; each step is one complete question
that can be searched on its own, aligned with the user's intent (when comparing things, one step per thing).
Output only one JSON object: {{"steps": ["first step's question", "second step's question"]}}""",
}

ANSWER = {
    "zh": """你是团队知识库的助手，根据用户给出的资料回答问题。要求：
1. 把资料当作你已经知道的知识，自然地推理，用中文简洁地回答。
2. 直接写出答案本身：资料中的数值、名称、选项或命令要照原文写出，不要只说“见资料”。
3. 每句话后面用方括号标注所依据资料的编号，例如：年假为十天 [1]。
4. 不要编造资料中没有的内容。只有当所有资料都与问题无关时，才回答：文档中没有找到答案。""",
    "en": """You are the assistant of a team knowledge base; answer the question from the passages the user gives.
1. Treat the passages as what you know, reason over them naturally, and answer briefly in English.
2. Write the answer itself: the value, name, option or command exactly as the passage writes it, not "see [2]".
3. After each sentence, cite the passage it rests on by its number in brackets, e.g.: Annual leave is ten days [1].
4. Never make up what the passages do not say. Only when no passage is about the question, reply:
The documents do not contain the answer.""",
}

SUMMARIZE = {
    "zh": """你是团队知识库的助手。用户的问题被拆成了几个步骤，用户给出了每个步骤检索到的资料。要求：
1. 把资料当作你已经知道的知识，综合所有步骤，用中文写一个 Markdown 格式的回答。
2. 每句话后面用方括号标注所依据资料的编号，例如：A 的保修期为两年 [1]，B 为五年 [3]。
3. 不要编造资料中没有的内容；某一步没有找到的内容直接说明。
只有当所有资料都与问题无关时，才回答：文档中没有找到答案。""",
    "en": """You are the assistant of a team knowledge base. The user's question was split into steps and the user
gives the passages each step found.
1. Treat the passages as what you know, combine all the steps, and write one answer in Markdown, in English.
2. After each sentence, cite the passage it rests on by its number in brackets, e.g.: A has two years [1], B five [3].
3. Never make up what the passages do not say; say plainly what a step did not find. Only when no passage is about
the question, reply: The documents do not contain the answer.""",
}

# Said again after the passages: small models follow the last thing they read.
REMINDER = {
    "zh": "请根据以上资料回答，并在句末用 [编号] 标注来源。",
    "en": "Answer from the passages above and cite them with [number] after each sentence.",
}

# Asked in place of REMINDER, with the same passages: the judge (answering.pipeline) reads the
# first token's P(yes) - P(no); the answer that follows shares the whole prompt before this line.
JUDGE = {
    "zh": "以上资料是否直接给出了这个问题的答案？只回答 yes 或 no。",
    "en": "Do the passages above state the answer to this question? Reply only yes or no.",
}

# The short judge of the evidence answer (answering.modes.confirm): the model reads only the
# reader's quotes and the question, and its first token's P(yes) - P(no) keeps or declines it.
CONFIRM = {
    "zh": "你判断一段文档原文是否回答了一个问题。只回答 yes 或 no。",
    "en": "You judge whether a quote from the documents answers a question. Reply only yes or no.",
}
CONFIRM_ASK = {
    "zh": "这段原文是否直接给出了这个问题的答案？",
    "en": "Does the quote state the answer to this question?",
}

# What the model says when the documents do not hold the answer (see ANSWER), and other
# ways small models say the same; an answer that cites nothing and says one of these abstains.
NO_ANSWER = {"zh": "文档中没有找到答案。", "en": "The documents do not contain the answer."}
# A multi-step answer made of its steps' quotes (the summary refused although steps found them).
STEPS_INTRO = {"zh": "资料中与各步相关的原文：", "en": "What the documents say on each part:"}


def declined(language: Language, lacking: Sequence[str], closest: Sequence[tuple[str, str]]) -> str:
    """The portal's own refusal when the passages lack what the question names (see
    answering.evidence) or do not state the answer (the judge): NO_ANSWER, what is missing
    (when something is), and where the closest passages are."""
    if language == "zh":
        missing = f"资料中没有提到{'、'.join(f'“{term}”' for term in lacking)}。" if lacking else ""
        places = "；".join(f"《{name}》{place}" for name, place in closest)
        return f"{NO_ANSWER['zh']}{missing}最接近的段落：{places}。"
    missing = f" Nothing in them mentions {', '.join(f'“{term}”' for term in lacking)}." if lacking else ""
    places = "; ".join(f'"{name}" {place}' for name, place in closest)
    return f"{NO_ANSWER['en']}{missing} Closest passages: {places}."


def picture_found(language: Language, name: str, number: int, words: str) -> str:
    """The portal's own answer when a picture's description matches what the question asks
    to see and the model would not say so: the picture, cited, and what it shows."""
    if language == "zh":
        return f"最符合的图片是《{name}》[{number}]：{words}"
    return f'The picture that matches best is "{name}" [{number}]: {words}'


def pictures_listed(language: Language, pictures: Sequence[tuple[str, int]]) -> str:
    """The line that names the pictures an answer attaches, each cited: (file name, number)."""
    if language == "zh":
        return "找到的图片：" + "、".join(f"《{name}》[{number}]" for name, number in pictures)
    return "Pictures found: " + ", ".join(f'"{name}" [{number}]' for name, number in pictures)


def table_cell(language: Language, value: str, row: str, column: str, number: int) -> str:
    """The portal's own answer when the question names one cell of a table: the value, with
    the row and column it was read from, cited."""
    where = f"{row}, {column}" if column else row
    if language == "zh":
        return f"{value}（表中“{where}”一格）[{number}]"
    return f'{value} (the table\'s cell "{where}") [{number}]'


ABSTAIN_MARKERS = {
    "zh": ("没有找到答案", "没有找到相关", "未找到", "没有提到", "未提及", "没有相关信息", "无法回答", "没有提供"),
    "en": (
        "do not contain the answer",
        "does not contain the answer",
        "don't contain",
        "not mentioned",
        "no information",
        "cannot find",
        "can't find",
        "could not find",
        "couldn't find",
        "not provided",
    ),
}

# When the portal remembers things about the user (assistant/memory): they come before the
# passages, are not passages (no [n]), and may answer a question about the user by themselves.
MEMORY_RULE = {
    "zh": "5. “关于用户的记忆”是你之前记住的用户信息，不是资料，不要用编号引用；与问题有关时结合它回答，"
    "并说出你用了记得的内容（例如：你之前提到……）。记忆与资料不一致时，以资料为准。",
    "en": '5. "What you remember about the user" is what you learned about them earlier, not passages: never cite it '
    "with a number; when it bears on the question, use it and say that you did (e.g.: You mentioned that ...). "
    "Where a memory and the passages disagree, the passages win.",
}
NO_PASSAGES = {"zh": "（没有找到相关资料）", "en": "(no passages found)"}
MEMORY_REMINDER = {
    "zh": "没有资料时，只根据关于用户的记忆回答；记忆也回答不了时，回答：文档中没有找到答案。",
    "en": "With no passages, answer only from what you remember about the user; when that cannot answer either, "
    "reply: The documents do not contain the answer.",
}

LABELS = {
    "zh": {
        "history": "对话历史",
        "question": "问题",
        "passages": "资料",
        "step": "步骤",
        "answer": "回答",
        "memories": "关于用户的记忆",
    },
    "en": {
        "history": "Conversation history",
        "question": "Question",
        "passages": "Passages",
        "step": "Step",
        "answer": "Answer",
        "memories": "What you remember about the user",
    },
}


def label(language: Language, key: str) -> str:
    return LABELS[language][key]


def evidence_lead(language: Language, quotes: Sequence[tuple[str, int, str, str]]) -> str:
    """The portal's own answer from the evidence reader's quotes (answering.modes): the quotes
    first, each in its own words (a quote in another language than the question's stays in
    its own) with its [n], then where it is (file and place) in the question's language; no
    preamble, so that what answers is what a person reads first. `quotes`: (text, number,
    file, place)."""
    lines = []
    for text, number, name, place in quotes:
        where = f"《{name}》{place}" if language == "zh" else f'"{name}", {place}'
        lines.append(f"“{text}” [{number}] — {where}")
    if len(lines) == 1:
        return lines[0]
    return "\n".join(f"- {line}" for line in lines)


def remembered_lead(language: Language, fact: str) -> str:
    """The portal's answer from what the user told it earlier (answering.modes): the fact as
    remembered, no citation (it is not in a document)."""
    if language == "zh":
        return f"你之前告诉过我：“{fact}”"
    return f"You told me earlier: “{fact}”"


# The model picks the sentence that answers (answering.modes, choose): its reply is read as
# the first token only, limited to the candidates' numbers and 0.
CHOOSE = {
    "zh": "下面是从文档中找到的几句原文，每句前有编号。哪一句回答了问题？"
    "只输出那一句的编号；没有一句回答问题时输出 0。",
    "en": "Below are numbered sentences found in the documents. Which one answers the question? "
    "Output only its number; output 0 when none of them answers it.",
}
