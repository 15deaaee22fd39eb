r"""Image (or other media) parts inside a tool result: only user messages may carry them.

OpenAI rejects image URLs in tool messages and most providers ignore them. The media parts move into a
user message placed right after the complete tool block, labelled with the call they came from; the tool
message keeps its text parts (or a note saying where the media went). Answers E-TOOL-IMG, OAI-10.

Bad:
    {"role": "user", "content": "Take a screenshot"}
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "screenshot", "arguments": "{}"}}]}
    {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "Done."}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}}]}
Good:
    {"role": "user", "content": "Take a screenshot"}
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "screenshot", "arguments": "{}"}}]}
    {"role": "tool", "tool_call_id": "call_1", "content": "Done."}
    {"role": "user", "content": [{"type": "text", "text": "[toolmend] Media returned by tool call call_1:"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}}]}
"""

from typing import Any

from proxy.repair.content import as_text, is_media_part
from proxy.repair.context import Context
from proxy.repair.history import Message, block_end, is_call_turn, result_id
from proxy.repair.rule import Rule

RULE = Rule("TM206", "tool-image-parts", ("E-TOOL-IMG", "OAI-10"))

#: What a tool message says when all it returned was media, now in the following user message.
MEDIA_MOVED_NOTE = "[toolmend] The media this tool returned follows in the next user message."


def apply(ctx: Context) -> None:
    messages = ctx.messages
    if not any(m.get("role") == "tool" and type(m.get("content")) is list for m in messages):
        return
    # The history is copied with the new user messages in place, not edited by ``insert``: each insertion would move
    # every later message, and a long history of such blocks became quadratic.
    out: list[Message] = []
    turn, count = 0, len(messages)
    while turn < count:
        if not is_call_turn(messages[turn]):
            out.append(messages[turn])
            turn += 1
            continue
        end = block_end(messages, turn)
        out += messages[turn:end]
        carried: list[Any] = []
        for message in messages[turn + 1 : end]:
            content = message.get("content")
            if type(content) is not list or not any(is_media_part(part) for part in content):
                continue
            media = [part for part in content if is_media_part(part)]
            text = [part for part in content if not is_media_part(part)]
            message["content"] = as_text(text) if text else MEDIA_MOVED_NOTE
            label = {"type": "text", "text": f"[toolmend] Media returned by tool call {result_id(message)}:"}
            carried += [label, *media]
            ctx.report(RULE, message, "moved", f"{len(media)} media part(s) of {result_id(message)} moved to a user message after the block",
                       len(out) - (end - turn))
        if carried:
            out.append({"role": "user", "content": carried})
        turn = end
    if len(out) != count:
        messages[:] = out
