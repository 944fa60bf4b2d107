"""The ``.meta`` room: everything a control file is, in one folder.

``controls.py`` is the table (per file: its node kind, how it renders, parses and
commits); ``values.py`` the writable values as text; ``status.py`` and
``listing_text.py`` the generated ``status``, ``threshold`` and ``query.toml``;
``session.py`` one open's writes, validated; ``files.py`` the control and scratch files
as node kinds and the commit; ``scratch.py`` editors' temporary files; ``directory.py``
``.meta/`` itself, where a scratch file renamed over a control file commits it.
"""
