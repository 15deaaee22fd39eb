r"""Call ids that are not exactly 9 letters and digits, sent to Mistral (or a mistral_common server).

Mistral rejects any other id. Each id is mapped deterministically to 9 alphanumerics derived from its
SHA-256 (the same id always maps to the same short id; a clash inside one request takes the next
candidate), in the calls and in their results. Profile ``mistral``. Answers E-MI-1, MI-4, VL-7.

Bad:
    {"role": "user", "content": "Weather?"}
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_PTLP8xhu3uwZk4l3nlnrrJha", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]}
    {"role": "tool", "tool_call_id": "call_PTLP8xhu3uwZk4l3nlnrrJha", "content": "18C"}
Good:
    {"role": "user", "content": "Weather?"}
    {"role": "assistant", "content": null, "tool_calls": [{"id": "NZ1xFJTAf", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]}
    {"role": "tool", "tool_call_id": "NZ1xFJTAf", "content": "18C"}
"""

import hashlib
import re
import string
from typing import Any

from proxy.repair.context import Context
from proxy.repair.history import call_id, calls_of, each_call, is_tool, result_id
from proxy.repair.rule import Rule

RULE = Rule("TM301", "mistral-call-ids", ("E-MI-1", "MI-4", "VL-7"))

VALID_ID = re.compile(r"[a-zA-Z0-9]{9}")
ALPHABET = string.ascii_letters + string.digits


def _is_valid(value: Any) -> bool:
    return type(value) is str and VALID_ID.fullmatch(value) is not None


def is_clean(messages: list[Any], profile: Any) -> bool:
    for message in messages:
        if message.get("role") == "tool" and not _is_valid(message.get("tool_call_id")):
            return False
        for call in calls_of(message):
            if type(call) is dict and not _is_valid(call.get("id")):
                return False
    return True


def short_id(original: str, attempt: int = 0) -> str:
    number = int.from_bytes(hashlib.sha256(f"{original}\x1f{attempt}".encode()).digest()[:8], "big")
    letters = []
    for _ in range(9):
        number, digit = divmod(number, len(ALPHABET))
        letters.append(ALPHABET[digit])
    return "".join(letters)


def apply(ctx: Context) -> None:
    taken = {cid for _, _, _, call in each_call(ctx.messages) if _is_valid(cid := call_id(call))}
    mapping: dict[str, str] = {}
    for position, message, number, call in each_call(ctx.messages):
        original = call_id(call)
        if original is None or _is_valid(original):
            continue
        if original not in mapping:
            attempt, candidate = 0, short_id(original)
            while candidate in taken:
                attempt += 1
                candidate = short_id(original, attempt)
            mapping[original] = candidate
            taken.add(candidate)
        call["id"] = mapping[original]
        ctx.report(RULE, message, "renamed", f"tool_calls[{number}] id {original} -> {call['id']}", position)
    for position, message in enumerate(ctx.messages):
        rid = result_id(message) if is_tool(message) else None
        if rid is not None and rid in mapping:
            message["tool_call_id"] = mapping[rid]
            ctx.report(RULE, message, "renamed", f"tool_call_id -> {message['tool_call_id']}", position)
