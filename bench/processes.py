"""The benchmark's processes (bench/run.py): what it starts and stops, their CPU time and memory
from /proc, a probe over a fresh connection, and the broker (`Broker`, and `fixture`, the
broker-bench-state tool writing a state of many sessions)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from typing import Callable


CLK_TCK = os.sysconf("SC_CLK_TCK")
STARTED: list[subprocess.Popen] = []
STOPPERS: list[Callable[[], None]] = []  # other things to stop at the end (the authorization server)


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

# ---------------------------------------------------------------------------------------------
# Processes and /proc


def which(tool: str) -> str | None:
    """A program on PATH, or in /usr/sbin (nginx, for users whose PATH lacks it)."""
    return shutil.which(tool) or shutil.which(tool, path="/usr/sbin:/sbin")


def load_average() -> str:
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


def postgres_cluster():
    """Tests/oauth/support/postgres.py's throwaway cluster (standard library only)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Tests", "oauth", "support", "postgres.py")
    spec = importlib.util.spec_from_file_location("bench_postgres", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.PostgresCluster()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_ticks(pids: list[int]) -> int:
    """utime + stime of the processes (all their threads), in clock ticks."""
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # fields 14 and 15 of proc(5)
    return total


def children(pid: int) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        found.append(int(name))
            except OSError:
                pass
    return found


def cpu_list(cpus: set[int]) -> str:
    """`cpus` as taskset and the table write them, e.g. `0,1`."""
    return ",".join(map(str, sorted(cpus)))


def pin(pids: list[int], cpus: set[int]) -> None:
    """Binds every thread of the processes to `cpus` (threads they start later inherit it)."""
    for pid in pids:
        for thread in os.listdir(f"/proc/{pid}/task"):
            try:
                os.sched_setaffinity(int(thread), cpus)
            except ProcessLookupError:
                pass  # the thread ended meanwhile


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def stop(process: subprocess.Popen, timeout: float = 120) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    if process in STARTED:
        STARTED.remove(process)


def stop_all() -> None:
    for process in list(STARTED):
        try:
            stop(process, timeout=30)
        except Exception:  # noqa: BLE001 - cleanup must go on
            pass
    for stopper in STOPPERS:
        try:
            stopper()
        except Exception:  # noqa: BLE001 - cleanup must go on
            pass


def http_get(port: int, path: str, headers: dict[str, str] | None = None, timeout: float = 5) -> tuple[int, dict, bytes]:
    """One request on a fresh connection; for probes, not for load."""
    lines = [f"GET {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    parsed = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        parsed[name.strip()] = value.strip()
    return int(status_line.split()[1]), parsed, body


# ---------------------------------------------------------------------------------------------
# The broker


class Broker:
    """One `token-broker serve --dev` process (or `serve` with other `arguments`) on its own port,
    state directory and log file."""

    def __init__(self, name: str, binary: str, workdir: str, state_dir: str, key: str, extra_env: dict[str, str] | None = None,
                 arguments: tuple[str, ...] = ("--dev",)):
        self.name = name
        self.arguments = arguments
        self.port = free_port()
        self.log_path = os.path.join(workdir, f"broker-{name}.log")
        env = {k: v for k, v in os.environ.items() if not k.startswith("BROKER_")}
        env.update({
            "BROKER_STATE_KEY": key,
            "BROKER_STATE_DIR": state_dir,
            "BROKER_LOG_FORMAT": "json",
            "BROKER_SHUTDOWN_DELAY_SECONDS": "0",  # no balancer to move off: stop at once
            # No periodic snapshot in the middle of the measurements; the one at shutdown is timed.
            "BROKER_SNAPSHOT_INTERVAL_SECONDS": "3600",
            # The load comes from one address: per-IP rate limits would measure the limiter.
            "BROKER_LOGIN_REQUESTS_PER_MINUTE": "0",
            "BROKER_TOKEN_REQUESTS_PER_MINUTE": "0",
            "BROKER_REFRESH_REQUESTS_PER_MINUTE": "0",
            # Refreshes are measured as fast as they go (POST /refresh on 16 sessions, waves of
            # min_ttl=86400): the per-session bound would turn them into 429s and current tokens.
            "BROKER_MIN_REFRESH_INTERVAL_SECONDS": "0",
        })
        env.update(extra_env or {})
        self.env = env
        self.binary = binary
        self.process: subprocess.Popen | None = None
        self.ready_seconds = 0.0

    def start(self, ready_timeout: float = 120) -> "Broker":
        self.log_file = open(self.log_path, "ab")
        self.log_offset = self.log_file.tell()
        started = time.monotonic()
        self.process = subprocess.Popen(
            [self.binary, "serve", *self.arguments, "--listen", f"127.0.0.1:{self.port}"],
            stdout=self.log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=self.env,
        )
        STARTED.append(self.process)
        deadline = started + ready_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"broker {self.name} exited with {self.process.returncode}; see {self.log_path}")
            try:
                if http_get(self.port, "/readyz", timeout=1)[0] == 200:
                    self.ready_seconds = time.monotonic() - started
                    return self
            except OSError:
                pass
            time.sleep(0.005)
        raise RuntimeError(f"broker {self.name} not ready within {ready_timeout} s; see {self.log_path}")

    @property
    def pid(self) -> int:
        assert self.process
        return self.process.pid

    def stop(self) -> None:
        if self.process:
            stop(self.process)
            self.log_file.close()

    def events(self, message: str, tail: int | None = None) -> list[dict]:
        """Log events with `msg` == message written since the last start (or in its last `tail`
        bytes: the access log makes the file large)."""
        needle = f'"{message}"'.encode()
        found = []
        with open(self.log_path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(self.log_offset, size - tail) if tail else self.log_offset)
            if tail:
                f.readline()  # maybe a partial line
            for line in f:
                if needle in line:
                    try:
                        event = json.loads(line)
                    except ValueError:
                        continue
                    if event.get("msg") == message or event.get("message") == message:
                        found.append(event)
        return found

    def event_seconds(self, message: str, tail: int | None = None) -> float | None:
        found = self.events(message, tail)
        return float(found[-1]["seconds"]) if found and "seconds" in found[-1] else None

    def refreshes(self) -> int:
        _, _, body = http_get(self.port, "/metrics")
        total = 0
        for line in body.decode().splitlines():
            if line.startswith("broker_refreshes_total") and 'provider="dev"' in line:
                total += int(float(line.rsplit(" ", 1)[1]))
        return total


def fixture(tool: str, directory: str, tokens: str, count: int, key: str, issuer: str, *options: str) -> dict:
    started = time.monotonic()
    out = subprocess.run(
        [tool, "--sessions", str(count), "--directory", directory, "--tokens", tokens, "--issuer", issuer, *options],
        env={**os.environ, "BROKER_STATE_KEY": key}, capture_output=True, text=True, timeout=600, check=True,
    ).stdout
    summary = json.loads(out.strip().splitlines()[-1])
    log(f"fixture: {count} sessions in {time.monotonic() - started:.1f} s ({summary['snapshot_bytes'] / 2**20:.0f} MiB snapshot)")
    return summary
