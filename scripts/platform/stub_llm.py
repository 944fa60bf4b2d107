#!/usr/bin/env python3
"""A stand-in for the platform's extraction model, so that the harness can ingest offline.

Why it exists: the platform turns each chunk of a document into concepts by asking an AI
provider. The providers its schema seeds (OpenAI, Anthropic) need the network and a key,
which the harness has neither of. Its ``llamacpp`` provider needs only an OpenAI-compatible
server at a base URL, with no key: this is such a server (standard library only), and
``scripts/platform.sh`` points the platform's active extraction config at it.

What it answers: the platform posts the extraction prompt to ``/v1/chat/completions`` with
``response_format=json_object``. The answer is deterministic: one concept per sentence (its
label the sentence's first words, or a markdown heading's), the sentence itself as the
evidence quote, and an IMPLIES edge between consecutive concepts. Any other chat call gets
``{}``. So concept labels are crude, but everything after extraction (the embeddings, the
graph, provenance, search) is the platform's own.

usage: stub_llm.py PORT   (listens on 127.0.0.1)
"""

import json
import re
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MAX_CONCEPTS = 8  # per chunk: enough for the small documents a test ingests


def extract(text: str) -> dict:
    """The extraction the platform expects, made from ``text`` without a model."""
    concepts, instances, rels = [], [], []
    sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+|\n+", text) if len(s.strip()) > 12]
    for i, s in enumerate(sentences[:MAX_CONCEPTS]):
        cid = f"concept_{i + 1:03d}"
        words = re.findall(r"[A-Za-z][A-Za-z0-9\-]*", s.lstrip("#").strip())
        label = " ".join(words[:4]).strip() or f"Concept {i + 1}"
        concepts.append({"concept_id": cid, "label": label, "description": s[:200],
                         "search_terms": [w.lower() for w in words[:3]]})
        instances.append({"concept_id": cid, "quote": s})
        if i:
            rels.append({"from_concept_id": f"concept_{i:03d}", "to_concept_id": cid,
                         "relationship_type": "IMPLIES", "direction_semantics": "outward",
                         "confidence": 0.8})
    return {"concepts": concepts, "instances": instances, "relationships": rels}


class Handler(BaseHTTPRequestHandler):
    def _send(self, obj: dict, code: int = 200) -> None:
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        path = self.path.rstrip("/")
        if path.endswith("/models"):
            return self._send({"object": "list",
                               "data": [{"id": "stub", "object": "model", "owned_by": "stub"}]})
        if path.endswith("/health"):
            return self._send({"status": "ok"})
        return self._send({"error": "not found"}, 404)

    def do_POST(self) -> None:
        n = int(self.headers.get("Content-Length") or 0)
        req = json.loads(self.rfile.read(n) or b"{}")
        msgs = req.get("messages") or []
        user = next((m.get("content") for m in reversed(msgs) if m.get("role") == "user"), "")
        user = user or ""
        if isinstance(user, list):
            user = " ".join(p.get("text", "") for p in user if isinstance(p, dict))
        content = "{}"
        if user.startswith("Text to analyze:"):
            content = json.dumps(extract(user.split("\n\n", 1)[-1]))
        self._send({
            "id": "chatcmpl-stub", "object": "chat.completion", "created": int(time.time()),
            "model": req.get("model") or "stub",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        })

    def log_message(self, format: str, *args: object) -> None:
        sys.stderr.write("stub_llm: " + format % args + "\n")


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
