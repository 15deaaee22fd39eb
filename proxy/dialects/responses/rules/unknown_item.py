r"""The upstream does not know an item id the input names: a reasoning item a converter fabricated, a message id from
another project, an item that expired. Nothing in a request tells an id the server issued from one it did not, so
this rule runs on the refusal.

OpenAI refuses the request (RS-8: status 404, ``Item with id 'rs_...' not found.``; RS-7's wording under ``store:
false`` begins alike and is answered alike). The item the refusal names is dropped where it holds nothing but that id
for the server to look up (an ``item_reference``, an item of only ``type`` and ``id``, reasoning without
``encrypted_content``); any other keeps its content and loses only its ``id``. The items that dropped reasoning
produced lose their server ids where they would be looked up without it (TM405), reasoning left with nothing it
produced goes (TM406), and what was sent goes once more to the same upstream; nothing else the client sent changes.
A second refusal, like any other answer, reaches the client as the upstream sent it. Answers RS-8.

Bad:
    {"role": "user", "content": "Weather in Paris?"}
    {"type": "reasoning", "id": "rs_fabricated", "summary": []}
    {"type": "function_call", "call_id": "call_1", "name": "weather", "arguments": "{}"}
    {"type": "function_call_output", "call_id": "call_1", "output": "18C"}
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "18C in Paris."}]}
    {"role": "user", "content": "And in Lyon?"}
Good:
    {"role": "user", "content": "Weather in Paris?"}
    {"type": "function_call", "call_id": "call_1", "name": "weather", "arguments": "{}"}
    {"type": "function_call_output", "call_id": "call_1", "output": "18C"}
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "18C in Paris."}]}
    {"role": "user", "content": "And in Lyon?"}
"""

import re
from typing import Any

from proxy.dialects.refusal import Refusal, leaving
from proxy.dialects.responses.items import id_pairs
from proxy.repair.context import Context
from proxy.repair.rule import Rule

RULE = Rule("TM409", "unknown-item", ("RS-8",))

#: Its status.
STATUS = 404
#: The id a refusal names.
_NAMED = re.compile(r"Item with id '([^']+)' not found")


def named(refusal: Refusal) -> str | None:
    """The item id a refusal says the server does not know (the first it names); None when it names none."""
    return next((found.group(1) for message in refusal.messages if (found := _NAMED.search(message)) is not None), None)


def refused(refusal: Refusal) -> bool:
    """Whether an upstream's refusal is this one: status 404, naming an item id."""
    return refusal.status == STATUS and named(refusal) is not None


def _looked_up(item: dict[str, Any]) -> bool:
    """An item that holds nothing but its id for the server to look up."""
    kind = item.get("type")
    return kind == "item_reference" or set(item) <= {"type", "id"} or (kind == "reasoning" and not item.get("encrypted_content"))


def apply(ctx: Context) -> None:
    refusal = leaving(ctx).refusal
    unknown = named(refusal) if refusal is not None else None
    kept: list[Any] = []
    for item in ctx.messages:
        if type(item) is not dict or unknown is None or item.get("id") != unknown or id_pairs(item):
            kept.append(item)
        elif _looked_up(item):
            ctx.report(RULE, item, "removed", f"item {unknown} dropped: the upstream does not know its id, and it holds nothing else")
        else:
            ctx.report(RULE, item, "removed", f"{item.get('type', 'message')} {unknown} id deleted: the upstream does not know it")
            kept.append({key: value for key, value in item.items() if key != "id"})
    ctx.messages[:] = kept
