"""What the repair engine reports, and the knobs a user turns."""

from dataclasses import dataclass
from typing import Literal

OrphanPolicy = Literal["synthesize", "drop", "reject"]
ORPHAN_POLICIES: tuple[OrphanPolicy, ...] = ("synthesize", "drop", "reject")

#: The text of a tool result the proxy had to invent for an unanswered call (rule S3). It says plainly
#: that nothing ran, so the model never mistakes it for a successful result.
DEFAULT_PLACEHOLDER = "[toolmend] No result: this tool call was not executed or its result was lost."

#: The function name given to a synthesized call when neither the tool message nor `tools` names it.
DEFAULT_PLACEHOLDER_NAME = "unknown_tool"


@dataclass(frozen=True, slots=True)
class Policy:
    """How to repair what cannot be repaired faithfully."""

    orphans: OrphanPolicy = "synthesize"
    placeholder: str = DEFAULT_PLACEHOLDER
    placeholder_name: str = DEFAULT_PLACEHOLDER_NAME

    def __post_init__(self) -> None:
        if self.orphans not in ORPHAN_POLICIES:
            raise ValueError(f"orphan policy must be one of {', '.join(ORPHAN_POLICIES)}, not {self.orphans!r}")


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing that was wrong with a history and what was done about it.

    ``index`` is the position, in the request as the client sent it, of the message the finding is about
    (for an insertion: the message it was inserted next to). ``detail`` names ids and tool names but never
    message content, so findings are safe to log.
    """

    code: str
    name: str
    index: int
    action: str
    detail: str

    def as_dict(self) -> dict[str, str | int]:
        return {"code": self.code, "name": self.name, "index": self.index, "action": self.action, "detail": self.detail}
