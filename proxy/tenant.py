"""Who a request belongs to, for scoping the tool-call memory: ``Tenancy`` decides, for a route's upstream.

By default a tenant is a hash of the credentials the client presented plus the upstream URL: two clients
with different keys can never recall each other's calls, and the same key against two upstreams gets two
memories. Only the hash is kept or logged, never the credential. Clients that present no credential at
all share one tenant per upstream (``--require-client-key`` refuses them instead).

A key rotates, and memory keyed by it would be lost with it. So the route file may name tenants, each with
the toolmend keys that belong to it (``[[tenant]]`` in ``proxy/routes.py``): a client presenting one of them
as ``Authorization: Bearer`` (or ``x-api-key``) belongs to that tenant, whose id hashes its name, never a key. And
``--tenant-scope upstream`` gives every client of an upstream one shared tenant (single-user deployments).

The formulas, kept stable so an upgrade keeps every tenant's memory::

    credential = authorization 0x1F api-key 0x1F x-api-key [0x1F x-goog-api-key [0x1F key-params
                 [0x1F ocp-apim-subscription-key [0x1F cf-aig-authorization [0x1F x-portkey-api-key]]]]] [named...]
    tenant     = sha256(credential 0x1E upstream-url).hexdigest()[:32]
    named      = sha256(0x00 "tenant" 0x1F name 0x1E upstream-url).hexdigest()[:32]
    shared     = sha256(0x00 "upstream" 0x1E upstream-url).hexdigest()[:32]

Each field is the header value as sent (empty when absent); key-params are the raw values of the ``key``
query parameters joined by ``&``. The bracketed fields came later and appear only when present, which
leaves the tenant of every client that uses none of them as it was. ``named`` are the headers the operator
names (``--credential-header``) that the client sent, each ``0x1F name ":" value`` in name order, after every
field above (none left out then, so that they cannot pass for one). The leading NUL keeps named and shared
tenants apart from every credential's: HTTP refuses NUL in a header value, and a query must be printable.
"""

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from proxy import credentials

# The carriers of the original formula: always in it, present or not.
ORIGINAL_FIELDS = 3
ORIGINAL_CARRIERS_IN_ORDER = credentials.CARRIERS[:ORIGINAL_FIELDS]
ORIGINAL_CARRIERS = frozenset(ORIGINAL_CARRIERS_IN_ORDER)
# The carriers the formula took on later, in its order; the key parameters go before the gateways' headers.
LATER_CARRIERS = credentials.CARRIERS[ORIGINAL_FIELDS:]
PARAMS_AMONG_LATER = len(credentials.HEADERS) - ORIGINAL_FIELDS
# credential: every client its own memory (per upstream). upstream: every client of an upstream shares one,
# so any client can recall any other's calls.
TENANT_SCOPES = ("credential", "upstream")


@dataclass(frozen=True)
class NamedTenant:
    """A tenant of the route file: its name and the toolmend keys that belong to it (any may rotate)."""

    name: str
    keys: frozenset[str]


class Tenancy:
    """Whose memory a request uses: a named tenant's, the upstream's shared one, or its credential's."""

    def __init__(self, scope: str = "credential", tenants: Iterable[NamedTenant] = (),
                 carriers: credentials.Carriers = credentials.BUILT_IN) -> None:
        self.shared = scope == "upstream"
        self.carriers = carriers
        self._tenants = tuple((tenant.name, frozenset(key.encode() for key in tenant.keys)) for tenant in tenants)

    def tenant(self, headers: list[tuple[bytes, bytes]], query: bytes, upstream: str) -> str:
        if self.shared:
            return shared_tenant_id(upstream)
        name = self.named(headers, query) if self._tenants else None
        if name is not None:
            return named_tenant_id(name, upstream)
        return tenant_id(credential(headers, query, self.carriers), upstream)

    def named(self, headers: list[tuple[bytes, bytes]], query: bytes = b"") -> str | None:
        """The tenant whose key the client presents (``Authorization: Bearer``, ``x-api-key``, Gemini's ``x-goog-api-key``
        or ``?key=``), as ``Access`` reads it; of several, the last, as of any repeated credential header
        (``credentials.in_headers``)."""
        for key in reversed([*credentials.presented_keys(headers, query)]):
            for name, keys in self._tenants:
                if credentials.is_one_of(key, keys):
                    return name
        return None


def credential(headers: list[tuple[bytes, bytes]], query: bytes = b"", carriers: credentials.Carriers = credentials.BUILT_IN) -> bytes:
    found = credentials.in_headers(headers, carriers.names)
    fields = [found.get(name, b"") for name in ORIGINAL_CARRIERS_IN_ORDER]
    if query or not found.keys() <= ORIGINAL_CARRIERS:  # else every field after the original ones is absent
        fields += _later_fields(found, query, carriers)
    return b"\x1f".join(fields)


def _later_fields(found: dict[bytes, bytes], query: bytes, carriers: credentials.Carriers) -> list[bytes]:
    """The formula's fields after the original three: the later carriers' up to the last one present (all of them
    when the client sent a named header), then the named headers."""
    later = [found.get(name, b"") for name in LATER_CARRIERS]
    later.insert(PARAMS_AMONG_LATER, b"&".join(credentials.in_query(query)))
    named = [name + b":" + found[name] for name in carriers.named if found.get(name)]
    if not named:
        while later and not later[-1]:
            later.pop()
    return later + named


def tenant_id(credential_value: bytes, upstream: str) -> str:
    return _digest(credential_value, upstream)


def named_tenant_id(name: str, upstream: str) -> str:
    return _digest(b"\x00tenant\x1f" + name.encode(), upstream)


def shared_tenant_id(upstream: str) -> str:
    return _digest(b"\x00upstream", upstream)


def _digest(who: bytes, upstream: str) -> str:
    return hashlib.sha256(who + b"\x1e" + upstream.encode()).hexdigest()[:32]
