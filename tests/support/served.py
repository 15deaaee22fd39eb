"""A scripted upstream and toolmend in front of it, each under real uvicorn on loopback (``strict_upstream.serve``):
the fixtures that the end-to-end tests of every dialect share, made once here."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any, Protocol, TypeVar

import pytest

from proxy.app import create_app
from proxy.config import Settings
from tests.support.strict_upstream import serve


class Resettable(Protocol):
    def reset(self) -> None: ...


R = TypeVar("R", bound=Resettable)


@contextlib.contextmanager
def served(made: tuple[Any, R]) -> Iterator[tuple[str, R]]:
    """An upstream as ``make_*_upstream`` returns it (its app, its recorder), served: yields its URL and its recorder."""
    app, recorder = made
    with serve(app) as url:
        yield url, recorder


@contextlib.contextmanager
def serve_proxy(upstream_url: str, **settings: Any) -> Iterator[str]:
    """toolmend with ``settings``, served in front of the upstream at ``upstream_url`` (no path): yields its URL."""
    with serve(create_app(Settings(upstream=upstream_url + "/v1", **settings))) as url:
        yield url


def served_fixtures(make: Callable[[], tuple[Any, R]], upstream: str = "upstream",
                    recorder: str = "rec") -> tuple[Any, Any]:
    """Two fixtures under the names given: the upstream ``make`` returns, served once per module (its URL and its
    recorder), and its recorder, emptied for each test. A test module assigns them to module names:
    ``upstream, rec = served_fixtures(lambda: make_..._upstream(seed=1))``."""

    @pytest.fixture(scope="module", name=upstream)
    def upstream_fixture() -> Iterator[tuple[str, R]]:
        with served(make()) as served_upstream:
            yield served_upstream

    @pytest.fixture(name=recorder)
    def recorder_fixture(request: pytest.FixtureRequest) -> R:
        emptied: R = request.getfixturevalue(upstream)[1]
        emptied.reset()
        return emptied

    return upstream_fixture, recorder_fixture


def proxy_fixture(name: str = "proxy", upstream: str = "upstream", **settings: Any) -> Any:
    """A fixture ``name``: toolmend with ``settings`` in front of the fixture ``upstream`` (URL, recorder), served once
    per module; its value is toolmend's URL. ``rejecting_proxy = proxy_fixture("rejecting_proxy", orphan_policy=...)``."""

    @pytest.fixture(scope="module", name=name)
    def fixture(request: pytest.FixtureRequest) -> Iterator[str]:
        with serve_proxy(request.getfixturevalue(upstream)[0], **settings) as url:
            yield url

    return fixture
