"""The fast path: does a message list already satisfy every universal rule?

Most requests are valid, and for them the proxy must cost no more than parsing the body. This single
pass answers "nothing to repair" without running the rules; when it says no, the rules run and report
exactly what is wrong. It must reject everything any universal rule would change (the property tests
hold the two to that).
"""

from typing import Any

import orjson

_decode = orjson.loads
_JSONDecodeError = orjson.JSONDecodeError
MAX_ID_LENGTH = 40


def is_clean(messages: Any) -> bool:
    if type(messages) is not list:
        return True  # not a chat history: nothing for the repair engine to do
    seen: set[str] = set()
    pending: set[str] | None = None  # ids of the current call turn not yet answered, inside its block
    for message in messages:
        if type(message) is not dict:
            return False
        role = message.get("role")
        if role == "tool":
            if not pending:
                return False  # outside a block, or one result too many (S2, S5)
            rid = message.get("tool_call_id")
            if rid not in pending or type(message.get("content")) is not str:
                return False  # S2/S5, S9
            pending.discard(rid)
            continue
        if pending:
            return False  # a non-tool message before every call was answered (S1, S3)
        pending = None
        if role == "assistant":
            calls = message.get("tool_calls")
            if calls is not None:
                if type(calls) is not list or not calls or not _calls_clean(calls, seen):
                    return False  # S4, S6, S7, S8, E-ID-40
                pending = {call["id"] for call in calls}
            elif _is_empty(message):
                return False  # S10
            if "function_call" in message:
                return False  # S11
        elif type(role) is not str or role == "function":
            return False  # malformed, S11
    return not pending


def _calls_clean(calls: list[Any], seen: set[str]) -> bool:
    for call in calls:
        if type(call) is not dict:
            return False
        cid = call.get("id")
        if type(cid) is not str or not cid or len(cid) > MAX_ID_LENGTH or cid in seen:
            return False
        seen.add(cid)
        kind = call.get("type")
        if kind != "function":
            if kind is None:
                return False  # S6
            continue  # another declared call type (OpenAI "custom" tools): not ours to judge
        function = call.get("function")
        if type(function) is not dict:
            return False
        name = function.get("name")
        arguments = function.get("arguments")
        if type(name) is not str or not name or type(arguments) is not str or not _is_json(arguments):
            return False
    return True


def _is_json(text: str) -> bool:
    if not text.strip():
        return False
    try:
        _decode(text)
    except _JSONDecodeError:
        return False
    return True


def _is_empty(message: dict[str, Any]) -> bool:
    content = message.get("content")
    return (content is None or content == "" or content == []) and not message.get("audio") and not message.get("refusal")
