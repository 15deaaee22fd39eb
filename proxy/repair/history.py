"""A small vocabulary for reading a message list: call turns, tool blocks, declared ids.

A *call turn* is an assistant message with a non-empty ``tool_calls`` list. Its *block* is the run of
``tool`` messages directly after it; rule S1 wants exactly one result per declared id in that block.
"""

from collections.abc import Iterator
from typing import Any, TypeGuard

Message = dict[str, Any]


def is_call_turn(message: Any) -> TypeGuard[Message]:
    return (
        type(message) is dict
        and message.get("role") == "assistant"
        and type(message.get("tool_calls")) is list
        and len(message["tool_calls"]) > 0
    )


def is_tool(message: Any) -> TypeGuard[Message]:
    return type(message) is dict and message.get("role") == "tool"


def is_assistant(message: Any) -> TypeGuard[Message]:
    return type(message) is dict and message.get("role") == "assistant"


def call_id(call: Any) -> str | None:
    if type(call) is dict:
        value = call.get("id")
        if type(value) is str and value:
            return value
    return None


def call_name(call: Any) -> str | None:
    if type(call) is dict:
        function = call.get("function")
        if type(function) is dict and type(function.get("name")) is str and function["name"]:
            return function["name"]
    return None


def calls_of(message: Message) -> list[Any]:
    """The message's ``tool_calls`` when it is a list (a client may send anything there), else none."""
    calls = message.get("tool_calls")
    return calls if type(calls) is list else []


def declared_ids(message: Message) -> list[str]:
    """The call ids an assistant message declares, in order."""
    ids = []
    calls = message.get("tool_calls")
    if type(calls) is list:  # calls_of
        for call in calls:  # call_id, written out: this runs for every call turn of the rules that pair calls and results
            if type(call) is dict:
                cid = call.get("id")
                if type(cid) is str and cid:
                    ids.append(cid)
    return ids


def result_id(message: Message) -> str | None:
    value = message.get("tool_call_id")
    return value if type(value) is str and value else None


def all_declared_ids(messages: list[Message]) -> set[str]:
    # is_call_turn's list test only: an empty list declares nothing either
    return {cid for message in messages if type(message) is dict and message.get("role") == "assistant" for cid in declared_ids(message)}


def block_end(messages: list[Message], turn_index: int) -> int:
    """The index just past the tool block that follows the call turn at ``turn_index``."""
    end = turn_index + 1
    count = len(messages)
    while end < count and type(message := messages[end]) is dict and message.get("role") == "tool":  # is_tool, written out
        end += 1
    return end


def is_empty_content(content: Any) -> bool:
    return content is None or content == "" or content == []


def orphan_call_ids(messages: Any) -> list[str]:
    """The ``tool_call_id`` of every tool message whose call is declared nowhere in the request (S2).

    These are the ids worth recalling from memory (``plan`` adds what profile rules look up), in
    order of first appearance.
    """
    if type(messages) is not list:
        return []
    # One pass: all_declared_ids, and result_id of every is_tool message, written out (this runs on every repair).
    declared: set[str] = set()
    results: list[str] = []
    for message in messages:
        if type(message) is dict:
            role = message.get("role")
            if role == "tool":
                rid = message.get("tool_call_id")
                if type(rid) is str and rid:
                    results.append(rid)
            elif role == "assistant":
                declared.update(declared_ids(message))
    return list(dict.fromkeys(rid for rid in results if rid not in declared))


def each_call(messages: list[Message]) -> Iterator[tuple[int, Message, int, dict[str, Any]]]:
    """Every call object of every assistant message: (message position, message, call number, call)."""
    for position, message in enumerate(messages):
        if message.get("role") == "assistant" and type(message.get("tool_calls")) is list:
            for number, call in enumerate(message["tool_calls"]):
                if type(call) is dict:
                    yield position, message, number, call
