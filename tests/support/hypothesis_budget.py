"""How many examples a property runs: its own budget normally, the campaign's when one was asked for, a fifth of its
own in the inner loop.

tests/conftest.py loads the hypothesis profile (``ci`` by default, ``campaign`` with
``TOOLMEND_HYPOTHESIS=campaign``); a property states the budget it needs to stay a few seconds long, and
``examples`` raises it to the campaign's size (``TOOLMEND_HYPOTHESIS_EXAMPLES``, default 5,000) in a campaign.
The inner loop (``pytest -m "not system"`` outside CI, see tests/conftest.py) runs every property, on a fifth of its
examples (at least 10); CI and any other run keep the full budget.
"""

import os

PROFILE = os.environ.get("TOOLMEND_HYPOTHESIS", "ci")
# A few thousand examples of the main repair property take a few minutes on one core: long enough to
# explore far beyond the CI examples, short enough to run before a release.
CAMPAIGN_EXAMPLES = int(os.environ.get("TOOLMEND_HYPOTHESIS_EXAMPLES", "5000"))


# Set by tests/conftest.py before any test module is imported: True for the inner loop.
INNER_LOOP = False
INNER_LOOP_SHARE = 5


def examples(default: int) -> int:
    if PROFILE == "campaign":
        return max(default, CAMPAIGN_EXAMPLES)
    return max(10, default // INNER_LOOP_SHARE) if INNER_LOOP else default
