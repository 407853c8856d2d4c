"""`manage.py evaluate <questions.jsonl> --collection <id>`: how well retrieval finds the right page.

    manage.py evaluate tests/files/eval/questions.jsonl --collection 7
    manage.py evaluate tests/files/eval/questions.jsonl --ingest <folder> --user alice@example.com

Each question is searched with every pipeline the configured models allow: each channel alone
(lexical, dense, and image where an image embedder is configured), the fused channels without
rerank, and fused + rerank where a reranker is configured. A hit is right when its (document
name, page number) is one of the question's gold pages (see assistant.retrieval.evaluation for
the metrics). The figures go to stdout, <out>.json and a bar chart <out>.png.

--answers: also asks every question through the real answer pipeline (router, retrieval,
the chat model, citations, attachments; follow-ups with their history as a conversation) and
scores the answers (see assistant.answering.evaluation): citation hit@1/5 and MRR, gold
recall, answer-key coverage (all keys, all within the first 200 characters), correct and false
abstention, picture attachments, median answer length, quotes cut mid-word, p50/p95 seconds
per answer, per question type and language.
Where the manifests beside the question file split the files into a calibration half and a
held-out half (eval/README.md), every figure is also given per half, and per half and
language or type.
--subset ci: only the questions marked "ci" (and with --ingest, only the files that the
manifest beside the question file marks "ci"): the short run CI makes.

--user: whose view of the portal is searched (results are limited to what that user may see).
It defaults to the collection's owner, or for a team's collection its first admin; with
--ingest, to the first superuser.
--ingest <folder>: creates a new collection "evaluation" (or "evaluation 2", ...) for the user,
indexes every file of the folder here (no Celery worker needed), and evaluates against it.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.test.utils import override_settings
from django.utils import timezone

from assistant.answering import pipeline as answering
from assistant.answering.evaluation import ANSWER_METRICS, answer_scores, answer_summary, decision_shares, settled_by
from assistant.answering.types import MODES
from assistant.models import Conversation
from assistant.retrieval.evaluation import (
    HALVES,
    METRICS,
    PageKey,
    Question,
    QuestionFileError,
    by_slice,
    first_rank,
    load_questions,
    manifest_entries,
    mean_scores,
    scores,
)
from assistant.retrieval.search import search
from assistant.retrieval.types import CHANNELS, Channel
from knowledge import actions
from knowledge.models import Collection, Document
from portal.models import User
from providers import registry

NDCG_DEPTH = 10  # nDCG@10 needs ten hits whatever --k says
TOP_SHOWN = 5  # hits kept per question in the JSON, to see what came instead of the gold page
COLLECTION_NAME = "evaluation"


@dataclass(frozen=True)
class Pipeline:
    name: str
    channels: tuple[Channel, ...]
    rerank: bool


class Command(BaseCommand):
    help = "Evaluate retrieval on a JSON Lines question file: hit@1/3/5, MRR and nDCG@10 per pipeline."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("questions", type=Path, help="JSON Lines: id, question, lang, type, gold [{file, page}].")
        parser.add_argument("--collection", type=int, help="The id of the collection to search.")
        parser.add_argument("--ingest", type=Path, help="A folder to index into a new collection and search instead.")
        parser.add_argument(
            "--user",
            help="Email (or username) of the user to search as; default: the collection's owner or first admin "
            "(with --ingest: the first superuser).",
        )
        parser.add_argument("--k", type=int, default=10, help="Hits per search and the cut-off of MRR (default 10).")
        parser.add_argument(
            "--out", type=Path, default=Path("bench/results/eval"), help="Writes <out>.json and <out>.png."
        )
        parser.add_argument("--answers", action="store_true", help="Also answer every question and score it.")
        parser.add_argument("--subset", choices=["ci"], help="Only the questions (and files) marked for CI.")
        parser.add_argument(
            "--mode",
            choices=["auto", *MODES],
            help="With --answers: how answers are made (PORTAL_ANSWER_MODE) for this run.",
        )

    def handle(
        self,
        *args: Any,
        questions: Path,
        collection: int | None,
        ingest: Path | None,
        user: str | None,
        k: int,
        out: Path,
        answers: bool = False,
        subset: str | None = None,
        mode: str | None = None,
        **options: Any,
    ) -> None:
        # call_command passes keyword options as given, without argparse's type conversion.
        questions, out = Path(questions), Path(out)
        ingest = Path(ingest) if ingest is not None else None
        if k < 1:
            raise CommandError("--k must be at least 1.")
        if (collection is None) == (ingest is None):
            raise CommandError("Give either --collection <id> or --ingest <folder>.")
        if not questions.is_file():
            raise CommandError(f"The question file {questions} does not exist.")
        try:
            entries = load_questions(questions)
        except QuestionFileError as exc:
            raise CommandError(str(exc)) from None
        files: set[str] | None = None
        if subset == "ci":
            entries = [entry for entry in entries if entry.ci]
            if not entries:
                raise CommandError(f"No question of {questions} is marked for CI.")
            files = ci_files(questions.parent)
        if ingest is not None:
            searcher = find_user(user) if user else first_superuser()
            target = self.ingest(ingest, searcher, files)
        else:
            assert collection is not None
            target = find_collection(collection)
            searcher = find_user(user) if user else default_user(target)
        if not Collection.objects.visible_to(searcher).filter(pk=target.pk).exists():
            raise CommandError(f"{searcher.email or searcher.username} cannot see collection {target.pk}.")
        self.stdout.write(f"Collection {target.pk} ({target.name}), searched as {searcher.email or searcher.username}")
        if any(entry.half for entry in entries):
            self.stdout.write(format_halves(entries))
        started = time.perf_counter()
        report = evaluate(entries, searcher, target, pipelines(), k)
        report["seconds"] = round(time.perf_counter() - started, 1)
        report["questions_file"] = str(questions)
        report["subset"] = subset or "all"
        self.stdout.write(format_report(report))
        if answers:
            with override_settings(ANSWER_MODE=mode or settings.ANSWER_MODE):
                report["answers"] = evaluate_answers(entries, searcher, target, self.stdout.write)
            self.stdout.write(format_answers(report["answers"]))
        json_path, png_path = output_paths(out)
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(report, ensure_ascii=False, indent=2), encoding="utf-8")
        plot(report, png_path)
        self.stdout.write(f"Wrote {json_path} and {png_path}")
        if answers:
            answers_png = png_path.with_name(f"{png_path.stem}-answers.png")
            plot_answers(report["answers"], answers_png)
            self.stdout.write(f"Wrote {answers_png}")

    def ingest(self, folder: Path, user: User, files: set[str] | None = None) -> Collection:
        """A new collection for `user` with every file of `folder` (or only those named in
        `files`), indexed here and now."""
        if not folder.is_dir():
            raise CommandError(f"{folder} is not a folder.")
        target = create_collection(user)
        self.stdout.write(f"Created collection {target.pk} ({target.name}); indexing {folder}")
        started = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="evaluate-") as picked:
            if files is not None:  # the named files only, copied beside each other
                found = [path for path in sorted(folder.rglob("*")) if path.is_file() and path.name in files]
                if {path.name for path in found} != files:
                    raise CommandError(f"{folder} lacks {', '.join(sorted(files - {p.name for p in found}))}.")
                for path in found:
                    shutil.copy2(path, Path(picked) / path.name)
                folder = Path(picked)
            # The folder named on the command line may be synced for this run, wherever it is.
            with override_settings(SOURCE_ROOTS=[*settings.SOURCE_ROOTS, str(folder.absolute())]):
                call_command(
                    "ingest", str(folder), collection=target.pk, inline=True, stdout=self.stdout, stderr=self.stderr
                )
        self.stdout.write(f"Indexed in {time.perf_counter() - started:.1f} s")
        documents = Document.objects.filter(collection=target)
        for failed in documents.filter(status=Document.Status.FAILED):
            self.stderr.write(f"{failed.rel_path} failed: {failed.error}")
        if not documents.filter(status=Document.Status.READY).exists():
            raise CommandError(f"No file of {folder} could be indexed: nothing to evaluate.")
        return target


def pipelines() -> list[Pipeline]:
    """Each channel alone, fused, and fused + rerank: those the configured models allow."""
    channels: list[Channel] = ["lexical", "dense"]
    if registry.available("image_embedding"):
        channels.append("image")
    found = [Pipeline(channel, (channel,), rerank=False) for channel in channels]
    found.append(Pipeline("fused", CHANNELS, rerank=False))
    if registry.available("rerank"):
        found.append(Pipeline("fused+rerank", CHANNELS, rerank=True))
    return found


def evaluate(
    questions: Sequence[Question], user: User, target: Collection, runs: Sequence[Pipeline], k: int
) -> dict[str, Any]:
    """Search every question with every pipeline; the report as it goes to JSON."""
    depth = max(k, NDCG_DEPTH)
    rows: dict[str, list[dict[str, float]]] = {run.name: [] for run in runs}
    millis: dict[str, list[float]] = {run.name: [] for run in runs}
    details = []
    questions = [question for question in questions if question.answerable]  # no gold page to find
    for question in questions:
        detail: dict[str, Any] = {
            "id": question.id,
            "question": question.question,
            "lang": question.lang,
            "type": question.type,
            "half": question.half,
            "gold": [{"file": file, "page": page} for file, page in sorted(question.gold)],
        }
        for run in runs:
            results = search(
                user, question.question, collection_ids=[target.pk], k=depth, channels=run.channels, rerank=run.rerank
            )
            ranked: list[PageKey] = [(hit.document_name, hit.page_number) for hit in results.hits]
            rows[run.name].append(scores(ranked, question.gold, k))
            millis[run.name].append(results.timings.get("total", 0.0))
            detail[run.name] = {
                "rank": first_rank(ranked, question.gold),
                "top": [{"file": file, "page": page} for file, page in ranked[:TOP_SHOWN]],
                "reranker": results.reranker,
            }
        details.append(detail)
    return {
        "created_at": timezone.now().isoformat(timespec="seconds"),
        "collection": target.pk,
        "user": user.email or user.username,
        "k": k,
        "questions": len(questions),
        "pipelines": [run.name for run in runs],
        "metrics": list(METRICS),
        "summary": {run.name: summary(questions, rows[run.name]) for run in runs},
        "mean_ms": {name: sum(values) / len(values) if values else 0.0 for name, values in millis.items()},
        "per_question": details,
    }


def evaluate_answers(
    questions: Sequence[Question], user: User, target: Collection, say: Callable[[str], object]
) -> dict[str, Any]:
    """Ask every question as `user` through the answer pipeline, as /api/ask/ does; a
    follow-up's history becomes the conversation it is asked in. Memory is off: each answer
    stands on the documents alone, and nothing is queued for a worker."""
    rows: list[dict[str, float | None]] = []
    seconds: list[float] = []
    evidence_seconds: list[float | None] = []
    trails: list[list[dict[str, Any]]] = []
    details = []
    with override_settings(MEMORY_ENABLED=False):
        for number, question in enumerate(questions, start=1):
            conversation = conversation_for(user, target, question) if question.history else None
            started = time.perf_counter()
            session = answering.start(
                user,
                question.question,
                collection_ids=[target.pk],
                conversation_id=conversation.pk if conversation else None,
            )
            result = answering.collect(answering.answer_events(session))
            elapsed = time.perf_counter() - started
            row = answer_scores(question, result)
            rows.append(row)
            seconds.append(elapsed)
            shown = result["timings"].get("evidence") if result["evidence"] else None
            evidence_seconds.append(round(shown / 1000, 3) if shown is not None else None)
            trails.append(result["decisions"])
            say(f"[{number}/{len(questions)}] {question.id} {elapsed:.1f} s {_row_line(row)}")
            details.append(
                {
                    "id": question.id,
                    "type": question.type,
                    "lang": question.lang,
                    "half": question.half,
                    "question": question.question,
                    "seconds": round(elapsed, 2),
                    "answer": result["answer"],
                    "abstain": result["abstain"],
                    "strategy": result["strategy"],
                    "rewrite": result["rewrite"],
                    "plan": result["plan"],
                    "citations": [{"file": c["file"], "page": c["page"]} for c in result["citations"]],
                    "attachments": [{"file": a["file"], "page": a["page"]} for a in result["attachments"]],
                    "error": result["error"],
                    "timings": result["timings"],
                    "checks": result.get("checks", {}),
                    "judge": result.get("judge"),
                    "mode": result["mode"],
                    "evidence": [item["quote"] for item in result["evidence"]],
                    "settled_by": settled_by(result["decisions"]),
                    "decisions": result["decisions"],
                    "scores": row,
                }
            )
    return {
        "questions": len(questions),
        "metrics": list(ANSWER_METRICS),
        "mode": settings.ANSWER_MODE,
        "summary": answer_summary(questions, rows, seconds, evidence_seconds),
        "decisions": decision_shares(questions, rows, trails, [bool(item["abstain"]) for item in details]),
        "per_question": details,
    }


def _row_line(row: dict[str, float | None]) -> str:
    return " ".join(f"{metric}={value:.2f}" for metric, value in row.items() if value is not None)


def conversation_for(user: User, target: Collection, question: Question) -> Conversation:
    """A conversation holding the question's history, as if the user had asked it here."""
    return Conversation.with_history(user, target, question.history[0][1], question.history)


