"""Which outbound proxy, if any, carries toolmend's requests to an upstream.

Corporate networks reach providers only through an HTTP proxy, and every client library (httpx, requests,
curl, the providers' SDKs) finds it in the same environment variables: ``HTTPS_PROXY`` for https URLs,
``HTTP_PROXY`` for http ones, ``ALL_PROXY`` for both, ``NO_PROXY`` for the hosts reached directly; the
lowercase spelling wins over the uppercase one, as in urllib and httpx. ``--upstream-proxy`` replaces the
three proxy variables (``none``: connect directly, whatever the environment says); ``NO_PROXY`` still
applies to it, as it does to curl's ``--proxy``, so local upstreams stay direct.

A proxy URL carries its credentials (``http://user:password@proxy:3128``): they go to the proxy in
``Proxy-Authorization`` and nowhere else. What logs and errors show is ``shown``, with them masked.
"""

import base64
import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

#: ``--upstream-proxy none``: connect directly, ignoring the environment's proxy variables.
NO_PROXY_SETTING = "none"


@dataclass(frozen=True)
class Proxy:
    """An HTTP proxy: its address, the ``Proxy-Authorization`` value its URL's credentials make, and the URL
    as logs show it (``http://***@host:port``)."""

    host: str
    port: int
    shown: str
    authorization: bytes | None = field(default=None, repr=False)

    def __str__(self) -> str:
        return self.shown


def parse_proxy(url: str, source: str) -> Proxy:
    """The proxy a URL names; ``ValueError`` (naming ``source``, never the URL's credentials) when unusable."""
    if "://" not in url:
        url = "http://" + url  # HTTPS_PROXY=proxy:3128 means an http proxy, as in httpx and curl
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme != "http":
        # A CONNECT tunnel through a plain http:// proxy already carries https upstreams end-to-end encrypted;
        # TLS to the proxy itself and SOCKS are not implemented.
        raise ValueError(f"{source}: a {scheme}:// proxy is not supported; give an http:// proxy URL (https "
                         "upstreams are tunnelled through it with CONNECT), or --upstream-proxy none to connect directly")
    try:
        host, port = parts.hostname, parts.port or 80
    except ValueError:
        host = None
    if not host:
        raise ValueError(f"{source}: {mask(url)!r} is not a proxy URL such as http://proxy.example.com:3128")
    authorization = None
    if parts.username is not None:
        pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
        authorization = b"Basic " + base64.b64encode(pair)
    netloc = f"[{host}]" if ":" in host else host
    return Proxy(host, port, f"http://{'***@' if parts.username is not None else ''}{netloc}:{port}", authorization)


def mask(url: str) -> str:
    """``url`` with any ``user:password@`` replaced by ``***@``: the only form of a proxy URL that is logged."""
    scheme, sep, rest = url.rpartition("://")
    if "@" in rest:  # everything up to the last @: a password may hold an unencoded / or :
        rest = "***@" + rest.rpartition("@")[2]
    return f"{scheme}{sep}{rest}"


@dataclass(frozen=True)
class _Exemption:
    """One ``NO_PROXY`` entry: a host name (with its subdomains), ``.domain`` (subdomains only), an IP address
    or network (``10.0.0.0/8``), each optionally with ``:port``."""

    name: str | None = None
    subdomains_only: bool = False
    network: ipaddress.IPv4Network | ipaddress.IPv6Network | None = None
    port: int | None = None

    @classmethod
    def parse(cls, entry: str) -> "_Exemption":
        entry = entry.partition("://")[2].partition("/")[0] if "://" in entry else entry  # httpx takes http://host too
        host, port = entry, None
        if entry.startswith("["):  # [::1]:8080
            host, _, rest = entry[1:].partition("]")
            port = int(rest[1:]) if rest.startswith(":") and rest[1:].isdigit() else None
        elif entry.count(":") == 1 and entry.partition(":")[2].isdigit():  # host:port, not a bare IPv6 address
            host, port = entry.split(":")[0], int(entry.split(":")[1])
        try:
            return cls(network=ipaddress.ip_network(host, strict=False), port=port)
        except ValueError:
            pass
        name = host.lower().rstrip(".")
        if name.startswith("*."):
            name = name[1:]
        return cls(name=name.lstrip("."), subdomains_only=name.startswith("."), port=port)

    def matches(self, host: str, port: int, address: ipaddress.IPv4Address | ipaddress.IPv6Address | None) -> bool:
        if self.port is not None and self.port != port:
            return False
        if self.network is not None:
            return address is not None and address in self.network
        assert self.name is not None
        if host.endswith("." + self.name):
            return True
        return host == self.name and not self.subdomains_only


@dataclass(frozen=True)
class Egress:
    """How to reach upstreams: the proxy for http and for https URLs (None: directly), and the exemptions."""

    http: Proxy | None = None
    https: Proxy | None = None
    exempt_all: bool = False
    exemptions: tuple[_Exemption, ...] = ()

    def proxy_for(self, scheme: str, host: str, port: int) -> Proxy | None:
        """The proxy a request to ``scheme://host:port`` goes through, or None for a direct connection."""
        proxy = self.https if scheme == "https" else self.http
        if proxy is None or self.exempt_all:
            return None
        host = host.lower().rstrip(".")
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            address = None
        if any(rule.matches(host, port, address) for rule in self.exemptions):
            return None
        return proxy

    def describe(self, url: str) -> str:
        """How toolmend reaches ``url``, for the start-up log: "directly" or "via proxy http://***@host:port"."""
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        proxy = self.proxy_for(scheme, parts.hostname or "", parts.port or (443 if scheme == "https" else 80))
        return f"via proxy {proxy}" if proxy else "directly"


def from_environment(environ: Mapping[str, str], upstream_proxy: str | None = None) -> Egress:
    """The egress the environment (and ``--upstream-proxy``, which wins) describes; ValueError when unusable."""
    no_proxy = _variable(environ, "no_proxy")
    entries = [entry.strip() for entry in (no_proxy[1] if no_proxy else "").split(",") if entry.strip()]
    exempt_all, exemptions = "*" in entries, tuple(_Exemption.parse(e) for e in entries if e != "*")
    if upstream_proxy is not None:
        if upstream_proxy.strip().lower() == NO_PROXY_SETTING:
            return Egress()
        proxy = parse_proxy(upstream_proxy, "--upstream-proxy")
        return Egress(proxy, proxy, exempt_all, exemptions)
    everything = _variable(environ, "all_proxy")
    chosen = {}
    for scheme in ("http", "https"):
        found = _variable(environ, f"{scheme}_proxy") or everything
        chosen[scheme] = parse_proxy(found[1], found[0]) if found else None
    return Egress(chosen["http"], chosen["https"], exempt_all, exemptions)


def _variable(environ: Mapping[str, str], name: str) -> tuple[str, str] | None:
    """``(name as set, value)`` of a variable in either case, the lowercase one first (urllib, httpx); None
    when unset or empty (an empty variable switches a proxy off, as in urllib)."""
    for spelling in (name, name.upper()):
        if spelling in environ:
            value = environ[spelling].strip()
            return (spelling, value) if value else None
    return None
