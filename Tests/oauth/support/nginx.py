"""nginx as the balancer in front of several brokers (Debian's nginx, which `make test`
installs), on a free loopback port with a configuration of its own in a temporary directory.

Its upstream settings are nginx's defaults unless told otherwise: passive health checks
(`max_fails=1 fail_timeout=10s`), a refused connection retried on the next server
(`proxy_next_upstream error timeout`). `retry=False` turns the retry off, as a balancer without
one (Kubernetes' kube-proxy) behaves. `servers(...)` changes the upstream list and reloads, as an
ingress controller does when Kubernetes' endpoints change.
"""

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def nginx_binary() -> str:
    found = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
    if not found:
        raise RuntimeError("nginx is needed (Debian's nginx; make test installs it)")
    return found


class Nginx:
    def __init__(self, ports: list[int], retry: bool = True):
        self.port = free_port()
        self.root = tempfile.mkdtemp(prefix="nginx-")
        self.retry = retry
        self.ports = list(ports)
        self._write()
        self.process = subprocess.Popen([nginx_binary(), "-p", self.root, "-c", self._path, "-g", "daemon off;"],
                                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("nginx did not start; see " + os.path.join(self.root, "error.log"))

    @property
    def _path(self) -> str:
        return os.path.join(self.root, "nginx.conf")

    def _write(self) -> None:
        servers = "\n".join(f"        server 127.0.0.1:{port};" for port in self.ports)
        conf = f"""
worker_processes 1;
pid {self.root}/nginx.pid;
error_log {self.root}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {self.root}/body;
    proxy_temp_path {self.root}/proxy;
    fastcgi_temp_path {self.root}/fastcgi;
    uwsgi_temp_path {self.root}/uwsgi;
    scgi_temp_path {self.root}/scgi;
    client_max_body_size 64m;
    client_body_buffer_size 64m;
    upstream brokers {{
{servers}
    }}
    server {{
        listen 127.0.0.1:{self.port};
        location / {{
            proxy_pass http://brokers;
            {"" if self.retry else "proxy_next_upstream off;"}
        }}
    }}
}}
"""
        with open(self._path, "w") as f:
            f.write(conf)

    def servers(self, ports: list[int]) -> None:
        """Balances over `ports` from now on (a configuration reload: old workers finish their
        requests)."""
        if list(ports) == self.ports:
            return
        self.ports = list(ports)
        self._write()
        self.process.send_signal(signal.SIGHUP)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        shutil.rmtree(self.root, ignore_errors=True)
