"""The PostgreSQL store in the benchmark (bench/run.py, `--postgres`): beside its hot-path rounds,
the memory of a bounded cache, logins and refreshes, and three instances (bench/several.py)."""

from __future__ import annotations

import asyncio
import os

import several
from flows import REDIRECT_URI, Connection, logins_and_refreshes, warm
from processes import Broker, log, rss_bytes


def postgres_extras(args, broker_bin: str, workdir: str, key: str, postgres_env: dict[str, str], sample: str, large: int) -> dict:
    """On the database the hot-path rounds used: the memory of an instance whose cache holds a
    tenth of the sessions, after reading more sessions than that; logins and refreshes on one
    instance (its development provider); and three instances refreshing at a stand-in provider:
    one session's crowd of callers spread over them, and revocations on one seen by another."""
    out: dict = {}
    with open(sample) as f:
        tokens = f.read().split()
    unused = os.path.join(workdir, "unused")
    bounded = max(100, large // 10)
    broker = Broker("pg-bounded", broker_bin, workdir, unused, key, postgres_env | {"BROKER_POSTGRES_CACHE_SESSIONS": str(bounded)}).start()
    started_rss = rss_bytes(broker.pid)
    asyncio.run(warm(broker.port, tokens))
    out["bounded"] = (bounded, len(tokens), started_rss, rss_bytes(broker.pid))
    broker.stop()
    log(f"PostgreSQL store, cache {bounded}: RSS {out['bounded'][3] / 2**20:.0f} MiB after reading {len(tokens)} sessions")

    broker = Broker("flows-pg", broker_bin, workdir, unused, key, postgres_env).start()
    out["flows"] = asyncio.run(logins_and_refreshes(broker, args.load_seconds))
    broker.stop()
    log(f"PostgreSQL store: logins {out['flows']['logins']}; refreshes {out['flows']['refreshes']}")

    stand_in = several.StandIn()
    config = os.path.join(workdir, "several.yaml")
    with open(config, "w") as f:
        f.write(stand_in.config("dev", "demo", REDIRECT_URI))
    env = postgres_env | {"BENCH_CLIENT_SECRET": "bench", "BROKER_MAX_CONNECTIONS": str(args.callers + 1000),
                          "BROKER_MAX_CONNECTIONS_PER_IP": str(args.callers + 500)}
    brokers = []
    try:
        for n in range(3):
            brokers.append(Broker(f"several-{n}", broker_bin, workdir, unused, key, env, arguments=("--config", config)).start())
        # The fixture's tokens live 12 hours: every caller asking for a day needs a refresh, and
        # the stand-in's new token (two days) satisfies every caller after it.
        before = stand_in.refreshes
        out["crowd"] = asyncio.run(several.crowd(Connection, [b.port for b in brokers], tokens[0], args.callers, 86400))
        out["crowd"]["refreshes"] = stand_in.refreshes - before
        out["revocations"] = asyncio.run(several.revocation_delays(Connection, brokers[0].port, brokers[1].port, tokens[1:201]))
    finally:
        for broker in brokers:
            broker.stop()
        stand_in.close()
    log(f"three instances: {out['crowd']}; revocation reaching another instance: {several.summary(out['revocations'])}")
    return out