def ci_files(folder: Path) -> set[str]:
    """The file names that the manifests beside the question file (manifest*.jsonl) mark "ci"."""
    names = {entry["file"] for entry in manifest_entries(folder) if entry.get("ci") is True}
    if not names:
        raise CommandError(f"No manifest*.jsonl in {folder} marks a file for CI.")
    return names


def summary(questions: Sequence[Question], rows: Sequence[dict[str, float]]) -> dict[str, Any]:
    """Mean scores overall, per language and per question type (those that occur), and per
    half where the questions have halves (by_slice)."""
    return by_slice(questions, lambda picked: mean_scores([rows[i] for i in picked]))


def format_halves(questions: Sequence[Question]) -> str:
    """How many questions each half holds, per question type and per language."""
    kinds = list(dict.fromkeys(question.type for question in questions))
    langs = sorted({question.lang for question in questions})
    columns = [*kinds, *langs, "all"]
    lines = ["Questions per half:", f"{'':<14}" + "".join(f"{column:>13}" for column in columns)]
    for half in (*HALVES, ""):
        picked = [question for question in questions if question.half == half]
        if not picked:
            continue
        counts = [sum(column in (q.type, q.lang) for q in picked) for column in columns[:-1]]
        lines.append(f"{half or '(none)':<14}" + "".join(f"{count:>13}" for count in [*counts, len(picked)]))
    return "\n".join(lines)


