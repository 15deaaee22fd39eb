"""What a Gemini repair must know of where the request goes, beside its body: the endpoint family and the model.

``developer`` is the Gemini Developer API (``generativelanguage.googleapis.com``, ``/v1beta/models/...``),
``vertex`` is Vertex AI (``/v1/projects/{p}/locations/{l}/publishers/google/models/...``). The serving side makes a
``GeminiTarget`` from the request's path (its model is in the path, not the body) and passes it to ``plan``.
"""

import re
from dataclasses import dataclass, field
from typing import Literal

Family = Literal["developer", "vertex"]
FAMILIES: tuple[Family, ...] = ("developer", "vertex")

#: A Gemini model name and its major version: ``gemini-3-pro-preview``, ``gemini-3.5-flash``, ``models/gemini-2.5-pro``.
_MAJOR = re.compile(r"(?:.*/)?gemini-(\d+)", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class GeminiTarget:
    family: Family = "developer"
    model: str = ""
    #: Whether the model checks thought signatures on the calls of the current turn (GN-11: Gemini 3 and later). Read
    #: off the model name once: the serving side keeps a target per path, and every request's check asks.
    signs_calls: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        major = self.major
        object.__setattr__(self, "signs_calls", major is not None and major >= 3)

    @property
    def major(self) -> int | None:
        """The model's Gemini major version (``3`` for ``gemini-3.5-flash``); None for a name that tells none."""
        found = _MAJOR.match(self.model)
        return int(found.group(1)) if found else None

    @property
    def takes_ids(self) -> bool:
        """Whether the endpoint takes ``functionCall.id`` and ``functionResponse.id`` (GN-9): the Developer API does;
        Vertex refuses them for models before Gemini 3 (``Unknown name "id"``) and defines them from Gemini 3 on."""
        return self.family == "developer" or self.signs_calls


DEVELOPER = GeminiTarget()
