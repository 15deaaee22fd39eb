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

from typing import Any

from proxy.dialects.messages.blocks import TEXT, is_thinking
from proxy.dialects.messages.rules.edit import Change, blocks, rewrite
from proxy.dialects.refusal import error_object
from proxy.repair.context import Context
from proxy.repair.rule import Rule

RULE = Rule("TM513", "refused-signature", ("AM-14",))

#: The part of the refusal's message both wordings share (the 2026-09 one goes on after it).
REFUSAL = "Invalid `signature` in `thinking` block"
#: What an assistant message that held nothing but thinking says instead (Plexus's and claude-code-hub's words).
ELIDED = "[reasoning elided]"


def refused(status: int, error: bytes) -> bool:
    """Whether an upstream's answer is this refusal: status 400, and a JSON error whose ``error.message`` says so."""
    detail = error_object(status, error)
    message = detail.get("message") if detail is not None else None
    return type(message) is str and REFUSAL in message


def _edit(position: int, message: dict[str, Any]) -> Change | None:
    if message["role"] != "assistant":
        return None
    content = blocks(message)
    kept = [block for block in content if not is_thinking(block)]
    dropped = len(content) - len(kept)
    if not dropped:
        return None
    why = f"the upstream refused a thinking signature: {dropped} thinking block(s) removed"
    if kept:
        return Change(kept, "removed", why)
    return Change([{"type": TEXT, "text": ELIDED}], "elided", f"{why}, the message left saying {ELIDED!r}")


def apply(ctx: Context) -> None:
    rewrite(ctx, RULE, _edit)
