"""An OpenID Connect issuer served on loopback at http://HOST:PORT/o by a process of its own."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Optional

import requests


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class LoopbackIssuer:
    """An issuer in a process of its own on a free loopback port: launched (three tries, since
    the port can be taken between probe and bind), ready once its discovery document answers 200,
    its output in a log file, stopped with its process group.

    Subclasses set `host_ip`, `startup_timeout`, `keep_data`, `error` (their exception class) and
    `label`, and implement `_launch()`: the process, started on `self.port` with its output to
    `self._log_file`. `start()` is theirs: it makes `tmpdir`, `log_path` and `_log_file`, then calls
    `_launch_ready()`.
    """

    host_ip: str
    port: Optional[int]
    startup_timeout: float
    keep_data: bool
    error: type[Exception] = RuntimeError
    label = "the server"
    tmpdir: Optional[Path] = None
    log_path: Optional[Path] = None
    _proc: Optional[subprocess.Popen] = None
    _log_file = None
    _http: requests.Session

    @property
    def host(self) -> str:
        """"127.0.0.1:PORT", the form Browser's allowlist takes."""
        return f"{self.host_ip}:{self.port}"

    @property
    def base_url(self) -> str:
        return f"http://{self.host}"

    @property
    def issuer(self) -> str:
        return f"{self.base_url}/o"

    @property
    def discovery_url(self) -> str:
        return f"{self.issuer}/.well-known/openid-configuration"

    # ----------------------------------------------------------------- lifecycle
    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _launch(self) -> subprocess.Popen:
        raise NotImplementedError

    def _ready(self, discovery: requests.Response) -> None:
        """Called once with the first 200 answer of the discovery document."""

    def _launch_ready(self) -> None:
        last_error = None
        for _attempt in range(3):
            self.port = free_port(self.host_ip)
            self._proc = self._launch()
            try:
                self._wait_ready()
                return
            except self.error as e:
                last_error = e
                self._terminate()
        raise self.error(f"{last_error}\n--- {self.label} log ---\n{self.log_text()}")

    def stop(self) -> None:
        self._terminate()
        if self._log_file:
            self._log_file.close()
            self._log_file = None
        self._http.close()
        if self.tmpdir and not self.keep_data:
            shutil.rmtree(self.tmpdir, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise self.error(f"{self.label} exited with status {self._proc.returncode} during start-up")
            try:
                r = self._http.get(self.discovery_url, timeout=2)
                if r.status_code == 200:
                    self._ready(r)
                    return
            except requests.RequestException:
                pass
            time.sleep(0.1)
        raise self.error(f"{self.label} was not ready after {self.startup_timeout} s")

    def _terminate(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)

    def log_text(self, since: int = 0) -> str:
        """The process's output from byte offset `since`."""
        if not self.log_path or not self.log_path.exists():
            return ""
        with open(self.log_path, "rb") as f:
            f.seek(since)
            return f.read().decode("utf-8", "replace")

    def log_size(self) -> int:
        return self.log_path.stat().st_size if self.log_path and self.log_path.exists() else 0
