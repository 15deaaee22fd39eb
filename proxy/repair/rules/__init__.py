"""The rules every dialect shares, written once over the neutral (chat-shaped) view of a history.

``STRUCTURAL`` pairs calls and results (TM101-TM108), in chat's order: the rules that give every result an id
first, then the id rules, then the orphan rule (which needs every declared id), then where results stand. Each
dialect's pipeline (``proxy/dialects/<dialect>/rules/__init__.py``) names them, with ``long_call_id`` (TM208, where
the provider bounds id length) and ``empty_history`` (TM210, last), among its own rules. Each rule is one module with
``RULE`` (code, name, provider rule ids), a Bad/Good docstring and ``apply(ctx)``.
"""

from proxy.repair.rule import RepairRule
from proxy.repair.rules import (
    duplicate_call_id,
    duplicate_tool_result,
    interleaved_message,
    misplaced_tool_result,
    orphan_tool_message,
    split_parallel_turn,
    tool_result_without_id,
    unanswered_tool_call,
)

#: The structural rules, in chat's order: what every dialect runs over its neutral view (pairing calls and
#: results: TM101-TM108). Where results may stand is the profile's.
STRUCTURAL: tuple[RepairRule, ...] = (
    tool_result_without_id,
    split_parallel_turn,
    duplicate_call_id,
    orphan_tool_message,
    interleaved_message,
    misplaced_tool_result,
    duplicate_tool_result,
    unanswered_tool_call,
)
