"""The client's error convention and retry policy: errors say which call failed and how,
a rejected token is fetched again once (the httpx auth flow), and the backoff grows with
jitter up to its cap. The server's answers are injected faults (a token the server
rejects, a 404), so these run without a server."""

from __future__ import annotations

import errno

import httpx
import pytest
import trio

from kg_fuse.client import errors
from kg_fuse.client.api import KgApiClient
from kg_fuse.client.credentials import Credentials
from kg_fuse.fs.kernel.errnos import errno_of
from kg_fuse.retry import Backoff, RetryPolicy

CREDENTIALS = Credentials("kg-fuse", "secret", "tests")


def client(answer) -> KgApiClient:
    return KgApiClient("http://kg.invalid/api", CREDENTIALS,
                       transport=httpx.MockTransport(answer))


def test_a_rejected_token_is_fetched_again_once_and_the_call_succeeds() -> None:
    sent: list[tuple[str, str | None]] = []
    tokens = iter(["expired", "fresh"])

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append((request.url.path, request.headers.get("authorization")))
        if request.url.path.endswith("/auth/oauth/token"):
            return httpx.Response(200, json={"access_token": next(tokens), "expires_in": 600})
        if request.headers["authorization"] == "Bearer expired":
            return httpx.Response(401, json={"detail": "token expired"})
        return httpx.Response(200, json={"epoch": 7})

    async def main() -> tuple[int, int]:
        api = client(answer)
        return (await api.epoch()).epoch, (await api.epoch()).epoch

    assert trio.run(main) == (7, 7)
    assert sent == [("/api/auth/oauth/token", None),
                    ("/api/database/epoch", "Bearer expired"),
                    ("/api/auth/oauth/token", None),
                    ("/api/database/epoch", "Bearer fresh"),
                    ("/api/database/epoch", "Bearer fresh")]  # the token is kept


def test_errors_carry_method_path_and_status_and_map_to_errnos() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/auth/oauth/token"):
            return httpx.Response(200, json={"access_token": "t", "expires_in": 600})
        return httpx.Response(404, json={"detail": "no such concept"})

    async def main() -> None:
        await client(answer).concept("a/b")

    with pytest.raises(errors.NotFound) as raised:
        trio.run(main)
    assert (raised.value.method, raised.value.path, raised.value.status) == (
        "GET", "/query/concept/a%2Fb", 404)
    assert "no such concept" in str(raised.value)
    assert errno_of(raised.value) == errno.ENOENT


def test_credentials_rejected_twice_is_authentication_failed() -> None:
    async def main() -> None:
        await client(lambda request: httpx.Response(401, json={"detail": "bad secret"})
                     ).epoch()

    with pytest.raises(errors.AuthenticationFailed) as raised:
        trio.run(main)
    assert raised.value.status == 401 and errno_of(raised.value) == errno.EACCES


def test_backoff_grows_with_jitter_up_to_its_cap_and_resets() -> None:
    policy = RetryPolicy(initial=1.0, maximum=5.0, jitter=0.5)

    async def main() -> None:
        backoff = Backoff(policy)
        delays = [backoff.failed() for _ in range(5)]
        assert 1.0 <= delays[0] <= 1.5 and 2.0 <= delays[1] <= 2.5
        assert 4.0 <= delays[2] <= 5.0 and delays[3] == delays[4] == 5.0
        assert backoff.waiting
        backoff.succeeded()
        assert not backoff.waiting and backoff.failures == 0

    trio.run(main)
