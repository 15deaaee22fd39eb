"""``ResponsesDialect.retries`` and ``remembered_fix``, asked of every request and answer: kept per policy, each answer
that of every dialect (``ListHistory``) under that policy, whichever policy was asked before."""

from typing import Any

import pytest

from proxy.dialects.dialect import ListHistory
from proxy.dialects.responses import RESPONSES, ResponsesDialect
from proxy.repair import Policy


def test_the_answers_are_those_of_every_dialect_under_each_policy() -> None:
    dialect = ResponsesDialect()
    drop, reject = Policy(thinking="drop"), Policy(thinking="reject")
    for policy in (drop, reject, drop, Policy(thinking="drop"), reject):
        assert dialect.remembered_fix(policy) is ListHistory.remembered_fix(RESPONSES, policy)
        for status in (200, 400, 404, 500):
            assert dialect.retries(status, policy) == ListHistory.retries(RESPONSES, status, policy)
    assert dialect.retries(200, drop) and not dialect.retries(200, reject) and dialect.retries(404, reject)
    assert dialect.remembered_fix(drop) is not None and dialect.remembered_fix(reject) is None


def test_the_fixes_are_asked_once_per_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []
    retries, remembered_fix = ListHistory.retries, ListHistory.remembered_fix

    def counted_retries(self: Any, status: int, policy: Policy) -> bool:
        asked.append("retries")
        return retries(self, status, policy)

    def counted_remembered_fix(self: Any, policy: Policy) -> Any:
        asked.append("remembered_fix")
        return remembered_fix(self, policy)

    monkeypatch.setattr(ListHistory, "retries", counted_retries)
    monkeypatch.setattr(ListHistory, "remembered_fix", counted_remembered_fix)
    dialect, policy = ResponsesDialect(), Policy()
    for _ in range(3):
        dialect.retries(200, policy)
        dialect.remembered_fix(policy)
    assert asked.count("retries") == 1 and asked.count("remembered_fix") == 1
