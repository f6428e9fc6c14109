"""The authorization server over TLS in the benchmark (bench/run.py, docs/benchmark.md): as it is
deployed, with a certificate of the private CA (bench/tls_peers.py) the broker's provider names in
`ca_file`, beside the same server over plain HTTP.

- `AuthFronts`: two django-oauth-toolkit servers (Tests/oauth/support/authserver.py) behind one
  nginx of their own, one through a plain-HTTP server block, one through a TLS server block
  (`proxy_set_header Host $host:$server_port; proxy_set_header X-Forwarded-Proto https`). Each
  is started with its issuer set to the address of its front (`AUTHSERVER_ISSUER`, which its
  settings read), so that its discovery document, its ID tokens' `iss` and every endpoint it
  names are the front's: `https://localhost:PORT/o/…` for the TLS one. The only difference
  between the two is TLS.
- `logins_and_refreshes`: a broker with one provider on each (`plain`, and `tls` with
  `ca_file`), the full sign-in (the broker's /authorize → the authorization server → the broker's
  /callback → POST /token) and forced refreshes (`POST /refresh`) against each in alternating
  rounds: the broker's CPU per login and per refresh, its provider connections (its own counters)
  and the front's count of new connections and full TLS handshakes from the broker.

Needs the tests' Python tools (requests, Django, django-oauth-toolkit, cryptography: `make venv`).
"""

from __future__ import annotations

import base64
import concurrent.futures
import hashlib
import os
import secrets
import subprocess
import sys
import time
import urllib.parse
from typing import Callable

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "Tests", "oauth"))

import requests  # noqa: E402 - after the path to the tests' support modules
from support.authserver import AuthServer  # noqa: E402
from support.browser import Browser, query_params  # noqa: E402
from support.private_ca import PrivateCA  # noqa: E402
from processes import CLK_TCK, STOPPERS, Broker, cpu_ticks, log, pin, which  # noqa: E402
from tls_peers import (  # noqa: E402
    BROKER_AGENT, LOCAL, LOG_FORMAT, TLSAPI, AccessLog, free_port, listen_lines, tls_lines, upstream_counts,
)

REDIRECT_URI = "http://127.0.0.1/callback"
USER, PASSWORD = "bench", "bench-password"


# ---------------------------------------------------------------------------------------------
# The authorization server over plain HTTP and over TLS


class FrontedAuthServer(AuthServer):
    """The tests' authorization server, its issuer the address of the nginx front before it."""

    def __init__(self, public_issuer: str, **kwargs):
        super().__init__(**kwargs)
        self.public_issuer = public_issuer

    def _env(self) -> dict:
        env = super()._env()
        env["AUTHSERVER_ISSUER"] = self.public_issuer
        return env


