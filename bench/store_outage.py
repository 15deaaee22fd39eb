#!/usr/bin/env python3
"""What a Redis outage costs a request, and how soon the memory is used again once Redis is back.

    python bench/store_outage.py [--recalls 200]

Starts a throwaway redis-server on a free loopback port (``memory_backends.start_redis``) and measures, through ``GuardedStore`` over
``RedisStore`` as the proxy uses them: a recall with Redis up (median); the one recall that finds it down
(the tests only check that it fails on the refused connection rather than on a timeout); recalls while it
is down (median: skipped, never sent); and the time from Redis answering again to the guard using it
(the probe's backoff, 0.2 s doubling to 10 s, so it grows with the length of the outage: ``--down``).

Needs the project's environment and redis-server (apt-get install -y redis-server).
"""

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

from memory_backends import start_redis  # bench/ is on sys.path when a script here runs
from procs import free_port

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from proxy.memory.guarded import GuardedStore  # noqa: E402
from proxy.memory.redis import RedisStore  # noqa: E402

#: Seconds to wait for the guard to use Redis again before calling it stuck (past the backoff's 10 s cap).
RECOVERY_LIMIT = 60.0


async def recall_ms(guarded: GuardedStore) -> float:
    started = time.perf_counter()
    await guarded.recall("bench", ["call_absent"])
    return (time.perf_counter() - started) * 1000


async def measure(recalls: int, down: float, cpus: str) -> dict[str, float]:
    port = free_port()
    redis = start_redis(port, cpus)
    store = RedisStore(f"redis://127.0.0.1:{port}/0", ttl_seconds=60, max_entries=1000)
    guarded = GuardedStore(store)
    try:
        assert await guarded.ready()
        up = [await recall_ms(guarded) for _ in range(recalls)]
        redis.terminate()
        redis.wait(5)
        discovering = await recall_ms(guarded)
        assert not guarded.available
        skipped = [await recall_ms(guarded) for _ in range(recalls)]
        await asyncio.sleep(down)  # the outage lasts this long: the probe's backoff grows meanwhile
        redis = start_redis(port, cpus)  # returns once it answers PING
        back = time.perf_counter()
        while not guarded.available and time.perf_counter() - back < RECOVERY_LIMIT:
            await asyncio.sleep(0.005)
        recovered = time.perf_counter() - back
    finally:
        await guarded.close()
        redis.terminate()
        redis.wait(5)
    return {"recall_up_p50_ms": statistics.median(up), "recall_finding_it_down_ms": discovering,
            "recall_while_down_p50_ms": statistics.median(skipped), "back_in_use_after_s": recovered}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recalls", type=int, default=200, help="recalls measured with Redis up, and while down")
    parser.add_argument("--down", type=float, default=3.0, help="seconds Redis stays down")
    parser.add_argument("--cpus", default="0", help="CPUs for redis-server (taskset)")
    args = parser.parse_args()
    for name, value in asyncio.run(measure(args.recalls, args.down, args.cpus)).items():
        print(f"{name:28} {value:10.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