REPORT_TABLES = (
    ("Overall", None),
    ("By language", "by_lang"),
    ("By question type", "by_type"),
    ("By half", "by_half"),
    ("By half and language", "by_half_lang"),
    ("By half and question type", "by_half_type"),
)


def format_report(report: dict[str, Any]) -> str:
    """Plain tables: overall, per language, per question type, and where the questions have
    halves, per half, per half and language, per half and question type."""
    lines = [f"\n{report['questions']} questions, k={report['k']}"]
    for title, key in REPORT_TABLES:
        if key is not None and not all(key in report["summary"][name] for name in report["pipelines"]):
            continue
        tables = [
            {"all": report["summary"][name]["overall"]} if key is None else report["summary"][name][key]
            for name in report["pipelines"]
        ]
        width = max([10, *(len(label) + 2 for slices in tables for label in slices)])
        header = f"{'pipeline':<14}{'slice':<{width}}{'n':>4}" + "".join(f"{metric:>9}" for metric in METRICS)
        lines += ["", title, header, "-" * len(header)]
        for name, slices in zip(report["pipelines"], tables, strict=True):
            for label, values in slices.items():
                cells = "".join(f"{values[metric]:>9.3f}" for metric in METRICS)
                lines.append(f"{name:<14}{label:<{width}}{int(values['n']):>4}{cells}")
    timing = ", ".join(f"{name} {ms:.0f} ms" for name, ms in report["mean_ms"].items())
    lines += ["", f"Mean search time: {timing}; {report.get('seconds', 0):.1f} s in all"]
    return "\n".join(lines)


