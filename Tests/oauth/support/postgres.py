"""A throwaway PostgreSQL server for the tests and the benchmark (Debian's postgresql, which
`make test` and `make bench` install). Standard library only: bench/processes.py loads it too.

initdb in a temporary directory (as the `postgres` user when the tests run as root), a free
loopback port, password authentication over TCP (the broker's password path), trust on its own
Unix socket (for creating databases); stopped (`-m immediate`) and removed afterwards.

    with PostgresCluster() as cluster:
        url = cluster.create_database()      # postgres://postgres@127.0.0.1:PORT/NAME
        env = {"BROKER_POSTGRES_PASSWORD": cluster.password}

With `tls=True` the server has a certificate for 127.0.0.1 (self-signed, at `cluster.certificate`,
made with the openssl command) and accepts TCP connections over TLS only (`hostssl`).
"""

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class PostgresCluster:
    password = "test-password"

    def __init__(self, tls: bool = False):
        candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), reverse=True)
        if not candidates:
            raise RuntimeError("no PostgreSQL server under /usr/lib/postgresql (Debian's postgresql; make test installs it)")
        self.bin = os.path.dirname(candidates[0])
        self.dir = tempfile.mkdtemp(prefix="pg-")
        self.data = os.path.join(self.dir, "data")
        self.port = free_port()
        self.as_postgres = os.getuid() == 0
        self.tls = tls
        self.certificate = os.path.join(self.dir, "server.crt")

    def _run(self, *argv, as_postgres=False):
        if as_postgres and self.as_postgres:
            argv = ("runuser", "-u", "postgres", "--") + argv
        subprocess.run(argv, check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def start(self) -> "PostgresCluster":
        password_file = os.path.join(self.dir, "password")
        with open(password_file, "w") as out:
            out.write(self.password)
        if self.as_postgres:
            shutil.chown(self.dir, "postgres", "postgres")
            shutil.chown(password_file, "postgres", "postgres")
        self._run(os.path.join(self.bin, "initdb"), "-D", self.data, "-U", "postgres", "--pwfile", password_file,
                  "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--no-sync", as_postgres=True)
        if self.tls:
            self._make_tls_only()
        self.restart()
        return self

    def _make_tls_only(self) -> None:
        key = os.path.join(self.data, "server.key")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                        "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                        "-keyout", key, "-out", self.certificate], check=True, capture_output=True)
        shutil.copy(self.certificate, os.path.join(self.data, "server.crt"))
        os.chmod(key, 0o600)
        with open(os.path.join(self.data, "pg_hba.conf"), "w") as hba:
            hba.write("local all all trust\nhostssl all all 127.0.0.1/32 scram-sha-256\n")
        with open(os.path.join(self.data, "postgresql.conf"), "a") as conf:
            conf.write("ssl = on\n")
        if self.as_postgres:
            for name in ("server.key", "server.crt", "pg_hba.conf"):
                shutil.chown(os.path.join(self.data, name), "postgres", "postgres")

    def stop(self, mode="immediate") -> None:
        if os.path.isdir(self.data):
            subprocess.run(("runuser", "-u", "postgres", "--") * self.as_postgres
                           + (os.path.join(self.bin, "pg_ctl"), "-D", self.data, "-m", mode, "-w", "stop"),
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def restart(self) -> None:
        self._run(os.path.join(self.bin, "pg_ctl"), "-D", self.data, "-l", os.path.join(self.dir, "log"), "-w", "-o",
                  f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1", "start", as_postgres=True)

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def sql(self, statement: str, database: str = "postgres") -> str:
        out = subprocess.run(["psql", "-h", self.dir, "-p", str(self.port), "-U", "postgres", "-d", database,
                              "-At", "-c", statement], check=True, capture_output=True, text=True)
        return out.stdout.strip()

    def create_database(self) -> str:
        name = "broker_" + uuid.uuid4().hex[:16]
        self.sql(f"CREATE DATABASE {name}")
        return f"postgres://postgres@127.0.0.1:{self.port}/{name}"

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.remove()
