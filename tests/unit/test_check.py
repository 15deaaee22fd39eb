"""``toolmend check --api gemini``: Gemini bodies linted offline, read by their shape too, fixed into bodies the strict
Gemini validator takes."""

import orjson

from proxy.cli import main
from tests.support.gemini_validator import check as server_check
from tests.test_cli import check, write

Q = {"role": "user", "parts": [{"text": "Weather in Paris and Rome?"}]}
CALLS = {"role": "model", "parts": [{"functionCall": {"id": "c1", "name": "weather", "args": {"city": "Paris"}}},
                                    {"functionCall": {"id": "c2", "name": "weather", "args": {"city": "Rome"}}}]}
ANSWER_A = {"role": "user", "parts": [{"functionResponse": {"id": "c1", "name": "weather", "response": {"temp": "18C"}}}]}
ANSWER_B = {"role": "user", "parts": [{"functionResponse": {"id": "c2", "name": "weather", "response": {"temp": "24C"}}}]}
SPLIT = {"contents": [Q, CALLS, ANSWER_A, ANSWER_B]}


def test_a_gemini_body_is_read_by_its_shape_and_its_split_responses_found(tmp_path, capsys):
    code, out, err = check(capsys, write(tmp_path, orjson.dumps(SPLIT).decode()))
    assert (code, err) == (1, "")
    assert [line.split()[:3] for line in out.splitlines() if line.startswith("contents[")] == [
        ["contents[3]", "TM601", "split-function-responses"]]
    clean = {"contents": [Q, CALLS, {"role": "user", "parts": [*ANSWER_A["parts"], *ANSWER_B["parts"]]}]}
    assert check(capsys, "--api", "gemini", write(tmp_path, orjson.dumps(clean).decode()))[:2] == (0, "clean: 1 document(s), nothing to repair\n")


def test_gemini_fix_prints_a_body_the_strict_server_accepts(tmp_path, capsys):
    assert server_check(SPLIT) is not None
    code, out, _ = check(capsys, "--api", "gemini", "--fix", write(tmp_path, orjson.dumps(SPLIT).decode()))
    assert code == 1 and server_check(orjson.loads(out)) is None


def test_the_vertex_profile_and_the_body_model_give_the_target(tmp_path, capsys):
    path = write(tmp_path, orjson.dumps({**SPLIT, "model": "gemini-2.5-pro"}).decode())
    code, out, _ = check(capsys, "--api", "gemini", "--profile", "vertex", "--format", "json", path)
    assert code == 1 and "TM608" in {row["code"] for row in orjson.loads(out)}  # Vertex before Gemini 3 refuses ids
    code, out, _ = check(capsys, "--api", "gemini", "--format", "json", path)
    assert "TM608" not in {row["code"] for row in orjson.loads(out)}


def test_list_rules_lists_the_gemini_rules(capsys):
    assert main(["check", "--list-rules"]) == 0
    out = capsys.readouterr().out.splitlines()
    for code in [f"TM6{n:02}" for n in range(1, 11)]:
        [line] = [line for line in out if line.startswith(code + " ")]
        assert "[api: gemini]" in line
