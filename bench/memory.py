"""Per-user memory (assistant/memory on mem0): how long a memory takes to add, and how long the
search before every answer takes when a user has 1k and 10k memories. Prints figures, writes
bench/results/memory.json and bench/results/memory.png.

    DATABASE_URL=... REDIS_URL=... MEM0_TELEMETRY=False PYTHONPATH=. .venv/bin/python bench/memory.py
    ... bench/memory.py --per-user 2000 --others 2 --queries 20 --turns 4 --celery-turns 0   # a quick look

Uses the configured database (run `manage.py migrate` first), Redis, and the local models. Its
users (`bench-memory-<stamp>-...`) are deleted at the end, and their memories with them.

1. Adding (off the answer path). `remember()` end to end with the real chat model on --turns
   Chinese and English question/answer turns (model time, and how many were stored by inference
   and how many as a card); mem0 `add(infer=False)` of one card-shaped memory, --adds times; and,
   with --celery-turns, the time from an answer's end (`remember_turn.delay`) to its memories
   being in the user's rows, through a real Celery worker.
2. Searching. One user ("heavy") gets --per-user memories, one ("light") --small, and --others
   users --per-user each, inserted in a shuffled order (people's memories accrue interleaved, so
   a user's rows are spread over the table) through the store's own `insert` (mem0's payload:
   data, hash, timestamps, user_id; the store adds the jieba terms): 10k model extractions would
   take hours. The text is generated: short memory-like sentences, half Chinese, half English.
   Only --distinct of them are embedded with the real e5 model (about 60 a second on 2 cores:
   100k would take half an hour); the heavy user holds those with their real vectors (reused
   with a small perturbation past --distinct), the light user a sample of them with real
   vectors, and the other users draw from them with perturbed vectors (gaussian noise,
   sigma --noise per component, renormalised; cosine to the original about 0.98). Queries are
   embedded for real. For --queries questions, alternately for the heavy and the light user:
   `search(user, query)` (what runs before every answer) and, separately, its parts: the query
   embedding, the dense SQL (the store's `search`, exact within the user's rows) and the keyword
   SQL (`keyword_search`). Every result must be the searched user's own (asserted). Also:
   `all(user)` (the "My memory" listing) and forgetting the heavy user.

The machine is shared: absolute times are noisy; compare medians and ratios within one run.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
OUT = ROOT / "bench" / "results"
SEED = 20261130
BATCH = 1000  # rows per insert
EMBED_BATCH = 256

# Question/answer turns for remember(): facts about the person, and plain questions (nothing to keep).
# fmt: off
TURNS: list[tuple[str, str]] = [
    ("我在上海财务部负责差旅报销审核，以后请用简短要点回答。出差补贴标准是多少？",
     "国内出差补贴为每天 100 元 [1]，住宿按城市分级报销 [2]。"),
    ("我们团队下个月要把 Falcon 路由器升级到 2.3 版本，我是负责人。升级前要做什么？",
     "升级前请备份配置，并在周六的维护窗口内操作 [1]。"),
    ("年假有几天？", "正式员工每年有 10 天带薪年假 [1]。"),
    ("我的经理是王芳，她让我整理第三季度销售报告。报告模板在哪里？", "模板在销售部共享盘的“季度报告”目录 [1]。"),
    ("我下周三去深圳出差见客户，可以订商务舱吗？", "飞行时间不足 4 小时只能订经济舱 [1]。"),
    ("I work on the data platform team in Hangzhou and prefer answers with code examples. How do I request "
     "database access?", "Submit an access request in the IT portal; your manager approves it [1]."),
    ("I'm organising the annual party for about 200 people in December. What is the budget per person?",
     "The budget is 300 CNY per person [1]."),
    ("How many days of sick leave do we get?", "Employees get 15 days of paid sick leave per year [1]."),
    ("My mentor is Bob Wang and I'm on probation until March. Can I take annual leave during probation?",
     "Annual leave accrues during probation but can be taken after it ends [2]."),
    ("I'm leading the migration of our CI pipeline to GitHub Actions this quarter. Where are the deploy scripts?",
     "The deploy scripts are in the ops/deploy repository [1]."),
]

# Turns with something to keep (a turn with nothing stores nothing: no change to wait for).
CELERY_TURNS = [TURNS[n] for n in (0, 5, 1, 6, 3, 9)]

# Vocabulary of the generated memories and queries: (zh topic, en topic, zh words, en words).
TOPICS: list[tuple[str, str, str, str]] = [  # en words split on "|"
    ("差旅报销", "travel expenses", "发票 机票 出差补贴 报销单",
     "receipts|flights|per diem|expense claims"),
    ("年假", "annual leave", "年假 病假 调休 请假审批",
     "vacation|sick leave|time off|leave approval"),
    ("服务器运维", "server operations", "服务器 监控告警 磁盘空间 日志轮转",
     "servers|alerts|disk space|log rotation"),
    ("数据库", "databases", "数据库备份 主从复制 慢查询 权限申请",
     "database backups|replication|slow queries|access requests"),
    ("远程办公", "remote work", "虚拟专用网 视频会议 居家办公 打卡",
     "VPN|video calls|home office|check-in"),
    ("采购", "procurement", "采购申请 供应商报价 采购订单 验收",
     "purchase requests|supplier quotes|purchase orders|goods receipt"),
    ("合同", "contracts", "法务审核 盖章 续签 保密协议",
     "legal review|company seal|renewals|NDAs"),
    ("招聘", "hiring", "简历筛选 面试 录用通知 内推",
     "resume screening|interviews|offer letters|referrals"),
    ("绩效", "performance", "季度考核 自评 晋升 调薪",
     "quarterly reviews|self reviews|promotion|salary review"),
    ("信息安全", "security", "密码策略 钓鱼邮件 双因素认证 漏洞扫描",
     "password policy|phishing|two-factor|vulnerability scans"),
    ("产品发布", "releases", "灰度发布 回滚 发布说明 功能开关",
     "canary releases|rollbacks|release notes|feature flags"),
    ("客户支持", "customer support", "工单 客户投诉 响应时间 满意度",
     "tickets|complaints|response times|satisfaction"),
    ("销售", "sales", "销售额 回款 客户拜访 商机",
     "revenue|collections|client visits|pipeline"),
    ("预算", "budget", "年度预算 成本中心 费用分摊 审计",
     "annual budget|cost centers|allocations|audits"),
    ("培训", "training", "培训课程 讲师 线上学习 证书",
     "courses|instructors|e-learning|certificates"),
    ("代码评审", "code review", "合并请求 单元测试 代码规范 重构",
     "pull requests|unit tests|style guide|refactoring"),
    ("持续集成", "CI", "流水线 构建失败 镜像 部署脚本",
     "pipelines|build failures|container images|deploy scripts"),
    ("数据隐私", "privacy", "个人信息 数据脱敏 用户同意 数据保留",
     "personal data|anonymisation|consent|retention"),
    ("库存", "inventory", "盘点 安全库存 出库 入库",
     "stocktakes|safety stock|outbound|inbound"),
    ("物流", "logistics", "配送 运费 签收 冷链",
     "deliveries|freight|proof of delivery|cold chain"),
    ("税务", "tax", "增值税 个税 专用发票 纳税申报",
     "VAT|income tax|tax invoices|tax returns"),
    ("福利", "benefits", "社保 公积金 体检 补充医疗",
     "social insurance|housing fund|checkups|dental plan"),
    ("机器学习", "machine learning", "模型训练 标注数据 推理服务 显卡",
     "model training|labelled data|inference|GPUs"),
    ("年会", "annual party", "节目 抽奖 场地 团建",
     "performances|raffle|venue|team building"),
]
CITIES = [("北京", "Beijing"), ("上海", "Shanghai"), ("深圳", "Shenzhen"), ("杭州", "Hangzhou"), ("成都", "Chengdu"),
          ("武汉", "Wuhan"), ("南京", "Nanjing"), ("西安", "Xi'an"), ("广州", "Guangzhou")]
DEPARTMENTS = [("财务部", "Finance"), ("人事部", "HR"), ("研发部", "Engineering"), ("市场部", "Marketing"),
               ("法务部", "Legal"), ("运维组", "Operations"), ("销售部", "Sales"), ("行政部", "Facilities")]
ZH_NAMES = ["张伟", "王芳", "李娜", "刘洋", "陈静", "杨磊", "赵敏", "黄强", "周杰", "吴婷", "徐明", "孙丽"]
EN_NAMES = ["Alice Chen", "Bob Wang", "Carol Li", "David Liu", "Emma Zhang", "Frank Zhou", "Grace Wu", "Henry Xu"]
ZH_FACTS = [
    "用户在{city}{dept}工作，负责{w1}", "用户希望关于{topic}的回答用表格列出", "用户下周{day}去{city}出差，要处理{w1}",
    "用户的直属经理是{dept}的{name}", "用户正在做{code}项目，涉及{w1}和{w2}", "用户在{date}提交了{w1}，金额{amount}元",
    "用户决定在{month}月底前完成{w1}", "用户经常询问{topic}方面的问题，尤其是{w1}", "用户和{name}一起负责{code}的{w2}",
    "用户提到{name}是{city}办公室的{w1}联系人", "用户每周{day}整理{w1}和{w2}", "用户负责的{code}要在{date}前完成{w2}",
]
EN_FACTS = [
    "User works in {dept} in {city} and handles {w1}", "User wants answers about {topic} as tables",
    "User travels to {city} next {day_en} to deal with {w1}", "User's manager is {name} in {dept}",
    "User is working on project {code}, which involves {w1} and {w2}", "User filed {w1} on {date_en} for {amount} CNY",
    "User decided to finish {w1} by the end of month {month}", "User often asks about {topic}, especially {w1}",
    "User shares {w2} for {code} with {name}", "User says {name} is the {w1} contact in the {city} office",
    "User reviews {w1} and {w2} every {day_en}", "User's project {code} must finish {w2} by {date_en}",
]
ZH_QUERIES = ["{w1}怎么办理？", "我的经理是谁？", "{topic}的规定是什么", "我下周去哪里出差？", "{code}项目进展如何",
              "{w1}和{w2}有什么区别", "{city}办公室谁负责{w1}？", "我负责哪些工作", "帮我总结一下{topic}"]
EN_QUERIES = ["how do I handle {w1}?", "who is my manager?", "what is the {topic} policy",
              "where am I travelling next week?", "status of project {code}", "{w1} vs {w2}",
              "who handles {w1} in {city}?", "what am I responsible for", "summarise {topic} for me"]
DAYS = [("一", "Monday"), ("二", "Tuesday"), ("三", "Wednesday"), ("四", "Thursday"), ("五", "Friday")]
# fmt: on


class Writer:
    """Memory-like sentences and questions in Chinese or English, from a seeded generator."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng

    def pick(self, items: Sequence[Any]) -> Any:
        return items[int(self.rng.integers(len(items)))]

    def fill(self, template: str, zh: bool) -> str:
        topic_zh, topic_en, words_zh, words_en = self.pick(TOPICS)
        words = words_zh.split() if zh else words_en.split("|")
        w1, w2 = (words[int(i)] for i in self.rng.choice(len(words), size=2, replace=False))
        city, dept, day = self.pick(CITIES), self.pick(DEPARTMENTS), self.pick(DAYS)
        month, date = int(self.rng.integers(1, 13)), int(self.rng.integers(1, 29))
        return template.format(
            topic=topic_zh if zh else topic_en, w1=w1, w2=w2, city=city[0 if zh else 1], dept=dept[0 if zh else 1],
            name=self.pick(ZH_NAMES if zh else EN_NAMES), day=day[0], day_en=day[1], month=month,
            date=f"{month}月{date}日", date_en=f"2026-{month:02}-{date:02}",
            amount=int(self.rng.integers(1, 400)) * 50,
            code=f"{self.pick(['PRJ', 'OPS', 'FIN', 'HR'])}-{int(self.rng.integers(1, 10000)):04}",
        )  # fmt: skip

    def memories(self, count: int) -> list[str]:
        """`count` distinct sentences, alternately Chinese and English."""
        found: dict[str, None] = {}
        while len(found) < count:
            zh = len(found) % 2 == 0
            found.setdefault(self.fill(self.pick(ZH_FACTS if zh else EN_FACTS), zh), None)
        return list(found)

    def queries(self, count: int) -> list[str]:
        """`count` distinct questions, alternately Chinese and English."""
        found: dict[str, None] = {}
        while len(found) < count:
            zh = len(found) % 2 == 0
            found.setdefault(self.fill(self.pick(ZH_QUERIES if zh else EN_QUERIES), zh), None)
        return list(found)