class AuthFronts:
    """Two authorization servers, `plain` and `tls`, each behind its own server block of one nginx."""

    KINDS = ("plain", "tls")

    def __init__(self, workdir: str, python: str, ca: PrivateCA, nginx: str):
        self.root = os.path.join(workdir, "nginx-auth")
        os.makedirs(self.root, exist_ok=True)
        self.python, self.ca, self.nginx = python, ca, nginx
        self.ports = {kind: free_port() for kind in self.KINDS}
        self.issuers = {"plain": f"http://127.0.0.1:{self.ports['plain']}/o", "tls": f"https://localhost:{self.ports['tls']}/o"}
        self.logs = {kind: AccessLog(os.path.join(self.root, f"{kind}-access.log"), agent=BROKER_AGENT) for kind in self.KINDS}
        self.servers: dict[str, FrontedAuthServer] = {}
        self.process: subprocess.Popen | None = None

    def start(self) -> "AuthFronts":
        try:
            for kind in self.KINDS:
                self.servers[kind] = FrontedAuthServer(self.issuers[kind], python=self.python, approval_prompt="auto").start()
                self.servers[kind].create_user(USER, PASSWORD)
            self.start_nginx()
        except BaseException:
            self.stop()
            raise
        return self

    def start_nginx(self) -> None:
        def front(kind: str) -> str:
            tls = kind == "tls"
            return f"""    server {{
{listen_lines(self.ports[kind], ssl=tls)}
{tls_lines(self.ca) if tls else ""}
        access_log {self.logs[kind].path} bench_tls;
        location / {{
            proxy_pass http://127.0.0.1:{self.servers[kind].port};
            proxy_set_header Host $host:$server_port;
            {"proxy_set_header X-Forwarded-Proto https;" if tls else ""}
        }}
    }}"""
        conf = f"""
worker_processes 1;
pid {self.root}/nginx.pid;
error_log {self.root}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    {LOG_FORMAT}
    client_body_temp_path {self.root}/body;
    proxy_temp_path {self.root}/proxy;
    fastcgi_temp_path {self.root}/fastcgi;
    uwsgi_temp_path {self.root}/uwsgi;
    scgi_temp_path {self.root}/scgi;
    keepalive_requests 1000000;
{front("plain")}
{front("tls")}
}}
"""
        path = os.path.join(self.root, "nginx.conf")
        with open(path, "w") as f:
            f.write(conf)
        self.process = subprocess.Popen([self.nginx, "-p", self.root, "-c", path, "-g", "daemon off;"], stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                if all(LOCAL.get(f"{self.issuers[k]}/.well-known/openid-configuration", timeout=5, verify=self.ca_file).json()["issuer"]
                       == self.issuers[k] for k in self.KINDS):
                    return
            except (requests.RequestException, ValueError, KeyError):
                pass
            time.sleep(0.1)
        raise RuntimeError("the authorization servers' nginx fronts did not answer; see " + os.path.join(self.root, "error.log"))

    @property
    def ca_file(self) -> str:
        return str(self.ca.ca_file)

    @property
    def pids(self) -> list[int]:
        return [self.process.pid] if self.process else []

    def register(self, redirect_uri: str) -> dict[str, tuple[str, str]]:
        """The broker registered at both: kind → (client_id, client_secret)."""
        return {kind: self.servers[kind].register_client([redirect_uri], skip_authorization=True,
                                                         client_id=f"broker-{kind}-{secrets.token_hex(4)}",
                                                         client_secret=secrets.token_urlsafe(32))
                for kind in self.KINDS}

    def broker_config(self, clients: dict[str, tuple[str, str]]) -> str:
        providers = "".join(f"""  {kind}:
    issuer: {self.issuers[kind]}
    client_id: {clients[kind][0]}
    client_secret_env: BENCH_{kind.upper()}_SECRET
    scopes: [openid, profile, email]
""" + (f"    ca_file: {self.ca_file}\n" if kind == "tls" else "") for kind in self.KINDS)
        return f"providers:\n{providers}apps:\n  bench:\n    redirect_uris: [{REDIRECT_URI}]\n"

    @staticmethod
    def broker_env(clients: dict[str, tuple[str, str]]) -> dict[str, str]:
        return {f"BENCH_{kind.upper()}_SECRET": secret for kind, (_, secret) in clients.items()}

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None
        for server in self.servers.values():
            server.stop()
        self.servers = {}


# ---------------------------------------------------------------------------------------------
# Logins and refreshes against each


class Client:
    """One user agent (its own cookies: the authorization server's sign-in is done once) and the
    sessions it signed in."""

    def __init__(self, broker_url: str, fronts: AuthFronts):
        self.broker_url = broker_url
        self.browser = Browser(allowed_hosts=[broker_url] + [fronts.issuers[k] for k in fronts.KINDS])
        self.browser.session.verify = fronts.ca_file
        self.browser.session.trust_env = False  # REQUESTS_CA_BUNDLE would replace the private CA
        self.sessions: dict[str, str] = {}

    def login(self, provider: str) -> str:
        verifier = secrets.token_urlsafe(48)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        url = f"{self.broker_url}/authorize?" + urllib.parse.urlencode({
            "provider": provider, "app": "bench", "redirect_uri": REDIRECT_URI,
            "code_challenge": challenge, "code_challenge_method": "S256", "state": "bench"})
        location = self.browser.authorize(url, USER, PASSWORD)
        code = query_params(location).get("code")
        if not code:
            raise RuntimeError(f"sign-in at {provider} ended at {location[:200]}")
        answer = self.browser.session.post(f"{self.broker_url}/token", timeout=30, data={
            "grant_type": "authorization_code", "code": code, "code_verifier": verifier,
            "redirect_uri": REDIRECT_URI, "app": "bench"})
        if answer.status_code != 200:
            raise RuntimeError(f"POST /token after signing in at {provider}: {answer.status_code} {answer.text[:200]}")
        self.sessions[provider] = answer.json()["session_token"]
        return self.sessions[provider]

    def refresh(self, provider: str) -> None:
        answer = self.browser.session.post(f"{self.broker_url}/refresh", timeout=30,
                                           headers={"Authorization": f"Bearer {self.sessions[provider]}"})
        if answer.status_code != 200:
            raise RuntimeError(f"POST /refresh at {provider}: {answer.status_code} {answer.text[:200]}")

    def close(self) -> None:
        self.browser.close()


def timed(clients: list[Client], seconds: float, operation: Callable[[Client], None]) -> tuple[int, int, float]:
    """`operation` in a loop on every client's thread for `seconds`: (done, failed, elapsed)."""
    deadline = time.monotonic() + seconds

    def loop(client: Client) -> tuple[int, int]:
        done = failed = 0
        while time.monotonic() < deadline:
            try:
                operation(client)
                done += 1
            except Exception:  # noqa: BLE001 - counted, the load goes on
                failed += 1
        return done, failed

    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(len(clients)) as pool:
        results = list(pool.map(loop, clients))
    return sum(d for d, _ in results), sum(f for _, f in results), time.monotonic() - started


def logins_and_refreshes(broker_port: int, broker_cpu: Callable[[], float], broker_ticks: Callable[[], float], fronts: AuthFronts,
                         rounds: int, seconds: float, workers: int, log: Callable[[str], None]) -> dict:
    """`rounds` alternating rounds (plain first, then TLS first, …) of logins, then of refreshes,
    at each provider: for each (kind, operation) a list of rounds, each a dict of done, failed,
    elapsed, cpu (broker seconds, from `broker_cpu`; `broker_ticks` gives the coarser figure of the
    rest of the benchmark, logged beside it), opened and reused (the broker's provider connections) and
    front (the front's Counts of the broker's requests)."""
    clients = [Client(f"http://127.0.0.1:{broker_port}", fronts) for _ in range(workers)]
    out: dict = {(kind, op): [] for kind in fronts.KINDS for op in ("logins", "refreshes")}
    try:
        for client in clients:  # the sign-in at each authorization server, and a session at each
            for kind in fronts.KINDS:
                client.login(kind)
        for round_number in range(rounds):
            order = fronts.KINDS if round_number % 2 == 0 else fronts.KINDS[::-1]
            for op in ("logins", "refreshes"):
                for kind in order:
                    operation = (lambda c, k=kind: c.login(k)) if op == "logins" else (lambda c, k=kind: c.refresh(k))
                    fronts.logs[kind].read()
                    opened, reused = upstream_counts(broker_port, "providers")
                    cpu, ticks = broker_cpu(), broker_ticks()
                    done, failed, elapsed = timed(clients, seconds, operation)
                    cpu, ticks = broker_cpu() - cpu, broker_ticks() - ticks
                    opened_after, reused_after = upstream_counts(broker_port, "providers")
                    time.sleep(0.1)  # nginx writes a request's line after its answer
                    result = {"done": done, "failed": failed, "elapsed": elapsed, "cpu": cpu,
                              "opened": opened_after - opened, "reused": reused_after - reused, "front": fronts.logs[kind].read()}
                    out[(kind, op)].append(result)
                    log(f"authorization server round {round_number + 1}, {kind}: {op} {done} in {elapsed:.1f} s"
                        + (f" ({failed} failed)" if failed else "")
                        + f", broker {cpu / max(done, 1) * 1e6:.0f} µs CPU each (by /proc/PID/stat's ticks "
                        f"{ticks / max(done, 1) * 1e6:.0f} µs); provider connections opened {result['opened']}, "
                        f"reused {result['reused']}; the front saw {result['front'].requests} requests of the broker on "
                        f"{result['front'].connections} new connections, {result['front'].handshakes} full TLS handshakes")
    finally:
        for client in clients:
            client.close()
    return out


def process_cpu_seconds(pid: int) -> float:
    """The CPU time of `pid`'s threads alive now, from /proc/PID/task/*/schedstat (nanoseconds):
    finer than /proc/PID/stat's clock ticks, for loads of a few hundred operations. (A thread
    that ends takes its time with it; the broker's threads live as long as it does.)"""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # the thread ended meanwhile
    return total / 1e9


def report_rows(out: dict, clients: int) -> list[tuple[str, ...]]:
    """The benchmark table's rows (report.py's columns) for logins_and_refreshes' figures."""
    def total(kind: str, op: str, key: str) -> float:
        return sum(r[key] for r in out[(kind, op)])

    def front(kind: str, op: str, key: str) -> float:
        return sum(getattr(r["front"], key) for r in out[(kind, op)])

    rows: list[tuple[str, ...]] = []
    labels = {"logins": "logins (the broker's /authorize → its sign-in → /callback → POST /token)",
              "refreshes": "refreshes (POST /refresh, each a refresh at the token endpoint)"}
    fronts = {"plain": "plain HTTP (nginx → Django)", "tls": "TLS (nginx https → Django; ca_file)"}
    for op in ("logins", "refreshes"):
        for kind in ("plain", "tls"):
            done, elapsed, cpu = total(kind, op, "done"), total(kind, op, "elapsed"), total(kind, op, "cpu")
            failed = total(kind, op, "failed")
            per = 1000 / max(done, 1)
            connections = f"{front(kind, op, 'connections') * per:.1f} new connections" + (
                f", {front(kind, op, 'handshakes') * per:.1f} full TLS handshakes" if kind == "tls" else "")
            rows.append((f"authorization server, {fronts[kind]}: {labels[op]}, {clients} clients", f"{done / elapsed:,.0f}/s", "", "",
                         f"{cpu / max(done, 1) * 1e6:,.0f} µs",
                         f"{done:.0f} in {elapsed:.1f} s" + (f", {failed:.0f} failed" if failed else "")
                         + f"; per 1,000: the broker opened {total(kind, op, 'opened') * per:.1f} provider connections, reused "
                         f"{total(kind, op, 'reused') * per:,.0f}; the front saw {connections} from it", ""))
    for op in ("logins", "refreshes"):
        def cpu_per(kind: str, r: dict) -> float:
            return r["cpu"] / max(r["done"], 1)
        ratio = (total("tls", op, "cpu") / max(total("tls", op, "done"), 1)) / (total("plain", op, "cpu") / max(total("plain", op, "done"), 1))
        by_round = [cpu_per("tls", t) / cpu_per("plain", p) for t, p in zip(out[("tls", op)], out[("plain", op)])]
        rows.append((f"authorization server: broker CPU per {'login' if op == 'logins' else 'refresh'}, TLS ÷ plain HTTP", "", "", "", "",
                     f"{ratio:.2f}× (by round " + " / ".join(f"{r:.2f}" for r in by_round) + ")",
                     f"≤ 1.3× {'✓' if ratio <= 1.3 else '✗ missed'}"))
    return rows


def authorization_server_over_tls(args, broker_bin: str, workdir: str, key: str, tls_api: TLSAPI) -> dict:
    """Logins and forced refreshes at the tests' authorization server behind nginx, over plain HTTP
    and over TLS (AuthFronts), on one broker with a provider on each: the broker's CPU per
    operation on each, in alternating rounds."""
    fronts = AuthFronts(workdir, sys.executable, tls_api.ca, which("nginx") or "nginx").start()
    STOPPERS.append(fronts.stop)
    state = os.path.join(workdir, "state-auth")
    os.makedirs(state)
    broker = Broker("auth", broker_bin, workdir, state, key)
    clients = fronts.register(f"http://127.0.0.1:{broker.port}/callback")
    config = os.path.join(workdir, "auth.yaml")
    with open(config, "w") as f:
        f.write(fronts.broker_config(clients))
    broker.arguments = ("--config", config)
    broker.env.update(fronts.broker_env(clients) | {"BROKER_PUBLIC_URL": f"http://127.0.0.1:{broker.port}"})
    broker.start()
    if args.pin:
        pin([broker.pid] + fronts.pids, args.server_cpus)
    try:
        return logins_and_refreshes(broker.port, lambda: process_cpu_seconds(broker.pid),
                                    lambda: cpu_ticks([broker.pid]) / CLK_TCK, fronts,
                                    args.auth_rounds, args.load_seconds, args.auth_clients, log)
    finally:
        broker.stop()
        STOPPERS.remove(fronts.stop)
        fronts.stop()
