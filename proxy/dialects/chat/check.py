"""Chat's fast path: does a message list already satisfy every rule chat runs for all profiles?

Most requests are valid, and for them the proxy must cost no more than parsing the body. This single
pass answers "nothing to repair" without running the rules; when it says no, the rules run and report
exactly what is wrong. It must reject everything any universal rule would change (the property tests
hold the two to that).
"""

from typing import Any

import orjson

from proxy.dialects.chat.rules.tool_content_type import text_parts
from proxy.repair.profile import Profile

_decode = orjson.loads
_JSONDecodeError = orjson.JSONDecodeError


def is_clean(messages: Any, profile: Profile) -> bool:
    """Whether ``messages`` needs nothing from the rules chat runs for every profile (``profile`` says which tool content
    is taken, and how long a call id may be)."""
    if type(messages) is not list:
        return True  # not a chat history: nothing for the repair engine to do
    try:
        return _all_clean(messages, profile.string_tool_content, profile.max_id_length)
    except (KeyError, TypeError, AttributeError):
        # A required key missing, or a message, call or function that is not an object: something a rule
        # will repair or refuse. (Subscripts instead of .get: the happy path is the hot path.)
        return False


def _all_clean(messages: list[Any], strings_only: bool, longest: int) -> bool:
    seen: set[str] = set()  # every call id declared so far (S4)
    pending: set[str] = set()  # ids of the latest call turn still awaiting their result
    for message in messages:
        role = message["role"]
        if role == "tool":
            content = message["content"]
            if type(content) is not str and (strings_only or not text_parts(content)):
                return False  # S9: OpenAI takes text parts (OAI-10), Groq, Mistral and vLLM only a string (GR-2, MI-9)
            try:  # an id this block awaits, answered once; else outside a block, unknown or repeated (S2, S5)
                pending.remove(message["tool_call_id"])
            except (KeyError, TypeError):
                return False
        elif pending:
            return False  # a non-tool message before every call was answered (S1, S3)
        elif role == "assistant":
            if "function_call" in message:
                return False  # S11
            calls = message.get("tool_calls")
            if calls is None:
                content = message.get("content")
                if (content is None or content == "" or content == []) and not message.get("audio") and not message.get("refusal"):
                    return False  # S10
                continue
            if type(calls) is not list or not calls:
                return False  # S8
            for call in calls:
                cid = call["id"]
                if type(cid) is not str or not 0 < len(cid) <= longest or cid in seen:
                    return False  # S6, E-ID-40, S4
                seen.add(cid)
                pending.add(cid)
                kind = call["type"]
                if kind != "function":
                    if kind is None:
                        return False  # S6
                    continue  # another declared call type (OpenAI "custom" tools): not ours to judge
                function = call["function"]
                name = function["name"]
                arguments = function["arguments"]
                if type(name) is not str or not name or type(arguments) is not str:
                    return False  # S6
                try:
                    _decode(arguments)  # S7; also rejects "" and whitespace
                except _JSONDecodeError:
                    return False
        elif type(role) is not str or role == "function":
            return False  # malformed, S11
    return not pending
