"""Retrieval latency and HNSW recall on a synthetic corpus: prints a table, writes
bench/results/retrieval.json and bench/results/retrieval.png.

    DATABASE_URL=... .venv/bin/python bench/retrieval.py                    # 10k and 100k chunks, 200 queries
    DATABASE_URL=... .venv/bin/python bench/retrieval.py --sizes 10000 --queries 50
    DATABASE_URL=... .venv/bin/python bench/retrieval.py --rebuild          # build the corpora again
    DATABASE_URL=... .venv/bin/python bench/retrieval.py --drop             # delete the bench corpora, measure nothing

Each size is its own corpus: 50 collections owned by one user (`bench-retrieval-<size>`), documents
of 20 chunks on pages of 5, zh + en text of 150-400 characters drawn from a fixed vocabulary with a
fixed seed. Terms and lengths come from `ingestion.terms`, as in the pipeline. Embeddings are
synthetic (embedding 100k chunks with the local model takes ~40 minutes on 2 cores) but live in the
real embedder's space: a chunk's vector is the mean of the real embeddings of the vocabulary words
it uses, plus per-document and per-chunk noise, normalised. So the queries, which are embedded for
real at search time, land near the chunks that share their words. A corpus is kept between runs
(its collections' description is the marker) unless --rebuild, and loaded in minutes: Document,
Page, IndexedPage and IndexedDocument rows by bulk_create, chunks by COPY, the version's HNSW index
and the global HNSW index of its dims (ingestion.index) built after the load, BM25 statistics
by ingestion.stats.add_documents.

Measured, as the bench user, over all 50 collections and over one: p50/p95 milliseconds of
`assistant.retrieval.search.search` for lexical alone, dense alone, fused (no rerank), and fused
with rerank when a reranker is configured (at most --rerank-queries queries: the local judge is
slow), query embedding included; and recall@10 of the dense channel against an exact scan (no
index) over the same versions. Targets from the issue: p95 <= 100 ms before rerank at 100k chunks;
recall@10 >= 0.95. The machine is shared: figures are medians and percentiles of noisy runs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

GENERATOR = 2  # bump when the corpus changes: corpora with another marker are rebuilt
SEED = 20241129
COLLECTIONS = 50
CHUNKS_PER_DOCUMENT = 20
CHUNKS_PER_PAGE = 5
TARGET_P95_MS = 100.0
TARGET_RECALL = 0.95
K = 10
BUILDS = ROOT / "bench" / "results" / "retrieval_build.json"  # seconds per phase of the last build of each size

# Topics: (zh name, en name, zh words, en words). Words are what chunks and queries are made of.
# fmt: off
TOPICS: list[tuple[str, str, list[str], list[str]]] = [
    ("差旅报销", "travel expenses", ["发票", "机票", "住宿标准", "出差补贴", "报销单", "经济舱"],
     ["receipt", "flight", "hotel cap", "per diem", "expense claim", "economy class"]),
    ("年假制度", "annual leave", ["年假", "病假", "调休", "请假审批", "法定节假日", "婚假"],
     ["vacation", "sick leave", "time off", "leave approval", "public holiday", "parental leave"]),
    ("服务器运维", "server operations", ["服务器", "磁盘空间", "监控告警", "重启", "负载均衡", "日志轮转"],
     ["server", "disk space", "monitoring alert", "reboot", "load balancer", "log rotation"]),
    ("数据库备份", "database backup", ["数据库", "全量备份", "增量备份", "恢复演练", "主从复制", "快照"],
     ["database", "full backup", "incremental backup", "restore drill", "replication", "snapshot"]),
    ("远程办公", "remote work", ["远程办公", "虚拟专用网", "视频会议", "打卡", "居家办公", "网络带宽"],
     ["remote work", "VPN", "video call", "check-in", "home office", "bandwidth"]),
    ("采购流程", "procurement", ["采购申请", "询价", "供应商报价", "比价", "采购订单", "验收"],
     ["purchase request", "quotation", "supplier quote", "bid comparison", "purchase order", "goods receipt"]),
    ("合同审批", "contract approval", ["合同", "法务审核", "盖章", "违约条款", "续签", "保密协议"],
     ["contract", "legal review", "company seal", "penalty clause", "renewal", "NDA"]),
    ("招聘", "hiring", ["招聘", "简历筛选", "面试官", "录用通知", "试用期", "内推奖励"],
     ["recruiting", "resume screening", "interviewer", "offer letter", "probation", "referral bonus"]),
    ("新员工入职", "onboarding", ["入职", "工牌", "账号开通", "入职培训", "导师", "劳动合同"],
     ["onboarding", "badge", "account setup", "orientation", "mentor", "employment contract"]),
    ("绩效考核", "performance review", ["绩效", "目标管理", "自评", "晋升", "调薪", "季度考核"],
     ["performance", "OKR", "self review", "promotion", "salary adjustment", "quarterly review"]),
    ("信息安全", "information security", ["密码策略", "钓鱼邮件", "双因素认证", "漏洞扫描", "权限管理", "加密"],
     ["password policy", "phishing", "two-factor", "vulnerability scan", "access control", "encryption"]),
    ("产品发布", "product release", ["版本发布", "灰度", "回滚", "发布说明", "功能开关", "上线窗口"],
     ["release", "canary", "rollback", "release notes", "feature flag", "deploy window"]),
    ("客户支持", "customer support", ["工单", "客户投诉", "响应时间", "满意度", "升级处理", "知识库"],
     ["ticket", "complaint", "response time", "satisfaction", "escalation", "help center"]),
    ("销售报告", "sales report", ["销售额", "回款", "客户拜访", "商机", "毛利率", "区域经理"],
     ["revenue", "collections", "client visit", "pipeline", "gross margin", "regional manager"]),
    ("财务预算", "budget", ["预算", "成本中心", "费用分摊", "年度计划", "超支", "审计"],
     ["budget", "cost center", "allocation", "annual plan", "overspend", "audit"]),
    ("市场推广", "marketing", ["市场活动", "品牌", "投放", "转化率", "社交媒体", "展会"],
     ["campaign", "brand", "ad spend", "conversion rate", "social media", "trade show"]),
    ("办公室搬迁", "office move", ["搬迁", "工位", "门禁", "装修", "停车位", "快递收发"],
     ["relocation", "desk", "door access", "renovation", "parking", "mail room"]),
    ("会议室预订", "meeting rooms", ["会议室", "预订系统", "投影仪", "视频设备", "取消预订", "大会议厅"],
     ["meeting room", "booking system", "projector", "AV equipment", "cancellation", "auditorium"]),
    ("员工培训", "training", ["培训课程", "学分", "讲师", "线上学习", "考试", "证书"],
     ["course", "credits", "instructor", "e-learning", "exam", "certificate"]),
    ("代码评审", "code review", ["代码评审", "合并请求", "单元测试", "代码规范", "技术债", "重构"],
     ["code review", "pull request", "unit test", "style guide", "tech debt", "refactoring"]),
    ("持续集成", "continuous integration", ["流水线", "构建失败", "镜像", "制品库", "自动化测试", "部署脚本"],
     ["pipeline", "build failure", "container image", "artifact registry", "test automation", "deploy script"]),
    ("数据隐私", "data privacy", ["个人信息", "数据脱敏", "用户同意", "数据保留", "跨境传输", "隐私政策"],
     ["personal data", "anonymisation", "consent", "retention", "cross-border transfer", "privacy policy"]),
    ("供应商管理", "vendor management", ["供应商", "准入评估", "付款条件", "交货期", "黑名单", "年度评审"],
     ["vendor", "onboarding assessment", "payment terms", "lead time", "blocklist", "annual vendor review"]),
    ("库存管理", "inventory", ["库存", "盘点", "安全库存", "出库", "入库", "呆滞物料"],
     ["stock", "stocktake", "safety stock", "outbound", "inbound", "obsolete stock"]),
    ("物流配送", "logistics", ["物流", "配送", "运费", "签收", "仓库", "冷链"],
     ["shipping", "delivery", "freight", "proof of delivery", "warehouse", "cold chain"]),
    ("质量检测", "quality assurance", ["质检", "抽检", "不良率", "返工", "检验标准", "纠正措施"],
     ["inspection", "sampling", "defect rate", "rework", "acceptance criteria", "corrective action"]),
    ("法务合规", "compliance", ["合规", "反贿赂", "礼品登记", "利益冲突", "举报渠道", "监管检查"],
     ["compliance", "anti-bribery", "gift register", "conflict of interest", "whistleblowing", "regulator"]),
    ("税务申报", "tax filing", ["增值税", "个税", "专用发票", "纳税申报", "税率", "汇算清缴"],
     ["VAT", "income tax", "tax invoice", "tax return", "tax rate", "annual settlement"]),
    ("保险福利", "benefits", ["社保", "公积金", "商业保险", "体检", "补充医疗", "节日福利"],
     ["social insurance", "housing fund", "health insurance", "medical checkup", "dental plan", "holiday gift"]),
    ("设备借用", "equipment loans", ["笔记本电脑", "显示器", "借用登记", "资产编号", "归还", "维修"],
     ["laptop", "monitor", "loan form", "asset tag", "return", "repair"]),
    ("网络故障", "network outage", ["断网", "交换机", "无线网络", "故障排查", "带宽限制", "域名解析"],
     ["outage", "switch", "Wi-Fi", "troubleshooting", "rate limit", "DNS"]),
    ("移动应用", "mobile app", ["安卓", "苹果应用", "推送通知", "崩溃率", "应用商店", "版本兼容"],
     ["Android", "iOS", "push notification", "crash rate", "app store", "compatibility"]),
    ("机器学习", "machine learning", ["模型训练", "标注数据", "特征工程", "推理服务", "准确率", "显卡"],
     ["model training", "labelled data", "feature engineering", "inference service", "accuracy", "GPU"]),
    ("用户调研", "user research", ["访谈", "问卷", "可用性测试", "用户画像", "需求优先级", "原型"],
     ["interview", "survey", "usability test", "persona", "prioritisation", "prototype"]),
    ("年会活动", "annual party", ["年会", "节目", "抽奖", "场地", "团建", "预算审批"],
     ["gala", "performance act", "raffle", "venue", "team building", "budget approval"]),
    ("客户合同续约", "renewals", ["续约", "报价单", "折扣", "服务等级协议", "到期提醒", "流失"],
     ["renewal", "price quote", "discount", "SLA", "expiry reminder", "churn"]),
]
ZH_NAMES: list[str] = ["张伟", "王芳", "李娜", "刘洋", "陈静", "杨磊", "赵敏", "黄强", "周杰", "吴婷",
                       "徐明", "孙丽", "马超", "朱琳", "胡斌", "郭晶", "何勇", "高峰", "林涛", "罗霞"]
EN_NAMES: list[str] = ["Alice Chen", "Bob Wang", "Carol Li", "David Liu", "Emma Zhang", "Frank Zhou", "Grace Wu",
    "Henry Xu", "Irene Sun", "Jack Ma", "Karen Hu", "Leo Guo", "Mia Lin", "Nina Luo", "Oscar He"]
CITIES: list[tuple[str, str]] = [
    ("北京", "Beijing"), ("上海", "Shanghai"), ("深圳", "Shenzhen"), ("杭州", "Hangzhou"), ("成都", "Chengdu"),
    ("武汉", "Wuhan"), ("南京", "Nanjing"), ("西安", "Xi'an"), ("广州", "Guangzhou")]
DEPARTMENTS: list[tuple[str, str]] = [
    ("财务部", "Finance"), ("人事部", "HR"), ("研发部", "Engineering"), ("市场部", "Marketing"), ("法务部", "Legal"),
    ("运维组", "Operations"), ("销售部", "Sales"), ("行政部", "Facilities")]
CODE_PREFIXES: list[str] = ["PRJ", "INV", "REQ", "TKT", "PO", "HR", "SEC", "OPS"]
DOC_KINDS: list[tuple[str, str]] = [
    ("手册", "handbook"), ("流程说明", "procedure"), ("会议纪要", "minutes"), ("周报", "weekly report"),
    ("常见问题", "FAQ"), ("培训材料", "training notes")]

ZH_TEMPLATES = [
    "{date}，{dept}的{name}在{city}提交了{w1}申请，金额为{amount}元，编号{code}。",
    "根据{topic}规定，{w1}须在{n}个工作日内完成{w2}，由{dept}负责审核。",
    "{name}提醒大家：{w1}和{w2}的流程已于{date}更新，详情请参阅{code}。",
    "关于{w1}的常见问题：如果{w2}出现异常，请联系{city}办公室的{name}，分机{ext}。",
    "{year}年第{q}季度，{dept}共处理{w1}相关事项{n}件，其中{w2}占{pct}%。",
    "{topic}：{w1}、{w2}与{w3}需同时满足，否则{dept}将退回申请。",
    "会议决定，{w1}的上限调整为{amount}元，{w2}自{date}起执行，负责人{name}。",
]
EN_TEMPLATES = [
    "On {date}, {name} from {dept} in {city} filed a {w1} request for {amount} USD under {code}.",
    "Under the {topic} policy, the {w1} must be completed within {n} working days after the {w2}; {dept} "
    "reviews it.",
    "{name} notes that the {w1} and {w2} process changed on {date}; see {code} for details.",
    "FAQ on {w1}: if the {w2} fails, contact {name} at the {city} office, extension {ext}.",
    "In Q{q} {year}, {dept} handled {n} {w1} cases, {pct}% of them about the {w2}.",
    "{topic}: {w1}, {w2} and {w3} are all required, otherwise {dept} returns the request.",
    "The meeting raised the {w1} limit to {amount} USD; the {w2} rule applies from {date}, owner {name}.",
]
ZH_QUERIES = ["{w1}怎么办理", "{w1}和{w2}的规定", "{topic}{w1}", "{city}{w1}负责人", "{year}年{w1}{w2}",
              "{w1}需要多少个工作日", "{name}{w1}"]
EN_QUERIES = ["how to handle {w1}", "{w1} and {w2} policy", "{topic} {w1}", "{w1} contact in {city}",
              "{w1} {w2} {year}", "{w1} limit", "{w2} deadline"]
# fmt: on


@dataclass
class Corpus:
    """One generated corpus, in memory: rows ready for the database, and the vocabulary words
    each chunk uses (for its synthetic embedding)."""

    size: int
    documents: list[dict[str, Any]] = field(default_factory=list)  # collection index, name, rel_path, pages
    chunk_texts: list[str] = field(default_factory=list)
    chunk_words: list[list[int]] = field(default_factory=list)  # vocabulary indices, with repeats
    chunk_doc: list[int] = field(default_factory=list)  # index into documents


class Vocabulary:
    def __init__(self) -> None:
        self.words: list[str] = []
        self.index: dict[str, int] = {}
        for zh, en, zh_words, en_words in TOPICS:
            for word in [zh, en, *zh_words, *en_words]:
                self.add(word)
        for zh, en in CITIES + DEPARTMENTS:
            self.add(zh)
            self.add(en)

    def add(self, word: str) -> int:
        if word not in self.index:
            self.index[word] = len(self.words)
            self.words.append(word)
        return self.index[word]


def setup() -> None:
    import django

    django.setup()


# Generation


class Writer:
    """Sentences in one language from the vocabulary, recording which words were used."""

    def __init__(self, rng: np.random.Generator, vocabulary: Vocabulary) -> None:
        self.rng = rng
        self.vocabulary = vocabulary

    def pick(self, items: Sequence[Any]) -> Any:
        return items[int(self.rng.integers(len(items)))]

    def fill(self, template: str, topic: int, zh: bool, used: list[int]) -> str:
        zh_name, en_name, zh_words, en_words = TOPICS[topic]
        words = zh_words if zh else en_words
        chosen = [words[int(i)] for i in self.rng.choice(len(words), size=3, replace=False)]
        city, dept = self.pick(CITIES), self.pick(DEPARTMENTS)
        year = int(self.rng.integers(2019, 2026))
        month, day = int(self.rng.integers(1, 13)), int(self.rng.integers(1, 29))
        values = {
            "topic": zh_name if zh else en_name,
            "w1": chosen[0],
            "w2": chosen[1],
            "w3": chosen[2],
            "city": city[0] if zh else city[1],
            "dept": dept[0] if zh else dept[1],
            "name": self.pick(ZH_NAMES if zh else EN_NAMES),
            "date": f"{year}年{month}月{day}日" if zh else f"{year}-{month:02}-{day:02}",
            "year": year,
            "q": int(self.rng.integers(1, 5)),
            "n": int(self.rng.integers(2, 60)),
            "pct": int(self.rng.integers(3, 95)),
            "amount": int(self.rng.integers(1, 400)) * 50,
            "ext": int(self.rng.integers(1000, 9999)),
            "code": f"{self.pick(CODE_PREFIXES)}-{int(self.rng.integers(1, 10000)):04}",
        }
        text = template.format(**values)
        for key in ("topic", "w1", "w2", "w3", "city", "dept"):
            if "{" + key + "}" in template:
                used.append(self.vocabulary.index[str(values[key])])
        return text

    def chunk(self, main: int, language: str) -> tuple[str, list[int]]:
        """150-400 characters, mostly about the document's topic."""
        target = int(self.rng.integers(150, 400))
        used: list[int] = []
        sentences: list[str] = []
        length = 0
        while length < target:
            topic = main if self.rng.random() < 0.75 else int(self.rng.integers(len(TOPICS)))
            zh = language == "zh" or (language == "mixed" and self.rng.random() < 0.5)
            sentence = self.fill(self.pick(ZH_TEMPLATES if zh else EN_TEMPLATES), topic, zh, used)
            if sentences and length + len(sentence) > 420:
                break
            sentences.append(sentence)
            length += len(sentence) + 1
        return " ".join(sentences), used


