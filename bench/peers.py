"""The benchmark's peers and the API behind the proxies (bench/run.py): the bare libmicrohttpd
responder (bench/mhd_bare.c), the proxy's floor (bench/proxy_floor.c), nginx (with the TLS
server block of bench/tls_peers.py), and a broker proxying to an API."""

from __future__ import annotations

import os
import subprocess
import time

import tls_peers
from processes import STARTED, Broker, children, fixture, free_port, http_get, which
from targets import PROXY_SESSIONS


HERE = os.path.dirname(os.path.abspath(__file__))


def start_bare(workdir: str, threads: int, response_file: str, fresh: bool = False) -> tuple[subprocess.Popen, int]:
    """bench/mhd_bare.c answering with `response_file`: one response for every request, or with
    `fresh` one made for each request."""
    binary = os.path.join(workdir, "mhd_bare")
    if not os.path.exists(binary):
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", "libmicrohttpd"], capture_output=True, text=True, check=True).stdout.split()
        subprocess.run(["gcc", "-O2", "-o", binary, os.path.join(HERE, "mhd_bare.c"), *flags, "-lpthread"], check=True)
    port = free_port()
    process = subprocess.Popen([binary, str(port), str(threads), response_file, *(["fresh"] if fresh else [])], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    STARTED.append(process)
    assert process.stdout and process.stdout.readline().startswith(b"listening")
    return process, port


def start_proxy_floor(workdir: str, design: str, threads: int, upstream: str, sessions: int | None = None) -> tuple[subprocess.Popen, int]:
    """bench/proxy_floor.c in `design` ("split" or "one"), proxying every request to `upstream`; with
    `sessions`, each transfer set up as the broker sets it up, on one of that many sessions' connections."""
    binary = os.path.join(workdir, "proxy_floor")
    if not os.path.exists(binary):
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", "libmicrohttpd", "libcurl"], capture_output=True, text=True, check=True).stdout.split()
        subprocess.run(["gcc", "-O2", "-o", binary, os.path.join(HERE, "proxy_floor.c"), *flags, "-lpthread"], check=True)
    port = free_port()
    extra = [] if sessions is None else [str(sessions)]
    process = subprocess.Popen([binary, design, str(port), str(threads), upstream, *extra], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    STARTED.append(process)
    assert process.stdout and process.stdout.readline().startswith(b"listening")
    return process, port


def start_nginx(workdir: str, workers: int, headers: dict[str, str], body: bytes,
                tls: tls_peers.TLSAPI | None = None) -> tuple[subprocess.Popen, int]:
    """nginx answering `body` with `headers` on every path (the API of every proxy); with `tls`, the
    same locations once more in a TLS server block on tls.port, with its access log."""
    port = free_port()
    root = os.path.join(workdir, "nginx")
    os.makedirs(root, exist_ok=True)
    quoted = body.decode().replace("\\", "\\\\").replace("'", "\\'")
    def nginx_string(value: str) -> str:
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'

    add_headers = "\n".join(f"            add_header {name} {nginx_string(value)} always;"
                             for name, value in headers.items() if name.lower() != "content-type")
    locations = f"""        location / {{
            default_type {headers.get('Content-Type', 'application/json')};
{add_headers}
            return 200 '{quoted}';
        }}
        location = /nginx_status {{
            stub_status;
        }}
        location = /authorization {{
            default_type text/plain;
            return 200 $http_authorization;
        }}"""
    conf = f"""
worker_processes {workers};
pid {root}/nginx.pid;
error_log {root}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {root}/body;
    proxy_temp_path {root}/proxy;
    fastcgi_temp_path {root}/fastcgi;
    uwsgi_temp_path {root}/uwsgi;
    scgi_temp_path {root}/scgi;
    keepalive_requests 1000000;
{tls.http_directives() if tls else ""}
    server {{
        listen 127.0.0.1:{port};
{locations}
    }}
{tls.server_block(locations) if tls else ""}
}}
"""
    path = os.path.join(root, "nginx.conf")
    with open(path, "w") as f:
        f.write(conf)
    process = subprocess.Popen([which("nginx") or "nginx", "-p", root, "-c", path, "-g", "daemon off;"], stdin=subprocess.DEVNULL)
    STARTED.append(process)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            if http_get(port, "/token")[0] == 200 and len(children(process.pid)) >= workers:
                return process, port
        except OSError:
            pass
        time.sleep(0.02)
    raise RuntimeError("nginx did not start; see " + os.path.join(root, "error.log"))


def start_proxy_broker(broker_bin: str, fixture_bin: str, workdir: str, key: str, api_lines: str,
                       provider: str = "api", name: str = "proxy") -> tuple["Broker", str]:
    """A broker whose provider `provider` has the API of `api_lines` (its `api_base_url` and the
    rest, YAML), with PROXY_SESSIONS sessions of that provider: `GET /proxy/<provider>/token` is the
    proxied request, nginx's `/token` the direct one. Returns the broker and its tokens file."""
    directory, tokens = os.path.join(workdir, f"state-{name}"), os.path.join(workdir, f"tokens-{name}.txt")
    fixture(fixture_bin, directory, tokens, PROXY_SESSIONS, key, f"http://127.0.0.1:9/{provider}", "--provider", provider, "--app", "bench")
    config = os.path.join(workdir, f"{name}.yaml")
    with open(config, "w") as f:
        f.write(f"""providers:
  {provider}:
    authorization_endpoint: http://127.0.0.1:9/authorize
    token_endpoint: http://127.0.0.1:9/token
    client_id: bench
    client_secret_env: BENCH_CLIENT_SECRET
{api_lines}apps:
  bench:
    redirect_uris: [http://127.0.0.1/cb]
""")
    # The per-session bounds off, as the per-IP ones: wrk's 64 connections on one busy session
    # would otherwise measure the bound (429s) instead of the proxy.
    broker = Broker(name, broker_bin, workdir, directory, key,
                    {"BENCH_CLIENT_SECRET": "unused", "BROKER_PROXY_REQUESTS_PER_MINUTE": "0",
                     "BROKER_PROXY_MAX_TRANSFERS_PER_SESSION": "64"}, arguments=("--config", config)).start()
    with open(tokens) as f:
        probe = f.readline().strip()
    status, _, body = http_get(broker.port, f"/proxy/{provider}/token", {"Authorization": f"Bearer {probe}"})
    assert status == 200, f"GET /proxy/{provider}/token: {status} {body[:200]!r}"
    return broker, tokens
