"""Google's targets keep their version on the way upstream (a Gemini route's upstream is the host alone); every other
target goes below ``/v1`` as before, an OpenAI model id with colons included. Both get the same path checks."""

import pytest

from proxy.router import InvalidPath, Router, UpstreamRoute, gemini_target

DEFAULT = object()


def select(target: bytes) -> bytes:
    router = Router(default=DEFAULT)  # type: ignore[arg-type]  # only the target runs
    route, path = router.select(target, b"")
    assert route is DEFAULT
    return path


@pytest.mark.parametrize("target", [
    b"/v1beta/models/gemini-2.5-flash:streamGenerateContent", b"/v1beta/models", b"/v1beta/cachedContents/c1",
    b"/v1alpha/models/gemini-3-pro:generateContent", b"/v1/models/gemini-2.5-pro:generateContent",
    b"/v1/models/gemini-2.5-pro:countTokens", b"/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.5-pro:generateContent",
    b"/v1beta1/publishers/google/models/gemini-2.5-flash:generateContent",
])
def test_googles_targets_go_upstream_with_their_version(target: bytes) -> None:
    assert gemini_target(target)
    assert select(target) == target


@pytest.mark.parametrize("target", [
    b"/v1/chat/completions", b"/v1/models", b"/v1/models/ft:gpt-4o-mini:org:abc123", b"/v1/models/gpt-4o",
    b"/v1/messages", b"/v1/organization/projects", b"/v1/responses/resp_1",
])
def test_every_other_target_goes_below_v1(target: bytes) -> None:
    assert not gemini_target(target)
    assert select(target) == target[len(b"/v1"):]


@pytest.mark.parametrize("target", [b"/v1beta/../v1/x", b"/v1beta/models/%2e%2e%2fother:generateContent", b"/v1beta//x",
                                    b"/v2/models", b"/v1betax/models"])
def test_a_google_target_cannot_leave_the_base_path_either(target: bytes) -> None:
    with pytest.raises(InvalidPath):
        select(target)


def test_a_route_prefix_serves_googles_targets_too() -> None:
    prefixed = UpstreamRoute(upstream=None, profile=None, prefix="/google")  # type: ignore[arg-type]
    router = Router(default=DEFAULT, routes=(prefixed,))  # type: ignore[arg-type]
    assert router.select(b"/google/v1beta/models/g:generateContent", b"") == (prefixed, b"/v1beta/models/g:generateContent")
    assert router.select(b"/google/v1/chat/completions", b"") == (prefixed, b"/chat/completions")
    with pytest.raises(InvalidPath):  # /google must not catch /googlex/v1/...
        router.select(b"/googlex/v1/chat/completions", b"")