@dataclass
class Population:
    """The users of the search bench and the memory ids each holds (for the isolation checks)."""

    heavy: Any
    light: Any
    others: list[Any]
    ids: dict[str, set[str]] = field(default_factory=dict)  # uid -> memory ids
    strays: list[dict[str, Any]] = field(default_factory=list)  # results that were not the user's own

    def check(self, user: Any, where: str, ids: list[str]) -> None:
        """Every memory found for `user` must be one of theirs; a stray is recorded (and fails the
        run at the end, after the figures are written) with its owner and text, and printed."""
        others = [memory_id for memory_id in ids if memory_id not in self.ids[str(user.uid)]]
        if others:
            stray = {"user": str(user.uid), "where": where, "found": owners(others)}
            print(f"ISOLATION: {stray}", flush=True)
            self.strays.append(stray)


def summary(samples: Sequence[float]) -> dict[str, float]:
    values = np.asarray(samples, dtype=float)
    if not len(values):
        return {"median": float("nan"), "p95": float("nan"), "n": 0}
    return {"median": float(np.median(values)), "p95": float(np.percentile(values, 95)), "n": len(values)}


def fmt(seconds: float | None) -> str:
    return "timed out" if seconds is None else f"{seconds:.1f}"


def timed(call: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = call()
    return time.perf_counter() - started, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=len(TURNS), help="remember() turns with the chat model")
    parser.add_argument("--adds", type=int, default=200, help="mem0 add(infer=False) of one memory")
    parser.add_argument("--celery-turns", type=int, default=2, help="turns through a Celery worker (0: skip)")
    parser.add_argument("--per-user", type=int, default=10_000, help="memories of the heavy user and of each other")
    parser.add_argument("--small", type=int, default=1_000, help="memories of the light user")
    parser.add_argument("--others", type=int, default=9, help="other users with --per-user memories each")
    parser.add_argument("--distinct", type=int, default=10_000, help="sentences embedded with the real model")
    parser.add_argument("--noise", type=float, default=0.01, help="perturbation of reused vectors (per component)")
    parser.add_argument("--queries", type=int, default=50, help="searches per user")
    args = parser.parse_args()

    import django

    django.setup()
    logging.getLogger("mem0").setLevel(logging.ERROR)  # an INFO line per insert, spaCy warnings
    from assistant.memory.service import close

    writer = Writer(np.random.default_rng(SEED))
    stamp = f"{time.time():.0f}"
    users: list[Any] = []
    results: dict[str, Any] = {"config": vars(args) | {"model": model_names()}}
    try:
        results["warmup"] = warm_up()
        results["remember"] = bench_remember(new_user(users, stamp, "writer"), args.turns)
        results["card_add"] = bench_card_adds(new_user(users, stamp, "cards"), writer, args.adds)
        if args.celery_turns:
            results["celery"] = bench_celery(new_user(users, stamp, "celery"), args.celery_turns)
        population = Population(
            new_user(users, stamp, "heavy"),
            new_user(users, stamp, "light"),
            [new_user(users, stamp, f"other{n}") for n in range(args.others)],
        )
        results["fill"] = fill(population, writer, args)
        results["search"] = bench_search(population, writer.queries(args.queries))
        results["listing"] = bench_listing(population)
        results["forget_s"] = forget(population.heavy, users)
        results["isolation"] = {"checked": "every result of search, dense, keyword and all()",
                                "strays": population.strays}  # fmt: skip
    finally:
        for user in users:
            user.delete()  # and its memories (assistant.apps: forget_deleted_user)
        close()
    report(results)
    assert not results["isolation"]["strays"], "a search found another user's memories (see ISOLATION above)"


