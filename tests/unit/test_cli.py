"""``toolmend check`` (exit 0 clean, 1 needs repair, 2 unreadable) and ``toolmend serve`` start-up errors."""

import io
import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from proxy import cli
from proxy.cli import main
from tests.support.gemini_validator import check as server_check

ROOT = Path(__file__).resolve().parents[2]
CLEAN = {"model": "m", "messages": [{"role": "user", "content": "hi"},
                                    {"role": "assistant", "content": None, "tool_calls": [
                                        {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                                    {"role": "tool", "tool_call_id": "call_1", "content": "ok"}]}
ORPHAN = {"model": "m", "messages": [{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "call_9", "content": "r"}]}


def check(capsys, *args, stdin: str | None = None, monkeypatch=None):
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    code = main(["check", *args])
    out, err = capsys.readouterr()
    return code, out, err


def write(tmp_path: Path, text: str, name: str = "body.json") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_clean_body_exits_0(tmp_path, capsys):
    code, out, err = check(capsys, write(tmp_path, orjson.dumps(CLEAN).decode()))
    assert (code, err) == (0, "")
    assert out.startswith("clean: 1 document(s)")


def test_body_needing_repair_exits_1_with_a_table_row(tmp_path, capsys):
    code, out, _ = check(capsys, write(tmp_path, orjson.dumps(ORPHAN).decode()))
    assert code == 1
    row = next(line for line in out.splitlines() if line.startswith("messages[1]"))
    assert "TM101 orphan-tool-message" in row and "synthesized" in row and "call_9" in row
    assert "1 finding(s) in 1 of 1 document(s)" in out
    assert "calls re-inserted: recalled=0,synthesized=1" in out.splitlines()  # no memory offline


def test_the_table_counts_synthesized_calls_not_findings_and_is_silent_when_none_were_put_back(tmp_path, capsys):
    two_orphans = {"messages": [*ORPHAN["messages"], {"role": "tool", "tool_call_id": "call_8", "content": "s"}]}
    lines = "\n".join(orjson.dumps(body).decode() for body in (two_orphans, ORPHAN)) + "\n"
    _, out, _ = check(capsys, write(tmp_path, lines, "h.jsonl"))
    assert "calls re-inserted: recalled=0,synthesized=3" in out.splitlines()
    _, out, _ = check(capsys, "--policy", "drop", write(tmp_path, orjson.dumps(ORPHAN).decode()))
    assert "calls re-inserted" not in out


def test_stdin_is_the_default_source(capsys, monkeypatch):
    code, out, _ = check(capsys, stdin=orjson.dumps(ORPHAN).decode(), monkeypatch=monkeypatch)
    assert code == 1 and "TM101" in out


def test_fix_prints_the_repaired_body(tmp_path, capsys):
    code, out, _ = check(capsys, "--fix", write(tmp_path, orjson.dumps(ORPHAN).decode()))
    assert code == 1
    fixed = orjson.loads(out)
    assert fixed["model"] == "m"
    assert [m["role"] for m in fixed["messages"]] == ["user", "assistant", "tool"]
    assert fixed["messages"][1]["tool_calls"][0]["id"] == "call_9"
    # The fixed output is itself clean.
    code, _, _ = check(capsys, write(tmp_path, out, "fixed.json"))
    assert code == 0


def test_fix_keeps_a_bare_list_a_bare_list(tmp_path, capsys):
    code, out, _ = check(capsys, "--fix", write(tmp_path, orjson.dumps(ORPHAN["messages"]).decode()))
    fixed = orjson.loads(out)
    assert code == 1 and isinstance(fixed, list) and len(fixed) == 3


def test_format_json_lists_findings_with_document_numbers(tmp_path, capsys):
    lines = "\n".join(orjson.dumps(body).decode() for body in (CLEAN, ORPHAN["messages"], ORPHAN)) + "\n"
    code, out, _ = check(capsys, "--format", "json", write(tmp_path, lines, "h.jsonl"))
    rows = orjson.loads(out)
    assert code == 1
    assert [(r["document"], r["code"], r["index"], r["action"]) for r in rows] == [
        (2, "TM101", 1, "synthesized"), (3, "TM101", 1, "synthesized")]
    assert set(rows[0]) == {"document", "code", "name", "index", "action", "detail", "source", "calls"}
    assert [(r["source"], r["calls"]) for r in rows] == [("synthesized", 1), ("synthesized", 1)]


def test_json_lines_table_prefixes_rows_with_the_line_number(tmp_path, capsys):
    lines = orjson.dumps(CLEAN).decode() + "\n\n" + orjson.dumps(ORPHAN).decode() + "\n"
    code, out, _ = check(capsys, write(tmp_path, lines, "h.jsonl"))
    assert code == 1
    assert any(line.startswith("3:messages[1]") for line in out.splitlines())
    assert "1 finding(s) in 1 of 2 document(s)" in out


def test_json_lines_fix_prints_one_line_per_document(tmp_path, capsys):
    lines = orjson.dumps(CLEAN).decode() + "\n" + orjson.dumps(ORPHAN).decode() + "\n"
    code, out, _ = check(capsys, "--fix", write(tmp_path, lines, "h.jsonl"))
    docs = [orjson.loads(line) for line in out.splitlines()]
    assert code == 1 and len(docs) == 2
    assert docs[0] == CLEAN and len(docs[1]["messages"]) == 3


@pytest.mark.parametrize(("policy", "action"), [("reject", "rejected"), ("drop", "removed")])
def test_policy_flag(tmp_path, capsys, policy, action):
    code, out, _ = check(capsys, "--policy", policy, "--format", "json", write(tmp_path, orjson.dumps(ORPHAN).decode()))
    [row] = orjson.loads(out)
    assert code == 1 and (row["code"], row["action"]) == ("TM101", action)
    assert (row["source"], row["calls"]) == (None, 0)  # no call put back


def test_reject_policy_with_fix_leaves_the_body_as_it_was(tmp_path, capsys):
    code, out, _ = check(capsys, "--policy", "reject", "--fix", write(tmp_path, orjson.dumps(ORPHAN).decode()))
    assert code == 1 and orjson.loads(out) == ORPHAN


@pytest.mark.parametrize("messages", [["hello"], [{"role": "user", "content": "q"}, 42], [{"content": "no role"}],
                                      [{"role": None, "content": "x"}]])
def test_malformed_message_is_a_finding_not_a_traceback(tmp_path, capsys, messages):
    code, out, err = check(capsys, "--format", "json", write(tmp_path, orjson.dumps(messages).decode()))
    [row] = orjson.loads(out)
    assert code == 1 and err == ""
    assert (row["code"], row["name"], row["action"]) == ("TM200", "malformed-message", "rejected")
    assert row["index"] == len(messages) - 1


def test_json_syntax_error_exits_2_with_file_line_col(tmp_path, capsys):
    path = write(tmp_path, '{\n  "messages": [\n    {"role": "user",, "content": "q"}\n  ]\n}\n')
    code, out, err = check(capsys, path)
    assert (code, out) == (2, "")
    assert err.startswith(f"toolmend check: {path}:3:21: invalid JSON")
    assert err.count("\n") == 1


def test_json_lines_syntax_error_names_the_line(tmp_path, capsys):
    lines = orjson.dumps(CLEAN).decode() + "\n" + orjson.dumps(CLEAN).decode() + "\n" + '{"messages": [}\n'
    path = write(tmp_path, lines, "h.jsonl")
    code, _, err = check(capsys, path)
    assert code == 2
    assert err.startswith(f"toolmend check: {path}:3:15: invalid JSON on this line")


@pytest.mark.parametrize("text", ["", "42", '{"model": "m"}', '"just text"'])
def test_not_a_chat_body_exits_2(tmp_path, capsys, text):
    code, out, err = check(capsys, write(tmp_path, text))
    assert code == 2 and out == "" and err.startswith("toolmend check:") and err.count("\n") == 1


def test_missing_or_undecodable_file_exits_2(tmp_path, capsys):
    code, _, err = check(capsys, str(tmp_path / "nope.json"))
    assert code == 2 and "cannot read" in err
    path = tmp_path / "latin1.json"
    path.write_bytes(b'{"messages": [{"role": "user", "content": "caf\xe9"}]}')
    code, _, err = check(capsys, str(path))
    assert code == 2 and "cannot read" in err


def test_list_rules_prints_every_rule(capsys):
    assert main(["check", "--list-rules"]) == 0
    out = capsys.readouterr().out
    for code in ("TM101", "TM104", "TM200", "TM203"):
        assert code in out


def run_toolmend(*args: str, env: dict[str, str] | None = None, stdin: str = "") -> subprocess.CompletedProcess:
    clean_env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLMEND_")}
    return subprocess.run([sys.executable, "-m", "proxy", *args], cwd=ROOT, env={**clean_env, **(env or {})},
                          input=stdin, capture_output=True, text=True, timeout=20)


def never_serve(settings):
    raise AssertionError(f"a bad setting was taken: serving with {settings}")


@pytest.mark.parametrize(("args", "env", "named"), [
    (["--port", "abc"], {}, "--port"),
    (["--upstream", "ftp://x/v1"], {}, "--upstream"),
    ([], {"TOOLMEND_WORKERS": "0"}, "--workers"),
    ([], {"TOOLMEND_UPSTREAM_API_KEY": "sk-up"}, "TOOLMEND_API_KEYS"),
])
def test_serve_with_a_bad_setting_exits_2_with_one_line(args, env, named, monkeypatch, capfd):
    """In-process, what is written to the process's own stdout and stderr included (``capfd``); the exit status of
    the real process is the next test's."""
    for name in [name for name in os.environ if name.startswith("TOOLMEND_")]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(cli, "serve_forever", never_serve)
    assert main(["serve", *args]) == 2
    out, err = capfd.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("toolmend: ")
    assert named in err


def test_serve_with_a_bad_setting_exits_2_through_the_real_entry_point():
    result = run_toolmend("serve", "--port", "abc")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("toolmend: ") and "--port" in result.stderr


def test_check_exit_codes_through_the_real_entry_point():
    assert run_toolmend("check", stdin=orjson.dumps(CLEAN).decode()).returncode == 0
    assert run_toolmend("check", stdin=orjson.dumps(ORPHAN).decode()).returncode == 1
    unreadable = run_toolmend("check", stdin="{nope")
    assert unreadable.returncode == 2 and unreadable.stderr.startswith("toolmend check: <stdin>:1:2:")


@pytest.mark.parametrize(
    ("profile", "code"),
    [("mistral", "TM301"), ("deepseek", "TM304"), ("anthropic", "TM306"), ("gemini", "TM305"), ("ollama", "TM305"),
     ("xai", "TM305"), ("groq", "TM303"), ("vllm", "TM309"), ("openai", None)],
)
def test_profile_flag_runs_that_profiles_rules(tmp_path, capsys, profile, code):
    call = {"id": "call_AbCdEfGhIjKlMnOpQrStUvWx", "type": "function", "function": {"name": "f", "arguments": "[1]"}, "index": 0}
    body = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "", "tool_calls": [call]},
                         {"role": "tool", "tool_call_id": call["id"], "content": "ok"}]}
    if profile in ("ollama", "xai", "gemini"):
        body["messages"][1]["content"] = None
    status, out, _ = check(capsys, write(tmp_path, orjson.dumps(body).decode()), "--profile", profile)
    if code is None:
        assert status == 0
    else:
        assert status == 1 and code in out


