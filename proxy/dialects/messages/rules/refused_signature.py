r"""The upstream refused a thinking block's signature, minted for another model, account or conversation (a model
or channel switch in Claude Code, a relay failing over between Claude models, a block bound to another ``system``
prompt): nothing in a request tells a foreign signature from a good one, so this rule runs on the refusal.

Anthropic refuses the request (AM-14: ``messages.1.content.0: Invalid `signature` in `thinking` block``, status 400,
the 2026-09 wording going on after that text). A signature cannot be made or mended, so under thinking policy
``drop`` every ``thinking`` and ``redacted_thinking`` block of every assistant message is removed, an assistant
message left without any block says ``[reasoning elided]`` (the roles keep alternating; a message with a
``tool_use`` is never left empty, so every ``tool_result`` keeps its call; a message of thinking alone ends with
thinking, which TM507 removes before it is sent, so this is a safety net), ``thinking`` is turned off for the
request where the final tool turn would now start without thinking (TM510's ``drop``), and what was sent goes once
more to the same upstream. A second refusal, like any other answer, reaches the client as the upstream sent it;
under ``reject`` the first does. Answers AM-14.

The refusal is recognised in every wording it reaches a client in (``proxy/dialects/refusal.py``): with or without
backticks (Bedrock, Vertex and OpenRouter drop them), ``thinking.signature: Field required``, ``Invalid `data` in
`redacted_thinking` block``, whatever the prefix. Where memory captured some of the thinking for this tenant (the
credential in use minted it), the retry leaves out only the rest, when there is a rest. What the retry left out is
remembered when the retry is accepted (by digest, never the signature), and a later request of the tenant that still
carries it has it removed before it is sent, with this code and a detail saying the upstream refused it before: a
resumed session pays one refused round trip, not one per request.

Request:
    {"thinking": {"type": "enabled", "budget_tokens": 1024}}
Bad:
    {"role": "user", "content": "Weather in Paris?"}
    {"role": "assistant", "content": [{"type": "thinking", "thinking": "The user wants the weather.", "signature": "c2ln"}, {"type": "redacted_thinking", "data": "cmVk"}, {"type": "tool_use", "id": "toolu_01", "name": "weather", "input": {"city": "Paris"}}]}
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "18C"}]}
    {"role": "assistant", "content": [{"type": "text", "text": "18C in Paris."}]}
    {"role": "user", "content": "And in Lyon?"}
    {"role": "assistant", "content": [{"type": "thinking", "thinking": "Lyon now.", "signature": "c2lnMg"}, {"type": "text", "text": "Checking."}, {"type": "tool_use", "id": "toolu_02", "name": "weather", "input": {"city": "Lyon"}}]}
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_02", "content": "16C"}]}
Good:
    {"role": "user", "content": "Weather in Paris?"}
    {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_01", "name": "weather", "input": {"city": "Paris"}}]}
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "18C"}]}
    {"role": "assistant", "content": [{"type": "text", "text": "18C in Paris."}]}
    {"role": "user", "content": "And in Lyon?"}
    {"role": "assistant", "content": [{"type": "text", "text": "Checking."}, {"type": "tool_use", "id": "toolu_02", "name": "weather", "input": {"city": "Lyon"}}]}
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_02", "content": "16C"}]}
"""

from collections.abc import Iterable
from typing import Any

from proxy.dialects.messages.blocks import REDACTED_THINKING, TEXT, is_thinking, is_tool_use
from proxy.dialects.messages.rules.edit import Change, blocks, rewrite
from proxy.dialects.refusal import STATUS, Refusal, leaving
from proxy.repair.context import Context
from proxy.repair.rule import Rule
from proxy.turns import Turn

RULE = Rule("TM513", "refused-signature", ("AM-14",))

#: Each wording of the refusal, as ``Refusal.says`` compares them (lower case, no backticks): the direct and the
#: Bedrock one (``Invalid `signature` in `thinking` block``, the 2026-09 one going on after it), a signature missing
#: (``thinking.signature: Field required``), and redacted thinking's.
WORDINGS = ("invalid signature in thinking block", "thinking.signature: field required", "invalid data in redacted_thinking block")
#: What an assistant message that held nothing but thinking says instead (Plexus's and claude-code-hub's words).
ELIDED = "[reasoning elided]"


def refused(refusal: Refusal) -> bool:
    """Whether an upstream's refusal is this one: status 400, and a message in one of the wordings."""
    return refusal.status == STATUS and any(refusal.says(wording) for wording in WORDINGS)


def blob_of(block: Any) -> Any:
    """What the upstream verifies of a thinking block: its ``signature``, or a redacted block's ``data``."""
    return block.get("data" if block.get("type") == REDACTED_THINKING else "signature")


def carried(body: dict[str, Any]) -> list[Any]:
    """The signature (or data) of every thinking block of the body's assistant messages (None where one has none)."""
    return [blob_of(block) for message in _assistants(body) for block in blocks(message) if is_thinking(block)]


def recall_keys(body: dict[str, Any]) -> list[str]:
    """The ids the turns that may hold that thinking are remembered by: the assistant messages' ``tool_use`` ids."""
    return [block["id"] for message in _assistants(body) for block in blocks(message)
            if is_tool_use(block) and type(block.get("id")) is str]


def minted(turn: Turn) -> Iterable[Any]:
    """The signatures (and data) of the thinking of a remembered turn."""
    return (blob_of(block) for block in turn.get("blocks", ()) if is_thinking(block))


def _assistants(body: dict[str, Any]) -> list[Any]:
    messages = body.get("messages")
    return [message for message in messages if type(message) is dict and message.get("role") == "assistant"] if type(messages) is list else []


def apply(ctx: Context) -> None:
    leave = leaving(ctx)
    why = "the upstream refused this thinking signature before" if leave.remembered else "the upstream refused a thinking signature"

    def edit(position: int, message: dict[str, Any]) -> Change | None:
        if message["role"] != "assistant":
            return None
        content = blocks(message)
        kept = [block for block in content if not (is_thinking(block) and leave.leaves(blob_of(block)))]
        dropped = len(content) - len(kept)
        if not dropped:
            return None
        said = f"{why}: {dropped} thinking block(s) removed"
        if kept:
            return Change(kept, "removed", said)
        return Change([{"type": TEXT, "text": ELIDED}], "elided", f"{said}, the message left saying {ELIDED!r}")

    rewrite(ctx, RULE, edit)
