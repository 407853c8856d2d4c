"""The REST API against its own OpenAPI schema, on a running portal: daphne and a Celery
worker as real processes, the schema read from the live `/api/schema/`, and schemathesis's
checks (no server error, every status code, content type, header and body as documented,
invalid input rejected with a 4xx, authentication enforced) over every operation, with valid
and invalid input, authenticated with an API token.

Many of the valid examples name objects that exist (alice's collections, the ingested
document, its pages and picture, her team, conversation, memory, a spare token), so success
responses are checked too, not only 404s. Operations that delete go last, so that the others
still find something. The worker ingests what is uploaded and builds the versions `reindex`
starts (one small document: seconds). Answers (`/api/ask/`) come from a scripted
OpenAI-compatible server (tests/providers/wire.py), in daphne and in the worker's memory
extraction alike: the local chat model would take tens of seconds per question, and what is
checked here is the API's shape, not the answer's quality (tests/assistant covers that with
the real model). Every question still goes through retrieval, the router, the answer stream,
citations and the per-minute limit (its 429 included).

PORTAL_SCHEMA_EXAMPLES sets the examples per operation and mode (10: about 850 requests, under
two minutes on two shared cores). The run is reproducible: the same seed generates the same
requests. It is DEFAULT_SEED unless PORTAL_SCHEMA_SEED names another, or says `random` for an
exploratory run; the seed is printed, and a failure names the command that replays it."""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, Verbosity, given, reject, seed, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from mem0.configs.prompts import ADDITIVE_EXTRACTION_PROMPT
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core import NotSet
from schemathesis.core.failures import AcceptedNegativeData, FailureGroup
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    ignored_auth,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from assistant.answering import prompts
from assistant.memory.service import memories
from assistant.models import Conversation, Message
from ingestion.actions import do_add_document
from knowledge import actions
from knowledge.models import Collection, Document, IndexVersion, Membership, Page, PageImage, Role
from quality.models import EvaluationRun, Feedback, GoldenQuestion
from sources.actions import do_save_source, do_start_sync
from sources.models import Source
from tests.conftest import make_user
from tests.ingestion.files import handbook_pdf
from tests.providers.wire import Reply, chunks, completion, serve
from tests.stack import wait_for

pytestmark = [
    pytest.mark.stack,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("media"),  # before `portal`: the processes are given the test's MEDIA_ROOT
]

EXAMPLES = int(os.environ.get("PORTAL_SCHEMA_EXAMPLES", "10"))
DEFAULT_SEED = 20261201


def chosen_seed(value: str) -> int:
    """PORTAL_SCHEMA_SEED: empty for DEFAULT_SEED, `random` for a new one, else the number."""
    value = value.strip()
    if value == "random":
        return random.randrange(1 << 32)
    return int(value) if value else DEFAULT_SEED


SEED = chosen_seed(os.environ.get("PORTAL_SCHEMA_SEED", ""))
REPLAY = f"PORTAL_SCHEMA_SEED={SEED} PORTAL_SCHEMA_EXAMPLES={EXAMPLES} scripts/test tests/hardening/test_schema.py"
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    negative_data_rejection,
    ignored_auth,
]


def scripted(path: str, body: Any) -> Reply:
    """The chat model: the router picks `direct`, mem0's extraction finds nothing to keep,
    an answer cites the first passage."""
    system = body["messages"][0]["content"]
    if system.startswith(ADDITIVE_EXTRACTION_PROMPT[:200]):
        return Reply(body=completion(json.dumps({"memory": []})))
    if any(system.startswith(text[:12]) for text in prompts.ROUTER.values()):
        return Reply(body=completion('{"strategy": "direct", "reason": "clear"}'))
    answer = "Hotels are capped by city tier [1]."
    return Reply(body=chunks(*re.findall(r".{1,8}", answer)) if body.get("stream") else completion(answer))


