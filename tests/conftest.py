"""Shared fixtures: respx as the upstream (``upstream``); a strict upstream and the proxy in front of it, both under
real uvicorn on loopback. Every test is marked by the directory it sits in: ``unit``, ``e2e`` or ``system``.

Hypothesis runs the ``ci`` profile unless ``TOOLMEND_HYPOTHESIS=campaign`` asks for the long random run:

* ``ci`` (the default, and what CI runs): derandomized, so every run tries the same examples and a red
  build is a real bug, never bad luck; no example database, so a failure a developer's ``.hypothesis/``
  remembers cannot make a local run differ from CI's; no deadline, so a loaded machine cannot fail a test.
* ``campaign``: random, each property runs ``TOOLMEND_HYPOTHESIS_EXAMPLES`` examples (default 5,000, see
  tests/support/hypothesis_budget.py) and failures are kept in ``.hypothesis/`` to replay:
  ``TOOLMEND_HYPOTHESIS=campaign python -m pytest -p no:cacheprovider tests/unit/dialects/chat/test_properties.py``.
  Pin what a campaign finds as an ``@example`` next to the property, so CI runs it from then on.
"""

import gc
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest
import respx
from hypothesis import HealthCheck, settings

from tests.support import hypothesis_budget
from tests.support.ci import under_ci
from tests.support.proxy_fixtures import UPSTREAM
from tests.support.served import proxy_fixture, served_fixtures
from tests.support.strict_upstream import OPENAI_SKIPS, make_strict_upstream

# too_slow measures time: on a busy machine it would fail a test that is otherwise deterministic.
settings.register_profile("ci", derandomize=True, database=None, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("campaign", deadline=None, print_blob=True, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(hypothesis_budget.PROFILE)

TESTS = Path(__file__).resolve().parent
# The layers of the suite, one directory each; `pytest -m "not system"` is the inner loop.
LAYERS = ("unit", "e2e", "system")
INNER_LOOP = "not system"


def pytest_configure(config: pytest.Config) -> None:
    # Before any test module is imported: the properties read their budget as they are defined.
    hypothesis_budget.INNER_LOOP = config.option.markexpr.strip() == INNER_LOOP and not under_ci()


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """The inner loop does not collect tests/system (every test there is marked ``system``, so all would be
    deselected): neither its modules nor what they import are loaded."""
    if collection_path == TESTS / "system" and config.option.markexpr.strip() == INNER_LOOP:
        return True
    return None


@pytest.hookimpl(wrapper=True)
def pytest_collection(session: pytest.Session) -> Generator[None, object, object]:
    """Collecting imports the client libraries into every worker (hundreds of thousands of objects, most of them
    pydantic models), and each of the collector's full passes walks them all: during collection each time the heap
    has grown by a quarter, after it each time a test triggers one. Garbage of an import is freed by its reference
    count, so the collector waits until collection is done, then leaves what is alive by then out of its passes
    (``gc.freeze``) until a large repair's own freeze ends (proxy/endpoint.py's ``heap_frozen`` thaws the whole heap).
    What a test allocates is collected as before."""
    gc.disable()
    try:
        return (yield)
    finally:
        gc.freeze()
        gc.enable()


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by these marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test with the layer its directory names; a test outside them, or marked with another, is an error."""
    for item in items:
        layer = item.path.resolve().relative_to(TESTS).parts[0]
        if layer not in LAYERS:
            raise pytest.UsageError(f"{item.nodeid}: a test belongs under tests/unit, tests/e2e or tests/system")
        others = {mark.name for mark in item.iter_markers() if mark.name in LAYERS} - {layer}
        if others:
            raise pytest.UsageError(f"{item.nodeid}: in tests/{layer}, so it cannot be marked {sorted(others)}")
        item.add_marker(layer)


@pytest.fixture
def upstream() -> Iterator[respx.MockRouter]:
    """respx as the upstream at ``UPSTREAM``: the test adds the routes it needs; the app's requests go to nothing else."""
    with respx.mock(base_url=UPSTREAM, assert_all_called=False) as mock:
        yield mock


# The strict OpenAI-like upstream (``strict_upstream``: URL, recorder), its emptied ``recorder``, toolmend in front of
# it (``proxy_url``).
strict_upstream, recorder = served_fixtures(lambda: make_strict_upstream(skip_rules=OPENAI_SKIPS), "strict_upstream", "recorder")
proxy_url = proxy_fixture("proxy_url", "strict_upstream")
