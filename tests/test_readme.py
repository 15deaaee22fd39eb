"""The README stays a five-minute read whose two commands are true, and the documentation it points to covers every
repair rule, every setting and every metric, so the docs and the code cannot drift apart."""

import re
import tomllib
from pathlib import Path

import pytest

from proxy import cli
from proxy.config import SERVE_OPTIONS
from proxy.dialects.gemini.rules import RULES as GEMINI_RULES
from proxy.dialects.gemini.rules import refused_signature as refused_thought_signature
from proxy.dialects.messages import surrogates
from proxy.dialects.messages.rules import RULES as MESSAGES_RULES
from proxy.dialects.messages.rules import refused_signature
from proxy.dialects.responses.rules import ITEM_RULES, refused_reasoning, unknown_item
from proxy.repair.catalog import RuleDoc, all_rules, describe

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
# Where each kind of table lives: the rule tables (one row per rule, "| TMnnn | `name` | ... | provider ids |"),
# every setting, every metric.
RULE_TABLES = ROOT / "docs" / "protocols.md"
SETTINGS = ROOT / "docs" / "settings.md"
METRICS = ROOT / "docs" / "operations.md"
README_MAX_LINES = 300


def rule_rows(text: str) -> dict[str, str]:
    """The rows of the rule tables in a document, by rule code."""
    return {line.split("|")[1].strip(): line for line in text.splitlines() if line.startswith("| TM")}


def known_rules() -> list[RuleDoc]:
    """Every rule the code has, shared and of each dialect."""
    dialect_rules = [describe(rule) for rule in (*ITEM_RULES, *MESSAGES_RULES, *GEMINI_RULES, surrogates, refused_signature, refused_reasoning,
                                                 unknown_item, refused_thought_signature)]
    return [*all_rules(), *dialect_rules]


def test_every_rule_has_a_row_with_its_name_and_provider_ids() -> None:
    rows = rule_rows(RULE_TABLES.read_text())
    for doc in known_rules():
        assert doc.code in rows, doc.code
        assert f"`{doc.name}`" in rows[doc.code]
        assert ", ".join(doc.answers) in rows[doc.code]


def test_every_rule_row_is_a_rule_of_the_code() -> None:
    assert set(rule_rows(RULE_TABLES.read_text())) == {doc.code for doc in known_rules()}


def test_every_setting_is_documented_with_its_variable_and_default() -> None:
    settings = SETTINGS.read_text()
    for option in SERVE_OPTIONS:
        assert f"`{option.flag}` | `{option.env}`" in settings, option.flag
        if type(option.default) in (int, float):  # numbers as documented: 600, not 600.0
            row = next(line for line in settings.splitlines() if line.startswith(f"| `{option.flag}` |"))
            assert row.split("|")[3].strip() == f"`{option.default:.15g}`", (option.flag, row)


def test_every_flag_of_serve_help_is_documented(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["serve", "--help"])
    flags = set(re.findall(r"(?<![\w-])--[a-z][a-z-]+", capsys.readouterr().out)) - {"--help"}
    assert flags == {option.flag for option in SERVE_OPTIONS}
    settings = SETTINGS.read_text()
    assert [flag for flag in sorted(flags) if f"| `{flag}` |" not in settings] == []


def test_the_readme_settings_table_names_real_settings() -> None:
    rows = re.findall(r"^\| `(--[a-z-]+)` \| `(TOOLMEND_\w+)` \|", README, re.MULTILINE)
    assert len(rows) >= 5
    assert set(rows) <= {(option.flag, option.env) for option in SERVE_OPTIONS}


def test_every_metric_is_documented() -> None:
    names = set(re.findall(r"\"(toolmend_\w+)\"", (ROOT / "proxy" / "metrics.py").read_text()))
    assert len(names) >= 10
    documented = METRICS.read_text()
    assert [name for name in sorted(names) if not re.search(rf"^\| `{name}(_total)?` \|", documented, re.MULTILINE)] == []


def test_the_readme_is_a_five_minute_read() -> None:
    assert len(README.splitlines()) < README_MAX_LINES


def test_the_readme_commands_are_true() -> None:
    """The command that runs the proxy names an extra, a script and a flag that exist; the one that runs the tests
    is the CI's own script."""
    serve = "python3 -m venv .venv && .venv/bin/pip install '.[fast]' && .venv/bin/toolmend serve --upstream https://api.openai.com/v1"
    assert f"\n    {serve}\n" in README and "\n    bash .ci/run\n" in README
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "fast" in project["optional-dependencies"] and project["scripts"]["toolmend"].startswith("proxy.")
    assert "--upstream" in {option.flag for option in SERVE_OPTIONS}
    assert (ROOT / ".ci" / "run").is_file() and "pytest" in (ROOT / ".ci" / "run").read_text()