@pytest.fixture
def chat_model(monkeypatch):
    """Daphne and the worker started after this (they inherit the environment) answer from it."""
    with serve() as wire:
        wire.responder = scripted
        monkeypatch.setenv("PROVIDER_CHAT", "openai")
        monkeypatch.setenv("BASE_URL_CHAT", f"{wire.url}/v1")
        monkeypatch.setenv("API_KEY_CHAT", "sk-test")
        yield wire


@pytest.fixture
def source_root(monkeypatch, settings, tmp_path):
    """PORTAL_SOURCE_ROOTS, here and in daphne and the worker started after this: a folder
    source of alice's is synced from it (an empty folder: a run that succeeds at once)."""
    root = tmp_path / "shares"
    (root / "handbook").mkdir(parents=True)
    monkeypatch.setenv("PORTAL_SOURCE_ROOTS", str(root))
    settings.SOURCE_ROOTS = [str(root)]
    return root


@pytest.fixture
def portal(source_root, chat_model, live_worker, live_web) -> str:
    return f"http://127.0.0.1:{live_web}"


@pytest.fixture
def objects(alice, bob, team, private_collection, team_collection, tmp_path, source_root) -> dict[str, list[Any]]:
    """alice's things, by kind, for the path parameters; the document ingested by the worker."""
    pdf = handbook_pdf(tmp_path / "handbook.pdf").read_bytes()
    document, _run = do_add_document(private_collection, "handbook.pdf", pdf)
    busy = (Document.Status.PENDING, Document.Status.PROCESSING)
    wait_for(lambda: Document.objects.filter(pk=document.pk).exclude(status__in=busy).exists(), 180, "ingestion")
    document.refresh_from_db()
    assert document.status == Document.Status.READY, document.error
    pages = list(Page.objects.filter(document=document).order_by("number"))
    image = PageImage.objects.filter(page__document=document).first()
    assert image is not None
    conversation = Conversation.objects.create(user=alice, title="Hotels")
    Message.objects.create(conversation=conversation, role="user", content="What are the hotel caps?")
    memory = memories()._mem0.add("alice prefers answers as tables", user_id=str(alice.uid), infer=False)
    spare, _key = actions.do_create_token(alice, "spare")
    erin = make_user("erin")
    guild = actions.do_create_team(erin, "Guild")
    # Two of each: one may be accepted, declined or revoked before the other is tried.
    invitations = [actions.do_invite(guild, alice.email, Role.VIEWER, erin).pk]
    invitations.append(actions.do_invite(actions.do_create_team(erin, "Guild 2"), alice.email, Role.VIEWER, erin).pk)
    team_invitations = [actions.do_invite(team, f"{name}@example.com", Role.VIEWER, alice).pk for name in "xy"]
    golden = GoldenQuestion.objects.create(
        collection=private_collection, key="g-1", question="What are the hotel caps?", lang="en",
        gold=[{"file": "handbook.pdf", "page": 1}],
    )  # fmt: skip
    answer = Message.objects.create(conversation=conversation, role="assistant", content="Capped by city tier.")
    feedback = Feedback.objects.create(
        message=answer, user=alice, rating="down", question="What are the hotel caps?", correct_document=document,
        correct_page=1,
    )  # fmt: skip
    feedback.collections.add(private_collection)
    version = IndexVersion.objects.get(pk=Collection.objects.get(pk=private_collection.pk).active_version_id or 0)
    evaluation = EvaluationRun.objects.create(
        collection=private_collection, version=version, version_number=version.number, status="succeeded"
    )
    handbook = str(source_root / "handbook")
    source = Source(collection=private_collection, name="Handbook share", kind="folder", url=handbook)
    do_save_source(source, actor=alice)
    sync_run = do_start_sync(source, actor=alice)
    return {
        "source": [source.pk],
        "sync_run": [sync_run.pk],
        "collection": [private_collection.pk, team_collection.pk],
        "document": [document.pk],
        "page": [page.pk for page in pages],
        "image": [image.sha256],
        "version": list(IndexVersion.objects.filter(collection=private_collection).values_list("number", flat=True)),
        "team": [team.pk],
        "membership": list(Membership.objects.filter(team=team).values_list("pk", flat=True)),
        "conversation": [conversation.pk],
        "memory": [memory["results"][0]["id"]],
        "token": [spare.pk],
        "invitation": invitations,
        "team_invitation": team_invitations,
        "golden": [golden.pk],
        "feedback": [feedback.pk],
        "message": [answer.pk],
        "evaluation": [evaluation.pk],
    }


