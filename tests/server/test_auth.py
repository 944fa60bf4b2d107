"""Auth: the token endpoint, 401/403/422 shapes and their order, the credentials file."""

from __future__ import annotations

import contextlib
import errno
import stat
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
import trio

from kg_fuse.client import errors
from kg_fuse.client.api import Epoch, KgApiClient
from kg_fuse.client.credentials import Credentials
from kg_fuse.fs.kernel.errnos import errno_of
from kg_fuse.server.api.auth import replace_clients
from kg_fuse.server.storage.store import Store
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


@pytest.mark.parametrize("number", ["1e309", "NaN", "-1e309"])
def test_a_threshold_json_cannot_carry_is_422(kg_server: KGServer, number: str) -> None:
    with kg_server.client("admin") as admin:
        before = admin.get(THRESHOLD).json()["threshold"]
        response = admin.put(THRESHOLD, content=f'{{"threshold": {number}}}'.encode(),
                             headers={"content-type": "application/json"})
        assert response.status_code == 422, response.text  # 500 before
        assert response.json()["detail"][0]["loc"] == ["body", "threshold"]
        assert admin.get(THRESHOLD).json()["threshold"] == before


@pytest.mark.parametrize("content_type", ["application/x-www-form-urlencoded",
                                          "text/plain"])
def test_a_search_body_that_is_not_json_is_422(kg_server: KGServer,
                                                content_type: str) -> None:
    """A form or text body (curl -d without -H) is told what was wrong, not answered 500."""
    with kg_server.client("user") as http:
        response = http.post("/query/search", content=b"query=compress+data",
                             headers={"content-type": content_type})
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["input"] == "query=compress+data"


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
        made = [client["client_secret"] for _ in range(50)
                for client in replace_clients(store).values()]
    finally:
        store.close()
    assert all(secret.isalnum() and len(secret) >= 43 for secret in made), made
    assert len(set(made)) == len(made)


# -- sign-ins: what the token endpoint gives away, and how fast it may be asked -----------

TOKEN = "/auth/oauth/token"


@pytest.fixture(scope="module")
def sign_in_server(kg_server_clone: Callable[..., KGServer]) -> Iterator[KGServer]:
    server = kg_server_clone()  # its own: these tests use up sign-in attempts
    yield server
    server.stop()


@contextlib.contextmanager
def from_address(server: KGServer, address: str) -> Iterator[httpx.Client]:
    """A client whose connections come from another loopback address (127.0.0.0/8):
    each test has an address of its own to use up."""
    transport = httpx.HTTPTransport(local_address=address)
    with httpx.Client(base_url=server.api_url, transport=transport, timeout=30) as http:
        yield http


def sign_in(http: httpx.Client, client_id: str, client_secret: str) -> httpx.Response:
    return http.post(TOKEN, data={"grant_type": "client_credentials",
                                  "client_id": client_id, "client_secret": client_secret})


def test_unknown_client_ids_answer_as_slowly_as_wrong_secrets(
        sign_in_server: KGServer) -> None:
    """An unknown id answered in 2 ms and a wrong secret in 22-38 ms: which ids exist
    showed in the timing."""
    def took(client_id: str) -> float:
        started = time.perf_counter()
        assert sign_in(http, client_id, "wrong").status_code == 401
        return time.perf_counter() - started

    with from_address(sign_in_server, "127.0.0.6") as http:
        known = [took(sign_in_server.admin["client_id"]) for _ in range(5)]
        unknown = [took(f"kgfuse-admin-{n:012x}") for n in range(5)]
    ratio = statistics.median(unknown) / statistics.median(known)
    assert ratio > 0.3, (known, unknown)


def test_failed_sign_ins_are_throttled_per_client_id_and_address(
        sign_in_server: KGServer) -> None:
    user, admin = sign_in_server.user, sign_in_server.admin
    with from_address(sign_in_server, "127.0.0.3") as http:
        for _ in range(10):
            assert sign_in(http, user["client_id"], "wrong").status_code == 401
        refused = sign_in(http, user["client_id"], "wrong")
        assert refused.status_code == 429
        assert refused.json()["detail"].startswith("Too many failed sign-ins")
        assert int(refused.headers["retry-after"]) >= 1
        # the id's failures are throttled from anywhere; its right secret never is
        with from_address(sign_in_server, "127.0.0.4") as elsewhere:
            assert sign_in(elsewhere, user["client_id"], "wrong").status_code == 429
            assert sign_in(elsewhere, **user).status_code == 200
        assert sign_in(http, **user).status_code == 200
        # an address guessing ids: its failures throttled after 30, for every id (its
        # bucket refills one every 2 s: on a loaded machine a few more get through)
        for n in range(60):
            answer = sign_in(http, f"kgfuse-user-{n:012x}", "wrong")
            if answer.status_code == 429:
                break
            assert answer.status_code == 401
        else:
            pytest.fail("an address guessing client ids was never throttled")
        assert n >= 30 - 13  # its 13 failures above count towards the 30
        assert sign_in(http, admin["client_id"], "wrong").status_code == 429
        assert sign_in(http, **admin).status_code == 200  # a right secret: never refused
    with from_address(sign_in_server, "127.0.0.4") as elsewhere:
        assert sign_in(elsewhere, admin["client_id"], "wrong").status_code == 401

    async def guessing_client_search() -> None:
        api = KgApiClient(sign_in_server.api_url, Credentials(
            user["client_id"], "wrong", "tests"))
        try:
            await api.epoch()
        finally:
            await api.aclose()

    with pytest.raises(errors.TooManyRequests, match="Too many failed sign-ins") as raised:
        trio.run(guessing_client_search)
    assert errno_of(raised.value) == errno.EAGAIN and raised.value.status == 429


def test_nobody_locks_a_client_out_by_failing_its_sign_ins(sign_in_server: KGServer
                                                             ) -> None:
    """Anyone who knows a client id (it is no secret) could fail 11 sign-ins for it, and
    its right secret was refused 429 from then on: a mount started then failed ``ls``
    with EAGAIN. A right secret now always succeeds, from any address, at once."""
    user = sign_in_server.user
    for address in ("127.0.0.1", "127.0.0.7"):  # the mount's own address, too
        with from_address(sign_in_server, address) as guesser:
            for _ in range(40):
                assert sign_in(guesser, user["client_id"], "wrong").status_code in (401, 429)
    for address in ("127.0.0.1", "127.0.0.7", "127.0.0.8"):
        with from_address(sign_in_server, address) as http:
            for _ in range(3):
                assert sign_in(http, **user).status_code == 200

    async def client_search() -> Epoch:
        api = KgApiClient(sign_in_server.api_url, Credentials(
            user["client_id"], user["client_secret"], "tests"))
        try:
            return await api.epoch()
        finally:
            await api.aclose()

    assert trio.run(client_search).epoch >= 0


def test_a_client_that_knows_its_secret_is_never_throttled(sign_in_server: KGServer
                                                           ) -> None:
    with from_address(sign_in_server, "127.0.0.5") as http:
        for _ in range(40):  # more than an address may fail
            assert sign_in(http, **sign_in_server.admin).status_code == 200
