"""Whether a user's turn holds something worth remembering, decided without a model.

A turn reaches mem0's extraction only when it says something durable about the user
(identity, role, team, location, preference, habit, plan, decision), corrects such a fact,
or asks to remember or to forget something. Document questions, small talk and one-off
requests ("用表格列出这些参数", "summarize this file") store nothing, even in the first
person ("我想知道年假有几天？", "I need the table on page 3").

The turn is cut into sentences (。！？!?；; and newlines end one; a full stop does before a
space, the end or a Chinese character). A sentence that asks something is cut again into
clauses (，,：: and the like), and only the clauses that state something are kept: "我是
SRE，请问告警文档在哪？" keeps "我是 SRE". What is kept is the user's own text, verbatim and
in order; only that goes to mem0, never the answer. Word lists and regular expressions
only: about a tenth of a millisecond a turn. Measured on `tests/files/memory/turns.jsonl`
(see docs/memory.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from common.text import CJK_CHARS

# A sentence longer than this is pasted material (a log, a paragraph of a document), not
# something the user says about themselves.
MAX_SENTENCE = 300

# What each kind is called, strongest first: a turn's kind is its strongest sentence's.
KINDS = ("forget", "correction", "remember", "statement")


@dataclass(frozen=True)
class Gate:
    keep: bool
    kind: str  # "statement" | "correction" | "forget" | "remember" | "" (nothing)
    sentences: tuple[str, ...]  # the user's own sentences (or clauses) that carry it, verbatim, in order
    kinds: tuple[str, ...] = field(default=(), compare=False)  # each sentence's own kind


NOTHING = Gate(keep=False, kind="", sentences=())

_CLOSE = "”’\"'」』）)】"
_SENTENCE_END = re.compile(
    rf"[。！？!?；;…]+[{_CLOSE}]*"  # Chinese and ASCII ends, with any closing quotes
    rf"|\.+[{_CLOSE}]*(?=\s|$|[{CJK_CHARS}])"  # a full stop before a space, the end or Chinese
    r"|\n"
)
_CLAUSE_END = re.compile(r"[，,：:、—]+|\s+(?:but|and|so|because)\s+", re.IGNORECASE)

_ME = r"(?:我|咱)"
# How a request to remember, to forget or to answer in some way may open.
_LEAD = r"^(?:(?:不过|还有|另外|然后|对了|顺便说一下|顺便|那就|那|好吧|好的|哦|嗯|也)[，,\s]*)?(?:请|麻烦)?你?"
_LEAD_EN = r"^(?:(?:also|and|oh|ok|okay|by the way|btw|one more thing|but|one last thing)[,:\s]+)*(?:please\s+)?"
_GROUP = r"(?:团队|小组|项目组|组|部门|科室|部|公司|分公司|办公室|中心)"
_CITY = (
    r"(?:北京|上海|广州|深圳|杭州|西安|成都|南京|武汉|重庆|天津|苏州|长沙|郑州|青岛|厦门|合肥|济南|"
    r"大连|沈阳|昆明|福州|无锡|宁波|珠海|东莞|佛山|香港|澳门|台北|新加坡|东京|伦敦|纽约)"
)


def _zh(*patterns: str) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in patterns))


def _en(*patterns: str) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in patterns), re.IGNORECASE)


# Asking rather than telling: a clause with one of these is not kept.
_ASKING = _zh(
    r"[？?]",
    r"[吗呢么嘛][\s。！!.~～]*$",
    r"什么|怎么|怎样|如何|为什么|为何|哪|谁|多少|几[天个点号岁次页种年月周位条章节]|是否",
    r"是不是|能不能|可不可以|会不会|有没有|要不要|行不行|对不对|可以吗",
    r"请问|想问|想知道|想了解|想确认|不知道|不懂|不清楚|搞不清|记不清",
)
_ASKING_EN = _en(
    r"^\s*(?:how|what|what's|where|where's|which|who|whom|whose|why|when|can|could|does|did|is|are|am|was|were|"
    r"should|would|will|may|might|shall|has|have)\b",
    r"^\s*do\b(?!\s+not\b)",
    r"\b(?:how to|how do|how can|what is|where is|wondering|not sure|no idea)\b",
    r"\bI(?:'d| would)? (?:like|want|need) to (?:know|understand|find|see|learn|check)\b",
)

# Asking for something: such a sentence is cut into clauses too, but a clause with one of
# these may still be kept ("I want answers in Chinese from now on").
_NEEDING = _zh(
    r"想看|想查|想找|想要看|要看一下|需要看|想请你|"
    r"(?:帮我|给我|麻烦你?|请你?)(?:查|找|看|总结|概括|列|翻译|整理|解释|对比|比较|说明|讲)",
)
_NEEDING_EN = _en(
    r"\bI (?:need|want|would like|'d like)\b|\b(?:can|could|would) you\b",
    rf"{_LEAD_EN}(?:list|show|give|find|summari[sz]e|explain|translate|compare|tell)\b",
    r"\bplease (?:list|show|give|find|summari[sz]e|explain|translate|compare|tell)\b",
)

_FORGET = _zh(
    rf"{_LEAD}(?:帮我)?(?:忘掉|忘记|忘了|别记|不要记|不用记|别再记|不要再记|不用再记|不再记)"
    rf"(?!问|说|带|拿)(?![^。]*问题)[^。]*?(?:{_ME}|记忆|这条|那条|这件事|那件事|之前说|刚才说)",
    rf"{_LEAD}(?:帮我)?(?:删掉|删除|去掉|清除|抹掉)[^。]*?"
    rf"(?:记忆|记住的|记下的|这条|那条|关于{_ME}|{_ME}说过|{_ME}之前说|{_ME}刚才说|这件事|那件事)",
    r"记忆[^。]{0,12}?(?:删|去掉|清除|忘)|(?:删|去掉|清除|忘)[^。]{0,12}?记忆",
)
_FORGET_EN = _en(
    rf"{_LEAD_EN}(?:forget|erase|unlearn)\b\s*"
    r"(?:that|what|everything|all (?:about|that)|about (?:me|my|that|what|the fact)|my|me|I|I'm|we|our)\b",
    rf"{_LEAD_EN}(?:delete|remove|drop|clear|erase|wipe)\b[^.?!]{{0,40}}\bmemor(?:y|ies)\b",
    rf"{_LEAD_EN}(?:stop|quit) remembering\b",
    rf"{_LEAD_EN}(?:don't|do not|no need to) (?:remember|keep|store)\b[^.?!]*\b(?:anymore|any more|now)\b",
    rf"{_LEAD_EN}(?:you can|you may) forget\b",
)

_REMEMBER = _zh(
    rf"{_LEAD}(?:帮我|给我)?(?:记住|记下|记一下|记好|记着|牢记|备注一下)",
)
_REMEMBER_EN = _en(
    rf"{_LEAD_EN}(?:note|make a note|take note)(?: that)?\s+(?:I|I'm|my|we|we're|our)\b",
    rf"{_LEAD_EN}(?:remember|bear in mind|keep in mind|don't forget|do not forget)\b"
    r"(?!\s+(?:what|how|where|which|when|who|the (?:manual|document|doc|file|page|table|handbook)))",
)

_CORRECTION = _zh(
    rf"{_ME}[^，。]{{0,8}}?(?:调到|调去|调回|搬到|搬去|搬回|转到|转去|转岗|调岗|换到|换组|换部门|换团队|换岗|跳槽|离职|辞职|退休)",
    rf"{_ME}[^，。]{{0,4}}?(?:已经|现在|目前|早就)?不再",
    rf"{_ME}[^，。]{{0,4}}?(?:已经|现在|目前|早就)不(?:在|是|用|负责|做|管|住|属于)",
    rf"{_ME}[^，。]{{0,4}}?不(?:在|是|用|负责|做|管|住|属于)[^，。]{{1,20}}了",
    rf"(?:不对|不是的|更正|纠正|说错|搞错|弄错|记错|有误)[^。]*?{_ME}(?!想问|问的是|的意思是|是说)",
    rf"{_ME}[^。]{{0,12}}?(?:说错|搞错|记错|弄错)",
    rf"{_ME}(?:其实|并|现在|已经)?不是[^，。]{{1,12}}[，,]\s*(?:只是|而是|是|现在是)",
    rf"{_ME}[^，。]{{0,6}}?现在(?:改|换)(?:成|为|到|用)",
    rf"{_ME}[^。]{{0,4}}?(?:以前|之前|原来|原先)[^。]{{1,20}}?(?:现在|如今|目前)",
    # Taking back a preference: 其实我更习惯中文，以后还是用中文回答吧.
    rf"^(?:其实|实际上)[，,]?{_ME}[^，。]{{0,4}}?(?:更|还是)(?:喜欢|习惯|想要|希望|倾向)",
)
_CORRECTION_EN = _en(
    r"\bI(?:'ve| have)? (?:moved|relocated|transferred|switched|changed|swapped|migrated) "
    r"(?:from|to|over|back|teams?|roles?|jobs?|offices?|departments?|companies|cities)\b",
    r"\b(?:I|I'm|I am|we|we're|we are)\s+no longer\b",
    r"\bI(?:'m| am) (?:switching|transferring|changing) "
    r"(?:from|to|over|back|teams?|roles?|jobs?|offices?|departments?)\b",
    r"\b(?:I|we) (?:don't|do not|no longer)\b[^.?!]*\b(?:anymore|any more)\b",
    r"^(?:actually|correction|sorry|oops|update|no)\b[,:]?\s*"
    r"(?:I|I'm|I am|my|we|we're|our)\b(?!\s+(?:meant?|asked|said))",
    r"^(?:not anymore|no longer)\b",
    r"\b(?:that's|that is|this is) (?:wrong|not right|incorrect|outdated|out of date)\b[^.?!]*\b(?:I|I'm|my|we|our)\b",
    r"\bI(?:'m| am) now\b|\bnow I(?:'m| am| work| use)\b",
    r"\bI now (?:work|use|lead|manage|prefer|live|report|run|own|sit)\b",
)

# Preferences that hold for once only ("这次", "this time") are requests, not preferences.
_ONE_OFF = _zh(
    r"这次|这一次|本次|这回|这个回答|上面|刚才|这段|这篇|这条回答|你的回答|这个答案|这个",
)
_ONE_OFF_EN = _en(
    r"\b(?:this|that|these|those|the (?:previous|last|above)|your) "
    r"(?:answer|response|reply|one|version|explanation|summary|table|list)\b",
    r"\b(?:this time|for now|just now|in this answer|here)\b",
    r",?\s*thanks?\b|\bthank you\b",
    r"\b(?:prefer|like|love|hate|dislike|enjoy|stand)\s+(?:this|that|it|these|those)\b",
)

_STATEMENT = _zh(
    # identity and role
    rf"{_ME}(?:现在|目前|其实|也|本人)?是(?!不是|用|从|在|通过|按|照|刚|第一次|想|要|来问|问|说|否)",
    rf"{_ME}叫|叫{_ME}|称呼{_ME}|{_ME}的名字(?:是|叫)|{_ME}姓",
    rf"{_ME}(?:现在|目前)?(?:住在|家在|老家在|来自|常驻)",
    rf"{_ME}(?:现在|目前|最近|一直|平时)?(?:在|常驻|驻)"
    rf"(?!找|看|查|读|试|学|问|用|装|安装|第|哪|这|那|网上|家)"
    rf"(?:{_CITY}|[^，。,]{{0,12}}?(?:{_GROUP}|工作|上班|办公|任职|实习|base))",
    rf"{_ME}(?:现在|目前|最近|一直|平时)?在(?:做|负责|带|跟|搞|写|维护)[^，。]{{0,20}}(?:项目|系统|模块|平台|产品|业务|方向)",
    rf"{_ME}(?:主要|目前|现在|一直|平时)?(?:负责|分管|主管|管理|带领|对接|维护|统筹)",
    rf"{_ME}(?:现在|目前|平时|一直|主要)?(?:用的是|在用|一直用)",
    # preferences and habits
    rf"{_ME}(?:很|比较|更|最|特别|还是|一直|也|个人)?(?:不)?(?:喜欢|偏好|偏爱|倾向|习惯|爱用|讨厌)",
    rf"{_ME}(?:每天|每周[一二三四五六日天]?|每个?月[底初]?|每年|每季度|平时|通常|一般|经常|主要)"
    rf"[^，。？]{{0,8}}?(?:用|使用|做|看|写|交|开|处理|负责|在|跑|查)",
    rf"{_ME}[^，。]{{0,4}}?(?:过敏|色弱|色盲|吃素|素食|不吃|怀孕|视力不好)",
    # plans and decisions
    rf"{_ME}们?(?:下个?月|下周|明年|下季度|下半年|年底|月底|今年)[^，。]{{0,6}}?(?:要|会|将|打算|准备|去|开始|出差|休假|搬|调)",
    rf"{_ME}们?(?:已经)?(?:打算|计划|准备|决定|定了)",
    # team, manager, ids
    rf"(?:{_ME}们|{_ME}的|咱们){_GROUP}[^，。]{{0,12}}?"
    r"(?:用的是|在用|使用|采用|负责|决定|打算|计划|有\s*\d+\s*个?人|都用|都放在|放在|迁移|是)",
    rf"{_ME}们(?:都|一直|主要|现在|目前)?(?:用的是|在用|使用|采用|用)",
    rf"{_ME}的(?:经理|领导|上级|老板|主管|导师|汇报对象|工号|职位|岗位|职责|邮箱|工位|项目|名字|时区|电脑|系统|手机)[^，。]{{0,3}}?(?:是|叫|在|负责|用)",
    # how to answer from now on
    rf"{_LEAD}(?:以后|今后|往后|之后|从现在起|从现在开始|从今天起|从今以后)[^，。]{{0,4}}?"
    r"(?:都|请|一律|尽量|统一|回答|回复|用|给|别|不要|不用|记得|称呼|叫|把|写|附|加|列)",
    r"(?:以后|今后|往后|从现在起|从今以后)[^，。]{0,6}?(?:都|请|一律|尽量|统一)",
    rf"{_LEAD}(?:回答|回复)?(?:一律|始终|永远|总是)(?:用|给|要|不要|别)",
    rf"{_LEAD}(?:别再|不要再|不用再|别总是|不要总是|别每次|不要每次|永远不要|再也不要)",
)
_STATEMENT_EN = _en(
    # identity and role
    r"\bI(?:'m| am)\s+(?:also\s+|currently\s+|still\s+)?(?:a|an|the)\s+(?!(?:bit|little|lot|few|one who|question)\b)",
    r"\bI(?:'m| am)\s+(?:based|located|responsible|in charge|vegetarian|vegan|allergic|colou?r-?blind|deaf|"
    r"left-handed|new (?:to the|on the|in the) (?:team|company|job|role)|on call|on-call|retiring|"
    r"working (?:on|in|at|for|as|remotely|from))\b",
    r"\bI(?:'m| am) (?!(?:OK|Ok|Okay|Fine|Good|Sorry|Done|Ready|Sure|Not|Also|Just|Still|Really|Very|So|Back|Here|"
    r"Afraid|Happy|Glad|Confused|Lost|Stuck|Trying|Looking|Getting|Going|Using|Reading|Working)\b)(?-i:[A-Z][a-z]+)\b",
    r"\bI(?:'m| am) on (?:the )?[\w-]+(?: [\w-]+)? (?:team|squad|rota|crew)\b",
    r"\bI(?:'m| am) (?:in|from) (?:the )?"
    r"(?!(?:section|chapter|page|step|table|figure|appendix|slide|part|line|version|row|column)\b)(?-i:[A-Z])\w+",
    r"\bI (?:mostly |currently |mainly |usually |now )?work "
    r"(?:in|at|on|for|as|with the|remotely|from|part-time|full-time)\b",
    r"\bI (?:live|sit|am based) (?:in|at)\b",
    r"\bI (?:lead|manage|own|maintain|run|head|coordinate|report to|look after|handle)\b",
    r"\b(?:call me|my name is|I go by|my pronouns are)\b",
    # preferences and habits
    r"\bI (?:really |much |generally |usually |strongly |also )?"
    r"(?:prefer|like|love|hate|dislike|enjoy|don't like|do not like|can't stand|cannot stand|would rather|'d rather)\b",
    r"\bI(?:'d| would) prefer\b",
    r"\bI (?:mostly |usually |normally |always |often |mainly |only |primarily |still )?use\b",
    r"\bI (?:always|never|usually|normally|mostly|often|rarely|typically|generally) "
    r"(?!(?:got|get|received|saw|heard|had|did|found|know|understand|knew|managed|was|were)\b)(?!\w+ed\b)\w+",
    r"\bI(?:'m| am) (?:vegetarian|vegan|allergic)\b|\bI (?:don't|do not) eat\b",
    # plans and decisions
    r"\bI(?:'m| am) (?:planning|going|about) to "
    r"(?!(?:ask|know|see|check|try|read|look|find|install|download|upload|need|print|open)\b)\w+",
    r"\bI (?:plan|intend) to\b|\bI(?:'ll| will) be (?:in|at|on|working|moving|leaving|joining|away|off)\b",
    r"\bI(?:'m| am) (?:moving|relocating|joining|leaving|starting)\b",
    r"\bwe(?:'ve| have)? (?:decided|agreed|chose|chosen|settled|standardi[sz]ed)\b",
    r"\bwe(?:'re| are)? (?:planning|moving|migrating|going) to\b|\bwe (?:plan|will migrate|will move|use|run)\b",
    # team, manager
    r"\b(?:my|our) (?:team|squad|group|department|dept|org|organi[sz]ation|company|manager|boss|lead|supervisor|"
    r"role|title|job|office|name|project|stack|employee id|employee number|location|time ?zone|pronouns)"
    r"(?:'s \w+)? (?:is|are|uses|use|runs|run|owns|own|works|work|handles|handle|decided|has|have|sits|reports|"
    r"consists|lives|builds|maintains|deploys)\b",
    # how to answer from now on
    r"\b(?:from now on|going forward|in (?:the )?future|from here on(?: out)?|henceforth|by default)\b",
    rf"{_LEAD_EN}(?:always|never|don't ever|do not ever|stop|no more)\s+(?!mind\b|remember|forget)"
    r"(?:giv|us|answer|repl|respond|writ|includ|put|add|show|start|list|cit|link|mention|call|send|format|"
    r"mak|translat|quot|summari[sz]|recommend|suggest|assum|bother)\w*",
)

_PREFERENCE = _zh(r"喜欢|偏好|偏爱|倾向|习惯|讨厌|以后|今后|往后|从现在|从今|一律|始终|永远|总是|别再|不要再|不用再")
_PREFERENCE_EN = _en(
    r"\b(?:prefer|like|love|hate|dislike|enjoy|can't stand|cannot stand|rather|always|never|stop|no more|"
    r"from now on|going forward|future|henceforth|by default)\b"
)


# A clause that is only "remember" or "forget", cut from a question, says nothing to keep.
_BARE = re.compile(r"(?i)^(?:please\s+)?(?:remember|forget|note|请?记住|请?记得|忘掉|忘记)[\s!！.。]*$")


def gate(text: str) -> Gate:
    """What of this turn is worth remembering: see the module's docstring."""
    kept: list[str] = []
    kinds: list[str] = []
    for sentence in _sentences(text):
        if len(sentence) > MAX_SENTENCE:
            continue
        if _asking(sentence):
            pieces = [clause for clause in _clauses(sentence) if not _asking(clause)]
        elif _needing(sentence):
            pieces = _clauses(sentence)
        else:
            pieces = [sentence]
        for piece in pieces:
            kind = _kind(piece)
            if kind and not _BARE.match(piece):
                kept.append(piece)
                kinds.append(kind)
    if not kept:
        return NOTHING
    strongest = min(KINDS.index(kind) for kind in kinds)
    return Gate(keep=True, kind=KINDS[strongest], sentences=tuple(kept), kinds=tuple(kinds))