# Path parameter -> the kind of object it names; `id` by the path's first segment.
KINDS = {
    "collection_id": "collection",
    "team_pk": "team",
    "team_id": "team",
    "number": "version",
    "sha256": "image",
    "message_id": "message",
    "run_id": "sync_run",
}
RESOURCES = {
    "collections": "collection",
    "documents": "document",
    "pages": "page",
    "teams": "team",
    "conversations": "conversation",
    "memories": "memory",
    "tokens": "token",
    "invitations": "invitation",
    "feedback": "feedback",
    "sources": "source",
}


def kind_of(path: str, name: str) -> str:
    if name != "id":
        return KINDS[name]
    if "/members/" in path:
        return "membership"
    if "/golden-questions/" in path:
        return "golden"
    if "/evaluations/" in path:
        return "evaluation"
    return (
        "team_invitation"
        if "/invitations/" in path and path.startswith("/api/teams/")
        else RESOURCES[path.split("/")[2]]
    )


def existing(operation: Any, objects: dict[str, list[Any]]) -> st.SearchStrategy[dict[str, Any]] | None:
    names = re.findall(r"{(\w+)}", operation.path)
    if not names:
        return None
    return st.fixed_dictionaries({name: st.sampled_from(objects[kind_of(operation.path, name)]) for name in names})


def destructive(operation: Any) -> bool:
    return operation.method.upper() == "DELETE" or operation.path.endswith("/delete-all/")


@dataclass
class Run:
    base: str
    headers: dict[str, str]
    own_token: int
    read_only: set[str]  # properties the schema marks readOnly
    examples: dict[str, int] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)
    nothing_to_negate: list[str] = field(default_factory=list)
    answered: dict[str, set[int]] = field(default_factory=dict)
    lenient: int = 0
    # What was sent, less the ids of the objects (new each run): equal digests, equal runs.
    sent: Any = field(default_factory=hashlib.sha256)

    def call(self, label: str, case: Any) -> None:
        revoking_own = case.method == "DELETE" and case.path_parameters.get("id") == self.own_token
        if case.path.startswith("/api/tokens/") and revoking_own:
            reject()  # revoking the token this run signs in with would end the run
        self.examples[label] = self.examples.get(label, 0) + 1
        body = None if isinstance(case.body, NotSet) else case.body  # NotSet's repr holds its address
        self.sent.update(repr((label, case.media_type, case.query, case.headers, body)).encode())
        response = case.call(base_url=self.base, headers=self.headers, timeout=60)
        self.answered.setdefault(case.operation.label, set()).add(response.status_code)
        transport = {"base_url": self.base, "headers": self.headers, "timeout": 60}
        try:
            case.validate_response(response, checks=CHECKS, headers=self.headers, transport_kwargs=transport)
        except FailureGroup as group:
            if not all(drf_leniency(failure, case, self.read_only) for failure in group.exceptions):
                raise
            self.lenient += 1


