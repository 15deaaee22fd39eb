"""``toolmend check``: lint request bodies offline, with the same engine the proxy runs.

Input: a request body, a bare history list, or JSON Lines of either; each document is read by a dialect:
Chat Completions (``messages``), the Responses API (``input``), Anthropic Messages or Gemini (``contents``), as
``--api`` says, or per document by its shape (``auto``: a body with ``messages`` or a bare list is chat, a body with
``input`` is Responses, a body with ``contents`` is Gemini). A Gemini body's target is the profile's family
(``--profile vertex``: Vertex AI, else the Developer API) and the model its ``model`` field names, if any (the
proxy reads it from the path).
Exit status: 0 when everything is clean, 1 when something needs repair (or would be rejected), 2 when the
input cannot be read.
"""

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import orjson

from proxy.dialects import CHAT, GEMINI, MESSAGES, RESPONSES, Dialect
from proxy.registry import CHAT_HOMES, entries
from proxy.repair import Policy, Result
from proxy.repair.engine import TOO_DEEP
from proxy.repair.findings import calls_by_source, summarize_calls

#: ``--api``: the dialect that reads every document, or ``auto`` (by each document's shape).
APIS: dict[str, Dialect] = {"chat": CHAT, "responses": RESPONSES, "messages": MESSAGES, "gemini": GEMINI}
#: What a body of each dialect holds, for the error about a document that holds none of it.
SHAPES = {CHAT.name: "a chat-completions body with 'messages' or a list of messages",
          RESPONSES.name: "a Responses body with 'input' or a list of input items",
          MESSAGES.name: "an Anthropic Messages body with 'messages' or a list of messages",
          GEMINI.name: "a Gemini body with 'contents' or a list of contents"}
#: Marks of an Anthropic Messages history that a chat history never has (and the other way round).
ANTHROPIC_BLOCKS = frozenset(("tool_use", "tool_result", "thinking", "redacted_thinking"))


class Unreadable(Exception):
    """The input is not JSON or JSON Lines; the message says where."""


@dataclass
class Document:
    number: int  # 1-based position in a JSON Lines file; 1 for a single document
    value: Any
    bare_list: bool
    dialect: Dialect = CHAT


def read_documents(text: str, source: str, api: str = "auto") -> list[Document]:
    try:
        return [_document(1, orjson.loads(text), api)]
    except orjson.JSONDecodeError as whole_error:
        lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
        if len(lines) < 2 or not _parses(lines[0][1]):
            raise Unreadable(f"{source}:{whole_error.lineno}:{whole_error.colno}: invalid JSON: {whole_error.msg}") from None
    documents = []
    for number, line in lines:
        try:
            documents.append(_document(number, orjson.loads(line), api))
        except orjson.JSONDecodeError as exc:
            raise Unreadable(f"{source}:{number}:{exc.colno}: invalid JSON on this line: {exc.msg}") from None
    return documents


def _parses(line: str) -> bool:
    try:
        orjson.loads(line)
    except orjson.JSONDecodeError:
        return False
    return True


def _document(number: int, value: Any, api: str) -> Document:
    dialect = APIS.get(api) or _shape_of(number, value)
    if type(value) is list:
        return Document(number, {dialect.history_key: value}, bare_list=True, dialect=dialect)
    if type(value) is dict and dialect.history_key in value:
        return Document(number, value, bare_list=False, dialect=dialect)
    raise Unreadable(f"document {number}: expected {SHAPES[dialect.name]}")


def _shape_of(number: int, value: Any) -> Dialect:
    """``--api auto``: a body with ``input`` (and no ``messages``) is a Responses body; a history (a body's
    ``messages``, or a bare list) is Anthropic Messages when the body has a top-level ``system`` or a message
    holds a ``tool_use``, ``tool_result`` or thinking block, else chat."""
    if type(value) is dict and "input" in value and "messages" not in value:
        return RESPONSES
    if type(value) is dict and "contents" in value and "messages" not in value:
        return GEMINI
    history = value if type(value) is list else value.get("messages") if type(value) is dict else None
    if type(history) is list:
        return MESSAGES if (type(value) is dict and "system" in value) or _has_blocks(history) else CHAT
    raise Unreadable(f"document {number}: expected a chat-completions body with 'messages', a Responses body with 'input', "
                     "a Gemini body with 'contents', or a list of messages")