# --------------------------------------------------------------------------------------------------
# the Responses API (--api responses, or auto by the body's shape)
# --------------------------------------------------------------------------------------------------

RS_CALL = {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"}
RS_CLEAN = {"model": "gpt-5.5", "input": [{"role": "user", "content": "hi"}, RS_CALL,
                                          {"type": "function_call_output", "call_id": "call_1", "output": "ok"}]}
RS_BROKEN = {"model": "gpt-5.5", "store": False, "input": [
    {"role": "user", "content": "hi"},
    {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA-opaque"},
    {**RS_CALL, "id": "fc_1"},  # unanswered; its id (and the reasoning's) is taken under store: false
    {"type": "custom_tool_call_output", "call_id": "call_9", "output": "patched"},  # an orphan
]}


def test_a_responses_body_is_read_as_one_by_its_shape(tmp_path, capsys):
    code, out, err = check(capsys, write(tmp_path, orjson.dumps(RS_BROKEN).decode()))
    rows = [line.split()[:3] for line in out.splitlines() if line.startswith("input[")]
    assert (code, err) == (1, "")
    assert rows == [["input[3]", "TM101", "orphan-tool-message"], ["input[1]", "TM104", "unanswered-tool-call"]]
    assert "2 finding(s) in 1 of 1 document(s)" in out and "calls re-inserted: recalled=0,synthesized=1" in out.splitlines()
    assert check(capsys, write(tmp_path, orjson.dumps(RS_CLEAN).decode()))[:2] == (0, "clean: 1 document(s), nothing to repair\n")


def test_responses_fix_prints_a_body_the_strict_server_accepts(tmp_path, capsys):
    from tests.support.responses_validator import violations

    assert violations(RS_BROKEN)
    code, out, _ = check(capsys, "--api", "responses", "--fix", write(tmp_path, orjson.dumps(RS_BROKEN).decode()))
    fixed = orjson.loads(out)
    assert code == 1 and violations(fixed) == []
    assert [item.get("type", "message") for item in fixed["input"]] == [
        "message", "reasoning", "function_call", "function_call_output", "custom_tool_call", "custom_tool_call_output"]
    assert fixed["input"][1:3] == RS_BROKEN["input"][1:3]  # ids on items that carry their content are taken under store: false
    assert check(capsys, write(tmp_path, out, "fixed.json"))[0] == 0


def test_a_bare_list_is_chat_unless_the_api_says_responses(tmp_path, capsys):
    items = write(tmp_path, orjson.dumps(RS_BROKEN["input"]).decode())
    code, out, _ = check(capsys, "--format", "json", items)
    assert code == 1 and {row["code"] for row in orjson.loads(out)} == {"TM200"}  # items are no chat messages
    code, out, _ = check(capsys, "--api", "responses", "--fix", items)
    fixed = orjson.loads(out)
    assert code == 1 and isinstance(fixed, list) and len(fixed) == 6


def test_json_lines_mixing_both_apis_reads_each_document_by_its_shape(tmp_path, capsys):
    lines = "\n".join(orjson.dumps(body).decode() for body in (ORPHAN, RS_BROKEN, CLEAN, RS_CLEAN)) + "\n"
    code, out, _ = check(capsys, "--format", "json", write(tmp_path, lines, "h.jsonl"))
    rows = orjson.loads(out)
    assert code == 1
    assert [(r["document"], r["code"]) for r in rows] == [(1, "TM101"), (2, "TM101"), (2, "TM104")]
    _, table, _ = check(capsys, write(tmp_path, lines, "h.jsonl"))
    assert any(line.startswith("1:messages[1]") for line in table.splitlines())
    assert any(line.startswith("2:input[3]") for line in table.splitlines())


@pytest.mark.parametrize(("api", "body", "expected"), [
    ("chat", RS_CLEAN, "expected a chat-completions body with 'messages'"),
    ("responses", CLEAN, "expected a Responses body with 'input'"),
    ("auto", {"model": "m"}, "expected a chat-completions body with 'messages', a Responses body with 'input'"),
])
def test_a_body_the_api_cannot_read_exits_2(tmp_path, capsys, api, body, expected):
    code, out, err = check(capsys, "--api", api, write(tmp_path, orjson.dumps(body).decode()))
    assert (code, out) == (2, "") and err.startswith(f"toolmend check: document 1: {expected}") and err.count("\n") == 1


def test_the_profile_says_where_responses_outputs_may_stand(tmp_path, capsys):
    note = {"role": "developer", "content": "hook: tests passed"}
    body = {"input": [{"role": "user", "content": "hi"}, RS_CALL, note, {"type": "function_call_output", "call_id": "call_1", "output": "ok"}]}
    path = write(tmp_path, orjson.dumps(body).decode())
    assert check(capsys, path)[0] == 0  # OpenAI takes an item between a call and its output
    code, out, _ = check(capsys, "--profile", "deepseek", "--fix", path)
    assert code == 1 and orjson.loads(out)["input"][2:] == [*body["input"][3:], note]


def test_list_rules_lists_the_responses_rules_too(capsys):
    assert main(["check", "--list-rules"]) == 0
    out = capsys.readouterr().out.splitlines()
    for code in ("TM401", "TM402", "TM403", "TM404", "TM405", "TM406", "TM407", "TM408"):
        [line] = [line for line in out if line.startswith(code + " ")]
        assert "[api: responses]" in line
    assert "TM407  unstored-ids [api: responses]  (RS-7)" in out
    assert "TM408  refused-reasoning [api: responses]  (RS-11)" in out
    for code in [f"TM5{n:02}" for n in range(1, 14)]:
        [line] = [line for line in out if line.startswith(code + " ")]
        assert "[api: messages]" in line
    [lone_surrogate] = [line for line in out if line.startswith("TM512 ")]
    assert lone_surrogate.startswith("TM512  lone-surrogate [api: messages]  (AM-21)")
    [refused] = [line for line in out if line.startswith("TM513 ")]
    assert refused.startswith("TM513  refused-signature [api: messages]  (AM-14)")


ANTHROPIC_BODY = {"model": "claude", "max_tokens": 8, "messages": [
    {"role": "user", "content": "Weather?"},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "functions.weather:0", "name": "weather", "input": {}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "functions.weather:0", "content": "18C"}]}]}