def drf_leniency(failure: Any, case: Any, read_only: set[str]) -> bool:
    """Invalid input that DRF accepts on purpose, and nothing else wrong with it: spaces around
    a name are stripped before its length is checked (` ` + 100 letters is a valid 100-letter
    name), a number sent for a text field is kept as its text ("description": -241 is "-241"),
    a form field is text whatever type schemathesis meant (`true` arrives as "true"), and
    read-only fields sent are ignored. Any other mutation in the same request still fails."""
    if not isinstance(failure, AcceptedNegativeData):
        return False
    mutations = [line for line in failure.message.splitlines() if "violates" in line]
    form = (case.media_type or "").startswith(("multipart/form-data", "application/x-www-form-urlencoded"))
    padded = isinstance(case.body, dict) and any(isinstance(v, str) and v != v.strip() for v in case.body.values())
    return bool(mutations) and all(
        ("`maxLength`" in line and padded)
        or re.search(r"\(was string, became (integer|number)\)", line)
        or (form and re.search(r"\(was string, became \w+\)", line))
        or ("violates `not`" in line and line.rsplit("/", 1)[-1].strip() in read_only)
        for line in mutations
    )


def operations(schema: Any) -> Iterator[Any]:
    found = [result.ok() for result in schema.get_all_operations()]
    yield from sorted(found, key=destructive)


def strategies(operation: Any, objects: dict[str, list[Any]]) -> Iterator[tuple[str, Any]]:
    positive = operation.as_strategy(GenerationMode.POSITIVE)
    real = existing(operation, objects)
    if real is not None:  # first: Hypothesis leans towards the first of its choices
        positive = (
            real.flatmap(lambda values: operation.as_strategy(GenerationMode.POSITIVE, path_parameters=values))
            | positive
        )
    yield "positive", positive
    yield "negative", operation.as_strategy(GenerationMode.NEGATIVE)


def exercise(run: Run, label: str, strategy: Any) -> None:
    @seed(SEED)
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        phases=[Phase.explicit, Phase.generate],  # no shrinking: each failure is reported as found
        suppress_health_check=list(HealthCheck),
        verbosity=Verbosity.quiet,
    )
    @given(case=strategy)
    def check(case: Any) -> None:
        run.call(label, case)

    try:
        check()
    except Unsatisfiable:
        # Only path parameters that take any string (a memory's id): no invalid value exists.
        assert label.endswith("[negative]"), label
        run.nothing_to_negate.append(label)
    except (Exception, BaseExceptionGroup) as exc:  # one operation's failure must not hide the others'
        run.failures[label] = "".join(traceback.format_exception_only(exc))[-4000:]


def test_every_operation_conforms_to_the_schema(portal, alice, objects):
    token, key = actions.do_create_token(alice, "schemathesis")
    schema = schemathesis.openapi.from_url(f"{portal}/api/schema/?format=json")
    components = schema.raw_schema["components"]["schemas"].values()
    read_only = {name for c in components for name, p in c.get("properties", {}).items() if p.get("readOnly")}
    run = Run(base=portal, headers={"Authorization": f"Token {key}"}, own_token=token.pk, read_only=read_only)
    started = time.monotonic()
    labels = []
    for operation in operations(schema):
        labels.append(operation.label)
        for mode, strategy in strategies(operation, objects):
            exercise(run, f"{operation.label} [{mode}]", strategy)
    elapsed = time.monotonic() - started
    print(
        f"\n{len(labels)} operations, {sum(run.examples.values())} examples in {elapsed:.0f} s (seed {SEED},"
        f" requests digest {run.sent.hexdigest()[:16]}),"
        f" {run.lenient} accepted by DRF's leniency,"
        f" no invalid input for: {', '.join(run.nothing_to_negate)}"
    )
    assert len(labels) >= 45, labels  # every REST endpoint is in the schema
    # Reads found alice's things (not only 404s), so their success bodies were checked too.
    unread = [label for label in labels if label.startswith("GET ") and not run.answered[label] & {200, 206}]
    assert unread == [], run.answered
    failures = "\n\n".join(f"== {k}\n{v}" for k, v in run.failures.items())
    assert not run.failures, f"seed {SEED}; replay: {REPLAY}\n{failures}"
