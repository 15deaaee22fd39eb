"""The rules as documentation: code, name, provider ids, summary and the Bad/Good example of each.

The examples live in each rule's docstring (one JSON message per line); the tests run every one of them
through the engine, and ``toolmend check --list-rules`` prints the table the README carries. Which rules exist, and
where each runs, is the registry's (``proxy/registry.py``).
"""

from dataclasses import dataclass, field
from typing import Any

import orjson

from proxy.repair.rule import Described

#: A rule's docstring: the broken history (``Bad:``), what memory holds (``Recalled:``), the repaired history
#: (``Good:``), one JSON value a line; and, where the rule depends on them, the request's other fields (``Request:``).
SECTIONS = ("Request:", "Bad:", "Recalled:", "Good:")


@dataclass(frozen=True)
class RuleDoc:
    code: str
    name: str
    answers: tuple[str, ...]
    summary: str
    bad: list[Any]
    recalled: list[dict[str, Any]]
    good: list[Any] | None  # None: the example is rejected, not repaired
    profiles: tuple[str, ...] = ()  # empty: a universal rule
    request: dict[str, Any] = field(default_factory=dict)  # the request's fields beside its history


def describe(rule: Described, profiles: tuple[str, ...] = ()) -> RuleDoc:
    doc = rule.__doc__ or ""
    summary = " ".join(doc.split("\n\n")[0].split())
    sections: dict[str, list[str]] = {name: [] for name in SECTIONS}
    current = None
    for line in doc.splitlines():
        if line.strip() in SECTIONS:
            current = line.strip()
        elif current and line.startswith("    ") and line.strip():
            sections[current].append(line.strip())
    good_lines = sections["Good:"]
    good = None if good_lines == ["(rejected)"] else [orjson.loads(line) for line in good_lines]
    return RuleDoc(
        code=rule.RULE.code,
        name=rule.RULE.name,
        answers=rule.RULE.answers,
        summary=summary,
        bad=[orjson.loads(line) for line in sections["Bad:"]],
        recalled=[orjson.loads(line) for line in sections["Recalled:"]],
        request={key: value for line in sections["Request:"] for key, value in orjson.loads(line).items()},
        good=good,
        profiles=profiles,
    )
