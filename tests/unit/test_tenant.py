"""Tenants: a hash of the presented credential plus the upstream URL; the credential itself is never kept."""

import hashlib

from proxy import credentials
from proxy.tenant import NamedTenant, Tenancy, credential, named_tenant_id, shared_tenant_id, tenant_id

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


# --- literal values: the formula is a stored format (tenants key the memory), so a change must be noticed --


def test_tenant_values_are_the_documented_formula_literally():
    # sha256(b"Bearer sk-a" 0x1F 0x1F 0x1E upstream), first 32 hex digits; computed once, by hand, and frozen.
    assert hashlib.sha256(b"Bearer sk-a\x1f\x1f\x1ehttps://api.openai.com/v1").hexdigest()[:32] == "f645869efaa9fc84418fd12b1d7a058b"
    assert tenant([(b"Authorization", b"Bearer sk-a")]) == "f645869efaa9fc84418fd12b1d7a058b"
    assert tenant([]) == "9b08f3f3802dfb346ab0a33a423a671d"  # the shared anonymous tenant of this upstream
    assert tenant([(b"api-key", b"k"), (b"x-api-key", b"k2")]) == "fbe7427d8221f289a69f328a568a0287"


def test_gemini_carriers_are_appended_fields_and_literal():
    assert credential([(b"x-goog-api-key", b"g-key")]) == b"\x1f\x1f\x1fg-key"
    assert credential([], b"alt=sse&key=q-key") == b"\x1f\x1f\x1f\x1fq-key"
    assert credential([(b"authorization", b"Bearer a")], b"key=q1&k%65y=q2") == b"Bearer a\x1f\x1f\x1f\x1fq1&q2"
    assert tenant_id(credential([(b"x-goog-api-key", b"g-key")]), UP) == "8a59928bf8e868c45ea67bd5483aaae8"
    assert tenant_id(credential([], b"key=q-key"), UP) == "6059005fbd4ecbc0e4c3933ebd226ab9"


def test_every_carrier_scopes_the_tenant():
    anonymous = tenant([])
    carriers = [tenant([(b"authorization", b"k")]), tenant([(b"api-key", b"k")]), tenant([(b"x-api-key", b"k")]),
                tenant([(b"x-goog-api-key", b"k")]), tenant_id(credential([], b"key=k"), UP)]
    assert len({anonymous, *carriers}) == 6
    assert tenant_id(credential([], b"key=a"), UP) != tenant_id(credential([], b"key=b"), UP)
    # Other query parameters are not credentials; an empty key is none.
    assert tenant_id(credential([], b"alt=sse&keyx=1&key="), UP) == anonymous


def test_credential_carriers_and_bearer_tokens():
    assert credentials.bearer(b"Bearer  tm-1 ") == credentials.bearer(b"bearer\ttm-1") == b"tm-1"
    assert credentials.bearer(b"Bearer") == b"" and credentials.bearer(b"Basic eA==") is None
    assert credentials.token(b"tm-1") == credentials.token(b"Bearer tm-1") == b"tm-1"
    assert not credentials.BUILT_IN.present([(b"authorization", b"Bearer"), (b"x-api-key", b"")], b"alt=sse&key=")
    assert credentials.BUILT_IN.present([(b"X-Goog-Api-Key", b"g")], b"") and credentials.BUILT_IN.present([], b"k%65y=q")
    drop_q1 = credentials.without_params(b"a=1&key=q1&&k%65y=q2&key=q3", lambda value: value in (b"q1", b"q2"))
    assert drop_q1 == b"a=1&&key=q3"


# --- named tenants and --tenant-scope upstream (issue 14 item 3): no key in the formula -------------------


def test_a_named_tenant_is_its_name_and_upstream_whichever_key_the_client_presents():
    tenancy = Tenancy(tenants=[NamedTenant("team-a", frozenset({"tm-a1", "tm-a2"})), NamedTenant("team-b", frozenset({"tm-b1"}))])
    a1, a2, b1 = (tenancy.tenant([(b"authorization", b"Bearer " + key)], b"", UP) for key in (b"tm-a1", b"tm-a2", b"tm-b1"))
    assert a1 == a2 == named_tenant_id("team-a", UP) != b1
    assert tenancy.tenant([(b"authorization", b"Bearer tm-a1")], b"", "http://other/v1") != a1
    # Anthropic's clients present their key as x-api-key: a tenant's key there is the tenant too.
    assert tenancy.tenant([(b"x-api-key", b"tm-a2")], b"", UP) == a1
    # A key outside every tenant, or one sent in a carrier toolmend keys never use, is a credential as before.
    assert tenancy.tenant([(b"authorization", b"Bearer tm-solo")], b"", UP) == tenant([(b"authorization", b"Bearer tm-solo")])
    assert tenancy.tenant([(b"api-key", b"tm-a1")], b"", UP) == tenant([(b"api-key", b"tm-a1")])


