from __future__ import annotations


def test_it_reports_database_and_redis_and_a_missing_worker(client, db, settings):
    response = client.get("/healthz")
    body = response.json()
    assert body["database"]["ok"] is True
    assert "pgvector" in body["database"]["detail"]
    assert body["redis"]["ok"] is True
    # No worker runs in this test (test_stack.py starts one): healthz must say so, with 503.
    assert body["worker"]["ok"] is False
    assert "worker" in body["worker"]["detail"]
    assert response.status_code == 503


def test_it_names_redis_url_when_redis_is_down(client, db, settings, monkeypatch):
    from portal import health

    health.redis_client.cache_clear()
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    settings.REDIS_URL_SOURCE = "REDIS_URL"
    try:
        body = client.get("/healthz").json()
    finally:
        health.redis_client.cache_clear()
    assert body["redis"]["ok"] is False
    assert "REDIS_URL=redis://127.0.0.1:1/0" in body["redis"]["detail"]
    assert body["ok"] is False
