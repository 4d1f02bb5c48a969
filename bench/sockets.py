"""Open websockets over real daphne and Redis: memory per socket, and a connect/disconnect soak.

1. Memory: daphne's resident size after 100 and then 1,000 open, subscribed
   sockets (100 users, each with one chat open in up to 10 tabs), per socket
   over a warmed-up server with none open.
2. Soak: 100 sockets held open while ``--rate`` others connect, subscribe
   and close every second for ``--minutes`` (10 by default). Daphne's memory
   is sampled every 10 s; growth is measured from the end of the warm-up
   (``--warm-up``, 120 s: daphne's resident size climbs for about the first
   80 s with no leak) to the last sample with the held sockets still open, in
   all and per socket that came and went, against flat within 1 MB.
3. Redis: keys and channel-group members before the first socket opened and
   after the last one closed, which should match.

Run: ``.venv/bin/python bench/sockets.py`` (``--minutes 10 --rate 10 --held 100``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import time

import harness
from events import Daphnes, Tab, open_all, raise_open_files, sessions_and_chats

TARGET_KIB_PER_SOCKET = 100
FLAT_KIB = 1024


def redis_state() -> tuple[int, int]:
    """Keys in the layer's Redis db, and members of all its channel groups."""
    import redis

    client = redis.Redis.from_url(os.environ["REDIS_URL"])
    try:
        groups = sum(client.zcard(key) for key in client.scan_iter(match="asgi:group:*"))
        return client.dbsize(), groups
    finally:
        client.close()


async def settle(servers: Daphnes, seconds: float = 3.0) -> int:
    """Daphne's resident size once the last closes have been handled."""
    await asyncio.sleep(seconds)
    return servers.rss_kib()


async def memory(servers: Daphnes, pairs: list[tuple[str, str]]) -> list[tuple[int, int, float]]:
    """(sockets, RSS KiB, KiB per socket) at 100 and 1,000 open sockets."""
    warm = [Tab(servers.ports[0], key, chat) for key, chat in pairs[:20]]
    await open_all(warm)
    await asyncio.gather(*(tab.close() for tab in warm))
    base = await settle(servers)
    print(f"daphne warmed up, no socket open: {base:,} KiB")
    rows = []
    tabs: list[Tab] = []
    for target in (100, 1000):
        more = [
            Tab(servers.ports[0], key, chat) for n in range(len(tabs), target) for key, chat in [pairs[n % len(pairs)]]
        ]
        seconds = await open_all(more)
        tabs += more
        rss = await settle(servers)
        rows.append((target, rss, (rss - base) / target))
        print(
            f"{target:>5} sockets open ({len(more) / seconds:.0f} connects/s): {rss:,} KiB, "
            f"{(rss - base) / target:.1f} KiB per socket",
            flush=True,
        )
    await asyncio.gather(*(tab.close() for tab in tabs))
    return rows


async def soak(
    servers: Daphnes, pairs: list[tuple[str, str]], minutes: float, rate: float, held: int
) -> list[tuple[float, int, int]]:
    """(seconds since start, RSS KiB, sockets that came and went) every 10 s while ``rate`` sockets a second
    come and go; the last sample is after every socket closed."""
    port = servers.ports[0]
    holding = [Tab(port, key, chat) for n in range(held) for key, chat in [pairs[n % len(pairs)]]]
    await open_all(holding)
    samples = [(0.0, servers.rss_kib(), 0)]
    began = time.monotonic()
    churned = failed = started = 0
    in_flight: set[asyncio.Task[None]] = set()

    async def come_and_go() -> None:
        nonlocal churned, failed
        key, chat = random.choice(pairs)
        tab = Tab(port, key, chat)
        try:
            await tab.open()
            await asyncio.sleep(random.uniform(0, 1))
            await tab.close()
            churned += 1
        except Exception:
            failed += 1

    next_sample = 10.0
    tick = 1 / rate
    while (elapsed := time.monotonic() - began) < minutes * 60:
        task = asyncio.ensure_future(come_and_go())
        started += 1
        in_flight.add(task)
        task.add_done_callback(in_flight.discard)
        if elapsed >= next_sample:
            samples.append((elapsed, servers.rss_kib(), churned))
            print(
                f"  {elapsed:6.0f} s: {samples[-1][1]:,} KiB, {churned:,} sockets came and went"
                f"{f', {failed} failed' if failed else ''}",
                flush=True,
            )
            next_sample += 10
        await asyncio.sleep(max(0.0, began + started * tick - time.monotonic()))
    await asyncio.gather(*in_flight)
    await asyncio.gather(*(tab.close() for tab in holding))
    samples.append((time.monotonic() - began, await settle(servers), churned))
    print(f"soak: {churned:,} sockets came and went in {minutes:g} min ({failed} failed), {held} held")
    return samples


def report(
    rows: list[tuple[int, int, float]],
    samples: list[tuple[float, int, int]],
    before: tuple[int, int],
    after: tuple[int, int],
    warm_up_s: float,
) -> None:
    print()
    for sockets, _rss, per in rows:
        print(
            f"{sockets:>5} sockets: {per:.1f} KiB each (≤ {TARGET_KIB_PER_SOCKET} KiB: "
            f"{harness.verdict(per <= TARGET_KIB_PER_SOCKET)})"
        )
    held = samples[:-1]
    warm_at, warm, warm_churned = next((sample for sample in held if sample[0] >= warm_up_s), held[0])
    end_at, end, end_churned = held[-1]
    growth = end - warm
    per_cycle = growth / max(end_churned - warm_churned, 1)
    print(
        f"soak memory: {warm:,} KiB after warm-up ({warm_at:.0f} s), {end:,} KiB at {end_at:.0f} s: "
        f"{growth:+,} KiB, {per_cycle * 1024:+.0f} B per socket that came and went "
        f"(flat within {FLAT_KIB // 1024} MB: {harness.verdict(abs(growth) <= FLAT_KIB)}); "
        f"{samples[-1][1]:,} KiB once every socket closed"
    )
    print(
        f"Redis before: {before[0]} keys, {before[1]} group members; after: {after[0]} keys, "
        f"{after[1]} group members (back to the start: {harness.verdict(after == before)})"
    )


async def bench(args: argparse.Namespace) -> None:
    pairs = await asyncio.to_thread(sessions_and_chats, 100)
    before = redis_state()
    with Daphnes(1, args.port) as servers:
        rows = await memory(servers, pairs) if not args.skip_memory else []
        samples = await soak(servers, pairs, args.minutes, args.rate, args.held)
        await asyncio.sleep(2)
        after = redis_state()
    report(rows, samples, before, after, args.warm_up)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10, help="length of the soak")
    parser.add_argument("--rate", type=float, default=10, help="sockets that come and go each second")
    parser.add_argument("--held", type=int, default=100, help="sockets held open through the soak")
    parser.add_argument("--warm-up", type=float, default=120, help="seconds of the soak before growth counts")
    parser.add_argument("--skip-memory", action="store_true", help="only the soak")
    parser.add_argument("--port", type=int, default=8121)
    args = parser.parse_args()
    raise_open_files()
    harness.setup()
    print(f"Redis {os.environ['REDIS_URL']}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    asyncio.run(bench(args))


if __name__ == "__main__":
    main()
