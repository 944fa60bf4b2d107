"""Every server endpoint fuzzed from its own OpenAPI schema (schemathesis over real HTTP,
on a copy of the test store): no input gives a 500, and every answer comes in bounded
time. The number of cases per operation is bounded so the run stays short in CI; the
total is printed at the end (``schemathesis: N cases over M operations``)."""

from __future__ import annotations

import time
from collections import Counter

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

MAX_EXAMPLES = 25  # per operation
ANSWER_WITHIN = 20.0  # seconds; a 20 MB search took 31 s before the size caps

cases: Counter[str] = Counter()
modes: Counter[str] = Counter()


@pytest.fixture(scope="module")
def fuzz_server(kg_server_clone):
    server = kg_server_clone()  # a copy: the fuzzer creates and deletes things
    yield server
    server.stop()


@pytest.fixture(scope="module")
def api_schema(fuzz_server):
    return schemathesis.openapi.from_url(f"{fuzz_server.api_url}/openapi.json")


@pytest.fixture(scope="module")
def auth(fuzz_server) -> dict[str, str]:
    return {"Authorization": f"Bearer {fuzz_server.token('admin')}"}


@pytest.fixture(scope="module", autouse=True)
def report(request):
    yield
    reporter = request.config.pluginmanager.getplugin("terminalreporter")
    if reporter is not None and cases:
        reporter.write_line(f"schemathesis: {sum(cases.values())} cases over "
                            f"{len(cases)} operations ({dict(modes)})")


def fuzz(operation, mode: GenerationMode, auth: dict[str, str], failures: list[str]) -> None:
    """Up to MAX_EXAMPLES generated requests to one operation."""

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=MAX_EXAMPLES, deadline=None, database=None,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    def call(case) -> None:
        started = time.monotonic()
        response = case.call(headers=auth, timeout=ANSWER_WITHIN + 10)
        elapsed = time.monotonic() - started
        cases[f"{case.method} {case.path}"] += 1
        modes[mode.value] += 1
        if response.status_code >= 500 or elapsed >= ANSWER_WITHIN:
            failures.append(f"{case.method} {case.path} {str(case.query)[:200]} -> "
                            f"{response.status_code} in {elapsed:.1f}s: {response.text[:200]}")

    try:
        call()
    except Unsatisfiable:  # no parameters to break: nothing negative to send
        assert mode is GenerationMode.NEGATIVE, operation.label


def test_no_input_gives_a_500_or_hangs(api_schema, auth) -> None:
    """Valid and invalid (schema-violating) inputs for every operation."""
    failures: list[str] = []
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) >= 15
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            fuzz(operation, mode, auth, failures)
    assert not failures, "\n".join(failures[:20])
