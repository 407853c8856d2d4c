"""The OpenAI-compatible endpoint with the `openai` Python client against a real daphne:
models are the collections the token's user may read; answers, streamed and not, in Chinese
and English, are /api/ask/'s answers with their citations as footnotes; another user's token
finds no such model; errors come in OpenAI's shape."""

from __future__ import annotations

import re

import httpx
import openai
import pytest

from knowledge import actions
from tests.assistant.chat_files import files, ingest_files

pytestmark = [pytest.mark.stack, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("media")]
QUESTIONS = ["报销单须在出差结束后多少天内提交？", "How many days of paid annual leave per year?"]


def client_for(port: int, user) -> tuple[openai.OpenAI, str]:
    _token, key = actions.do_create_token(user, "openai client")
    return openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=key, max_retries=0), key


def without_footnotes(text: str) -> str:
    return re.sub(r"\n\n(\[\d+\] [^\n]*\n?)+$", "", text)


def test_answers_equal_the_apis_with_citations_as_footnotes(web, alice, private_collection):
    ingest_files(private_collection, files())
    client, key = client_for(web, alice)
    models = [model.id for model in client.models.list()]
    assert models == ["kb-all", f"kb-{private_collection.pk}"]
    model = f"kb-{private_collection.pk}"
    for question in QUESTIONS:
        asked = httpx.post(
            f"http://127.0.0.1:{web}/api/ask/",
            json={"question": question, "collections": [private_collection.pk]},
            headers={"Authorization": f"Bearer {key}"},
            timeout=120,
        ).json()
        completion = client.chat.completions.create(model=model, messages=[{"role": "user", "content": question}])
        message = completion.choices[0].message
        content = message.content or ""
        assert without_footnotes(content) == asked["answer"], (content, asked["answer"])
        citations = message.model_extra["citations"]  # type: ignore[index]
        assert [c["page"] for c in citations] == [c["page"] for c in asked["citations"]]
        for citation in citations:
            assert f"[{citation['n']}] {citation['file']}, {citation['place']}" in content

        streamed = client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": question}], stream=True
        )
        parts = []
        last = None
        for piece in streamed:
            parts.append(piece.choices[0].delta.content or "")
            last = piece
        assert "".join(parts) == content
        assert last is not None
        assert last.choices[0].finish_reason == "stop"
        assert last.model_extra["citations"] == citations  # type: ignore[index]


def test_earlier_messages_are_the_history(web, alice, private_collection):
    ingest_files(private_collection, files())
    client, _key = client_for(web, alice)
    completion = client.chat.completions.create(
        model="kb-all",
        messages=[
            {"role": "system", "content": "Answer briefly."},
            {"role": "user", "content": "Falcon 路由器的保修期是多久？"},
            {"role": "assistant", "content": "Falcon 路由器的保修期为两年。"},
            {"role": "user", "content": "Heron 交换机呢？"},
        ],
    )
    assert "五年" in (completion.choices[0].message.content or "")


def test_another_users_token_finds_no_such_model_and_errors_are_openais(web, alice, bob, private_collection):
    bobs, _key = client_for(web, bob)
    assert [model.id for model in bobs.models.list()] == ["kb-all"]
    with pytest.raises(openai.NotFoundError) as missing:
        bobs.chat.completions.create(
            model=f"kb-{private_collection.pk}", messages=[{"role": "user", "content": "年假有几天？"}]
        )
    assert missing.value.body["code"] == "model_not_found"  # type: ignore[index]
    with pytest.raises(openai.NotFoundError):
        bobs.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(openai.BadRequestError) as long:
        bobs.chat.completions.create(model="kb-all", messages=[{"role": "user", "content": "q" * 2_001}])
    assert "2000" in long.value.body["message"] or "2,000" in long.value.body["message"]  # type: ignore[index]
    with pytest.raises(openai.BadRequestError):
        bobs.chat.completions.create(model="kb-all", messages=[{"role": "assistant", "content": "hi"}])
    nobody = openai.OpenAI(base_url=f"http://127.0.0.1:{web}/v1", api_key="kp_wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        nobody.models.list()