def test_of_two_authorization_headers_the_last_decides_the_tenant():
    """The last of a repeated credential header is the one that counts (``credentials.in_headers``, and so the
    credential tenant): a named tenant's key is read the same way, not the first that matches."""
    tenancy = Tenancy(tenants=[NamedTenant("team-a", frozenset({"tm-a1"})), NamedTenant("team-b", frozenset({"tm-b1"}))])
    both = [(b"authorization", b"Bearer tm-a1"), (b"authorization", b"Bearer tm-b1")]
    assert tenancy.tenant(both, b"", UP) == named_tenant_id("team-b", UP)
    assert tenancy.tenant(both[::-1], b"", UP) == named_tenant_id("team-a", UP)
    # A key outside every tenant after a tenant's: still that tenant's (the other key is no tenant's to decide).
    assert tenancy.tenant([both[0], (b"authorization", b"Bearer sk-solo")], b"", UP) == named_tenant_id("team-a", UP)
    solo = [(b"authorization", b"Bearer sk-first"), (b"authorization", b"Bearer sk-last")]
    assert Tenancy().tenant(solo, b"", UP) == tenant([(b"authorization", b"Bearer sk-last")]) != tenant(solo[:1])


def test_named_and_shared_tenant_values_are_the_documented_formula_literally():
    assert named_tenant_id("team-a", UP) == hashlib.sha256(b"\x00tenant\x1fteam-a\x1e" + UP.encode()).hexdigest()[:32]
    assert named_tenant_id("team-a", UP) == "f08d035df0bbd6c40a80d77fa23df78a"
    assert shared_tenant_id(UP) == hashlib.sha256(b"\x00upstream\x1e" + UP.encode()).hexdigest()[:32]
    assert shared_tenant_id(UP) == "885b266d75d3259bbc5077d150b45140"
    # Neither can be a credential's tenant: no credential starts with NUL (HTTP refuses it in a header value).
    assert shared_tenant_id(UP) not in (tenant([]), named_tenant_id("upstream", UP))


def test_tenant_scope_upstream_gives_every_client_of_an_upstream_one_tenant():
    shared = Tenancy(scope="upstream")
    clients = [[(b"authorization", b"Bearer sk-a")], [(b"api-key", b"k")], []]
    assert {shared.tenant(headers, b"key=q", UP) for headers in clients} == {shared_tenant_id(UP)}
    assert shared.tenant([], b"", "http://other/v1") != shared_tenant_id(UP)


# --- gateway carriers and the operator's own (issue 23) ---------------------------------------------------


def test_gateway_carriers_come_after_the_key_parameter_and_leave_older_tenants_alone():
    assert credential([(b"Ocp-Apim-Subscription-Key", b"apim")]) == b"\x1f\x1f\x1f\x1f\x1fapim"
    assert credential([(b"cf-aig-authorization", b"Bearer cf")], b"key=q") == b"\x1f\x1f\x1f\x1fq\x1f\x1fBearer cf"
    assert credential([(b"x-portkey-api-key", b"pk")]) == b"\x1f\x1f\x1f\x1f\x1f\x1f\x1fpk"
    assert credential([], b"key=q-key") == b"\x1f\x1f\x1f\x1fq-key"  # as before the gateways came
    anonymous = tenant([])
    gateways = {tenant([(name, b"k")]) for name in (b"ocp-apim-subscription-key", b"cf-aig-authorization", b"x-portkey-api-key")}
    assert len(gateways) == 3 and anonymous not in gateways
    assert tenant([(b"ocp-apim-subscription-key", b"k1")]) != tenant([(b"ocp-apim-subscription-key", b"k2")])


def test_headers_the_operator_names_scope_the_tenant_whatever_their_order_and_cannot_pass_for_another_field():
    mine = credentials.Carriers(["X-My-Key", "x-team"])
    assert credentials.Carriers(["x-team", "X-MY-KEY"]).named == mine.named == (b"x-my-key", b"x-team")
    by_mine = credential([(b"X-My-Key", b"k")], b"", mine)
    assert by_mine == b"\x1f" * 7 + b"\x1fx-my-key:k"
    assert by_mine != credential([(b"X-My-Key", b"other")], b"", mine)
    assert credential([(b"X-My-Key", b"k")]) == credential([])  # not named: not a credential
    assert credential([(b"x-portkey-api-key", b"x-my-key:k")], b"", mine) != by_mine
    assert credential([(b"x-my-key", b"")], b"", mine) == credential([])  # an empty value is none
    assert mine.present([(b"x-team", b"t")], b"") and not credentials.BUILT_IN.present([(b"x-team", b"t")], b"")


def test_a_tenancy_reads_the_headers_it_was_given():
    headers = [(b"x-my-key", b"k1")]
    named = Tenancy(carriers=credentials.Carriers(["x-my-key"]))
    assert named.tenant(headers, b"", UP) != named.tenant([(b"x-my-key", b"k2")], b"", UP)
    assert Tenancy().tenant(headers, b"", UP) == Tenancy().tenant([], b"", UP)