def model_names() -> dict[str, str]:
    from django.conf import settings

    roles = settings.MODEL_ROLES
    return {"chat": roles["chat"].model, "embedding": roles["embedding"].model}


def new_user(users: list[Any], stamp: str, name: str) -> Any:
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create(username=f"bench-memory-{stamp}-{name}", email=f"{name}-{stamp}@localhost")
    users.append(user)
    return user


def warm_up() -> dict[str, float]:
    """Load the models and the memory service before anything is timed."""
    from assistant.memory.service import memories
    from providers import registry
    from providers.base import ChatMessage

    chat_s, _ = timed(lambda: registry.chat_model().complete([ChatMessage("user", "hi")], max_tokens=4))
    embed_s, _ = timed(lambda: registry.text_embedder().embed_query("hi"))
    service_s, _ = timed(memories)
    print(f"warm-up: chat model {chat_s:.1f} s, embedder {embed_s:.1f} s, memory service {service_s:.2f} s", flush=True)
    return {"chat_model_s": chat_s, "embedder_s": embed_s, "service_s": service_s}


# 1. Adding


class TimedChat:
    """The chat model with a stopwatch: how much of remember() is the model's."""

    def __init__(self, model: Any) -> None:
        self.model, self.seconds, self.calls = model, 0.0, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)

    def complete(self, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return self.model.complete(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - started
            self.calls += 1


def bench_remember(user: Any, turns: int) -> dict[str, Any]:
    from assistant.memory.service import memories
    from providers import registry

    model = registry.chat_model()
    stopwatch = TimedChat(model)
    registry._instances["chat"] = stopwatch
    rows: list[dict[str, Any]] = []
    try:
        for n, (question, _answer) in enumerate((TURNS * (turns // len(TURNS) + 1))[:turns]):
            stopwatch.seconds = 0.0
            seconds, remembered = timed(partial(memories().remember, user, question))
            kind = ("inferred" if remembered.items else "nothing") if remembered.inferred else "card"
            rows.append({"question": question, "seconds": seconds, "model_s": stopwatch.seconds, "kind": kind,
                         "stored": [item.text for item in remembered.items]})  # fmt: skip
            print(f"remember {n + 1}/{turns}: {seconds:5.1f} s (model {stopwatch.seconds:5.1f} s) {kind:8} "
                  f"{[item.text for item in remembered.items]}", flush=True)  # fmt: skip
    finally:
        registry._instances["chat"] = model
    kinds = [row["kind"] for row in rows]
    return {
        "seconds": summary([row["seconds"] for row in rows]),
        "model_s": summary([row["model_s"] for row in rows]),
        "by_kind": {kind: kinds.count(kind) for kind in ("inferred", "nothing", "card")},
        "memories_stored": sum(len(row["stored"]) for row in rows),
        "turns": rows,
    }


def bench_card_adds(user: Any, writer: Writer, count: int) -> dict[str, Any]:
    """mem0 add(infer=False) of one card, as remember() stores a card: embed, insert, history."""
    from assistant.memory.service import memories

    mem0 = memories()._mem0
    texts = writer.memories(2 * count)
    cards = [f"问：{texts[2 * n]}？\n答：{texts[2 * n + 1]}。" for n in range(count)]
    metadata = {"inferred": False, "conversation": None, "message": None}
    seconds = [
        timed(partial(mem0.add, card, user_id=str(user.uid), metadata=metadata, infer=False))[0] for card in cards
    ]
    figures = summary([s * 1000 for s in seconds])
    print(f"add(infer=False) x{count}: median {figures['median']:.1f} ms, p95 {figures['p95']:.1f} ms", flush=True)
    return {"ms": figures}


def bench_celery(user: Any, turns: int) -> dict[str, Any]:
    """From `remember_turn.delay` (the answer is stored) to the user's rows holding its memories;
    the first turn also loads the worker's model and is reported apart."""
    from portal.supervisor import MEMORY_QUEUE, worker_command

    log = Path(tempfile.gettempdir()) / "portal-bench-memory-celery.log"
    with Worker(worker_command(f"bench-memory-{os.getpid()}@%h", 1, MEMORY_QUEUE), log):
        rows = [celery_turn(user, *CELERY_TURNS[n % len(CELERY_TURNS)]) for n in range(turns + 1)]
    cold, warm = rows[0], rows[1:]
    figures = summary([row["seconds"] for row in warm if row["seconds"] is not None])
    print(f"celery answer -> searchable: cold {fmt(cold['seconds'])} s, then median {figures['median']:.1f} s, "
          f"p95 {figures['p95']:.1f} s", flush=True)  # fmt: skip
    return {"cold_s": cold["seconds"], "seconds": figures, "turns": rows, "log": str(log)}


class Worker:
    def __init__(self, command: list[str], log: Path) -> None:
        self.command, self.log = command, log

    def __enter__(self) -> None:
        import subprocess

        from portal.services import die_with_parent

        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                self.command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, preexec_fn=die_with_parent
            )
        deadline = time.monotonic() + 120
        while "ready." not in self.log.read_text(errors="replace"):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise SystemExit(f"the Celery worker did not start; see {self.log}")
            time.sleep(0.5)

    def __exit__(self, *exc: object) -> None:
        import psutil

        from portal.services import stop_process_group

        stop_process_group(psutil.Process(self.proc.pid))
        self.proc.wait()


def celery_turn(user: Any, question: str, answer: str, timeout: float = 180.0) -> dict[str, Any]:
    from assistant.memory.service import memories
    from assistant.models import Conversation, Message
    from assistant.tasks import remember_turn

    store, uid = memories()._store, str(user.uid)
    before = len(store.list(filters={"user_id": uid}, top_k=10_000)[0])
    conversation = Conversation.objects.create(user=user, title=question[:50])
    Message.objects.create(conversation=conversation, role=Message.Role.USER, content=question)
    reply = Message.objects.create(conversation=conversation, role=Message.Role.ASSISTANT, content=answer)
    started = time.perf_counter()
    remember_turn.delay(reply.pk)
    while time.perf_counter() - started < timeout:
        if len(store.list(filters={"user_id": uid}, top_k=10_000)[0]) > before:
            return {"question": question, "seconds": time.perf_counter() - started}
        time.sleep(0.1)
    return {"question": question, "seconds": None}  # nothing stored (nothing worth it), or too slow


# 2. Searching


def fill(population: Population, writer: Writer, args: argparse.Namespace) -> dict[str, Any]:
    rng = np.random.default_rng(SEED + 1)
    texts = writer.memories(args.distinct)
    embed_s, vectors = timed(lambda: embed(texts))
    print(f"embedded {len(texts)} distinct sentences in {embed_s:.0f} s ({len(texts) / embed_s:.0f}/s)", flush=True)
    plan: list[tuple[str, int, bool]] = []  # (uid, sentence, perturbed)
    heavy, light = str(population.heavy.uid), str(population.light.uid)
    plan += [(heavy, n % len(texts), n >= len(texts)) for n in range(args.per_user)]
    plan += [(light, int(n), False) for n in rng.choice(len(texts), size=min(args.small, len(texts)), replace=False)]
    for other in population.others:
        plan += [(str(other.uid), int(n), True) for n in rng.integers(len(texts), size=args.per_user)]
    order = rng.permutation(len(plan))
    insert_s, _ = timed(lambda: insert(population, [plan[i] for i in order], texts, vectors, rng, args.noise))
    settle(population)
    rows, size = table_size()
    print(f"inserted {len(plan)} rows in {insert_s:.0f} s; the table holds {rows} rows, {size / 2**20:.0f} MiB",
          flush=True)  # fmt: skip
    return {
        "distinct_embedded": len(texts), "embed_s": embed_s, "embed_per_s": len(texts) / embed_s,
        "inserted": len(plan), "insert_s": insert_s, "table_rows": rows, "table_mib": size / 2**20,
        "heavy": len(population.ids[heavy]), "light": len(population.ids[light]),
        "vectors": f"{len(texts)} sentences embedded with the real model; the heavy user holds them with their real "
        f"vectors (repeated with noise past {len(texts)}), the light user a sample of them with real vectors, the "
        f"{len(population.others)} other users draw from them with perturbed vectors (noise sigma {args.noise}, "
        "renormalised)",
    }  # fmt: skip


def embed(texts: list[str]) -> np.ndarray:
    from providers import registry

    embedder = registry.text_embedder()
    batches = []
    for start in range(0, len(texts), EMBED_BATCH):
        batches.append(np.asarray(embedder.embed_documents(texts[start : start + EMBED_BATCH]), dtype=np.float32))
        if (start // EMBED_BATCH) % 10 == 9:
            print(f"  embedded {min(start + EMBED_BATCH, len(texts))}/{len(texts)}", flush=True)
    return np.concatenate(batches)


def insert(
    population: Population,
    plan: list[tuple[str, int, bool]],
    texts: list[str],
    vectors: np.ndarray,
    rng: np.random.Generator,
    noise: float,
) -> None:
    from assistant.memory.service import memories

    store = memories()._store
    now = datetime.now(UTC)
    for start in range(0, len(plan), BATCH):
        batch = plan[start : start + BATCH]
        rows = np.stack([vectors[n] for _, n, _ in batch])
        shaken = np.array([perturbed for *_, perturbed in batch])
        rows[shaken] += rng.normal(0.0, noise, size=(int(shaken.sum()), rows.shape[1])).astype(np.float32)
        rows /= np.linalg.norm(rows, axis=1, keepdims=True)
        ids = [str(uuid.uuid4()) for _ in batch]
        payloads = [payload(uid, texts[n], now - timedelta(minutes=int(rng.integers(525_600)))) for uid, n, _ in batch]
        store.insert(rows.tolist(), payloads, ids)
        for (uid, *_), memory_id in zip(batch, ids, strict=True):
            population.ids.setdefault(uid, set()).add(memory_id)
        if (start // BATCH) % 20 == 19:
            print(f"  inserted {start + BATCH}/{len(plan)}", flush=True)


def payload(uid: str, text: str, created: datetime) -> dict[str, Any]:
    """What mem0 stores for an extracted memory (main.py `_add_to_vector_store`)."""
    digest = hashlib.md5(text.encode()).hexdigest()  # noqa: S324 (mem0's own digest)
    stamp = created.isoformat()
    return {"data": text, "hash": digest, "created_at": stamp, "updated_at": stamp, "user_id": uid,
            "attributed_to": "user", "conversation": None, "message": None}  # fmt: skip


def settle(population: Population) -> None:
    """ANALYZE (autovacuum would, soon after a load like this), and check that the table holds
    exactly the memories the bench recorded for each of its users."""
    from django.conf import settings
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {settings.MEMORY_TABLE}")
        cursor.execute(
            f"SELECT payload->>'user_id', array_agg(id::text) FROM {settings.MEMORY_TABLE} "  # noqa: S608 (a setting)
            "WHERE payload->>'user_id' = ANY(%s) GROUP BY 1",
            [list(population.ids)],
        )
        stored = {uid: set(ids) for uid, ids in cursor.fetchall()}
    assert stored == population.ids, "the table does not hold the memories the bench inserted"


def table_size() -> tuple[int, int]:
    from django.conf import settings
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*), pg_total_relation_size(%s) FROM {settings.MEMORY_TABLE}",  # noqa: S608 (a setting)
            [settings.MEMORY_TABLE],
        )
        rows, size = cursor.fetchone()
    return int(rows), int(size)


def bench_search(population: Population, queries: list[str]) -> dict[str, Any]:
    """For each query, the light user's search and then the heavy user's (alternating, so that the
    machine's load falls on both alike); then the parts, in the same way."""
    users = {"light": population.light, "heavy": population.heavy}
    for query in queries[:3]:  # warm: the pool's connections, the caches
        for user in users.values():
            search_once(population, user, query)
    samples: dict[str, list[dict[str, Any]]] = {name: [] for name in users}
    for query in queries:
        for name, user in users.items():
            samples[name].append(search_once(population, user, query))
    for n, query in enumerate(queries):
        for name, user in users.items():
            samples[name][n].update(parts(population, user, query))
    figures = {name: search_figures(rows, len(population.ids[str(users[name].uid)])) for name, rows in samples.items()}
    for name, line in figures.items():
        print_search(name, line)
    ratio = figures["heavy"]["total_ms"]["median"] / figures["light"]["total_ms"]["median"]
    print(f"search median, {figures['heavy']['memories']} vs {figures['light']['memories']} memories: x{ratio:.2f}")
    return {"users": figures, "ratio_median": ratio, "queries": queries, "samples": samples}


def search_once(population: Population, user: Any, query: str) -> dict[str, Any]:
    from assistant.memory.service import memories

    seconds, found = timed(lambda: memories().search(user, query))
    population.check(user, f"search({query!r})", [item.id for item in found])
    return {"query": query, "total_ms": seconds * 1000, "results": len(found)}


def owners(ids: list[str]) -> list[tuple[str, str, str]]:
    """(id, user_id, text) of memories, for the message of a failed isolation check."""
    from django.conf import settings
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id::text, payload->>'user_id', payload->>'data' FROM {settings.MEMORY_TABLE} "  # noqa: S608
            "WHERE id = ANY(%s::uuid[])",
            [ids],
        )
        return [tuple(row) for row in cursor.fetchall()]


def parts(population: Population, user: Any, query: str) -> dict[str, float]:
    """The parts of one search, each on its own: the query embedding, mem0's dense and keyword
    queries at the depth mem0 asks for (max(4 x the service's top_k, 60))."""
    from django.conf import settings

    from assistant.memory.service import memories
    from providers import registry

    store, uid = memories()._store, str(user.uid)
    depth = max(4 * 2 * settings.MEMORY_SEARCH_LIMIT, 60)
    embed_s, vector = timed(lambda: registry.text_embedder().embed_query(query))
    dense_s, dense = timed(lambda: store.search(query, vector, depth, {"user_id": uid}))
    keyword_s, keyword = timed(lambda: store.keyword_search(query, depth, {"user_id": uid}))
    population.check(user, f"dense({query!r})", [row.id for row in dense])
    population.check(user, f"keyword({query!r})", [row.id for row in keyword])
    return {"embed_ms": embed_s * 1000, "dense_ms": dense_s * 1000, "keyword_ms": keyword_s * 1000,
            "dense_rows": len(dense), "keyword_rows": len(keyword)}  # fmt: skip


def search_figures(rows: list[dict[str, Any]], memories: int) -> dict[str, Any]:
    figures: dict[str, Any] = {"memories": memories}
    for key in ("total_ms", "embed_ms", "dense_ms", "keyword_ms"):
        figures[key] = summary([row[key] for row in rows])
    figures["rest_ms"] = summary(
        [row["total_ms"] - row["embed_ms"] - row["dense_ms"] - row["keyword_ms"] for row in rows]
    )
    figures["with_results"] = sum(row["results"] > 0 for row in rows)
    figures["mean_results"] = float(np.mean([row["results"] for row in rows]))
    figures["keyword_rows_median"] = float(np.median([row["keyword_rows"] for row in rows]))
    return figures


def print_search(name: str, line: dict[str, Any]) -> None:
    total = line["total_ms"]
    parts = ", ".join(f"{key[:-3]} {line[key]['median']:.1f}/{line[key]['p95']:.1f}"
                      for key in ("embed_ms", "dense_ms", "keyword_ms", "rest_ms"))  # fmt: skip
    print(f"search {name:5} ({line['memories']:>6} memories): median {total['median']:6.1f} ms, p95 "
          f"{total['p95']:6.1f} ms; parts median/p95 ms: {parts}; {line['with_results']}/{total['n']} queries "
          f"found something ({line['mean_results']:.1f} results on average)", flush=True)  # fmt: skip


def bench_listing(population: Population) -> dict[str, Any]:
    """`all(user)`: what GET /api/memories/ (My memory) loads before it paginates."""
    from assistant.memory.service import memories

    figures: dict[str, Any] = {}
    for name, user in (("light", population.light), ("heavy", population.heavy)):
        seconds: list[float] = []
        for _ in range(3):
            took, items = timed(partial(memories().all, user))
            population.check(user, "all()", [item.id for item in items])
            assert len(items) == len(population.ids[str(user.uid)]), f"all({name}) misses memories"
            seconds.append(took * 1000)
        figures[name] = {"memories": len(items), "ms": summary(seconds)}
        print(f"all({name}), {len(items)} memories: median {figures[name]['ms']['median']:.0f} ms", flush=True)
    return figures


def forget(user: Any, users: list[Any]) -> float:
    """Deleting a user with --per-user memories (memories and their history)."""
    seconds, _ = timed(user.delete)
    users.remove(user)
    print(f"deleting the heavy user and its memories: {seconds:.2f} s", flush=True)
    return seconds


# Report


def report(results: dict[str, Any]) -> None:
    remember, cards = results["remember"], results["card_add"]
    lines = [
        "",
        f"models: {results['config']['model']}",
        f"remember() x{remember['seconds']['n']}: median {remember['seconds']['median']:.1f} s, p95 "
        f"{remember['seconds']['p95']:.1f} s (model median {remember['model_s']['median']:.1f} s); "
        f"inferred {remember['by_kind']['inferred']}, nothing to keep {remember['by_kind']['nothing']}, "
        f"card {remember['by_kind']['card']}; {remember['memories_stored']} memories",
        f"add(infer=False) x{cards['ms']['n']}: median {cards['ms']['median']:.1f} ms, p95 {cards['ms']['p95']:.1f} ms",
    ]
    if "celery" in results:
        celery = results["celery"]
        lines.append(f"Celery, answer -> in the user's memories: median {celery['seconds']['median']:.1f} s, p95 "
                     f"{celery['seconds']['p95']:.1f} s (first, worker cold: {fmt(celery['cold_s'])} s)")  # fmt: skip
    fill, search = results["fill"], results["search"]
    lines.append(f"table: {fill['table_rows']} rows ({fill['table_mib']:.0f} MiB); vectors: {fill['vectors']}")
    for name, line in search["users"].items():
        lines.append(f"search {name} ({line['memories']} memories): p50 {line['total_ms']['median']:.1f} ms, "
                     f"p95 {line['total_ms']['p95']:.1f} ms")  # fmt: skip
    lines.append(f"search median ratio heavy/light: x{search['ratio_median']:.2f}")
    strays = results["isolation"]["strays"]
    lines.append(f"isolation: {len(strays)} results of another user" if strays else "isolation: every result was own")
    print("\n".join(lines))
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "memory.json").write_text(json.dumps(results, indent=2, ensure_ascii=False, default=str))
    plot(results)


def plot(results: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (adds, cards, search) = plt.subplots(1, 3, figsize=(14, 4.2), gridspec_kw={"width_ratios": [1.2, 0.8, 2]})
    bars = {"remember()": results["remember"]["seconds"], "its model": results["remember"]["model_s"]}
    if "celery" in results:
        bars["via Celery"] = results["celery"]["seconds"]
    names = list(bars)
    adds.bar(names, [bars[n]["median"] for n in names], color="#4c72b0", label="median")
    adds.scatter(names, [bars[n]["p95"] for n in names], color="#b42318", marker="_", s=400, label="p95", zorder=3)
    adds.set_ylabel("s")
    adds.set_title("remember(): chat model extraction (async)")
    adds.legend()
    card = results["card_add"]["ms"]
    cards.bar(["median", "p95"], [card["median"], card["p95"]], color="#55a868")
    cards.set_ylabel("ms")
    cards.set_title("add(infer=False), one memory")
    plot_search(search, results)
    figure.tight_layout()
    figure.savefig(OUT / "memory.png", dpi=110)


def plot_search(axes: Any, results: dict[str, Any]) -> None:
    """The parts' medians stacked (each measured on its own: they need not add up to the whole), and
    the whole search's median and p95."""
    users = results["search"]["users"]
    names = list(users)
    labels = [f"{users[n]['memories']:,} memories" for n in names]
    bottom = np.zeros(len(names))
    colors = {"embed_ms": "#8172b2", "dense_ms": "#4c72b0", "keyword_ms": "#dd8452", "rest_ms": "#999999"}
    for key, color in colors.items():
        heights = np.array([max(users[n][key]["median"], 0.0) for n in names])
        axes.bar(labels, heights, 0.5, bottom=bottom, color=color, label=f"{key[:-3]} (median)")
        bottom += heights
    for x, name in enumerate(names):
        total = users[name]["total_ms"]
        axes.text(
            x, total["p95"] * 1.04, f"p50 {total['median']:.0f} / p95 {total['p95']:.0f} ms", ha="center", va="bottom"
        )
    p95 = [users[n]["total_ms"]["p95"] for n in names]
    axes.scatter(labels, p95, color="#b42318", marker="_", s=900, label="search p95", zorder=3)
    axes.set_ylim(0, max(p95) * 1.2)
    axes.set_ylabel("ms")
    axes.set_title(f"search(user, query), table of {results['fill']['table_rows']:,} memories")
    axes.legend(fontsize=8, loc="upper left", markerscale=0.4)


if __name__ == "__main__":
    main()
