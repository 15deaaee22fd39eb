r"""A message that is not an object, or has no string ``role``: nothing can be repaired safely.

The request is refused with a clear error naming the message, instead of being forwarded for the
upstream to reject with a less helpful one. Answers OAI-10 (messages must be typed objects).

Bad:
    {"role": "user", "content": "hi"}
    "hello"
Good:
    (rejected)
"""

from proxy.repair.context import Context
from proxy.repair.rule import Rule

RULE = Rule("TM200", "malformed-message", ("OAI-10",))


def apply(ctx: Context) -> None:
    for index, message in enumerate(ctx.messages):
        if type(message) is not dict:
            ctx.reject(RULE, message, f"messages[{index}] is a {type(message).__name__}, not an object", index)
            return
        if type(message.get("role")) is not str:
            ctx.reject(RULE, message, f"messages[{index}] has no string 'role'", index)
            return
