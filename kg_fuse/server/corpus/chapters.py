"""Which ontology a standard-library module belongs to.

The grouping follows the chapters of the Python Library Reference (3.11): a module goes
to the chapter that documents its top-level package (``email.utils`` follows ``email``,
``posixpath`` is ``os.path``); anything the table does not name goes to
:data:`FALLBACK_CHAPTER`.
"""

from __future__ import annotations

FALLBACK_CHAPTER = "Other Standard Library Modules"

CHAPTERS: dict[str, tuple[str, ...]] = {
    "Built-in Functions, Types and Exceptions": ("builtins",),
    "Text Processing Services": (
        "string", "re", "difflib", "textwrap", "unicodedata", "stringprep", "readline",
        "rlcompleter",
    ),
    "Binary Data Services": ("struct", "codecs"),
    "Data Types": (
        "datetime", "zoneinfo", "calendar", "collections", "heapq", "bisect", "array",
        "weakref", "types", "copy", "pprint", "reprlib", "enum", "graphlib",
    ),
    "Numeric and Mathematical Modules": (
        "numbers", "math", "cmath", "decimal", "fractions", "random", "statistics",
    ),
    "Functional Programming Modules": ("itertools", "functools", "operator"),
    "File and Directory Access": (
        "pathlib", "os.path", "posixpath", "ntpath", "genericpath", "fileinput", "stat",
        "filecmp", "tempfile", "glob", "fnmatch", "linecache", "shutil",
    ),
    "Data Persistence": ("pickle", "copyreg", "shelve", "marshal", "dbm", "sqlite3"),
    "Data Compression and Archiving": ("zlib", "gzip", "bz2", "lzma", "zipfile", "tarfile"),
    "File Formats": ("csv", "configparser", "tomllib", "netrc", "plistlib"),
    "Cryptographic Services": ("hashlib", "hmac", "secrets"),
    "Generic Operating System Services": (
        "os", "io", "time", "argparse", "getopt", "logging", "getpass", "curses",
        "platform", "errno", "ctypes",
    ),
    "Concurrent Execution": (
        "threading", "multiprocessing", "concurrent", "subprocess", "sched", "queue",
        "contextvars",
    ),
    "Networking and Interprocess Communication": (
        "asyncio", "socket", "ssl", "select", "selectors", "signal", "mmap",
    ),
    "Internet Data Handling": (
        "email", "json", "mailbox", "mimetypes", "base64", "binascii", "quopri",
    ),
    "Structured Markup Processing Tools": ("html", "xml"),
    "Internet Protocols and Support": (
        "webbrowser", "wsgiref", "urllib", "http", "ftplib", "poplib", "imaplib",
        "smtplib", "uuid", "socketserver", "xmlrpc", "ipaddress",
    ),
    "Multimedia Services": ("wave", "colorsys"),
    "Internationalization": ("gettext", "locale"),
    "Program Frameworks": ("turtle", "cmd", "shlex"),
    "Graphical User Interfaces with Tk": ("tkinter",),
    "Development Tools": ("typing", "pydoc", "doctest", "unittest"),
    "Debugging and Profiling": (
        "bdb", "faulthandler", "pdb", "timeit", "trace", "tracemalloc", "cProfile",
        "profile", "pstats",
    ),
    "Software Packaging and Distribution": ("venv", "zipapp"),
    "Python Runtime Services": (
        "sys", "sysconfig", "warnings", "dataclasses", "contextlib", "abc",
        "atexit", "traceback", "gc", "inspect", "site",
    ),
    "Custom Python Interpreters": ("code", "codeop"),
    "Importing Modules": ("zipimport", "pkgutil", "modulefinder", "runpy", "importlib"),
    "Python Language Services": (
        "ast", "symtable", "token", "keyword", "tokenize", "tabnanny", "pyclbr",
        "py_compile", "compileall", "dis", "pickletools",
    ),
    "Unix Specific Services": (
        "posix", "pwd", "grp", "termios", "tty", "pty", "fcntl", "resource", "syslog",
    ),
    "Superseded Modules": (
        "optparse", "imp", "aifc", "asynchat", "asyncore", "audioop", "cgi", "cgitb",
        "chunk", "crypt", "imghdr", "mailcap", "msilib", "nis", "nntplib", "ossaudiodev",
        "pipes", "smtpd", "sndhdr", "spwd", "sunau", "telnetlib", "uu", "xdrlib",
        "distutils",
    ),
}

_BY_MODULE = {module: chapter for chapter, modules in CHAPTERS.items() for module in modules}


def chapter_of(module: str) -> str:
    """The Library Reference chapter of a dotted module name (longest prefix wins)."""
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        chapter = _BY_MODULE.get(".".join(parts[:end]))
        if chapter is not None:
            return chapter
    return FALLBACK_CHAPTER
