r"""A call with no result before the next non-tool message (an interrupted tool, a cancelled turn, or
a history that ends with the call).

Every strict provider rejects it. A tool message with the call's id and the policy's placeholder text
(saying plainly that nothing ran) is added at the end of the block; a result is never invented.
Answers S3, OAI-2, AZ-1, DS-2, QW-2, KI-2, AN-1, GE-2, MI-2; RS-1, RS-2 and RS-18 (the Responses view writes an
output of the call's family), AM-1 (the Messages view writes an ``is_error`` ``tool_result`` first in the next
user message).

Bad:
    {"role": "user", "content": "Weather?"}
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]}
    {"role": "user", "content": "Never mind, just say hi."}
Good:
    {"role": "user", "content": "Weather?"}
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]}
    {"role": "tool", "tool_call_id": "call_1", "content": "[toolmend] No result: this tool call was not executed or its result was lost."}
    {"role": "user", "content": "Never mind, just say hi."}
"""

from proxy.repair.context import Context
from proxy.repair.history import Message
from proxy.repair.rule import Rule

RULE = Rule("TM104", "unanswered-tool-call", ("S3", "OAI-2", "AZ-1", "DS-2", "QW-2", "KI-2", "AN-1", "GE-2", "MI-2", "RS-1", "RS-2", "RS-18", "AM-1"))


def apply(ctx: Context) -> None:
    messages = ctx.messages
    pairing = ctx.pairing()
    # Where a result may stand anywhere after its call (``Profile.adjacent_results`` False), one later on counts.
    later: dict[str, int] = {} if ctx.profile.adjacent_results else {rid: position for position, rid, _ in pairing.results}
    # The history is copied once with the placeholders in place, not edited by ``insert``: each insertion would move
    # every later message, and a long history with many unanswered calls became quadratic. It is copied only from the
    # first unanswered call on, in slices: ``messages[copied:]`` is not in ``out`` yet.
    out: list[Message] = []
    copied = 0
    # (call turn, id) for each result in the block of a call turn (a declared id is a non-empty string: a result
    # without one answers none).
    answered = {(block, rid) for _, rid, block in pairing.results if block >= 0}
    for turn, end, declared in pairing.turns:
        missing = [cid for cid in declared if (turn, cid) not in answered]
        if missing and later:  # filled only where a later result counts: the others skip a look-up per call
            missing = [cid for cid in missing if later.get(cid, -1) <= turn]
        if missing:
            m = messages[turn]
            out += messages[copied:end]
            copied = end
            at = len(out) - (end - turn)  # where the turn stands in the repaired history
            for cid in missing:
                out.append({"role": "tool", "tool_call_id": cid, "content": ctx.policy.placeholder})
                ctx.report(RULE, m, "inserted", f"placeholder result for unanswered call {cid}", at)
    if copied:
        out += messages[copied:]
        messages[:] = out
