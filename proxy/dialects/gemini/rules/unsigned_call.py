r"""A call of the current turn without a thought signature that memory does not hold either: a call a client or
another model made up, a history from before toolmend saw it, a turn memory has forgotten.

Gemini 3 refuses it (``Function call is missing a thought_signature in functionCall parts. ...``, 400
``INVALID_ARGUMENT``), and a signature cannot be made. What happens is the operator's choice: under thinking policy
``drop`` (the default) the step's calls, and the responses right after them, become text parts that say so (the
model reads what was called and returned; nothing claims to be its own call); under ``reject`` the request is
refused; with ``--dummy-signatures`` (opt-in) the step's first call gets the dummy value Google documents,
``skip_thought_signature_validator``, which tells the server to skip the check. Answers GN-11.

Request:
    {"family": "developer", "model": "gemini-3-pro-preview"}
Bad:
    {"role": "user", "parts": [{"text": "List the files."}]}
    {"role": "model", "parts": [{"functionCall": {"name": "shell", "args": {"command": "ls"}}}]}
    {"role": "user", "parts": [{"functionResponse": {"name": "shell", "response": {"output": "README.md"}}}]}
Good:
    {"role": "user", "parts": [{"text": "List the files."}]}
    {"role": "model", "parts": [{"text": "[toolmend] Called shell with {\"command\":\"ls\"} (its thought signature was lost, so it is shown as text)."}]}
    {"role": "user", "parts": [{"text": "[toolmend] shell returned {\"output\":\"README.md\"}"}]}
"""

from typing import Any

import orjson

from proxy.dialects.gemini.parts import SIGNATURE, function_call, function_response, is_response_content
from proxy.dialects.gemini.rules.edit import copy, target_of
from proxy.dialects.gemini.rules.thought_signature import unsigned_steps
from proxy.repair.context import Context
from proxy.repair.rule import Rule

RULE = Rule("TM610", "unsigned-call", ("GN-11",))

#: The value Google documents for a call that never had a signature (Gemini API FAQ; Vertex thought-signatures page).
DUMMY = "skip_thought_signature_validator"


def _json(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except orjson.JSONEncodeError:
        return "(too deeply nested to show)"


def call_text(call: dict[str, Any]) -> dict[str, Any]:
    return {"text": f"[toolmend] Called {call.get('name')} with {_json(call.get('args', {}))} "
                    "(its thought signature was lost, so it is shown as text)."}


def response_text(response: dict[str, Any]) -> dict[str, Any]:
    return {"text": f"[toolmend] {response.get('name')} returned {_json(response.get('response'))}"}


def apply(ctx: Context) -> None:
    if not target_of(ctx).signs_calls:
        return
    contents = ctx.messages
    for position, content, parts in list(unsigned_steps(contents)):
        if ctx.policy.dummy_signatures:
            signed = list(parts)
            at = next(number for number, part in enumerate(parts) if function_call(part) is not None)
            signed[at] = {**parts[at], SIGNATURE: DUMMY}
            contents[position] = copy(ctx, content, parts=signed)
            ctx.report(RULE, content, "signed", f"no thought signature remembered; the dummy {DUMMY!r} given (opt-in policy)", position)
            continue
        if ctx.policy.thinking == "reject":
            ctx.reject(RULE, content, "a call of the current turn has no thought signature, and none is remembered", position)
            return
        calls = sum(1 for part in parts if function_call(part) is not None)
        contents[position] = copy(ctx, content, parts=[call_text(call) if (call := function_call(part)) is not None else part
                                                       for part in parts])
        after = contents[position + 1] if position + 1 < len(contents) else None
        if type(after) is dict and is_response_content(after):
            contents[position + 1] = copy(ctx, after, parts=[response_text(response) if (response := function_response(part)) is not None
                                                              else part for part in after["parts"]])
        ctx.report(RULE, content, "converted", f"no thought signature remembered for {calls} call(s); shown as text "
                   "(thinking policy 'drop')", position)
