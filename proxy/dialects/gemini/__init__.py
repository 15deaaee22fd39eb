"""Gemini's native API (``generateContent``, ``streamGenerateContent``): a history of ``contents`` made of parts.

Served at the paths Google's clients call below their base URL, toolmend's address (Gemini CLI's
``GOOGLE_GEMINI_BASE_URL``, google-genai's ``http_options.base_url``), also below a route prefix: the Developer API's
``/v1beta/models/{model}:generateContent`` and ``:streamGenerateContent`` (``/v1`` and ``/v1alpha`` alike), and
Vertex AI's ``/v1/projects/{p}/locations/{l}/publishers/google/models/{model}:...`` (``/v1beta1`` too, and the
express form without project). The version stays in the path that goes upstream (``proxy/router.py``): a Gemini route's
``--upstream`` is the host alone (``https://generativelanguage.googleapis.com``). The model and whether the answer
streams come from the path; ``:streamGenerateContent`` answers server-sent events with ``?alt=sse`` and one JSON array
without it, and ``capture.py`` reads both as they are relayed. The other Gemini paths (``countTokens``, ``models``,
files, caches) pass through; toolmend's own errors on every Gemini path are in Google's envelope. A 400 refusing a
thought signature (GN-12) is answered by sending the request again without it (``rules/refused_signature.py``), under
thinking policy ``drop``.
"""

import functools
import re
from typing import Any

from starlette.responses import Response

from proxy.dialects.dialect import Blobs, Facts, ListHistory, RefusalFix, rejection
from proxy.dialects.gemini.capture import CAPTURE
from proxy.dialects.gemini.errors import google_error
from proxy.dialects.gemini.plan import GeminiPlan, plan, retried
from proxy.dialects.gemini.profiles import VERTEX, gemini_profile
from proxy.dialects.gemini.rules import PIPELINE, refused_signature
from proxy.dialects.gemini.target import GeminiTarget
from proxy.repair import Finding, Policy, Profile
from proxy.turns import Dialect as DialectName

#: The versions Google serves Gemini under; ``v1beta1`` is Vertex's, ``v1beta`` and ``v1alpha`` the Developer API's.
VERSIONS = ("/v1", "/v1beta", "/v1beta1", "/v1alpha")
STREAMED = "streamGenerateContent"
#: What a Vertex AI model's resource name holds.
VERTEX_MODEL = "publishers/google/models/"
#: A repaired endpoint (as decoded, at its end): the version, the path form (the Developer API's, Vertex's, Vertex
#: express mode's), the model and the method.
ENDPOINT = re.compile(r"/(?:v1|v1beta|v1beta1|v1alpha)(?P<vertex>/projects/[^/]+/locations/[^/]+/publishers/google"
                      r"|/publishers/google)?/models/(?P<model>[^/]+):(?P<method>generateContent|streamGenerateContent)$")
#: Any other path of Google's API: a Gemini version, or Vertex's resources and model methods under ``/v1``.
API_PATH = re.compile(r"/(?:v1beta1?|v1alpha)/|/v1/(?:projects|publishers)/|/v1/models/[^/]+:[A-Za-z]+$")


@functools.lru_cache(maxsize=1024)
def target_of(raw_path: bytes) -> tuple[GeminiTarget, bool] | None:
    """Where a request target goes (the endpoint family, the model) and whether its answer streams; None for a path that
    is no endpoint. Kept per path (clients repeat theirs; bounded)."""
    found = ENDPOINT.search(raw_path.decode("latin-1"))
    if found is None:
        return None
    return GeminiTarget("vertex" if found["vertex"] else "developer", found["model"]), found["method"] == STREAMED


class GeminiDialect(ListHistory):
    name: DialectName = "gemini"
    #: No endpoint below ``/v1`` by name: its endpoints carry the model in the path (``path_pattern``).
    path = ""
    paths = ()
    path_pattern = ENDPOINT
    api_pattern = API_PATH
    history_key = "contents"
    entries_key = "parts"
    history_entries = "contents and their parts"
    capture = CAPTURE
    pipeline = PIPELINE
    #: A 400 refusing a thought signature (GN-12): sent once more without the signatures memory did not capture (TM612).
    refusal_fixes = (RefusalFix(refused_signature.refused, retried,
                                Blobs(refused_signature.carried, refused_signature.recall_keys, refused_signature.minted)),)
    error = staticmethod(google_error)

    def facts(self, target: bytes, body: dict[str, Any]) -> Facts:
        """The model and whether the answer streams, from the path (``:streamGenerateContent`` streams: with ``?alt=sse``
        as events, else as one JSON array)."""
        found = target_of(target)
        return Facts(target, None, False) if found is None else Facts(target, found[0].model, found[1])

    def retries(self, status: int, policy: Policy) -> bool:
        """Only a refusal's own status: Google refuses a request before any of its stream, never as a stream's first
        event, so a successful answer goes to the client without a look at it."""
        return any(fix.status == status and fix.applies(policy) for fix in self.refusal_fixes)

    def profile(self, name: str) -> Profile:
        return gemini_profile(name)

    def plan(self, body: dict[str, Any], profile: Profile, facts: Facts | None = None,
             policy: Policy | None = None) -> GeminiPlan | None:
        """For the target the path names; offline (no ``facts``), the body's ``model``, if it names one, at Vertex AI
        for profile ``vertex`` or a Vertex model name (``projects/{p}/locations/{l}/publishers/google/models/{model}``)."""
        found = target_of(facts.target) if facts is not None else None
        if found is not None:
            return plan(body, profile, found[0], policy)
        model = body.get("model")
        model = model if type(model) is str else ""
        vertex = profile is VERTEX or VERTEX_MODEL in model
        return plan(body, profile, GeminiTarget("vertex" if vertex else "developer", model), policy)

    def rejection(self, finding: Finding) -> Response:
        return rejection(finding, google_error, f"contents[{finding.index}]", f"contents[{finding.index}]")


GEMINI = GeminiDialect()

__all__ = ["GEMINI", "GeminiDialect"]
