"""Who a request belongs to, for scoping the tool-call memory.

A tenant is a hash of the credential the client presented plus the upstream URL: two clients with
different keys can never recall each other's calls, and the same key against two upstreams gets two
memories. Only the hash is kept or logged, never the credential.
"""

import hashlib

# Headers that carry a client's credential: OpenAI-style bearer tokens, Azure's api-key, Anthropic's.
CREDENTIAL_HEADERS = (b"authorization", b"api-key", b"x-api-key")


def credential(headers: list[tuple[bytes, bytes]]) -> bytes:
    found = {name.lower(): value for name, value in headers if name.lower() in CREDENTIAL_HEADERS}
    return b"\x1f".join(found.get(name, b"") for name in CREDENTIAL_HEADERS)


def tenant_id(credential_value: bytes, upstream: str) -> str:
    return hashlib.sha256(credential_value + b"\x1e" + upstream.encode()).hexdigest()[:32]
