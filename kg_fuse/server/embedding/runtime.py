"""ONNX Runtime, imported one way by the embedder and the int8 quantiser."""

from __future__ import annotations

import os
from typing import Any


def import_onnxruntime() -> Any:
    """``onnxruntime``, imported with its usage telemetry off: from version 1.29 it keeps
    a device id and an event cache under ``~/.cache/Microsoft`` and uploads them, unless
    ``ORT_DISABLE_TELEMETRY=1`` is set before the import. A local server sends nothing
    (set the variable to 0 to allow it)."""
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
    import onnxruntime

    return onnxruntime
