"""The rule registry: every rule module of ``proxy/`` is in it once, under a code no other rule has, and each pipeline's
phases hold what the engine can run."""

import importlib
import pkgutil
from types import ModuleType

import pytest

import proxy
from proxy.dialects import DIALECTS, Dialect
from proxy.dialects.chat.profiles import PROFILES
from proxy.dialects.messages.check import may_change
from proxy.registry import CHAT_HOMES, DuplicateCode, Entry, assemble, entries
from proxy.repair.findings import Policy, Rule
from proxy.repair.pipeline import Phase, Pipeline, Step
from proxy.repair.rules import empty_history, orphan_tool_message

BY_NAME = {dialect.name: dialect for dialect in DIALECTS}


def rule_modules() -> list[ModuleType]:
    """Every module under ``proxy/`` that declares a ``RULE``."""
    found = []
    for info in pkgutil.walk_packages(proxy.__path__, "proxy."):
        if info.name == "proxy.__main__":
            continue  # runs the command
        module = importlib.import_module(info.name)
        if isinstance(getattr(module, "RULE", None), Rule):
            found.append(module)
    return found


def test_every_rule_module_is_registered_once() -> None:
    registered = [entry.rule for entry in entries()]
    assert sorted(module.__name__ for module in rule_modules()) == sorted(rule.__name__ for rule in registered)  # type: ignore[attr-defined]


def test_codes_and_names_are_unique_over_every_dialect() -> None:
    modules = rule_modules()
    assert len({module.RULE.code for module in modules}) == len(modules)
    assert len({module.RULE.name for module in modules}) == len(modules)


def test_two_rules_with_one_code_are_refused() -> None:
    twin = ModuleType("proxy.dialects.other.rules.twin")
    twin.RULE = Rule(orphan_tool_message.RULE.code, "twin", ("S2",))  # type: ignore[attr-defined]
    with pytest.raises(DuplicateCode, match="TM101"):
        assemble([Pipeline("chat", (Phase("repair", "", (orphan_tool_message,)),)),
                  Pipeline("other", (Phase("repair", "", (twin,)),))])


def test_applied_phases_hold_rules_and_profile_steps_say_when_they_are_clean() -> None:
    for dialect in DIALECTS:
        for phase in dialect.pipeline.phases:
            for step in phase.scoped:
                assert not phase.applied or callable(getattr(step.rule, "apply", None)), (dialect.name, phase.name, step.rule)
                assert not step.profiles or callable(getattr(step.rule, "is_clean", None)), (dialect.name, step.rule)


def test_where_the_shared_rules_run() -> None:
    uses = {entry.code: {(use.dialect, use.phase) for use in entry.uses} for entry in entries()}
    assert uses["TM101"] == {("chat", "repair"), ("responses", "view"), ("messages", "view"), ("gemini", "view")}
    assert ("responses", "view") not in uses["TM105"]  # a run of calls is one Responses view entry already
    assert {dialect for dialect, _ in uses["TM208"]} == {"chat", "responses"}  # no id length rule is known for Messages
    assert uses[empty_history.RULE.code] == {("chat", "repair"), ("responses", "items"), ("messages", "messages"), ("gemini", "written")}
    assert {entry.home for entry in entries() if entry.code.startswith("TM1") and entry.code != "TM109"} == {"shared"}


def test_each_chat_profile_runs_the_rules_the_pipeline_names_for_it() -> None:
    chat = next(dialect.pipeline for dialect in DIALECTS if dialect.name == "chat")
    for name, profile in PROFILES.items():
        assert profile.rules == tuple(step.rule for step in chat.phase("repair").scoped if name in step.profiles)
        every = tuple(step.rule for step in chat.phase("repair").scoped if not step.profiles)
        assert chat.run("repair", name) == (*every[:-1], *profile.rules, every[-1])  # TM210 last


def test_a_bare_rule_is_a_step_for_every_profile() -> None:
    phase = Phase("p", "", (empty_history, Step(orphan_tool_message, ("mistral",))))
    assert phase.scoped == (Step(empty_history), Step(orphan_tool_message, ("mistral",)))
    assert Pipeline("d", (phase,)).run("p", "openai") == (empty_history,)


def _home_dialect(entry: Entry) -> Dialect:
    """The dialect whose histories a rule's Bad/Good example is written in: the shared rules' are chat's."""
    return BY_NAME["chat" if entry.home in CHAT_HOMES else entry.home]


def _phase(dialect: str, name: str) -> Phase:
    return BY_NAME[dialect].pipeline.phase(name)


#: Every opt-in of the operator's policy on.
OPTED_IN = Policy(dummy_signatures=True, continue_model_turn=True)
CHECKED = [entry for entry in entries()
           if any(use.dialect == _home_dialect(entry).name and _phase(use.dialect, use.phase).checked for use in entry.uses)]


@pytest.mark.parametrize("entry", CHECKED, ids=[entry.code for entry in CHECKED])
def test_every_rule_is_known_to_its_dialects_fast_check(entry: Entry) -> None:
    """The fused fast checks stay fused (they run on every request): each rule's Bad example must still make its
    dialect's check plan a repair (or, for TM516, a look in memory), under the first profile that runs the rule and
    the operator's opt-ins on (TM614 acts under one only)."""
    doc = entry.doc()
    dialect = _home_dialect(entry)
    profile = doc.profiles[0] if doc.profiles else "anthropic" if dialect.name == "messages" else "openai"
    body = {"model": "deepseek-reasoner" if profile == "deepseek" else "gpt-4o", **doc.request, dialect.history_key: doc.bad}
    assert dialect.plan(body, dialect.profile(profile), None, OPTED_IN) is not None


#: The Messages rules that edit one message at a time: the repair runs them over the messages ``may_change`` flags.
ONE_MESSAGE_AT_A_TIME = [entry for entry in entries() if entry.home == "messages" and "TM502" <= entry.code <= "TM509"]


@pytest.mark.parametrize("entry", ONE_MESSAGE_AT_A_TIME, ids=[entry.code for entry in ONE_MESSAGE_AT_A_TIME])
def test_every_rule_editing_one_message_is_known_to_may_change(entry: Entry) -> None:
    doc = entry.doc()
    assert any(may_change(message, strips_unsigned=True) for message in doc.bad)
    assert not any(may_change(message, strips_unsigned=True) for message in doc.good or [])
