"""Memory URLs in logs: a Redis password never appears, the host does (issue 15)."""

import secrets

from proxy.memory import redact
from tests.support.processes import ProxyProcess, RedisServer


def test_redact_hides_the_password_of_redis_urls_and_keeps_the_rest() -> None:
    assert redact("redis://toolmend:s3cret-pass@cache.internal:6379/2") == "redis://toolmend:***@cache.internal:6379/2"
    assert redact("rediss://:s3cret-pass@127.0.0.1:6380/0?socket_timeout=2") == "rediss://:***@127.0.0.1:6380/0?socket_timeout=2"
    assert redact("redis://127.0.0.1:6379/0") == "redis://127.0.0.1:6379/0"
    assert redact("sqlite:///var/lib/toolmend/memory.db") == "sqlite:///var/lib/toolmend/memory.db"


def test_the_start_up_log_names_the_redis_host_but_not_its_password() -> None:
    password = "pw-" + secrets.token_hex(12)
    with RedisServer() as server:
        server.command(b"CONFIG", b"SET", b"requirepass", password.encode())
        memory = f"redis://:{password}@127.0.0.1:{server.port}/0"
        # Nothing is forwarded: the upstream is never contacted.
        with ProxyProcess("http://127.0.0.1:9/v1", "--memory", memory) as proxy:
            log = proxy.log()
    assert f"memory store redis ready: redis://:***@127.0.0.1:{server.port}/0" in log  # the password worked
    assert password not in log
