"""How many examples a property runs: its own budget normally, the campaign's when one was asked for.

tests/conftest.py loads the hypothesis profile (``ci`` by default, ``campaign`` with
``TOOLMEND_HYPOTHESIS=campaign``); a property states the budget it needs to stay a few seconds long, and
``examples`` raises it to the campaign's size (``TOOLMEND_HYPOTHESIS_EXAMPLES``, default 5,000) in a campaign.
"""

import os

PROFILE = os.environ.get("TOOLMEND_HYPOTHESIS", "ci")
# A few thousand examples of the main repair property take a few minutes on one core: long enough to
# explore far beyond the CI examples, short enough to run before a release.
CAMPAIGN_EXAMPLES = int(os.environ.get("TOOLMEND_HYPOTHESIS_EXAMPLES", "5000"))


def examples(default: int) -> int:
    return max(default, CAMPAIGN_EXAMPLES) if PROFILE == "campaign" else default
