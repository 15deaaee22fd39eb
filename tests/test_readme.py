"""The README documents every repair rule and every setting, so the two cannot drift apart."""

from pathlib import Path

from proxy.config import SERVE_OPTIONS
from proxy.dialects.gemini.rules import refused_signature as refused_thought_signature
from proxy.dialects.messages import surrogates
from proxy.dialects.messages.rules import refused_signature
from proxy.dialects.messages.rules import RULES as MESSAGES_RULES
from proxy.dialects.responses.rules import ITEM_RULES, refused_reasoning, unknown_item
from proxy.repair.catalog import all_rules, describe

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


def test_every_rule_has_a_row_with_its_name_and_provider_ids() -> None:
    rows = {line.split("|")[1].strip(): line for line in README.splitlines() if line.startswith("| TM")}
    dialect_rules = [describe(rule) for rule in (*ITEM_RULES, *MESSAGES_RULES, surrogates, refused_signature, refused_reasoning, unknown_item,
                                                refused_thought_signature)]
    for doc in [*all_rules(), *dialect_rules]:
        assert doc.code in rows, doc.code
        assert f"`{doc.name}`" in rows[doc.code]
        assert ", ".join(doc.answers) in rows[doc.code]


def test_every_setting_is_documented_with_its_variable() -> None:
    for option in SERVE_OPTIONS:
        assert f"`{option.flag}` | `{option.env}`" in README, option.flag
