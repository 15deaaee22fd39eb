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
from proxy.repair.history import Message, is_call_turn, is_tool
from proxy.repair.rule import Rule

RULE = Rule("TM102", "misplaced-tool-result", ("S1", "S2", "OAI-1", "AN-2", "MM-1", "RS-3", "AM-2"))


def apply(ctx: Context) -> None:
    messages = ctx.messages
    pairing = ctx.pairing()
    owner = pairing.declares  # id -> position of the latest call turn declaring it
    if not owner or not pairing.tools:
        return  # no result has a call to move to
    # position of the owning call turn -> results to append to its block
    moved: dict[int, list[Message]] = {}
    # Where results need only follow their call somewhere (``Profile.adjacent_results`` False), those after it stay.
    anywhere_after = not ctx.profile.adjacent_results
    for position, rid, block in pairing.results:
        home = owner.get(rid)
        if home is not None and home != block and not (anywhere_after and home < position):
            moved.setdefault(home, []).append(messages[position])
            ctx.report(RULE, messages[position], "moved", f"result of {rid} moved into its call's block", position)
    if not moved:
        return
    relocated = {id(m) for results in moved.values() for m in results}
    rebuilt: list[Message] = []
    block_of = -1  # the position of the call turn whose block we are in, if any
    for position, message in enumerate(messages):
        if id(message) in relocated:
            continue
        if not is_tool(message):
            rebuilt.extend(moved.pop(block_of, ()))
            block_of = position if is_call_turn(message) else -1
        rebuilt.append(message)
    rebuilt.extend(moved.pop(block_of, ()))
    messages[:] = rebuilt
