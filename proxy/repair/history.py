"""A small vocabulary for reading a message list: call turns, tool blocks, declared ids.

A *call turn* is an assistant message with a non-empty ``tool_calls`` list. Its *block* is the run of
``tool`` messages directly after it; rule S1 wants exactly one result per declared id in that block.
"""

from collections.abc import Iterator, Sequence
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
    calls = calls_of(message)
    # Most assistant messages of a long history declare none: no comprehension is run for them.
    return [cid for call in calls if (cid := call_id(call)) is not None] if calls else []


def result_id(message: Message) -> str | None:
    value = message.get("tool_call_id")
    return value if type(value) is str and value else None


def all_declared_ids(messages: list[Message]) -> set[str]:
    return {cid for message in messages if is_assistant(message) for cid in declared_ids(message)}


def block_end(messages: list[Message], turn_index: int) -> int:
    """The index just past the tool block that follows the call turn at ``turn_index``."""
    end = turn_index + 1
    while end < len(messages) and is_tool(messages[end]):
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
    declared = all_declared_ids(messages)
    return list(dict.fromkeys(rid for message in messages if is_tool(message) and (rid := result_id(message)) is not None
                              and rid not in declared))


class Pairing:
    """Where the calls and results of a message list stand, read in one walk: what the structural rules ask of the
    whole history, so that rules that follow one another without changing it do not each walk it again
    (``Context.pairing``). Positions are indices into the list as it was walked."""

    __slots__ = ("declares", "idless", "repeated", "results", "tools", "turns")

    def __init__(self, messages: Sequence[Message] = ()) -> None:
        #: Every call turn (``is_call_turn``): its position, the end of the block of tool messages after it
        #: (``block_end``) and the ids it declares (``declared_ids``), in order.
        self.turns: list[tuple[int, int, list[str]]] = []
        #: Every tool message with an id (``result_id``): its position, its id, and the position of the call turn whose
        #: block it stands in (-1: none), in order.
        self.results: list[tuple[int, str, int]] = []
        #: Each declared id (``declared_ids``) -> the position of the latest assistant message declaring it.
        self.declares: dict[str, int] = {}
        self.repeated = False  # whether some id is declared twice
        self.tools = False  # whether there is any tool message (``is_tool``)
        self.idless = False  # whether some tool message has no id (``result_id``), and so no place in ``results``
        # Written out with locals (and ``call_id``, ``result_id``, ``is_call_turn`` inlined): this walks every message.
        # tests/unit/repair/test_history.py holds it to what those say.
        turns, results, declares = self.turns, self.results, self.declares
        add_turn, add_result = turns.append, results.append
        tools = idless = False
        declared = 0  # how many ids the call turns declare: more than ``declares`` holds when some id is repeated
        block = -1  # the call turn whose block the walk is in
        ids: list[str] = []  # the ids it declares
        for position, message in enumerate(messages):
            role = message.get("role") if type(message) is dict else None
            if role == "tool":
                tools = True
                if type(rid := message.get("tool_call_id")) is str and rid:
                    add_result((position, rid, block))
                else:
                    idless = True
                continue
            if block >= 0:
                add_turn((block, position, ids))
                block = -1
            if role == "assistant" and type(calls := message.get("tool_calls")) is list and calls:
                block, ids = position, []
                for call in calls:
                    if type(call) is dict and type(cid := call.get("id")) is str and cid:
                        ids.append(cid)
                        declares[cid] = position
                declared += len(ids)
        if block >= 0:
            add_turn((block, len(messages), ids))
        repeated = declared > len(declares)
        self.repeated, self.tools, self.idless = repeated, tools, idless


def each_call(messages: list[Message]) -> Iterator[tuple[int, Message, int, dict[str, Any]]]:
    """Every call object of every assistant message: (message position, message, call number, call)."""
    for position, message in enumerate(messages):
        if message.get("role") == "assistant" and type(message.get("tool_calls")) is list:
            for number, call in enumerate(message["tool_calls"]):
                if type(call) is dict:
                    yield position, message, number, call