def answer_slices(answers: dict[str, Any], crossed: bool = False) -> dict[str, dict[str, Any]]:
    """The answer summary's slices by label: all, then each language, then each type, then
    each half where there are halves; `crossed`: then each half's languages and types."""
    summary_ = answers["summary"]
    slices = {"all": summary_["overall"], **summary_["by_lang"], **summary_["by_type"], **summary_.get("by_half", {})}
    if crossed:
        slices |= {**summary_.get("by_half_lang", {}), **summary_.get("by_half_type", {})}
    return slices


def format_answers(answers: dict[str, Any]) -> str:
    """The answer metrics: overall, per language and per question type, and where there are
    halves per half, per half and language, per half and type ("-": does not apply); then
    each settling decision's share of the answers and of the right ones."""
    shown = [*ANSWER_METRICS, "median_chars", "p50_s", "p95_s", "evidence_p50_s", "evidence_p95_s"]
    slices = answer_slices(answers, crossed=True)
    width = max(14, *(len(label) + 2 for label in slices))
    columns = [max(9, len(metric) + 2) for metric in shown]
    header = f"{'slice':<{width}}{'n':>4}" + "".join(f"{m:>{c}}" for m, c in zip(shown, columns, strict=True))
    lines = [f"\nAnswers: {answers['questions']} questions", header, "-" * len(header)]
    for label, values in slices.items():
        cells = "".join(
            f"{'-':>{c}}" if values.get(m) is None else f"{values[m]:>{c}.{0 if m == 'median_chars' else 3}f}"
            for m, c in zip(shown, columns, strict=True)
        )
        lines.append(f"{label:<{width}}{values['n']:>4}{cells}")
    if answers.get("decisions"):
        lines += ["", f"Settled by (mode {answers.get('mode', '')}): answers, right, answerable"]
        for settled, counts in answers["decisions"].items():
            lines.append(f"  {settled:<40}{counts['n']:>5}{counts['right']:>6}{counts['answerable']:>6}")
    return "\n".join(lines)


