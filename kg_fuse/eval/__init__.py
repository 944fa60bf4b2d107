"""``kg-fuse eval``: measure search quality against a running server (ADR-508 style).

:mod:`sets` reads query sets, :mod:`runner` asks the server, :mod:`report` prints the
table or JSON, :mod:`plot` draws it, :mod:`commands` wires the subcommand.
"""
