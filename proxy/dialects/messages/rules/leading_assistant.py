r"""A repair that would make an assistant message the first of the history: a trimmed window opens with a user
message holding only ``tool_result`` blocks whose ``tool_use`` the request lacks, and the orphan rule (TM101) put
the remembered (or synthesized) assistant turn in front of it; or a system message the client put before an
assistant message was folded into the top-level ``system`` (TM514, profiles ``deepseek`` and ``zai``).

A strict Messages server refuses a history whose first message is not the user's (`` messages: first message must
use the "user" role ``), and a proxy must never create that shape itself (S12). A short user message
(``OPENING_TEXT``, as TM308's) goes before the assistant turn; the turn and the results stay as they were put
back. Only a history the client did not open with the assistant is changed: one it opened with the assistant is its
own. Answers S12.
Bad:
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "18C"}]}
    {"role": "user", "content": "And tomorrow?"}
Recalled:
    {"dialect": "messages", "ids": ["toolu_01"], "message_id": "msg_01", "blocks": [{"type": "tool_use", "id": "toolu_01", "name": "weather", "input": {"city": "Paris"}}]}
Good:
    {"role": "user", "content": [{"type": "text", "text": "(earlier conversation omitted)"}]}
    {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_01", "name": "weather", "input": {"city": "Paris"}}]}
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "18C"}]}
    {"role": "user", "content": "And tomorrow?"}
"""

from proxy.dialects.messages.blocks import TEXT
from proxy.repair.content import OPENING_TEXT
from proxy.repair.context import Context
from proxy.repair.rule import Rule

RULE = Rule("TM515", "leading-assistant", ("S12",))


def apply(ctx: Context) -> None:
    sent = ctx.request.get("messages")
    first = ctx.messages[0] if ctx.messages else None
    opened = sent[0] if type(sent) is list and sent else None
    if type(first) is dict and first.get("role") == "assistant" and type(opened) is dict and opened.get("role") != "assistant":
        ctx.messages.insert(0, {"role": "user", "content": [{"type": TEXT, "text": OPENING_TEXT}]})
        ctx.report(RULE, first, "inserted", "user message before the assistant turn the repair left at the start of the history")