@pytest.mark.parametrize("api", ["auto", "messages"])
def test_check_reads_anthropic_messages_bodies(tmp_path, capsys, api):
    path = tmp_path / "messages.json"
    path.write_bytes(orjson.dumps(ANTHROPIC_BODY))
    assert main(["check", "--api", api, str(path)]) == 1
    out = capsys.readouterr().out
    assert "messages[1]  TM501 tool-use-id-pattern" in out and "functions_weather_0" in out
    assert main(["check", "--api", api, "--fix", str(path)]) == 1
    fixed = orjson.loads(capsys.readouterr().out)
    assert fixed["messages"][1]["content"][0]["id"] == fixed["messages"][2]["content"][0]["tool_use_id"] == "functions_weather_0"


def test_check_auto_tells_a_chat_history_from_an_anthropic_one(tmp_path, capsys):
    chat = tmp_path / "chat.json"
    chat.write_bytes(orjson.dumps([{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "call_1", "content": "18C"}]))
    assert main(["check", str(chat)]) == 1
    assert "messages[1]  TM101 orphan-tool-message" in capsys.readouterr().out
    system = tmp_path / "system.json"
    system.write_bytes(orjson.dumps({"system": "Be brief.", "messages": [{"role": "user", "content": ""}]}))
    assert main(["check", str(system)]) == 1  # Anthropic's top-level system: read as Messages (AM-17)
    assert "TM504 empty-text" in capsys.readouterr().out


