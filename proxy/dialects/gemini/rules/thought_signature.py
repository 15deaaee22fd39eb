r"""A call of the current turn sent back without the ``thoughtSignature`` the model gave it: an OpenAI bridge or SDK
that has no field for it, a client that rebuilt the parts, a history trimmed and re-assembled.

Gemini 3 refuses the first call of each step of the current turn without its signature (``Function call is missing
a thought_signature in functionCall parts. ...``; Vertex: ``Unable to submit request because function call ... is
missing a `thought_signature`.``, 400 ``INVALID_ARGUMENT``). The signature the model gave is put back, byte for byte,
on the call part it came on, taken from the proxy's memory of the model's answer (by the call's id, else the digest
of its name and arguments). A signature is never made up: calls memory does not hold go to TM610. Answers GN-11;
with the calls it re-inserts, the orphan rule (TM101) brings back their thought parts (GN-14).

Request:
    {"family": "developer", "model": "gemini-3-pro-preview"}
Bad:
    {"role": "user", "parts": [{"text": "Weather in Paris?"}]}
    {"role": "model", "parts": [{"functionCall": {"name": "weather", "args": {"city": "Paris"}}}]}
    {"role": "user", "parts": [{"functionResponse": {"name": "weather", "response": {"temp": "18C"}}}]}
Recalled:
    {"dialect": "gemini", "ids": ["gemini-call:bbb97bf00a54e97e6fa48cc8764b40a3"], "parts": [{"functionCall": {"name": "weather", "args": {"city": "Paris"}}, "thoughtSignature": "EqQBCkgIARABGAIiQLsig1=="}]}
Good:
    {"role": "user", "parts": [{"text": "Weather in Paris?"}]}
    {"role": "model", "parts": [{"functionCall": {"name": "weather", "args": {"city": "Paris"}}, "thoughtSignature": "EqQBCkgIARABGAIiQLsig1=="}]}
    {"role": "user", "parts": [{"functionResponse": {"name": "weather", "response": {"temp": "18C"}}}]}
"""

from collections.abc import Iterator
from typing import Any

import orjson

from proxy.dialects.gemini.keys import call_key, stored_keys
from proxy.dialects.gemini.parts import MODEL, SIGNATURE, current_turn, first_call, function_call
from proxy.dialects.gemini.rules.edit import copy, target_of
from proxy.repair.context import Context
from proxy.repair.rule import Rule
from proxy.turns import Turn, dialect_of

RULE = Rule("TM609", "remembered-thought-signature", ("GN-11", "GN-14"))


def signed(parts: list[Any]) -> bool:
    """Whether some part of a call content carries a signature. Gemini wants it on the first call part; one that came on
    another part (a stream that sent it on a later empty text part) is left where the model put it, never moved or
    taken for missing."""
    return any(type(part) is dict and part.get(SIGNATURE) is not None for part in parts)


def unsigned_steps(contents: list[Any]) -> Iterator[tuple[int, dict[str, Any], list[Any]]]:
    """Every model content of the current turn with calls and no signature on any part: (position, content, parts)."""
    for position in range(current_turn(contents), len(contents)):
        content = contents[position]
        if (type(content) is dict and content.get("role") == MODEL and type(parts := content.get("parts")) is list
                and first_call(parts) is not None and not signed(parts)):
            yield position, content, parts


def wanted_keys(contents: list[Any]) -> list[str]:
    """What the calls of the current turn's unsigned steps are recalled by."""
    return [key for _, _, parts in unsigned_steps(contents) for part in parts
            if (call := function_call(part)) is not None and part.get(SIGNATURE) is None and (key := call_key(call)) is not None]


def _signed_parts(turn: Turn) -> dict[str, dict[str, Any]]:
    """A remembered turn's signed call parts, by every key they are stored under."""
    return {key: part for part in turn.get("parts", ()) if part.get(SIGNATURE) is not None and (call := function_call(part)) is not None
            for key in stored_keys(call)}


def apply(ctx: Context) -> None:
    if not target_of(ctx).signs_calls or not ctx.recalled:
        return
    contents = ctx.messages
    read: dict[int, dict[str, dict[str, Any]]] = {}  # identity of a remembered turn -> its signed call parts
    for position, content, parts in list(unsigned_steps(contents)):
        restored = 0
        remembered_turn: Turn | None = None
        out: list[Any] = []
        for part in parts:
            call = function_call(part)
            key = call_key(call) if call is not None else None
            turn = ctx.recalled.get(key) if key is not None else None
            if turn is not None and dialect_of(turn) == "gemini":
                remembered_turn = turn
                found = read.get(id(turn))
                if found is None:
                    found = read[id(turn)] = _signed_parts(turn)
                remembered = found.get(key)  # type: ignore[arg-type]
                if remembered is not None:
                    out.append({**part, SIGNATURE: remembered[SIGNATURE]})
                    restored += 1
                    continue
            out.append(part)
        if not restored and remembered_turn is not None:
            # The model gave the signature on another part (a stream's later empty text part), which the client dropped.
            carriers = [part for part in remembered_turn.get("parts", ()) if part.get(SIGNATURE) is not None and function_call(part) is None]
            out += orjson.loads(orjson.dumps(carriers))  # never alias the memory
            restored = len(carriers)
        if restored:
            contents[position] = copy(ctx, content, parts=out)
            ctx.report(RULE, content, "restored", f"{restored} thought signature(s) restored from memory", position)
