r"""Manual thinking is on (``thinking.type: "enabled"``) and the assistant message of the tool loop in progress
does not start with thinking: the client kept the calls but dropped the thinking (frameworks that store only
text and calls, LiteLLM and gateway histories), or its thinking could not be kept (unsigned, empty).

Anthropic refuses it (AM-9: "When `thinking` is enabled, a final `assistant` message must start with a thinking
block"). Thinking is never made up: when memory holds the turn the message's calls came from, its thinking
blocks go back in front, byte for byte. Otherwise the thinking policy decides: ``drop`` sends this one request
without ``thinking`` (LiteLLM's behaviour), ``reject`` refuses it. Adaptive thinking is not held to the rule.
Answers AM-9.

Request:
    {"thinking": {"type": "enabled", "budget_tokens": 1024}}
Bad:
    {"role": "user", "content": "Weather in Paris?"}
    {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_01", "name": "weather", "input": {"city": "Paris"}}]}
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "18C"}]}
Recalled:
    {"dialect": "messages", "ids": ["toolu_01"], "message_id": "msg_01", "blocks": [{"type": "thinking", "thinking": "The user wants the weather.", "signature": "c2ln"}, {"type": "tool_use", "id": "toolu_01", "name": "weather", "input": {"city": "Paris"}}]}
Good:
    {"role": "user", "content": "Weather in Paris?"}
    {"role": "assistant", "content": [{"type": "thinking", "thinking": "The user wants the weather.", "signature": "c2ln"}, {"type": "tool_use", "id": "toolu_01", "name": "weather", "input": {"city": "Paris"}}]}
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "18C"}]}
"""

from typing import Any

import orjson

from proxy.dialects.messages.blocks import is_thinking, is_tool_use, tool_use_id_of
from proxy.dialects.messages.rules import thinking
from proxy.dialects.messages.rules.edit import with_content
from proxy.dialects.messages.view import blocks_of
from proxy.repair.context import Context
from proxy.repair.rule import Rule
from proxy.turns import call_ids, dialect_of

RULE = Rule("TM510", "thinking-required", ("AM-9",))


def remembered_thinking(ctx: Context, content: list[Any]) -> list[Any]:
    """Copies of the thinking blocks the remembered turn of these calls began with, or none: every call of the
    message must come from that one turn, whose thinking was made for exactly those calls."""
    ids = [cid for block in content if (cid := tool_use_id_of(block)) is not None]
    turn = next((turn for cid in ids if (turn := ctx.recalled.get(cid)) is not None), None)
    if turn is None or dialect_of(turn) != "messages" or not set(ids) <= set(call_ids(turn)):
        return []
    leading = []
    for block in turn.get("blocks", ()):
        if is_tool_use(block):
            break
        if is_thinking(block):
            leading.append(block)
    return orjson.loads(orjson.dumps(leading))  # never alias the memory


def apply(ctx: Context) -> None:
    if thinking.mode(ctx) != "enabled":
        return
    current = thinking.current_assistant(ctx.messages)
    if current is None or not current[1]:
        return
    position = current[0]
    message = ctx.messages[position]
    content = blocks_of(message)
    if not content or is_thinking(content[0]):
        return
    ids = ", ".join(cid for block in content if (cid := tool_use_id_of(block)) is not None)
    restored = remembered_thinking(ctx, content)
    if restored:
        ctx.messages[position] = with_content(ctx, message, [*restored, *content])
        ctx.report(RULE, message, "restored", f"{len(restored)} thinking block(s) of the turn ({ids}) restored from memory", position)
    elif ctx.policy.thinking == "reject":
        ctx.reject(RULE, message, f"thinking is enabled and the final assistant tool turn ({ids}) has no thinking block, which memory does not hold "
                   "(thinking policy 'reject')", position)
    else:
        ctx.report(RULE, message, thinking.TURNED_OFF, f"thinking turned off for this request: the final assistant tool turn ({ids}) has no "
                   "thinking block and memory holds none (thinking policy 'drop')", position)
