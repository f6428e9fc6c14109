"""TLS in the benchmark (bench/run.py, docs/benchmark.md): the API as it is deployed, over TLS,
with certificates of a private CA the broker's provider names in `ca_file`, and what the
authorization server over TLS (bench/tls_auth.py) shares with it.

- `TLSAPI`: a private CA made for the run (Tests/oauth/support/private_ca.py: a CA, and a
  certificate it signed for `localhost` and 127.0.0.1) and the second server block of the
  benchmark's nginx: the same answers as its plain one, over TLS, with a shared session cache and
  session tickets (resumption possible), logging each request's connection serial number and
  whether its TLS session was resumed (`$connection $ssl_session_reused`).
- `AccessLog`: reads such a log as it grows — per target of the run, the requests, the
  connections nginx had not seen before, and those of them that made a full handshake
  (`$ssl_session_reused` "." on a TLS connection).

Needs the tests' Python tools (requests, Django, django-oauth-toolkit, cryptography: `make venv`).
"""

from __future__ import annotations

import os
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "Tests", "oauth"))

import requests  # noqa: E402 - after the path to the tests' support modules
from support.private_ca import PrivateCA  # noqa: E402

# The access log of every TLS server block: the connection's serial number (unique in one nginx,
# across its workers), "r" when its TLS session was resumed ("." for a full handshake, "-" on a
# plain connection), the TLS version, and the client's User-Agent (the broker's calls say
# "token-broker").
LOG_FORMAT = "log_format bench_tls '$connection $ssl_session_reused $ssl_protocol $http_user_agent';"
BROKER_AGENT = "token-broker"
PAUSE = "5-20"  # ms a connection waits before each of its requests in the "spread" rows (token.lua)
# Loopback calls of the run itself (metrics, readiness): no proxy or CA bundle from the environment.
LOCAL = requests.Session()
LOCAL.trust_env = False


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ipv6_loopback() -> bool:
    """Whether ::1 can be listened on: libcurl resolves `localhost` to ::1 and 127.0.0.1 and tries
    ::1 first, so a TLS server block listens on both when it can."""
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


def listen_lines(port: int, ssl: bool) -> str:
    suffix = " ssl" if ssl else ""
    lines = [f"listen 127.0.0.1:{port}{suffix};"] + ([f"listen [::1]:{port}{suffix};"] if ipv6_loopback() else [])
    return "\n".join(f"        {line}" for line in lines)


def tls_lines(ca: PrivateCA) -> str:
    return f"""        ssl_certificate {ca.cert_file};
        ssl_certificate_key {ca.key_file};
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_session_cache shared:SSL:10m;
        ssl_session_timeout 10m;
        ssl_session_tickets on;"""


@dataclass
class Counts:
    requests: int = 0
    connections: int = 0  # not seen in the log before
    handshakes: int = 0  # of those, the ones whose TLS session was not resumed
    protocols: set[str] = field(default_factory=set)  # the TLS versions of those connections


class AccessLog:
    """A log in LOG_FORMAT, read as it grows; with `agent`, only the lines of that User-Agent."""

    def __init__(self, path: str, agent: str | None = None):
        self.path = path
        self.agent = agent
        self.offset = 0
        self.seen: set[str] = set()

    def read(self) -> Counts:
        """What was logged since the last read (whole lines only)."""
        counts = Counts()
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return counts
        end = data.rfind(b"\n") + 1
        self.offset += end
        for line in data[:end].decode("latin-1").splitlines():
            serial, reused, protocol, agent = (line.split(" ", 3) + ["", "", ""])[:4]
            if self.agent and not agent.startswith(self.agent):
                continue
            counts.requests += 1
            if serial not in self.seen:
                self.seen.add(serial)
                counts.connections += 1
                counts.handshakes += reused == "."
                counts.protocols.add(protocol)
        return counts


class TLSAPI:
    """The benchmark nginx's TLS server block: its port, certificate and log (peers.py's start_nginx
    writes it into that nginx's configuration with the same locations as the plain one)."""

    def __init__(self, workdir: str):
        self.ca = PrivateCA(Path(workdir) / "private-ca")
        self.ca_file = str(self.ca.ca_file)
        self.port = free_port()
        self.log = AccessLog(os.path.join(workdir, "nginx", "tls-access.log"))
        self.base_url = f"https://localhost:{self.port}"

    def http_directives(self) -> str:
        return "    " + LOG_FORMAT

    def server_block(self, locations: str) -> str:
        return f"""    server {{
{listen_lines(self.port, ssl=True)}
{tls_lines(self.ca)}
        access_log {self.log.path} bench_tls;
{locations}
    }}"""

    def provider_lines(self) -> str:
        """The proxy broker's provider settings for this API (YAML, under the provider)."""
        return (f"    api_base_url: {self.base_url}\n    api_allow_private_addresses: true\n"
                f"    ca_file: {self.ca_file}\n")


def upstream_counts(port: int, client: str) -> tuple[int, int]:
    """The broker's broker_upstream_connections_{opened,reused}_total{client=...}."""
    text = LOCAL.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    found = {}
    for kind in ("opened", "reused"):
        prefix = f'broker_upstream_connections_{kind}_total{{client="{client}"}} '
        found[kind] = next((int(float(line[len(prefix):])) for line in text.splitlines() if line.startswith(prefix)), 0)
    return found["opened"], found["reused"]
