"""Who a request belongs to, for scoping the tool-call memory.

A tenant is a hash of the credentials the client presented plus the upstream URL: two clients with
different keys can never recall each other's calls, and the same key against two upstreams gets two
memories. Only the hash is kept or logged, never the credential. Clients that present no credential at
all share one tenant per upstream (``--require-client-key`` refuses them instead).

The formula, kept stable so an upgrade keeps every tenant's memory::

    credential = authorization 0x1F api-key 0x1F x-api-key [0x1F x-goog-api-key [0x1F key-params]]
    tenant     = sha256(credential 0x1E upstream-url).hexdigest()[:32]

Each field is the header value as sent (empty when absent); key-params are the raw values of the ``key``
query parameters joined by ``&``. The bracketed fields came later and appear only when present, which
leaves the tenant of every client that uses none of them as it was.
"""

import hashlib

from proxy import credentials

# The carriers of the original formula: always in it, present or not.
ORIGINAL_FIELDS = 3


def credential(headers: list[tuple[bytes, bytes]], query: bytes = b"") -> bytes:
    found = credentials.in_headers(headers)
    fields = [found.get(name, b"") for name in credentials.HEADERS]
    fields.append(b"&".join(credentials.in_query(query)))
    while len(fields) > ORIGINAL_FIELDS and not fields[-1]:
        fields.pop()
    return b"\x1f".join(fields)


def tenant_id(credential_value: bytes, upstream: str) -> str:
    return hashlib.sha256(credential_value + b"\x1e" + upstream.encode()).hexdigest()[:32]
