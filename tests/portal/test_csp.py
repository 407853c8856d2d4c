"""The Content-Security-Policy header (portal/csp.py); the browser tests fail on anything it blocks."""

from __future__ import annotations


def test_pages_carry_a_content_security_policy_and_the_api_docs_do_not(client, alice):
    from portal.csp import POLICY

    client.force_login(alice)
    for url in ("/", "/chat/", "/memory/", "/accounts/email/"):
        response = client.get(url)
        assert response.status_code == 200, url
        assert response["Content-Security-Policy"] == POLICY, url
    assert "script-src 'self';" in POLICY
    assert "Content-Security-Policy" not in client.get("/api/docs/")
    assert "Content-Security-Policy" not in client.get("/api/collections/")
