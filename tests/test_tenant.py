"""Tenants: a hash of the presented credential plus the upstream URL; the credential itself is never kept."""

from proxy.tenant import credential, tenant_id

UP = "https://api.openai.com/v1"


def tenant(headers, upstream=UP):
    return tenant_id(credential(headers), upstream)


def test_tenant_is_a_stable_hex_hash_that_does_not_contain_the_key():
    headers = [(b"authorization", b"Bearer sk-secret-key")]
    first = tenant(headers)
    assert first == tenant(list(headers))
    assert len(first) == 32 and int(first, 16) >= 0
    assert "sk-secret-key" not in first


def test_different_keys_give_different_tenants():
    assert tenant([(b"authorization", b"Bearer sk-a")]) != tenant([(b"authorization", b"Bearer sk-b")])


def test_same_key_against_two_upstreams_gives_two_tenants():
    headers = [(b"authorization", b"Bearer sk-a")]
    assert tenant(headers, UP) != tenant(headers, "https://api.deepseek.com/v1")


def test_header_names_are_case_insensitive_and_other_headers_ignored():
    a = tenant([(b"Authorization", b"Bearer sk-a"), (b"x-request-id", b"1")])
    b = tenant([(b"authorization", b"Bearer sk-a"), (b"x-request-id", b"2"), (b"user-agent", b"z")])
    assert a == b


def test_every_credential_header_counts_and_they_cannot_be_confused():
    by_azure = tenant([(b"api-key", b"k")])
    by_anthropic = tenant([(b"x-api-key", b"k")])
    by_bearer = tenant([(b"authorization", b"k")])
    assert len({by_azure, by_anthropic, by_bearer}) == 3
    assert tenant([(b"authorization", b"Bearer a"), (b"api-key", b"b")]) != tenant([(b"authorization", b"Bearer a")])


def test_no_credential_is_one_shared_anonymous_tenant_per_upstream():
    assert tenant([]) == tenant([(b"accept", b"*/*")])
    assert tenant([]) != tenant([], "http://other/v1")
