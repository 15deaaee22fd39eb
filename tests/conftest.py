"""Shared fixtures: a strict upstream and the proxy in front of it, both under real uvicorn on loopback."""

from collections.abc import Iterator

import pytest

from proxy.app import create_app
from proxy.config import Settings
from tests.support.strict_upstream import Recorder, make_strict_upstream, serve

# A leading orphan repaired by synthesis opens the history with a call turn: OpenAI accepts that; only
# Gemini's GE-3 (S12) does not, and that is the gemini profile's business.
OPENAI_SKIPS = ("S12",)


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
