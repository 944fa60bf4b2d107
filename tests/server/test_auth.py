"""Auth: the token endpoint, 401/403/422 shapes and their order, the credentials file."""

from __future__ import annotations

import stat
from pathlib import Path

import httpx
import pytest

from kg_fuse.server.auth import create_client
from kg_fuse.server.store import Store
from tests.helpers.server import KGServer

THRESHOLD = "/admin/config/search-threshold"


def test_token_endpoint_issues_bearer_tokens(kg_server: KGServer) -> None:
    response = httpx.post(f"{kg_server.api_url}/auth/oauth/token",
                          data={"grant_type": "client_credentials", **kg_server.user})
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"access_token", "token_type", "expires_in", "refresh_token", "scope"}
    assert body["token_type"] == "Bearer" and body["expires_in"] == 3600
    assert body["refresh_token"] is None and isinstance(body["scope"], str)


@pytest.mark.parametrize("form", [
    {"grant_type": "client_credentials"},
    {"client_id": "x", "client_secret": "y"},
    {},
])
def test_token_endpoint_missing_fields_is_400(kg_server: KGServer, form: dict) -> None:
    response = httpx.post(f"{kg_server.api_url}/auth/oauth/token", data=form)
    assert response.status_code == 400
    assert isinstance(response.json()["detail"], str)


def test_token_endpoint_bad_credentials_is_401(kg_server: KGServer) -> None:
    form = {"grant_type": "client_credentials", "client_id": kg_server.user["client_id"],
            "client_secret": "wrong"}
    response = httpx.post(f"{kg_server.api_url}/auth/oauth/token", data=form)
    assert response.status_code == 401
    assert response.json() == {"detail": "Invalid client credentials"}


def test_token_endpoint_json_body_is_422(kg_server: KGServer) -> None:
    response = httpx.post(f"{kg_server.api_url}/auth/oauth/token",
                          json={"grant_type": "client_credentials", **kg_server.user})
    assert response.status_code == 422
    assert isinstance(response.json()["detail"], list)


def test_health_needs_no_token(kg_server: KGServer) -> None:
    body = httpx.get(f"{kg_server.api_url}/health").json()
    assert body["status"] == "healthy" and body["concepts"] > 100


@pytest.mark.parametrize("method,path", [
    ("GET", "/database/epoch"), ("GET", "/catalog/children"), ("POST", "/query/search"),
    ("GET", "/query/concept/x"), ("GET", "/ontology/x"), ("GET", "/documents/x/content"),
    ("GET", THRESHOLD), ("GET", "/jobs/job_000000000000"),
])
def test_missing_token_is_401_not_authenticated(kg_server: KGServer, method: str,
                                                path: str) -> None:
    response = httpx.request(method, f"{kg_server.api_url}{path}")
    assert response.status_code == 401
    assert response.json() == {"detail": "Not authenticated"}
    assert response.headers["www-authenticate"] == "Bearer"


def test_bad_token_is_401_could_not_validate(kg_server: KGServer) -> None:
    response = httpx.get(f"{kg_server.api_url}/database/epoch",
                         headers={"Authorization": "Bearer not-a-token"})
    assert response.status_code == 401
    assert response.json() == {"detail": "Could not validate credentials"}
    assert response.headers["www-authenticate"] == "Bearer"


def test_user_on_admin_endpoints_is_403(kg_server: KGServer) -> None:
    with kg_server.client("user") as http:
        got = http.get(THRESHOLD)
        put = http.put(THRESHOLD, json={"threshold": 0.5})
    assert got.status_code == 403
    assert got.json() == {"detail": "Permission denied: read on search_config"}
    assert put.status_code == 403
    assert put.json() == {"detail": "Permission denied: write on search_config"}


def test_check_order_is_401_then_403_then_422(kg_server: KGServer) -> None:
    url = f"{kg_server.api_url}{THRESHOLD}"
    broken = {"content": b"{not json", "headers": {"content-type": "application/json"}}
    # no token + malformed body: 401 (auth is checked before the body is parsed)
    assert httpx.put(url, **broken).status_code == 401
    search = f"{kg_server.api_url}/query/search"
    assert httpx.post(search, json={"query": "x", "limit": 101}).status_code == 401
    # user + invalid body on an admin endpoint: 403
    user = {"Authorization": f"Bearer {kg_server.token('user')}"}
    assert httpx.put(url, json={"threshold": 7}, headers=user).status_code == 403
    assert httpx.put(url, content=b"{", headers={**user, **broken["headers"]}
                     ).status_code == 403
    # admin + invalid body: 422
    admin = {"Authorization": f"Bearer {kg_server.token('admin')}"}
    response = httpx.put(url, json={"threshold": 7}, headers=admin)
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "threshold"]


def test_admin_reads_the_threshold_setting(kg_server: KGServer) -> None:
    with kg_server.client("admin") as http:
        body = http.get(THRESHOLD).json()
    assert body["key"] == "search_default_similarity_threshold"
    assert body["fallback"] == 0.6
    assert isinstance(body["threshold"], float)


def test_credentials_file_is_private_and_complete(kg_server: KGServer) -> None:
    mode = stat.S_IMODE(kg_server.credentials_path.stat().st_mode)
    assert mode == 0o600
    creds = kg_server.credentials
    assert creds["api_url"] == kg_server.api_url
    for who in ("admin", "user"):
        assert set(creds[who]) == {"client_id", "client_secret"}
    assert creds["admin"]["client_id"] != creds["user"]["client_id"]
    # only hashes in the store: the plain secret appears nowhere in the database file
    raw = kg_server.db_path.read_bytes()
    assert creds["user"]["client_secret"].encode() not in raw


def test_secrets_pass_as_command_line_arguments(tmp_path: Path) -> None:
    """A secret is pasted after ``--client-secret`` (the platform's own client takes it
    so): one starting with "-" is read as an option and the mount refuses to start.
    Every secret is letters and digits only."""
    store = Store(tmp_path / "kg.sqlite3")
    try:
        made = [create_client(store, "user", False)[1] for _ in range(100)]
    finally:
        store.close()
    assert all(secret.isalnum() and len(secret) >= 43 for secret in made), made
    assert len(set(made)) == len(made)
