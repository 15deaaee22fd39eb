r"""The upstream could not verify a reasoning item's ``encrypted_content``: minted for another organization, key or
account (a login or key switch in Codex, a relay failing over between accounts), corrupted by a session store, or
refused during a server incident (2025-12-16): nothing in a request tells a foreign blob from a good one, so this
rule runs on the refusal.

OpenAI refuses the request (RS-11: ``The encrypted content gAAA...DQ== could not be verified.``, or ``The encrypted
content for item rs_... could not be verified. Reason: ...``; status 400, code ``invalid_encrypted_content``). The
blob cannot be made or mended, so under thinking policy ``drop`` every reasoning item that carries
``encrypted_content`` is removed, not only one the message names: the cause (another key or organization) is the same
for all of them, and a retry that left the others would be refused again. The items they produced lose their server
``id`` where it would be looked up without its reasoning (TM405, RS-4, RS-5), reasoning left with nothing it produced
goes (TM406), and what was sent goes once more to the same upstream; nothing else the client sent changes. A
``compaction`` item is kept: it holds the summary of everything before it, and a refusal naming one (``cmp_...``) is
relayed, since leaving out reasoning would not cure it. A second refusal, like any other answer, reaches the client as
the upstream sent it; under ``reject`` the first does. Answers RS-11.

The refusal is recognised in every shape it reaches a client in (``proxy/dialects/refusal.py``: OpenRouter's quoted
body, a stream whose first event is ``response.failed`` with it). Where memory captured some of the reasoning for this
tenant (the credential in use minted it), the retry leaves out only the rest, when there is a rest. What the retry
left out is remembered when the retry is accepted (by digest, never the blob), and a later request of the tenant that
still carries it has it removed before it is sent, with this code and a detail saying the upstream refused it before:
a resumed session pays one refused round trip, not one per request.

Bad:
    {"type": "compaction", "encrypted_content": "gAAAcmp"}
    {"role": "user", "content": "Weather in Paris and the time?"}
    {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA1"}
    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "weather", "arguments": "{}"}
    {"type": "function_call", "id": "fc_2", "call_id": "call_2", "name": "time", "arguments": "{}"}
    {"type": "function_call_output", "call_id": "call_1", "output": "18C"}
    {"type": "function_call_output", "call_id": "call_2", "output": "9:00"}
    {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "gAAA2"}
    {"type": "message", "id": "msg_2", "role": "assistant", "content": [{"type": "output_text", "text": "18C at 9:00."}]}
    {"role": "user", "content": "And in Lyon?"}
Good:
    {"type": "compaction", "encrypted_content": "gAAAcmp"}
    {"role": "user", "content": "Weather in Paris and the time?"}
    {"type": "function_call", "call_id": "call_1", "name": "weather", "arguments": "{}"}
    {"type": "function_call", "call_id": "call_2", "name": "time", "arguments": "{}"}
    {"type": "function_call_output", "call_id": "call_1", "output": "18C"}
    {"type": "function_call_output", "call_id": "call_2", "output": "9:00"}
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "18C at 9:00."}]}
    {"role": "user", "content": "And in Lyon?"}
"""

import re
from collections.abc import Iterable
from typing import Any

from proxy.dialects.refusal import STATUS, Refusal, leaving
from proxy.dialects.responses.items import recall_key
from proxy.repair.context import Context
from proxy.repair.rule import Rule
from proxy.turns import Turn

RULE = Rule("TM408", "refused-reasoning", ("RS-11",))

#: Its error code.
CODE = "invalid_encrypted_content"
#: What both wordings of its message say (``Refusal.says`` compares in lower case), for an error without the code.
SAYS = ("encrypted content", "could not be verified")
#: The item a refusal names, in the wording that names one.
_NAMED = re.compile(r"for item ([A-Za-z0-9_-]+)")
#: The prefix of a compaction item's id: a refusal of one is not cured by leaving out reasoning.
COMPACTION_PREFIX = "cmp_"


def refused(refusal: Refusal) -> bool:
    """Whether an upstream's refusal is this one: status 400, and an OpenAI error whose code is
    ``invalid_encrypted_content`` or whose message says the encrypted content could not be verified, not naming a
    compaction item."""
    if refusal.status != STATUS or not (CODE in refusal.codes or refusal.says(*SAYS)):
        return False
    return not any(named.group(1).startswith(COMPACTION_PREFIX) for message in refusal.messages for named in _NAMED.finditer(message))


def refusable(item: Any) -> bool:
    """A reasoning item that carries encrypted content (what the server verifies). Not a ``compaction`` item."""
    return type(item) is dict and item.get("type") == "reasoning" and bool(item.get("encrypted_content"))


def carried(body: dict[str, Any]) -> list[Any]:
    """The encrypted content of every reasoning item of the body's input that carries some."""
    items = body.get("input")
    return [item["encrypted_content"] for item in items if refusable(item)] if type(items) is list else []


def recall_keys(body: dict[str, Any]) -> list[str]:
    """The ids the turns that may hold that reasoning are remembered by: those of the calls and messages it produced."""
    items = body.get("input")
    return [key for item in items if (key := recall_key(item)) is not None] if type(items) is list else []


def minted(turn: Turn) -> Iterable[Any]:
    """The encrypted content of the reasoning of a remembered turn."""
    return (item["encrypted_content"] for item in turn.get("items", ()) if refusable(item))


def made_with(items: list[Any]) -> dict[str, Turn]:
    """What TM405 reads as memory on the retry: the input as it was sent, for each item with a server id, by its
    recall key. The input is the record of which reasoning item each one came with (the one right before it, which a
    run of calls shares), so once that item is removed TM405 deletes the ``id`` the server would look up without it."""
    sent: Turn = {"dialect": "responses", "items": items}
    return {key: sent for item in items if type(item) is dict and "id" in item and (key := recall_key(item)) is not None}


def apply(ctx: Context) -> None:
    leave = leaving(ctx)
    why = "the upstream refused its encrypted content before" if leave.remembered else "the upstream could not verify its encrypted content"
    kept = []
    for item in ctx.messages:
        if refusable(item) and leave.leaves(item["encrypted_content"]):
            ctx.report(RULE, item, "removed", f"reasoning {item.get('id', '')} dropped: {why}".replace("  ", " "))
        else:
            kept.append(item)
    ctx.messages[:] = kept