def test_check_thinking_policy_reject_refuses_a_turn_without_thinking(tmp_path, capsys):
    body = {**ANTHROPIC_BODY, "thinking": {"type": "enabled", "budget_tokens": 1024}}
    path = tmp_path / "thinking.json"
    path.write_bytes(orjson.dumps(body))
    assert main(["check", "--thinking-policy", "reject", str(path)]) == 1
    [row] = [line for line in capsys.readouterr().out.splitlines() if "TM510 thinking-required" in line]
    assert "rejected" in row


def test_serve_runs_uvicorn_without_the_layers_toolmend_does_not_use(monkeypatch, tmp_path) -> None:
    """No access log (toolmend writes its own line), no WebSocket, and no X-Forwarded-* rewriting of the client's
    address: nothing reads it, and each layer costs every request."""
    import uvicorn

    import proxy.logs

    ran: dict = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **options: ran.update(options))
    monkeypatch.setattr(proxy.logs, "configure", lambda level, log_format: None)
    assert main(["serve", "--upstream", "http://127.0.0.1:9/v1", "--memory", f"sqlite:///{tmp_path}/m.db"]) == 0
    assert ran["proxy_headers"] is False and ran["access_log"] is False and ran["ws"] == "none"


# --------------------------------------------------------------------------------------------------
# Gemini (--api gemini, or auto by a body's contents)
# --------------------------------------------------------------------------------------------------