def generate(size: int, vocabulary: Vocabulary) -> Corpus:
    rng = np.random.default_rng([SEED, size])
    writer = Writer(rng, vocabulary)
    corpus = Corpus(size)
    documents = size // CHUNKS_PER_DOCUMENT
    for number in range(documents):
        main = int(rng.integers(len(TOPICS)))
        language = str(rng.choice(["zh", "en", "mixed"], p=[0.5, 0.35, 0.15]))
        kind = writer.pick(DOC_KINDS)
        dept = writer.pick(DEPARTMENTS)
        year = int(rng.integers(2019, 2026))
        zh = language != "en"
        title = f"{TOPICS[main][0]}{kind[0]} {year}" if zh else f"{TOPICS[main][1].capitalize()} {kind[1]} {year}"
        pages = []
        for page in range(CHUNKS_PER_DOCUMENT // CHUNKS_PER_PAGE):
            section = writer.pick(TOPICS[main][2] if zh else TOPICS[main][3])
            pages.append({"number": page + 1, "heading_path": [title, section]})
            for _ in range(CHUNKS_PER_PAGE):
                text, used = writer.chunk(main, language)
                corpus.chunk_texts.append(text)
                corpus.chunk_words.append(used)
                corpus.chunk_doc.append(number)
        corpus.documents.append(
            {
                "collection": number % COLLECTIONS,
                "name": f"{title}.pdf",
                "rel_path": f"{dept[1]}/{number:06}-{title}.pdf",
                "pages": pages,
            }
        )
    return corpus


def word_vectors(vocabulary: Vocabulary) -> np.ndarray:
    from providers import registry

    embedder = registry.text_embedder()
    vectors = []
    for start in range(0, len(vocabulary.words), 32):
        vectors.extend(embedder.embed_documents(vocabulary.words[start : start + 32]))
    matrix = np.asarray(vectors, dtype=np.float32)
    normalised: np.ndarray = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
    return normalised


def embeddings(corpus: Corpus, words: np.ndarray, noise: float = 0.35, document_noise: float = 0.25) -> np.ndarray:
    """Mean of the chunk's word vectors (with repeats), plus a per-document offset shared by its
    chunks and per-chunk noise (total norms `document_noise` and `noise`), normalised."""
    rng = np.random.default_rng([SEED, corpus.size, 1])
    size, dims = len(corpus.chunk_texts), words.shape[1]
    scale = 1 / np.sqrt(dims)
    offsets = rng.normal(0, document_noise * scale, (len(corpus.documents), dims)).astype(np.float32)
    out = np.empty((size, dims), dtype=np.float32)
    for n, used in enumerate(corpus.chunk_words):
        out[n] = words[used].mean(axis=0)
    out += offsets[np.asarray(corpus.chunk_doc)]
    out += rng.normal(0, noise * scale, (size, dims)).astype(np.float32)
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out


def queries(count: int, seed: int = SEED) -> list[str]:
    """Mixed zh/en queries from the vocabulary, so that they hit: half zh, half en."""
    rng = np.random.default_rng([seed, 7])
    writer = Writer(rng, Vocabulary())
    out = []
    for n in range(count):
        topic = int(rng.integers(len(TOPICS)))
        zh = n % 2 == 0
        zh_name, en_name, zh_words, en_words = TOPICS[topic]
        words = zh_words if zh else en_words
        w1, w2 = (words[int(i)] for i in rng.choice(len(words), size=2, replace=False))
        template = writer.pick(ZH_QUERIES if zh else EN_QUERIES)
        city = writer.pick(CITIES)
        out.append(
            template.format(
                w1=w1,
                w2=w2,
                topic=zh_name if zh else en_name,
                city=city[0] if zh else city[1],
                year=int(rng.integers(2019, 2026)),
                name=writer.pick(ZH_NAMES),
            )
        )
    return out


# Loading


def marker(size: int) -> str:
    return f"retrieval bench corpus: generator={GENERATOR} seed={SEED} chunks={size}"


def bench_user(size: int):  # type: ignore[no-untyped-def]
    from django.contrib.auth import get_user_model

    user, _ = get_user_model().objects.get_or_create(
        username=f"bench-retrieval-{size}", defaults={"email": f"bench-retrieval-{size}@localhost"}
    )
    return user


def existing(size: int) -> list[int] | None:
    """The corpus's collection ids when it is complete, else None."""
    from knowledge.models import Collection

    user = bench_user(size)
    rows = list(Collection.objects.filter(owner_user=user).values_list("pk", "description", "active_version_id"))
    if len(rows) != COLLECTIONS or any(d != marker(size) or v is None for _, d, v in rows):
        return None
    return sorted(pk for pk, _, _ in rows)


def drop(size: int) -> None:
    from django.contrib.auth import get_user_model
    from django.db import connection, transaction

    from knowledge.models import Collection, IndexVersion

    user = get_user_model().objects.filter(username=f"bench-retrieval-{size}").first()
    if user is None:
        return
    for collection in Collection.objects.filter(owner_user=user):
        with transaction.atomic():
            versions = list(IndexVersion.objects.filter(collection=collection).values_list("pk", flat=True))
            collection.delete()
            with connection.cursor() as cursor:
                for pk in versions:
                    cursor.execute(f"DROP INDEX IF EXISTS chunk_hnsw_v{int(pk)}")
                    cursor.execute(f"DROP INDEX IF EXISTS chunk_image_hnsw_v{int(pk)}")
    user.delete()


def build(size: int) -> tuple[list[int], dict[str, float]]:
    """Generate and load one corpus; its collection ids and seconds per phase."""
    from django.db import connection, transaction

    from ingestion import stats
    from ingestion.index import ensure_active_version, vector_index_sql
    from ingestion.terms import terms
    from knowledge.models import Collection, Document, IndexedDocument, IndexedPage, Page
    from providers import registry

    seconds: dict[str, float] = {}
    started = time.perf_counter()
    drop(size)
    seconds["drop_old"] = time.perf_counter() - started

    started = time.perf_counter()
    vocabulary = Vocabulary()
    corpus = generate(size, vocabulary)
    seconds["generate_text"] = time.perf_counter() - started

    started = time.perf_counter()
    counts = [
        terms(
            text
            + " "
            + " ".join(corpus.documents[d]["pages"][(n % CHUNKS_PER_DOCUMENT) // CHUNKS_PER_PAGE]["heading_path"])
        )
        for n, (text, d) in enumerate(zip(corpus.chunk_texts, corpus.chunk_doc, strict=True))
    ]
    seconds["terms"] = time.perf_counter() - started

    started = time.perf_counter()
    embedder = registry.text_embedder()
    vectors = embeddings(corpus, word_vectors(vocabulary))
    seconds["embeddings"] = time.perf_counter() - started

    user = bench_user(size)
    by_collection: dict[int, list[int]] = {}
    for number, entry in enumerate(corpus.documents):
        by_collection.setdefault(entry["collection"], []).append(number)
    ids: list[int] = []
    begun = time.perf_counter()
    load = index = statistics_seconds = 0.0
    # The collections and their versions first: creating a version creates its HNSW indexes,
    # the global one per dims included. All are dropped for the load and built after it, which
    # is much faster than adding rows to a graph one by one.
    collections = []
    for position in range(COLLECTIONS):
        collection = Collection.objects.create(
            name=f"bench-retrieval-{size} #{position:02}", owner_user=user, created_by=user, description=""
        )
        collections.append((collection, ensure_active_version(collection, embedder)))
    with connection.cursor() as cursor:
        for sql in {sql for _collection, version in collections for sql in vector_index_sql(version)}:
            cursor.execute(f"DROP INDEX IF EXISTS {_index_name(sql)}")
    for position, (collection, version) in enumerate(collections):
        started = time.perf_counter()
        with transaction.atomic():
            numbers = by_collection.get(position, [])
            documents = Document.objects.bulk_create(
                [
                    Document(
                        collection=collection,
                        name=corpus.documents[n]["name"],
                        rel_path=corpus.documents[n]["rel_path"],
                        file=f"bench/{n}.pdf",
                        sha256=hashlib.sha256(f"{size}-{n}".encode()).hexdigest(),
                        size=1000,
                        mime="application/pdf",
                        status=Document.Status.READY,
                        page_count=len(corpus.documents[n]["pages"]),
                    )
                    for n in numbers
                ]
            )
            pages = Page.objects.bulk_create(
                [
                    Page(
                        document=document,
                        number=page["number"],
                        kind=Page.Kind.PDF_PAGE,
                        content_sha256=hashlib.sha256(f"{document.sha256}-{page['number']}".encode()).hexdigest(),
                        heading_path=page["heading_path"],
                        text=" ".join(
                            corpus.chunk_texts[n * CHUNKS_PER_DOCUMENT + (page["number"] - 1) * CHUNKS_PER_PAGE + o]
                            for o in range(CHUNKS_PER_PAGE)
                        ),
                    )
                    for n, document in zip(numbers, documents, strict=True)
                    for page in corpus.documents[n]["pages"]
                ]
            )
            rows = []
            for (n, document), page_group in zip(
                zip(numbers, documents, strict=True),
                _groups(pages, CHUNKS_PER_DOCUMENT // CHUNKS_PER_PAGE),
                strict=True,
            ):
                for page in page_group:
                    for ordinal in range(CHUNKS_PER_PAGE):
                        chunk = n * CHUNKS_PER_DOCUMENT + (page.number - 1) * CHUNKS_PER_PAGE + ordinal
                        text = corpus.chunk_texts[chunk]
                        rows.append(
                            (
                                ordinal,
                                "text",
                                text,
                                {"page": page.number, "heading_path": page.heading_path},
                                dict(counts[chunk]),
                                sum(counts[chunk].values()),
                                vectors[chunk],
                                1.0,
                                hashlib.sha256(text.encode()).hexdigest(),
                                document.pk,
                                version.pk,
                                page.pk,
                                False,  # marked by ingestion.stats.add_document, as in the pipeline
                            )
                        )
            _copy_chunks(rows)
            IndexedPage.objects.bulk_create(
                [
                    IndexedPage(
                        index_version=version,
                        page=page,
                        content_sha256=page.content_sha256,
                        chunk_count=CHUNKS_PER_PAGE,
                    )
                    for page in pages
                ]
            )
            IndexedDocument.objects.bulk_create(
                [IndexedDocument(index_version=version, document=d, sha256=d.sha256) for d in documents]
            )
            load += time.perf_counter() - started
            started = time.perf_counter()
            stats.add_documents(version.pk, [document.pk for document in documents])  # bulk_create: no signals
            statistics_seconds += time.perf_counter() - started
            started = time.perf_counter()
            with connection.cursor() as cursor:  # over the chunks add_documents marked searchable
                cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # CREATE INDEX refuses pending FK checks
                cursor.execute("SET maintenance_work_mem = '512MB'")
                for sql in vector_index_sql(version):
                    if not GLOBAL_INDEX.search(sql):  # that one once, after the last collection
                        cursor.execute(sql)
            index += time.perf_counter() - started
            Collection.objects.filter(pk=collection.pk).update(description=marker(size))
        ids.append(collection.pk)
        if (position + 1) % 10 == 0:
            print(f"  {position + 1}/{COLLECTIONS} collections loaded, {time.perf_counter() - begun:.0f} s", flush=True)
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("SET maintenance_work_mem = '512MB'")  # the graph fits: built in memory
        for sql in vector_index_sql(collections[-1][1]):
            cursor.execute(sql)
    seconds["global_hnsw_index"] = time.perf_counter() - started
    seconds["load_rows"] = load
    seconds["hnsw_index"] = index
    seconds["bm25_statistics"] = statistics_seconds
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE knowledge_chunk")  # the searchable marks left a dead tuple per chunk
        cursor.execute("ANALYZE knowledge_termstat")
        cursor.execute("ANALYZE knowledge_indexeddocument")
    seconds["vacuum_analyze"] = time.perf_counter() - started
    seconds["total"] = sum(seconds.values())
    return ids, seconds


GLOBAL_INDEX = re.compile(r"INDEX IF NOT EXISTS chunk_(image_)?hnsw_d[0-9]+ ")


def _index_name(sql: str) -> str:
    match = re.search(r"INDEX IF NOT EXISTS (chunk_[a-z_0-9]+) ", sql)
    assert match is not None
    return match.group(1)


def _groups(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


CHUNK_COLUMNS = (
    "ordinal, kind, text, location, terms, length, embedding, weight, content_sha256, document_id, "
    "index_version_id, page_id, searchable"
)


def _copy_chunks(rows: list[tuple[Any, ...]]) -> None:
    """Binary COPY, with the pgvector dumper for numpy vectors on this connection."""
    from django.db import connection
    from pgvector.psycopg import register_vector
    from psycopg.types.json import Jsonb

    connection.ensure_connection()
    raw = connection.connection
    assert raw is not None
    register_vector(raw)
    copy_sql = f"COPY knowledge_chunk ({CHUNK_COLUMNS}) FROM STDIN (FORMAT BINARY)"
    with raw.cursor() as cursor, cursor.copy(copy_sql) as copy:
        copy.set_types(
            [
                "int4",
                "varchar",
                "text",
                "jsonb",
                "jsonb",
                "int4",
                "vector",
                "float8",
                "varchar",
                "int8",
                "int8",
                "int8",
                "bool",
            ]
        )
        for row in rows:
            copy.write_row((*row[:3], Jsonb(row[3]), Jsonb(row[4]), *row[5:]))


# Measuring

CONFIGS: dict[str, dict[str, Any]] = {
    "lexical": {"channels": ("lexical",), "rerank": False},
    "dense": {"channels": ("dense",), "rerank": False},
    "fused": {"channels": ("lexical", "dense", "image"), "rerank": False},
    "fused+rerank": {"channels": ("lexical", "dense", "image"), "rerank": True},  # when a reranker is configured
}
EXPLAINED = [
    ("all", "lexical"),
    ("one", "lexical"),
    ("all", "dense"),
]  # (scope, config) whose slowest query is explained
VECTOR_LITERAL = re.compile(r"\[-?[0-9.e-]+(?:,-?[0-9.e-]+){20,}\]")
EXACT = """
SELECT c.id FROM knowledge_chunk c
WHERE c.index_version_id = ANY(%s) AND c.embedding IS NOT NULL
  AND EXISTS (
    SELECT 1 FROM knowledge_indexeddocument d
    WHERE d.document_id = c.document_id AND d.index_version_id = c.index_version_id
  )
ORDER BY c.embedding::vector({dims}) <=> %s::vector({dims}), c.id
LIMIT %s
"""


def percentile(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else float("nan")


def summary(samples: Sequence[float]) -> dict[str, float]:
    return {"p50": percentile(samples, 50), "p95": percentile(samples, 95), "n": len(samples)}


def latency(
    user: Any, scopes: dict[str, list[int]], texts: list[str], configs: dict[str, dict[str, Any]], rerank_queries: int
) -> dict[str, Any]:
    """p50/p95 of the whole search call and of each stage in its timings, per scope and config;
    configs are interleaved query by query so that noise spreads evenly."""
    from assistant.retrieval.search import search

    results: dict[str, Any] = {}
    for scope, ids in scopes.items():
        walls: dict[str, list[float]] = {name: [] for name in configs}
        stages: dict[str, dict[str, list[float]]] = {name: {} for name in configs}
        slowest: dict[str, tuple[float, str]] = {}
        for n, text in enumerate(texts[:5]):  # warm-up: the embedder, the connection, the caches
            for options in configs.values():
                if n == 0 or not options["rerank"]:  # the reranker once: it is slow
                    search(user, text, collection_ids=ids, k=K, **options)
        for n, text in enumerate(texts):
            for name, options in configs.items():
                if options["rerank"] and n >= rerank_queries:
                    continue
                started = time.perf_counter()
                found = search(user, text, collection_ids=ids, k=K, **options)
                wall = (time.perf_counter() - started) * 1000
                walls[name].append(wall)
                for stage, ms in found.timings.items():
                    stages[name].setdefault(stage, []).append(ms)
                if "dense" in found.timings and "embed_query" in found.timings:
                    sql = found.timings["dense"] - found.timings["embed_query"]
                    stages[name].setdefault("dense_sql", []).append(sql)
                # The query embedding is the stage most exposed to CPU contention on a shared machine.
                stages[name].setdefault("without_embed", []).append(wall - found.timings.get("embed_query", 0.0))
                if wall > slowest.get(name, (0.0, ""))[0]:
                    slowest[name] = (wall, text)
        results[scope] = {
            name: {
                **summary(walls[name]),
                "samples_ms": [round(ms, 2) for ms in walls[name]],
                "stages": {stage: summary(values) for stage, values in stages[name].items()},
                "slowest_query": slowest.get(name, (0.0, ""))[1],
            }
            for name in configs
            if walls[name]
        }
    return results


def recall(user: Any, scopes: dict[str, list[int]], texts: list[str]) -> dict[str, Any]:
    """Mean recall@10 of the dense channel (as search calls it) against an exact scan of the
    same versions with index scans off."""
    from django.conf import settings
    from django.db import connection, transaction

    from assistant.retrieval.dense import search_dense
    from assistant.retrieval.scope import scope_for
    from providers import registry

    embedder = registry.text_embedder()
    depth = max(K, settings.RETRIEVAL_DEPTH)
    results: dict[str, Any] = {}
    for scope_name, ids in scopes.items():
        scope = scope_for(user, ids)
        versions = [v.pk for v in scope.versions]
        dims = scope.versions[0].dims
        values, exact_ms = [], []
        for text in texts:
            vector = embedder.embed_query(" ".join(text.split()))
            approximate = [pk for pk, _score in search_dense(scope, vector, embedder.model_id, depth)[:K]]
            literal = "[" + ",".join(f"{float(x):.7g}" for x in vector) + "]"
            started = time.perf_counter()
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute("SET LOCAL enable_indexscan = off")
                cursor.execute(EXACT.format(dims=int(dims)), [versions, literal, K])
                exact = [int(row[0]) for row in cursor.fetchall()]
            exact_ms.append((time.perf_counter() - started) * 1000)
            values.append(len(set(approximate) & set(exact)) / max(len(exact), 1))
        results[scope_name] = {
            "recall_at_10": statistics.fmean(values),
            "min": min(values),
            "queries_below_target": sum(v < TARGET_RECALL for v in values),
            "exact_scan_ms_p50": percentile(exact_ms, 50),
            "ef_search": settings.HNSW_EF_SEARCH,
        }
    return results


@contextmanager
def captured() -> Iterator[list[tuple[str, Any, float]]]:
    """The SQL statements run inside the block, with their parameters and milliseconds."""
    from django.db import connection

    statements: list[tuple[str, Any, float]] = []

    def wrapper(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            statements.append((sql, params, (time.perf_counter() - started) * 1000))

    with connection.execute_wrapper(wrapper):
        yield statements


def explain(user: Any, ids: list[int], text: str, options: dict[str, Any]) -> dict[str, Any]:
    """Run one search with its SQL captured: statements and milliseconds grouped by statement,
    then EXPLAIN ANALYZE of the slowest one that reads chunks (after the transaction-local
    settings the search had set before it)."""
    from django.db import connection, transaction

    from assistant.retrieval.search import search

    with captured() as statements:
        search(user, text, collection_ids=ids, k=K, **options)
    groups: dict[str, list[float]] = {}
    for sql, _params, ms in statements:
        groups.setdefault(" ".join(sql.split())[:80], []).append(ms)
    reading = [s for s in statements if "knowledge_chunk" in s[0] and "set_config" not in s[0]]
    sql, params, ms = max(reading or statements, key=lambda s: s[2])
    with transaction.atomic(), connection.cursor() as cursor:
        for setting, setting_params, _ms in statements:
            if "set_config" in setting:
                cursor.execute(setting, setting_params)
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params)
        plan = [VECTOR_LITERAL.sub("[…]", row[0]) for row in cursor.fetchall()]
    return {
        "query": text,
        "statements": len(statements),
        "statements_ms": sum(s[2] for s in statements),
        "by_statement": {key: {"count": len(v), "ms": sum(v)} for key, v in groups.items()},
        "explained_statement_ms": ms,
        "explained_statement": VECTOR_LITERAL.sub("[…]", " ".join(sql.split()))[:1500],
        "plan": plan,
    }


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = list(results["sizes"])
    groups = [(size, scope) for size in sizes for scope in ("all", "one")]
    names = [
        name for name in CONFIGS if any(name in results["sizes"][size]["latency"][scope] for size, scope in groups)
    ]
    figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4), gridspec_kw={"width_ratios": [3, 1.3]})
    width = 0.8 / max(len(names), 1)
    colors = {"lexical": "#1f5fbf", "dense": "#2e9e5b", "fused": "#8a3ffc", "fused+rerank": "#c27c0e"}
    for i, name in enumerate(names):
        xs = [g + (i - (len(names) - 1) / 2) * width for g in range(len(groups))]
        p95 = [results["sizes"][s]["latency"][c].get(name, {}).get("p95", 0.0) for s, c in groups]
        p50 = [results["sizes"][s]["latency"][c].get(name, {}).get("p50", 0.0) for s, c in groups]
        left.bar(xs, p95, width, color=colors[name], alpha=0.45, label=f"{name} p95")
        left.bar(xs, p50, width * 0.5, color=colors[name], label=f"{name} p50")
    left.axhline(TARGET_P95_MS, color="#b42318", linestyle="--", label=f"target p95 ≤ {TARGET_P95_MS:.0f} ms")
    left.set_xticks(range(len(groups)))
    left.set_xticklabels([f"{int(s) // 1000}k, {'50 coll.' if c == 'all' else '1 coll.'}" for s, c in groups])
    left.set_yscale("log")
    left.set_ylabel("ms per search, log scale (query embedding included)")
    left.set_title("search latency", fontsize=10)
    left.legend(fontsize=7, ncol=2)
    values = [results["sizes"][s].get("recall", {}).get(c, {}).get("recall_at_10", 0.0) for s, c in groups]
    right.bar(range(len(groups)), values, color="#2e9e5b")
    right.axhline(TARGET_RECALL, color="#b42318", linestyle="--", label=f"target ≥ {TARGET_RECALL}")
    right.set_xticks(range(len(groups)))
    right.set_xticklabels([f"{int(s) // 1000}k\n{'50' if c == 'all' else '1'}" for s, c in groups], fontsize=8)
    right.set_ylim(min(0.8, min(values or [1.0]) - 0.05), 1.0)
    right.set_title("dense recall@10 vs exact scan", fontsize=10)
    right.legend(fontsize=8)
    if not any(values):
        right.set_axis_off()
        right.text(0.5, 0.5, "recall not measured in this run", ha="center", transform=right.transAxes)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def code_version() -> dict[str, str]:
    """The commit measured, and whether the retrieval code differed from it (the lead works alongside)."""

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)
        return done.stdout.strip()

    return {
        "commit": git("rev-parse", "--short", "HEAD"),
        "uncommitted": git("status", "--porcelain", "assistant/retrieval", "ingestion", "knowledge"),
    }


def table(results: dict[str, Any]) -> None:
    print(f"{'size':>7} {'scope':<5} {'config':<13} {'p50 ms':>8} {'p95 ms':>8}  stages p50/p95 (ms)")
    for size, figures in results["sizes"].items():
        for scope, configs in figures["latency"].items():
            for name, row in configs.items():
                stages = ", ".join(
                    f"{stage} {value['p50']:.1f}/{value['p95']:.1f}"
                    for stage, value in row["stages"].items()
                    if stage != "total" and value["p95"] > 0.05
                )
                print(f"{size:>7} {scope:<5} {name:<13} {row['p50']:>8.1f} {row['p95']:>8.1f}  {stages}")
        for scope, row in figures.get("recall", {}).items():
            print(
                f"{size:>7} {scope:<5} recall@10 {row['recall_at_10']:.3f} (min {row['min']:.1f}, "
                f"{row['queries_below_target']} queries below {TARGET_RECALL}; exact scan p50 "
                f"{row['exact_scan_ms_p50']:.1f} ms)"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", default="10000,100000", help="chunks per corpus, comma-separated")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rerank-queries", type=int, default=10, help="cap for fused + rerank")
    parser.add_argument("--rebuild", action="store_true", help="build the corpora even if they exist")
    parser.add_argument("--drop", action="store_true", help="delete the bench corpora and stop")
    parser.add_argument("--build-only", action="store_true", help="build (or keep) the corpora and stop")
    parser.add_argument("--configs", default=",".join(CONFIGS), help="which of " + ", ".join(CONFIGS))
    parser.add_argument("--no-recall", action="store_true")
    parser.add_argument("--no-explain", action="store_true")
    parser.add_argument("--out", default="retrieval", help="name of the results files in bench/results")
    args = parser.parse_args()
    sizes = [
        int(s) // (COLLECTIONS * CHUNKS_PER_DOCUMENT) * COLLECTIONS * CHUNKS_PER_DOCUMENT for s in args.sizes.split(",")
    ]
    setup()
    if args.drop:
        for size in sizes:
            started = time.perf_counter()
            drop(size)
            print(f"dropped the {size}-chunk corpus in {time.perf_counter() - started:.1f} s")
        return
    from django.conf import settings

    from providers import registry

    texts = queries(args.queries)
    configs = {name: CONFIGS[name] for name in args.configs.split(",")}
    if "fused+rerank" in configs and not registry.available("rerank"):
        print("no reranker configured (PROVIDER_RERANK): fused + rerank is skipped")
        del configs["fused+rerank"]
    if "fused+rerank" in configs and registry.role_config("chat").provider == "local":
        # The local judge asks the registry for the chat model while the registry builds the
        # judge; registry.get's lock is not reentrant, so build the chat model first.
        registry.chat_model()
    results: dict[str, Any] = {
        "queries": args.queries,
        "targets": {"p95_ms_before_rerank_at_100k": TARGET_P95_MS, "recall_at_10": TARGET_RECALL},
        "settings": {
            "hnsw_ef_search": settings.HNSW_EF_SEARCH,
            "retrieval_depth": settings.RETRIEVAL_DEPTH,
            "rerank_candidates": settings.RERANK_CANDIDATES,
            "embedder": registry.text_embedder().model_id,
            "reranker": registry.role_config("rerank").provider if registry.available("rerank") else "",
        },
        "code": code_version(),
        "sizes": {},
    }
    for size in sizes:
        ids = None if args.rebuild else existing(size)
        build_seconds: dict[str, float] | None = None
        if ids is None:
            print(f"building the {size}-chunk corpus …")
            ids, build_seconds = build(size)
            print("  " + ", ".join(f"{k} {v:.1f} s" for k, v in build_seconds.items()))
            builds = json.loads(BUILDS.read_text()) if BUILDS.exists() else {}
            builds[str(size)] = build_seconds
            BUILDS.parent.mkdir(exist_ok=True)
            BUILDS.write_text(json.dumps(builds, indent=2))
        else:
            print(f"reusing the {size}-chunk corpus (--rebuild to build it again)")
        if args.build_only:
            continue
        user = bench_user(size)
        scopes = {"all": ids, "one": ids[:1]}
        print(f"  latency, {len(texts)} queries …")
        last_build = json.loads(BUILDS.read_text()).get(str(size)) if BUILDS.exists() else None
        figures: dict[str, Any] = {
            "build_seconds": build_seconds or last_build,
            "corpus_reused": build_seconds is None,
            "latency": latency(user, scopes, texts, configs, args.rerank_queries),
        }
        if not args.no_recall and "dense" in configs:
            print("  recall …")
            figures["recall"] = recall(user, scopes, texts)
        if not args.no_explain:
            figures["explain"] = {}
            for scope, name in EXPLAINED:
                if name in configs:
                    slow = figures["latency"][scope][name]["slowest_query"]
                    figures["explain"][f"{scope}/{name}"] = explain(user, scopes[scope], slow, CONFIGS[name])
        results["sizes"][str(size)] = figures
    if args.build_only:
        return
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / f"{args.out}.json").write_text(json.dumps(results, indent=2, ensure_ascii=False))
    plot(results, out / f"{args.out}.png")
    table(results)
    for size, figures in results["sizes"].items():
        for name, found in figures.get("explain", {}).items():
            print(
                f"\n{size} chunks, {name}, slowest query {found['query']!r}: {found['statements']} statements, "
                f"{found['statements_ms']:.1f} ms"
            )
            for key, group in found["by_statement"].items():
                print(f"  {group['count']:>3} x {group['ms']:>7.1f} ms  {key}")
            print(f"  EXPLAIN ANALYZE of the slowest reading chunks ({found['explained_statement_ms']:.1f} ms):")
            lines = found["plan"] if len(found["plan"]) <= 60 else [*found["plan"][:50], "…", *found["plan"][-6:]]
            print("\n".join("    " + line[:240] for line in lines))
    print(f"written: bench/results/{args.out}.json, bench/results/{args.out}.png (full plans in the json)")


if __name__ == "__main__":
    main()