def plot(report: dict[str, Any], path: Path) -> None:
    """Grouped bars: every metric by pipeline, then hit@5 per language and per question type."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = report["pipelines"]
    panels = [
        ("All metrics", {metric: {n: report["summary"][n]["overall"][metric] for n in names} for metric in METRICS}),
        ("hit@5 by language", _slices(report, "by_lang")),
        ("hit@5 by question type", _slices(report, "by_type")),
    ]
    figure, axes = plt.subplots(1, len(panels), figsize=(16, 4.5))
    width = 0.8 / max(len(names), 1)
    for axis, (title, groups) in zip(axes, panels, strict=True):
        labels = list(groups)
        for index, name in enumerate(names):
            positions = [g + (index - (len(names) - 1) / 2) * width for g in range(len(labels))]
            axis.bar(positions, [groups[label][name] for label in labels], width, label=name)
        axis.set_xticks(range(len(labels)), labels)
        axis.set_ylim(0, 1.05)
        axis.set_title(title)
        axis.grid(axis="y", alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="lower center", ncol=max(len(names), 1))
    figure.suptitle(f"Retrieval evaluation: {report['questions']} questions, collection {report['collection']}")
    figure.tight_layout(rect=(0, 0.07, 1, 1))
    figure.savefig(path, dpi=110)
    plt.close(figure)


PLOTTED_ANSWER_METRICS = ("cite@5", "gold_recall", "key_coverage", "abstain_correct", "abstain_false")


def plot_answers(answers: dict[str, Any], path: Path) -> None:
    """Bars of the main answer metrics per question type and per language, and the seconds
    per answer (p50, p95) beside them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    slices = answer_slices(answers)
    labels = list(slices)
    figure, (bars, times) = plt.subplots(1, 2, figsize=(16, 4.5), gridspec_kw={"width_ratios": [3, 1]})
    width = 0.8 / len(PLOTTED_ANSWER_METRICS)
    for index, metric in enumerate(PLOTTED_ANSWER_METRICS):
        positions = [g + (index - (len(PLOTTED_ANSWER_METRICS) - 1) / 2) * width for g in range(len(labels))]
        bars.bar(positions, [slices[label][metric] or 0.0 for label in labels], width, label=metric)
    bars.set_xticks(range(len(labels)), labels)
    bars.set_ylim(0, 1.05)
    bars.grid(axis="y", alpha=0.3)
    bars.legend(loc="upper center", ncol=len(PLOTTED_ANSWER_METRICS), fontsize="small")
    bars.set_title("Answers (a missing bar: does not apply)")
    times.bar([0, 1], [slices["all"]["p50_s"] or 0.0, slices["all"]["p95_s"] or 0.0])
    times.set_xticks([0, 1], ["p50", "p95"])
    times.set_ylabel("seconds per answer")
    times.set_title("Time per answer")
    figure.suptitle(f"Answer evaluation: {answers['questions']} questions")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def _slices(report: dict[str, Any], key: str) -> dict[str, dict[str, float]]:
    names = report["pipelines"]
    labels = list(report["summary"][names[0]][key]) if names else []
    return {label: {n: report["summary"][n][key][label]["hit@5"] for n in names} for label in labels}


