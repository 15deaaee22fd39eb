"""The Responses API's own rules, over input items (after the structural rules ran over the view and their
edits were written back), in the order they run: what the previous response already holds first (that one
before the structural rules, see ``plan.py``), then duplicates, then item ids (wrong ones deleted, ones memory knows the server
never issued deleted, ones whose reasoning is gone deleted), reasoning left with nothing to follow, and last what ``store: false`` forbids, so it
also sees what the earlier rules kept.
Each rule is one module with ``RULE``, a Bad/Good docstring (one input item a line) and ``apply(ctx)``.
"""

from proxy.dialects.responses.rules import (
    bad_item_id,
    dangling_reasoning,
    duplicate_item,
    previous_response_items,
    previous_response_unanswered,
    reasoning_required,
    unissued_ids,
    unstored_ids,
)
from proxy.repair.rule import RepairRule

#: Every Responses rule, as the catalogue lists them. TM408 (``refused_reasoning.py``) and TM409 (``unknown_item.py``)
#: run on no request as the client sent it, only on the upstream's refusal of encrypted content it could not verify
#: (``plan.retried``) or of an item id it does not know (``plan.retried_unknown``).
ITEM_RULES: tuple[RepairRule, ...] = (
    previous_response_items,
    previous_response_unanswered,
    duplicate_item,
    bad_item_id,
    unissued_ids,
    reasoning_required,
    dangling_reasoning,
    unstored_ids,
)
#: The rules run over the items the structural rules wrote back: all but TM401, which runs before them.
AFTER_VIEW: tuple[RepairRule, ...] = tuple(rule for rule in ITEM_RULES if rule is not previous_response_items)
