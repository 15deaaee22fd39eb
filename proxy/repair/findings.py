"""What the repair engine reports (each finding under its rule's identity), and the knobs a user turns."""

from collections import Counter
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Literal

OrphanPolicy = Literal["synthesize", "drop", "reject"]
ORPHAN_POLICIES: tuple[OrphanPolicy, ...] = ("synthesize", "drop", "reject")
#: What to do when a repaired Anthropic history would need a thinking block memory does not hold (AM-9): turn
#: ``thinking`` off for that one request, or refuse it; and when the upstream refuses a thinking block's signature
#: (AM-14), or a Responses upstream cannot verify the encrypted content of reasoning items (RS-11): send the request
#: once more without that thinking or reasoning, or relay the refusal. Thinking and reasoning are never made up.
#: Gemini 3 (GN-11): a call of the current turn whose thought signature memory does not hold is turned into text
#: (``drop``) or refused (``reject``), unless ``Policy.dummy_signatures`` opts into Google's documented dummy value.
ThinkingPolicy = Literal["drop", "reject"]
THINKING_POLICIES: tuple[ThinkingPolicy, ...] = ("drop", "reject")

#: The text of a tool result the proxy had to invent for an unanswered call (rule S3). It says plainly
#: that nothing ran, so the model never mistakes it for a successful result.
DEFAULT_PLACEHOLDER = "[toolmend] No result: this tool call was not executed or its result was lost."

#: The function name given to a synthesized call when neither the tool message nor `tools` names it.
DEFAULT_PLACEHOLDER_NAME = "unknown_tool"

#: Where a call put back into a history came from: the proxy's memory (the upstream's own call, exactly as it
#: was sent) or made up by the orphan policy because memory had nothing (the model now sees a call it never
#: made, with arguments ``{}``). Both look alike in the rule counts; they are reported apart.
CallSource = Literal["recalled", "synthesized"]
CALL_SOURCES: tuple[CallSource, ...] = ("recalled", "synthesized")


#: The most names (call ids, keys) one finding's detail lists, and the most characters it shows of one name. A
#: finding is about one message, but what it names may be shared by thousands (every id of a long parallel turn):
#: listed whole in each finding, a long history made as many copies of the list as it had findings.
DETAIL_NAMES = 3
DETAIL_NAME_CHARS = 64
#: The longest detail a finding keeps (``bounded``), whatever a rule wrote: with the two bounds above, the findings
#: of a repair take memory linear in their number.
DETAIL_CHARS = 512


def shown(name: str) -> str:
    """A name (an id, a key) as a detail shows it: whole, or its first ``DETAIL_NAME_CHARS`` characters and its length."""
    return name if len(name) <= DETAIL_NAME_CHARS else f"{name[:DETAIL_NAME_CHARS]}... ({len(name)} characters)"


def listed(names: Collection[str]) -> str:
    """``a, b, c and 7 more``: the first ``DETAIL_NAMES`` names, each ``shown``, and how many were left out."""
    first = [shown(name) for _, name in zip(range(DETAIL_NAMES), names, strict=False)]
    more = len(names) - len(first)
    return ", ".join(first) + (f" and {more} more" if more else "")


def bounded(detail: str) -> str:
    """``detail`` cut to ``DETAIL_CHARS`` characters (what a finding keeps)."""
    return detail if len(detail) <= DETAIL_CHARS else f"{detail[:DETAIL_CHARS]}..."


@dataclass(frozen=True, slots=True)
class Rule:
    """A rule's stable identity: its code (``TM101``), its name and the provider rules it answers."""

    code: str
    name: str
    answers: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Policy:
    """How to repair what cannot be repaired faithfully."""

    orphans: OrphanPolicy = "synthesize"
    placeholder: str = DEFAULT_PLACEHOLDER
    placeholder_name: str = DEFAULT_PLACEHOLDER_NAME
    thinking: ThinkingPolicy = "drop"
    #: Opt-in: give such a Gemini call the dummy signature Google documents (``skip_thought_signature_validator``)
    #: instead of the thinking policy's text or refusal.
    dummy_signatures: bool = False
    #: Opt-in: a Gemini history that ends with the model's own text (a prefill) gets a user content after it, for an
    #: upstream that refuses a history ending with a model turn (GN-6); off, it goes as sent.
    continue_model_turn: bool = False

    def __post_init__(self) -> None:
        if self.orphans not in ORPHAN_POLICIES:
            raise ValueError(f"orphan policy must be one of {', '.join(ORPHAN_POLICIES)}, not {self.orphans!r}")
        if self.thinking not in THINKING_POLICIES:
            raise ValueError(f"thinking policy must be one of {', '.join(THINKING_POLICIES)}, not {self.thinking!r}")


@dataclass(slots=True)
class Finding:
    """One thing that was wrong with a history and what was done about it.

    ``index`` is the position, in the request as the client sent it, of the message the finding is about
    (for an insertion: the message it was inserted next to). ``detail`` names ids and tool names but never
    message content, so findings are safe to log. A finding that put tool calls back into the history says
    how many (``calls``: one finding may restore a whole parallel turn) and whence (``source``).

    Written once, read after: nothing changes a finding. It is not a frozen dataclass, whose ``__init__`` sets each
    field through ``object.__setattr__`` at three times the cost, and a repair of a long history makes one per change.
    """

    code: str
    name: str
    index: int
    action: str
    detail: str
    source: CallSource | None = None
    calls: int = 0

    def as_dict(self) -> dict[str, str | int | None]:
        return {"code": self.code, "name": self.name, "index": self.index, "action": self.action, "detail": self.detail,
                "source": self.source, "calls": self.calls}


def calls_by_source(findings: Iterable[Finding]) -> Counter[CallSource]:
    """The calls the findings put back, counted by source; empty when they put back none."""
    counts: Counter[CallSource] = Counter()
    for finding in findings:
        if finding.source is not None:
            counts[finding.source] += finding.calls
    return counts


def summarize_calls(counts: Counter[CallSource]) -> str:
    """``recalled=1,synthesized=0``: both sources always, so a reader never has to guess an absent one."""
    return ",".join(f"{source}={counts[source]}" for source in CALL_SOURCES)