def _has_blocks(history: list[Any]) -> bool:
    return any(type(m) is dict and type(m.get("content")) is list
               and any(type(b) is dict and b.get("type") in ANTHROPIC_BLOCKS for b in m["content"]) for m in history)


def check_document(doc: Document, profile: str, policy: Policy) -> Result:
    """What the proxy would do to the document, with nothing in memory: its dialect's plan, repaired."""
    planned = doc.dialect.plan(doc.value, doc.dialect.profile(profile), None, policy)
    return Result(doc.value, ()) if planned is None else planned.repair({}, policy)


@dataclass(frozen=True, slots=True)
class Checking:
    """What ``toolmend check`` was asked: print the repaired documents (``fix``) or the findings in ``output_format``,
    under ``profile`` and ``policy``, each document read by ``api``'s dialect (or by its shape: ``auto``)."""

    fix: bool
    output_format: str
    profile: str
    policy: Policy
    api: str = "auto"


def run(source: str, stdin: TextIO, stdout: TextIO, asked: Checking) -> int:
    fix, output_format, profile, policy, api = asked.fix, asked.output_format, asked.profile, asked.policy, asked.api
    try:
        text = stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
        documents = read_documents(text, "<stdin>" if source == "-" else source, api)
    except (OSError, UnicodeDecodeError) as exc:
        print(f"toolmend check: cannot read {source}: {exc}", file=sys.stderr)
        return 2
    except Unreadable as exc:
        print(f"toolmend check: {exc}", file=sys.stderr)
        return 2
    results = [(doc, check_document(doc, profile, policy)) for doc in documents]
    if fix:
        for doc, result in results:
            body = result.body[doc.dialect.history_key] if doc.bare_list else result.body
            try:
                stdout.write(orjson.dumps(body, option=0 if len(documents) > 1 else orjson.OPT_INDENT_2).decode() + "\n")
            except orjson.JSONEncodeError:
                print(f"toolmend check: document {doc.number}: {TOO_DEEP}", file=sys.stderr)
                return 2
    elif output_format == "json":
        rows = [{"document": doc.number, **finding.as_dict()} for doc, result in results for finding in result.findings]
        stdout.write(orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        _print_table(results, len(documents) > 1, stdout)
    return 1 if any(result.findings for _, result in results) else 0


def _print_table(results: list[tuple[Document, Result]], several: bool, out: TextIO) -> None:
    rows = [
        ((f"{doc.number}:" if several else "") + f"{doc.dialect.history_key}[{f.index}]", f"{f.code} {f.name}", f.action, f.detail)
        for doc, result in results
        for f in result.findings
    ]
    if not rows:
        out.write(f"clean: {len(results)} document(s), nothing to repair\n")
        return
    header = ("where", "rule", "action", "what changes")
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(3)]
    for row in [header, *rows]:
        out.write("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)) + "  " + row[3] + "\n")
    repaired = sum(1 for _, result in results if result.findings)
    out.write(f"\n{len(rows)} finding(s) in {repaired} of {len(results)} document(s)\n")
    calls = calls_by_source(f for _, result in results for f in result.findings)
    if calls:
        # Offline there is no memory to recall from: every call put back is made up, which the model will see.
        out.write(f"calls re-inserted: {summarize_calls(calls)}\n")


def list_rules(out: TextIO) -> int:
    """Every rule of the registry: chat's (the structural ones run on every dialect's history) with the profiles that run
    them, then each other dialect's own, marked with its API."""
    for entry in entries():
        doc = entry.doc()
        scope = f" [api: {entry.home}]" if entry.home not in CHAT_HOMES else f" [profiles: {', '.join(doc.profiles)}]" if doc.profiles else ""
        out.write(f"{doc.code}  {doc.name}{scope}  ({', '.join(doc.answers)})\n    {doc.summary}\n")
    return 0
