"""The key a Gemini call is remembered and recalled by: capture and repair must agree on it."""

from proxy.dialects.gemini.keys import DIGEST_PREFIX, call_key, digest_key, response_key, stored_keys, turn_ids


def test_a_call_with_an_id_is_recalled_by_it_and_stored_under_its_digest_too() -> None:
    call = {"id": "c1", "name": "read", "args": {"path": "a"}}
    assert call_key(call) == "c1"
    digest = digest_key("read", {"path": "a"})
    assert stored_keys(call) == ["c1", digest]
    # a client that dropped the id (a Vertex route) still finds the remembered turn
    assert call_key({"name": "read", "args": {"path": "a"}}) == digest


def test_the_digest_ignores_key_order_and_integral_floats_but_not_values() -> None:
    assert call_key({"name": "f", "args": {"b": 1.0, "a": [2]}}) == call_key({"name": "f", "args": {"a": [2], "b": 1}})
    assert call_key({"name": "f", "args": {"a": 1.5}}) != call_key({"name": "f", "args": {"a": 1}})
    assert call_key({"name": "f"}) == call_key({"name": "f", "args": {}}) == call_key({"name": "f", "args": None})
    assert call_key({"name": "g"}) != call_key({"name": "f"})
    key = call_key({"name": "f"})
    assert key is not None and key.startswith(DIGEST_PREFIX) and len(key) == len(DIGEST_PREFIX) + 32


def test_what_has_no_key() -> None:
    assert call_key({"args": {}}) is None
    assert call_key({"name": ""}) is None
    assert call_key("read") is None
    assert response_key({"name": "read", "response": {}}) is None
    assert response_key({"id": "c1", "name": "read"}) == "c1"
    deep: object = {}
    for _ in range(300):
        deep = {"a": deep}
    assert digest_key("f", deep) is None


def test_turn_ids_lists_every_call_once_in_order() -> None:
    parts = [{"text": "thinking", "thought": True}, {"functionCall": {"id": "a", "name": "f"}, "thoughtSignature": "c2ln"},
             {"functionCall": {"name": "f"}}, {"text": "done"}]
    assert turn_ids(parts) == ["a", digest_key("f", {})]
