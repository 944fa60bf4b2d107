"""Worker: import standard-library modules and describe their public API as JSON lines.

Runs only as ``python -I -m kg_fuse.server.corpus.introspect MODULE...`` in a child
process (see :mod:`kg_fuse.server.corpus.live`), never inside the server: importing a
module runs its code. Standard output is pointed at /dev/null before any import, so a
module that prints cannot corrupt the protocol; results go to the original stdout:

    {"begin": "zlib"}
    {"module": "zlib", "doc": "...", "all": [...] | null, "objects": [...]}

Each object: ``name`` (as exported), ``key`` (where it is really defined, for
de-duplicating re-exports), ``home`` (its ``__module__``), ``kind``, ``signature``,
``doc`` and, for classes, ``members`` of the same shape. This file imports nothing from
kg_fuse and only the standard library.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import sys
import types
import warnings

CALLABLE_TYPES = (types.FunctionType, types.BuiltinFunctionType, types.MethodType,
                  types.MethodDescriptorType, types.ClassMethodDescriptorType,
                  types.WrapperDescriptorType, classmethod, staticmethod, property,
                  types.MethodWrapperType)


def _doc(obj: object) -> str:
    raw = obj.__dict__.get("__doc__") if isinstance(obj, type) else getattr(obj, "__doc__",
                                                                           None)
    return inspect.cleandoc(raw) if isinstance(raw, str) else ""


def _signature(name: str, obj: object) -> str:
    target = obj.__func__ if isinstance(obj, classmethod | staticmethod) else obj
    if isinstance(target, property):
        return ""
    try:
        text = str(inspect.signature(target))
    except (TypeError, ValueError, RuntimeError):
        return ""
    if isinstance(obj, type) and text in ("(*args, **kwargs)", "(self, /, *args, **kwargs)"):
        return ""
    return f"{name}{text}"


def _defining_class(cls: type, name: str) -> type:
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass
    return cls


def _key(obj: object) -> str:
    """Where an object is defined: re-exports and aliases share one key."""
    if isinstance(obj, types.MethodType):
        obj = obj.__func__
    elif isinstance(obj, types.BuiltinMethodType) and not isinstance(
            obj.__self__, types.ModuleType | type(None)):
        owner = _defining_class(type(obj.__self__), obj.__name__)
        return f"{owner.__module__}.{owner.__qualname__}.{obj.__name__}"
    module = getattr(obj, "__module__", None) or ""
    qualname = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", "")
    return f"{module}.{qualname}"


def _home(obj: object) -> str:
    if isinstance(obj, types.MethodType):
        obj = obj.__func__
    elif isinstance(obj, types.BuiltinMethodType) and not isinstance(
            obj.__self__, types.ModuleType | type(None)):
        return type(obj.__self__).__module__
    return getattr(obj, "__module__", None) or ""


def _own_c_base(cls: type, klass: type) -> bool:
    """``klass`` is the private C counterpart of ``cls`` (``_socket.socket`` for
    ``socket.socket``, ``_io._IOBase`` for ``io.IOBase``), not a shared mix-in."""
    return (klass is not object and klass.__name__.lstrip("_") == cls.__name__
            and (klass.__module__.startswith("_") or klass.__name__.startswith("_")))


def _members(cls: type) -> list[dict]:
    """Public documented members defined on the class or on its own private C base."""
    out: list[dict] = []
    seen: set[str] = set()
    for klass in cls.__mro__:
        if klass is not cls and not _own_c_base(cls, klass):
            continue
        for name, raw in list(klass.__dict__.items()):
            if name.startswith("_") or name in seen:
                continue
            if not isinstance(raw, CALLABLE_TYPES):
                continue
            seen.add(name)
            doc = _doc(raw.__func__ if isinstance(raw, classmethod | staticmethod) else raw)
            if not doc:
                continue
            try:
                bound = getattr(cls, name)
            except AttributeError:
                bound = raw
            out.append({"name": name, "key": f"{klass.__module__}.{klass.__qualname__}.{name}",
                        "kind": "property" if isinstance(raw, property) else "method",
                        "signature": _signature(name, bound), "doc": doc})
    return out


def describe(module_name: str) -> dict:
    module = importlib.import_module(module_name)
    exported = getattr(module, "__all__", None)
    names = [n for n in (exported if isinstance(exported, list | tuple) else dir(module))
             if isinstance(n, str) and not n.startswith("_")]
    objects = []
    for name in names:
        obj = getattr(module, name, None)
        if isinstance(obj, type):
            kind = "class"
        elif callable(obj) and isinstance(obj, CALLABLE_TYPES):
            kind = "function"
        else:
            continue
        doc = _doc(obj)
        if not doc:
            continue
        objects.append({"name": name, "key": _key(obj), "home": _home(obj), "kind": kind,
                        "signature": _signature(name, obj), "doc": doc,
                        "members": _members(obj) if kind == "class" else []})
    return {"module": module_name, "doc": _doc(module),
            "all": list(exported) if isinstance(exported, list | tuple) else None,
            "objects": objects}


def main(modules: list[str]) -> int:
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the process
    warnings.simplefilter("ignore")
    for name in modules:
        out.write(json.dumps({"begin": name}) + "\n")
        out.flush()
        try:
            result = describe(name)
        except BaseException as exc:  # noqa: BLE001 - a module may raise anything
            result = {"module": name, "error": f"{type(exc).__name__}: {exc}"}
        out.write(json.dumps(result) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