def _sentences(text: str) -> list[str]:
    """The sentences of text, each with its closing punctuation."""
    return _pieces(text, _SENTENCE_END, keep_end=True)


def _clauses(sentence: str) -> list[str]:
    """The clauses of a sentence, without the commas (or "but", "and") between them."""
    return _pieces(sentence, _CLAUSE_END, keep_end=False)


def _pieces(text: str, ends: re.Pattern[str], *, keep_end: bool) -> list[str]:
    """text cut at each match of ends, each piece stripped, empty ones dropped: every piece
    is a verbatim substring of text."""
    pieces = []
    start = 0
    for match in ends.finditer(text):
        pieces.append(text[start : match.end() if keep_end else match.start()].strip())
        start = match.end()
    pieces.append(text[start:].strip())
    return [piece for piece in pieces if piece]


def _asking(piece: str) -> bool:
    return bool(_ASKING.search(piece) or _ASKING_EN.search(_plain(piece)))


def _needing(piece: str) -> bool:
    plain = _plain(piece)
    return bool(_NEEDING.search(plain) or _NEEDING_EN.search(plain))


def _kind(piece: str) -> str:
    """The kind of durable content one sentence or clause carries, or ""."""
    plain = _plain(piece)
    if _FORGET.search(plain) or _FORGET_EN.search(plain):
        return "forget"
    if _CORRECTION.search(plain) or _CORRECTION_EN.search(plain):
        return "correction"
    if _REMEMBER.search(plain) or _REMEMBER_EN.search(plain):
        return "remember"
    if _statement(plain):
        return "statement"
    return ""


def _statement(plain: str) -> bool:
    """Whether a piece states something durable: a preference said for once only ("这次",
    "this answer") does not count."""
    for statement, preference, one_off in (
        (_STATEMENT, _PREFERENCE, _ONE_OFF),
        (_STATEMENT_EN, _PREFERENCE_EN, _ONE_OFF_EN),
    ):
        for match in statement.finditer(plain):
            if not (preference.search(match.group()) and one_off.search(plain)):
                return True
    return False


def _plain(piece: str) -> str:
    """The piece as the patterns read it: typographic apostrophes as ASCII ones."""
    return piece.replace("’", "'").replace("‘", "'")