GEMINI_Q = {"role": "user", "parts": [{"text": "Weather in Paris and Rome?"}]}
GEMINI_CALLS = {"role": "model", "parts": [{"functionCall": {"id": "c1", "name": "weather", "args": {"city": "Paris"}}},
                                    {"functionCall": {"id": "c2", "name": "weather", "args": {"city": "Rome"}}}]}
GEMINI_ANSWER_A = {"role": "user", "parts": [{"functionResponse": {"id": "c1", "name": "weather", "response": {"temp": "18C"}}}]}
GEMINI_ANSWER_B = {"role": "user", "parts": [{"functionResponse": {"id": "c2", "name": "weather", "response": {"temp": "24C"}}}]}
GEMINI_SPLIT = {"contents": [GEMINI_Q, GEMINI_CALLS, GEMINI_ANSWER_A, GEMINI_ANSWER_B]}


def test_a_gemini_body_is_read_by_its_shape_and_its_split_responses_found(tmp_path, capsys):
    code, out, err = check(capsys, write(tmp_path, orjson.dumps(GEMINI_SPLIT).decode()))
    assert (code, err) == (1, "")
    assert [line.split()[:3] for line in out.splitlines() if line.startswith("contents[")] == [
        ["contents[3]", "TM601", "split-function-responses"]]
    clean = {"contents": [GEMINI_Q, GEMINI_CALLS, {"role": "user", "parts": [*GEMINI_ANSWER_A["parts"], *GEMINI_ANSWER_B["parts"]]}]}
    assert check(capsys, "--api", "gemini", write(tmp_path, orjson.dumps(clean).decode()))[:2] == (0, "clean: 1 document(s), nothing to repair\n")


