"""The README documents every repair rule and every setting, so the two cannot drift apart.

The rule rows are read wherever the rule tables stand: the README or any page of docs/.
"""

from pathlib import Path

from proxy.config import SERVE_OPTIONS
from proxy.registry import entries

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
PAGES = [README, *(page.read_text() for page in sorted((ROOT / "docs").glob("*.md")))]


def test_every_rule_has_a_row_with_its_name_and_provider_ids() -> None:
    rows = {line.split("|")[1].strip(): line for page in PAGES for line in page.splitlines() if line.startswith("| TM")}
    for entry in entries():
        doc = entry.doc()
        assert doc.code in rows, doc.code
        assert f"`{doc.name}`" in rows[doc.code]
        assert ", ".join(doc.answers) in rows[doc.code]


def test_every_setting_is_documented_with_its_variable() -> None:
    for option in SERVE_OPTIONS:
        assert f"`{option.flag}` | `{option.env}`" in README, option.flag
