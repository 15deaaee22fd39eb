r"""A tool result that sits outside its call's block: before the call, after a later turn, or in another
turn's block (persistence races, snapshot merges).

The result moves to the end of the block of the assistant message that declares its id.
Answers S1, S2, OAI-1, AN-2, MM-1, and over the dialects' views RS-3 (an output before its call) and AM-2.
Where the profile lets results stand anywhere after their call (``Profile.adjacent_results`` False: OpenAI's
Responses API) only results before their call move.

Bad:
    {"role": "user", "content": "Weather?"}
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]}
    {"role": "assistant", "content": "Checking."}
    {"role": "tool", "tool_call_id": "call_1", "content": "18C"}
Good:
    {"role": "user", "content": "Weather?"}
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]}
    {"role": "tool", "tool_call_id": "call_1", "content": "18C"}
    {"role": "assistant", "content": "Checking."}
"""

from proxy.repair.context import Context
from proxy.repair.history import Message, declared_ids, is_assistant, is_call_turn, is_tool
from proxy.repair.rule import Rule

RULE = Rule("TM102", "misplaced-tool-result", ("S1", "S2", "OAI-1", "AN-2", "MM-1", "RS-3", "AM-2"))


def apply(ctx: Context) -> None:
    messages = ctx.messages
    # The latest call turn declaring each id, and whether there is any tool message at all (one pass).
    owner: dict[str, int] = {}
    any_result = False
    for m in messages:
        if is_assistant(m):
            for cid in declared_ids(m):
                owner[cid] = id(m)
        elif is_tool(m):
            any_result = True
    if not owner or not any_result:
        return  # no result has a call to move to
    # identity of the owning call turn -> results to append to its block (looked up with None outside any block)
    moved: dict[int | None, list[Message]] = {}
    block_of: int | None = None  # identity of the call turn whose block we are in, if any
    # Where results need only follow their call somewhere (``Profile.adjacent_results`` False), those after it stay.
    anywhere_after = not ctx.profile.adjacent_results
    seen: set[int] = set()  # identity of the call turns passed so far
    for position, message in enumerate(messages):
        if type(message) is dict and message.get("role") == "tool":  # history.is_tool
            rid = message.get("tool_call_id")  # history.result_id: a non-empty string, else no owner
            home = owner.get(rid) if type(rid) is str and rid else None
            if home is not None and home != block_of and not (anywhere_after and home in seen):
                moved.setdefault(home, []).append(message)
                ctx.report(RULE, message, "moved", f"result of {rid} moved into its call's block", position)
        elif type(message) is dict and message.get("role") == "assistant" and type(calls := message.get("tool_calls")) is list and calls:
            block_of = id(message)  # a call turn (history.is_call_turn)
            seen.add(block_of)
        else:
            block_of = None
    if not moved:
        return
    relocated = {id(m) for results in moved.values() for m in results}
    rebuilt: list[Message] = []
    block_of = None
    for message in messages:
        if id(message) in relocated:
            continue
        if not is_tool(message):
            rebuilt.extend(moved.pop(block_of, ()))
            block_of = id(message) if is_call_turn(message) else None
        rebuilt.append(message)
    rebuilt.extend(moved.pop(block_of, ()))
    messages[:] = rebuilt
