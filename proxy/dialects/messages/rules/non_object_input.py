r"""A ``tool_use`` whose ``input`` is not an object: JSON text (a chat-completions ``arguments`` string carried
over), ``""``, ``[]``, null, or missing (calls from another model, a framework that stored the raw arguments).

Anthropic refuses it (AM-8: "tool_use.input: Input should be a valid dictionary"). Text that parses to an
object becomes that object (what the model meant); empty text, null or a missing input become ``{}``; anything
else is kept, as JSON text, under the key ``_toolmend_unparsed_arguments`` of an object, as for chat's invalid
arguments (TM203), so nothing the model wrote is lost. Answers AM-8.

Bad:
    {"role": "user", "content": "Weather in Paris?"}
    {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_01", "name": "weather", "input": "{\"city\": \"Paris\"}"}, {"type": "tool_use", "id": "toolu_02", "name": "search", "input": "[1, 2"}]}
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "18C"}, {"type": "tool_result", "tool_use_id": "toolu_02", "content": "bad input"}]}
Good:
    {"role": "user", "content": "Weather in Paris?"}
    {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_01", "name": "weather", "input": {"city": "Paris"}}, {"type": "tool_use", "id": "toolu_02", "name": "search", "input": {"_toolmend_unparsed_arguments": "[1, 2"}}]}
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "18C"}, {"type": "tool_result", "tool_use_id": "toolu_02", "content": "bad input"}]}
"""

from typing import Any

import orjson

from proxy.dialects.messages.blocks import is_tool_use
from proxy.dialects.messages.rules.edit import Change, blocks, rewrite
from proxy.repair.content import UNPARSED_KEY
from proxy.repair.context import Context
from proxy.repair.rule import Rule

RULE = Rule("TM503", "non-object-input", ("AM-8",))


def bad_input(block: Any) -> bool:
    return is_tool_use(block) and type(block.get("input")) is not dict


def as_object(value: Any) -> dict[str, Any]:
    """The object a non-object ``input`` stands for."""
    if value is None or (type(value) is str and not value.strip()):
        return {}
    if type(value) is str:
        try:
            parsed = orjson.loads(value)
        except orjson.JSONDecodeError:
            return {UNPARSED_KEY: value}
        return parsed if type(parsed) is dict else {UNPARSED_KEY: value}
    return {UNPARSED_KEY: orjson.dumps(value).decode()}


def edited(position: int, message: dict[str, Any]) -> Change | None:
    """The message as this rule edits it (its new content, the finding), or None when it leaves it as it is."""
    content = blocks(message)
    bad = [block for block in content if bad_input(block)]
    if not bad:
        return None
    fixed = [{**block, "input": as_object(block.get("input"))} if bad_input(block) else block for block in content]
    kinds = ", ".join(f"{block.get('id')} ({type(block.get('input')).__name__ if 'input' in block else 'missing'})" for block in bad)
    return Change(fixed, "replaced", f"tool_use input made an object: {kinds}")


def apply(ctx: Context) -> None:
    rewrite(ctx, RULE, edited)