def test_gemini_fix_prints_a_body_the_strict_server_accepts(tmp_path, capsys):
    assert server_check(GEMINI_SPLIT) is not None
    code, out, _ = check(capsys, "--api", "gemini", "--fix", write(tmp_path, orjson.dumps(GEMINI_SPLIT).decode()))
    assert code == 1 and server_check(orjson.loads(out)) is None


def test_the_vertex_profile_and_the_body_model_give_the_target(tmp_path, capsys):
    path = write(tmp_path, orjson.dumps({**GEMINI_SPLIT, "model": "gemini-2.5-pro"}).decode())
    code, out, _ = check(capsys, "--api", "gemini", "--profile", "vertex", "--format", "json", path)
    assert code == 1 and "TM608" in {row["code"] for row in orjson.loads(out)}  # Vertex before Gemini 3 refuses ids
    code, out, _ = check(capsys, "--api", "gemini", "--format", "json", path)
    assert "TM608" not in {row["code"] for row in orjson.loads(out)}


def test_a_prefill_is_continued_only_under_the_opt_in(tmp_path, capsys):
    path = write(tmp_path, orjson.dumps({"contents": [GEMINI_Q, {"role": "model", "parts": [{"text": "It is"}]}]}).decode())
    assert check(capsys, "--api", "gemini", path)[:2] == (0, "clean: 1 document(s), nothing to repair\n")
    code, out, _ = check(capsys, "--api", "gemini", "--continue-model-turn", "--format", "json", path)
    assert code == 1 and [row["code"] for row in orjson.loads(out)] == ["TM614"]


def test_list_rules_lists_the_gemini_rules(capsys):
    assert main(["check", "--list-rules"]) == 0
    out = capsys.readouterr().out.splitlines()
    for code in [f"TM6{n:02}" for n in range(1, 15)]:
        [line] = [line for line in out if line.startswith(code + " ")]
        assert "[api: gemini]" in line
