"""The harness's two accounts on the platform, with the passwords the environment gives.

- ``admin``: the platform's schema seeds it (role ``platform_admin``) with a password hash
  nobody knows; this sets its password, as the platform's ``set-admin-password.sh`` does.
- ``contributor``: made here with role ``contributor``, as the platform's admin route
  ``POST /users`` makes a user (a ``kg_auth.users`` row whose ``primary_role`` is the role;
  the platform reads a user's permissions from that role and its parents). Not an
  administrator: the admin endpoints answer it 403.

Both sign in with ``POST /auth/oauth/clients/personal`` (username and password). Idempotent:
a hash that already matches its password is left alone, so a second run only checks.

Run with the platform's venv (psycopg2, bcrypt); the environment gives
KG_PLATFORM_PG_PORT, KG_PLATFORM_ADMIN_PASSWORD and KG_PLATFORM_CONTRIBUTOR_PASSWORD
(passwords by the environment, never on a command line that ps shows).
"""

import os

import bcrypt
import psycopg2

ACCOUNTS = (("admin", "platform_admin", "KG_PLATFORM_ADMIN_PASSWORD"),
            ("contributor", "contributor", "KG_PLATFORM_CONTRIBUTOR_PASSWORD"))


def main() -> None:
    conn = psycopg2.connect(host="127.0.0.1", port=int(os.environ["KG_PLATFORM_PG_PORT"]),
                            user="postgres", dbname="knowledge_graph")
    with conn, conn.cursor() as cur:
        for username, role, variable in ACCOUNTS:
            password = os.environ[variable].encode()
            cur.execute("SELECT password_hash, primary_role, disabled FROM kg_auth.users"
                        " WHERE username = %s", (username,))
            row = cur.fetchone()
            if (row and row[1] == role and not row[2] and row[0].startswith("$2")
                    and bcrypt.checkpw(password, row[0].encode())):
                continue
            hashed = bcrypt.hashpw(password, bcrypt.gensalt()).decode()
            cur.execute("INSERT INTO kg_auth.users (username, password_hash, primary_role)"
                        " VALUES (%s, %s, %s) ON CONFLICT (username) DO UPDATE"
                        " SET password_hash = EXCLUDED.password_hash,"
                        " primary_role = EXCLUDED.primary_role, disabled = false",
                        (username, hashed, role))
            print(f"account {username} ({role}): password set")
    conn.close()


if __name__ == "__main__":
    main()