def output_paths(out: Path) -> tuple[Path, Path]:
    """<out>.json and <out>.png; an --out given with either suffix means the same."""
    stem = out.with_suffix("") if out.suffix in (".json", ".png") else out
    return stem.parent / f"{stem.name}.json", stem.parent / f"{stem.name}.png"


def find_collection(pk: int) -> Collection:
    target = Collection.objects.filter(pk=pk).first()
    if target is None:
        raise CommandError(f"No collection has the id {pk}.")
    return target


def find_user(name: str) -> User:
    """The user with this email (unique, case-insensitive), or else this username."""
    model = get_user_model()
    found: User | None = model.objects.filter(email__iexact=name).first() or model.objects.filter(username=name).first()
    if found is None:
        raise CommandError(f"No user has the email or username {name!r}.")
    return found


def default_user(target: Collection) -> User:
    """The collection's owner, or for a team's collection the team's first admin."""
    found = target.first_admin()
    if found is None:
        raise CommandError(f"Collection {target.pk} has no owner or team admin to search as: give --user.")
    return found


def first_superuser() -> User:
    found: User | None = get_user_model().objects.filter(is_superuser=True, is_active=True).order_by("pk").first()
    if found is None:
        raise CommandError("--ingest needs --user <email>: there is no superuser to default to.")
    return found


def create_collection(user: User) -> Collection:
    """A collection named "evaluation", or "evaluation 2", ... when that name is taken."""
    for number in range(1, 1000):
        name = COLLECTION_NAME if number == 1 else f"{COLLECTION_NAME} {number}"
        try:
            return actions.do_create_collection(user, name)
        except ValidationError:
            continue
    raise CommandError(f"Could not find a free collection name for {user}.")
