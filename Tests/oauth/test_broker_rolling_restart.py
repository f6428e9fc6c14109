"""Three brokers on one PostgreSQL behind a balancer, restarted one after the other under load
(docs/several-instances.md): no request fails.

- nginx with its default upstream settings (passive health checks: one refused connection marks
  a server down for 10 s; the request is retried on the next one). Each instance is stopped
  with SIGTERM and started again on its port, then the next. The shutdown delay
  (`server.shutdown_delay_seconds`, default 10 s, nginx's `fail_timeout`: the instance serves on
  while it says it is not ready) spaces the instances' refusals so that nginx never holds more
  than one down.
- Kubernetes' order: a new instance starts and becomes ready, then an old one gets SIGTERM; a
  balancer that does not retry (as kube-proxy) follows `/readyz` (an endpoints controller that
  polls it), so the old instance is out of rotation before it stops accepting.

Each test prints its counts. A request whose declared body is over the limit gets its 413
through nginx, not a 502.
"""

import concurrent.futures
import threading
import time

import pytest
import requests

from support.broker import BrokerProcess, broker_config, free_port, provider_config, wait_for
from support.nginx import Nginx
from support.postgres import PostgresCluster


@pytest.fixture(scope="module")
def postgres():
    with PostgresCluster() as cluster:
        yield cluster


class Fleet:
    """Brokers on one database, all with the same configuration; the delay is the broker's own
    default (the test harness's 0 removed)."""

    def __init__(self, postgres, auth_server):
        self.callback_port = free_port()
        client_id, secret = auth_server.register_client([f"http://127.0.0.1:{self.callback_port}/callback"])
        self.config = broker_config(provider_config(auth_server, client_id))
        self.env = {
            "DOT_CLIENT_SECRET": secret, "BROKER_STATE_BACKEND": "postgres", "BROKER_POSTGRES_URL": postgres.create_database(),
            "BROKER_POSTGRES_PASSWORD": postgres.password, "BROKER_PUBLIC_URL": f"http://127.0.0.1:{self.callback_port}",
            "BROKER_SHUTDOWN_DELAY_SECONDS": None,
        }
        self.running: dict[int, BrokerProcess] = {}

    def start(self, port: int) -> BrokerProcess:
        broker = BrokerProcess(self.config, env=self.env, port=port)
        assert wait_for(lambda: requests.get(broker.url("/readyz"), timeout=5).status_code == 200, 10)
        self.running[port] = broker
        return broker

    def stop(self, port: int) -> None:
        broker = self.running.pop(port)
        assert broker.stop() == 0, broker.log_text[-2000:]

    def close(self) -> None:
        for broker in self.running.values():
            broker.stop()


@pytest.fixture
def fleet(postgres, auth_server):
    made = Fleet(postgres, auth_server)
    yield made
    made.close()


class Load:
    """Clients calling `GET /token` through the balancer until stopped, each on a kept-alive
    connection of its own (or, `keep_alive=False`, a new one per request); counts the answers by
    status (0: no answer at all)."""

    def __init__(self, url: str, token: str, clients: int = 6, keep_alive: bool = True):
        self.url, self.token = url, token
        self.headers = {"Authorization": f"Bearer {token}"} | ({} if keep_alive else {"Connection": "close"})
        self.stopping = threading.Event()
        self.counts: dict[int, int] = {}
        self.lock = threading.Lock()
        self.pool = concurrent.futures.ThreadPoolExecutor(clients)
        self.futures = [self.pool.submit(self._run) for _ in range(clients)]

    def _run(self) -> None:
        with requests.Session() as session:
            while not self.stopping.is_set():
                try:
                    status = session.get(self.url, headers=self.headers, timeout=10).status_code
                except requests.RequestException:
                    status = 0
                with self.lock:
                    self.counts[status] = self.counts.get(status, 0) + 1

    def stop(self) -> dict[int, int]:
        self.stopping.set()
        for future in self.futures:
            future.result()
        self.pool.shutdown()
        return dict(self.counts)


def under_load(load: Load, restart) -> tuple[dict[int, int], float]:
    """Runs `restart` while `load` runs, with a second of load before and after: the answers by
    status, and how long the restart took."""
    try:
        time.sleep(1)
        started = time.monotonic()
        restart()
        took = time.monotonic() - started
        time.sleep(1)
    finally:
        counts = load.stop()
    return counts, took


def session_token(broker: BrokerProcess, browser) -> str:
    from support.broker import App
    return App(broker, browser).login("alice")["session_token"]


def test_a_rolling_restart_behind_nginx_with_its_defaults_fails_no_request(fleet, browser):
    ports = [fleet.callback_port, free_port(), free_port()]
    for port in ports:
        fleet.start(port)
    token = session_token(fleet.running[ports[0]], browser)
    nginx = Nginx(ports)

    def restart():
        for port in ports:
            fleet.stop(port)
            fleet.start(port)

    try:
        counts, took = under_load(Load(nginx.url("/token"), token), restart)
    finally:
        nginx.close()
    print(f"\nrolling restart behind nginx (defaults), {took:.1f} s: answers by status {counts}")
    assert counts.get(200, 0) > 500
    assert set(counts) == {200}, counts


def test_a_rolling_restart_in_kubernetes_order_fails_no_request(fleet, browser):
    old = [fleet.callback_port, free_port(), free_port()]
    for port in old:
        fleet.start(port)
    token = session_token(fleet.running[old[0]], browser)
    nginx = Nginx(old, retry=False)
    watching = threading.Event()

    def endpoints():
        """Kubernetes' endpoints, as an ingress controller follows them: the ready instances."""
        while not watching.is_set():
            ready = []
            for port, broker in list(fleet.running.items()):
                try:
                    if requests.get(broker.url("/readyz"), timeout=1).status_code == 200:
                        ready.append(port)
                except requests.RequestException:
                    pass
            if ready:
                nginx.servers(sorted(ready))
            time.sleep(0.5)

    controller = threading.Thread(target=endpoints, daemon=True)
    controller.start()
    # A connection per request: nginx's own reloads close kept-alive client connections, which is
    # nginx's matter, not the broker's.
    def restart():
        for port in old:
            fleet.start(free_port())  # ready before the old one is told to go
            fleet.stop(port)

    try:
        counts, took = under_load(Load(nginx.url("/token"), token, keep_alive=False), restart)
    finally:
        watching.set()
        controller.join()
        nginx.close()
    print(f"\nrolling restart in Kubernetes' order (no retry, readiness followed), {took:.1f} s: answers by status {counts}")
    assert counts.get(200, 0) > 500
    assert set(counts) == {200}, counts


def test_a_declared_body_over_the_limit_reaches_the_client_through_nginx_as_413(fleet):
    port = fleet.callback_port
    broker = fleet.start(port)
    nginx = Nginx([port])
    try:
        answer = requests.post(nginx.url("/token"), data=b"a" * 8_000_000,
                               headers={"Content-Type": "application/x-www-form-urlencoded"}, timeout=10)
    finally:
        nginx.close()
    assert answer.status_code == 413, answer.text
    assert answer.json()["error"] == "payload_too_large"
    assert requests.get(broker.url("/healthz"), timeout=5).status_code == 200
