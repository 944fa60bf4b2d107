"""Where the client finds its server address and OAuth client credentials."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kg_fuse.client.credentials import Credentials, resolve_connection
from kg_fuse.client.errors import MissingCredentials
from kg_fuse.paths import DEFAULT_API_URL

SERVER_URL = "http://127.0.0.1:9911"
CLI_URL = "https://kg.example.org/api"


@pytest.fixture
def homes(tmp_path, monkeypatch):
    """Isolated XDG config and HOME; no KG_* variables."""
    xdg, home = tmp_path / "xdg", tmp_path / "home"
    xdg.mkdir()
    home.mkdir()
    monkeypatch.setenv("XDG_CONFIG_HOME", str(xdg))
    monkeypatch.setenv("HOME", str(home))
    for var in ("KG_API_URL", "KG_CLIENT_ID", "KG_CLIENT_SECRET"):
        monkeypatch.delenv(var, raising=False)
    return xdg, home


def write_json(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")


def server_file(homes, api_url: str = SERVER_URL) -> None:
    xdg, _ = homes
    write_json(
        xdg / "kg-fuse" / "server-credentials.json",
        {
            "api_url": api_url,
            "admin": {"client_id": "srv-admin", "client_secret": "srv-admin-secret"},
            "user": {"client_id": "srv-user", "client_secret": "srv-user-secret"},
        },
    )


def cli_file(homes, auth: dict, api_url: str | None = CLI_URL) -> None:
    _, home = homes
    data: dict = {"auth": auth}
    if api_url is not None:
        data["api_url"] = api_url
    write_json(home / ".config" / "kg" / "config.json", data)


CLI_AUTH = {"oauth_client_id": "cli-id", "oauth_client_secret": "cli-secret"}


def test_nothing_configured_raises_missing_credentials(homes):
    with pytest.raises(MissingCredentials):
        resolve_connection()


def test_platform_cli_config(homes):
    cli_file(homes, CLI_AUTH)
    conn = resolve_connection()
    assert conn.api_url == CLI_URL
    assert conn.credentials.client_id == "cli-id"
    assert conn.credentials.client_secret == "cli-secret"


def test_platform_cli_config_without_api_url_uses_the_default_server(homes):
    cli_file(homes, CLI_AUTH, api_url=None)
    conn = resolve_connection()
    assert conn.api_url == DEFAULT_API_URL
    assert conn.credentials.client_id == "cli-id"


def test_platform_cli_config_with_other_key_names_is_not_used(homes):
    cli_file(homes, {"client_id": "x", "client_secret": "y"})
    with pytest.raises(MissingCredentials):
        resolve_connection()


@pytest.mark.parametrize("role", ["user", "admin"])
def test_embedded_server_file_by_role(homes, role):
    server_file(homes)
    conn = resolve_connection(role=role)
    assert conn.api_url == SERVER_URL
    assert conn.credentials.client_id == f"srv-{role}"
    assert conn.credentials.client_secret == f"srv-{role}-secret"


def test_default_role_is_user(homes):
    server_file(homes)
    assert resolve_connection().credentials.client_id == "srv-user"


def test_server_file_wins_over_the_platform_cli_for_the_same_server(homes):
    server_file(homes, api_url=SERVER_URL + "/")
    cli_file(homes, CLI_AUTH, api_url=SERVER_URL)
    conn = resolve_connection()
    assert conn.credentials.client_id == "srv-user"
    assert conn.api_url == SERVER_URL


def test_cli_credentials_are_not_sent_to_another_server(homes):
    server_file(homes)  # address comes from here
    cli_file(homes, CLI_AUTH, api_url=CLI_URL)
    conn = resolve_connection()
    assert conn.api_url == SERVER_URL
    assert conn.credentials.client_id == "srv-user"
    # With no usable pair in the server file for this role, the CLI pair (which belongs to
    # CLI_URL) must still not be sent to SERVER_URL.
    with pytest.raises(MissingCredentials):
        resolve_connection(role="auditor")


def test_environment_wins_over_both_files(homes, monkeypatch):
    server_file(homes)
    cli_file(homes, CLI_AUTH, api_url=SERVER_URL)
    monkeypatch.setenv("KG_CLIENT_ID", "env-id")
    monkeypatch.setenv("KG_CLIENT_SECRET", "env-secret")
    conn = resolve_connection()
    assert conn.credentials.client_id == "env-id"
    assert conn.credentials.client_secret == "env-secret"
    assert conn.credentials.source == "environment"


def test_environment_url_wins_and_server_file_credentials_stay_with_their_server(
    homes, monkeypatch
):
    server_file(homes)
    monkeypatch.setenv("KG_API_URL", "http://elsewhere:1/")
    with pytest.raises(MissingCredentials):
        resolve_connection()
    monkeypatch.setenv("KG_CLIENT_ID", "env-id")
    monkeypatch.setenv("KG_CLIENT_SECRET", "env-secret")
    conn = resolve_connection()
    assert conn.api_url == "http://elsewhere:1"
    assert conn.credentials.client_id == "env-id"


def test_half_set_environment_is_ignored(homes, monkeypatch):
    server_file(homes)
    monkeypatch.setenv("KG_CLIENT_ID", "env-id")
    assert resolve_connection().credentials.client_id == "srv-user"


def test_explicit_client_and_secret_file_win(homes, monkeypatch, tmp_path):
    server_file(homes)
    monkeypatch.setenv("KG_CLIENT_ID", "env-id")
    monkeypatch.setenv("KG_CLIENT_SECRET", "env-secret")
    secret = tmp_path / "secret"
    secret.write_text("file-secret\n", encoding="utf-8")
    conn = resolve_connection(client_id="flag-id", client_secret_file=str(secret))
    assert conn.credentials.client_id == "flag-id"
    assert conn.credentials.client_secret == "file-secret"


def test_unreadable_server_file_is_ignored(homes):
    xdg, _ = homes
    (xdg / "kg-fuse").mkdir()
    (xdg / "kg-fuse" / "server-credentials.json").write_text("{not json", encoding="utf-8")
    cli_file(homes, CLI_AUTH)
    assert resolve_connection().credentials.client_id == "cli-id"


def test_secret_never_appears_in_repr(homes):
    server_file(homes)
    conn = resolve_connection()
    assert "srv-user-secret" not in repr(conn.credentials)
    assert "srv-user-secret" not in str(conn.credentials)
    assert "srv-user-secret" not in repr(conn)
    assert "srv-user" in repr(conn.credentials)
    direct = Credentials("id", "hunter2-very-secret", "test")
    assert "hunter2-very-secret" not in repr(direct)
    assert "hunter2-very-secret" not in f"{direct}"


def test_reread_finds_rotated_credentials_of_the_same_server(homes):
    """A mount whose client the server refuses looks again: a rotation rewrote the file."""
    server_file(homes)
    connection = resolve_connection()
    assert connection.reread is not None
    assert connection.reread() == connection.credentials  # nothing newer yet
    xdg, _ = homes
    path = xdg / "kg-fuse" / "server-credentials.json"
    rotated = json.loads(path.read_text())
    rotated["user"] = {"client_id": "srv-user-2", "client_secret": "rotated"}
    write_json(path, rotated)
    found = connection.reread()
    assert (found.client_id, found.client_secret) == ("srv-user-2", "rotated")
    server_file(homes, api_url="http://127.0.0.1:9912")  # another server's now
    assert connection.reread() is None


def test_a_named_data_dir_is_its_own_server_before_the_environment(homes, tmp_path,
                                                                    monkeypatch):
    """``kg-fuse mount --data-dir DIR`` mounts the server started on DIR, with the
    credentials it wrote there, even where the environment names another server."""
    server_file(homes)  # the default data directory's server
    other = tmp_path / "other"
    write_json(other / "server" / "server-credentials.json", {
        "api_url": "http://127.0.0.1:9922",
        "user": {"client_id": "other-user", "client_secret": "other-secret"}})
    monkeypatch.setenv("KG_API_URL", CLI_URL)
    monkeypatch.setenv("KG_CLIENT_ID", "env-id")
    monkeypatch.setenv("KG_CLIENT_SECRET", "env-secret")
    named = resolve_connection(data_dir=str(other))
    assert named.api_url == "http://127.0.0.1:9922"
    assert named.credentials.client_id == "other-user"
    assert resolve_connection().api_url == CLI_URL  # without it: as before
    with pytest.raises(MissingCredentials, match="no server has run on"):
        resolve_connection(data_dir=str(tmp_path / "never-started"))
