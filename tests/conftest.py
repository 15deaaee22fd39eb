"""Shared fixtures: a strict upstream and the proxy in front of it, both under real uvicorn on loopback.

Hypothesis runs the ``ci`` profile unless ``TOOLMEND_HYPOTHESIS=campaign`` asks for the long random run:

* ``ci`` (the default, and what CI runs): derandomized, so every run tries the same examples and a red
  build is a real bug, never bad luck; no example database, so a failure a developer's ``.hypothesis/``
  remembers cannot make a local run differ from CI's; no deadline, so a loaded machine cannot fail a test.
* ``campaign``: random, each property runs ``TOOLMEND_HYPOTHESIS_EXAMPLES`` examples (default 5,000, see
  tests/support/hypothesis_budget.py) and failures are kept in ``.hypothesis/`` to replay:
  ``TOOLMEND_HYPOTHESIS=campaign python -m pytest -p no:cacheprovider tests/test_repair_properties.py``.
  Pin what a campaign finds as an ``@example`` next to the property, so CI runs it from then on.
"""

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from proxy.app import create_app
from proxy.config import Settings
from tests.support.hypothesis_budget import PROFILE
from tests.support.strict_upstream import OPENAI_SKIPS, Recorder, make_strict_upstream, serve

# too_slow measures time: on a busy machine it would fail a test that is otherwise deterministic.
settings.register_profile("ci", derandomize=True, database=None, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("campaign", deadline=None, print_blob=True, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(PROFILE)


@pytest.fixture(scope="module")
def strict_upstream() -> Iterator[tuple[str, Recorder]]:
    app, recorder = make_strict_upstream(skip_rules=OPENAI_SKIPS)
    with serve(app) as url:
        yield url, recorder


@pytest.fixture
def recorder(strict_upstream: tuple[str, Recorder]) -> Recorder:
    strict_upstream[1].reset()
    return strict_upstream[1]


@pytest.fixture(scope="module")
def proxy_url(strict_upstream: tuple[str, Recorder]) -> Iterator[str]:
    settings = Settings(upstream=strict_upstream[0] + "/v1")
    with serve(create_app(settings)) as url:
        yield url
