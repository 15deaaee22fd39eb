r"""Legacy function calling: ``function_call`` on an assistant and ``role: "function"`` results.

o-series models, newer Azure api-versions and closed-schema providers reject the legacy shape. The call
becomes a one-element ``tool_calls`` entry with a deterministic id, and the function message that answers
it becomes a ``tool`` message carrying that id; content is unchanged. Answers S11, OAI-11, AZ-3, MI-7.

Bad:
    {"role": "user", "content": "Weather?"}
    {"role": "assistant", "content": null, "function_call": {"name": "weather", "arguments": "{}"}}
    {"role": "function", "name": "weather", "content": "18C"}
Good:
    {"role": "user", "content": "Weather?"}
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_f411e99e77e4e16cddc579f6", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]}
    {"role": "tool", "name": "weather", "content": "18C", "tool_call_id": "call_f411e99e77e4e16cddc579f6"}
"""

from collections import OrderedDict, deque
from itertools import count
from typing import Any

import orjson

from proxy.repair.context import Context, stable_id
from proxy.repair.history import calls_of
from proxy.repair.rule import Rule

RULE = Rule("TM207", "legacy-function-call", ("S11", "OAI-11", "AZ-3", "MI-7"))


def apply(ctx: Context) -> None:
    awaiting = _Awaiting()
    for position, message in enumerate(ctx.messages):
        role = message.get("role")
        if role == "assistant" and "function_call" in message:
            legacy = message.pop("function_call")
            function = legacy if type(legacy) is dict else {}
            name = function.get("name")
            new_id = stable_id(position, name, function.get("arguments"))
            call = {"id": new_id, "type": "function", "function": dict(function)}
            message["tool_calls"] = [*calls_of(message), call]
            awaiting.add(name, new_id)
            ctx.report(RULE, message, "converted", f"function_call {name!r} -> tool_calls id {new_id}", position)
        elif role == "function":
            name = message.get("name")
            new_id = awaiting.answer(name) or stable_id(position, name)  # a fresh id: the orphan rule then decides
            message["role"] = "tool"
            message["tool_call_id"] = new_id
            ctx.report(RULE, message, "converted", f"role 'function' -> 'tool' answering {new_id}", position)


class _Awaiting:
    """The converted calls not yet answered, in order. A function message answers the first awaiting one with its
    name, else the first awaiting one (found by name, not by a search of every awaiting call, which made a long
    history of unmatched names quadratic)."""

    def __init__(self) -> None:
        self._order: OrderedDict[int, tuple[Any, str]] = OrderedDict()  # number -> (name, id), oldest first
        self._named: dict[Any, deque[int]] = {}  # name (``_key``) -> the numbers awaiting with it, oldest first
        self._numbers = count()

    def add(self, name: Any, call_id: str) -> None:
        number = next(self._numbers)
        self._order[number] = (name, call_id)
        self._named.setdefault(_key(name), deque()).append(number)

    def answer(self, name: Any) -> str | None:
        """The id of the call a function message of this name answers (no longer awaiting); None when none awaits."""
        numbers = self._named.get(_key(name))
        if numbers:
            return self._order.pop(numbers.popleft())[1]
        if not self._order:
            return None
        _, (first, call_id) = self._order.popitem(last=False)
        self._named[_key(first)].popleft()  # the oldest of all is the oldest of its name
        return call_id


def _key(name: Any) -> Any:
    """A name as a dict key, equal where names are equal: a list or an object as its JSON text, keys sorted."""
    return orjson.dumps(name, option=orjson.OPT_SORT_KEYS) if type(name) is list or type(name) is dict else name
