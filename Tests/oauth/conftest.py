"""Pytest fixtures: a real OAuth 2.0 / OIDC authorization server on loopback, and a browser.

Fixtures
  auth_server   (session)  support.authserver.AuthServer, started, with users alice and bob
  browser       (function) support.browser.Browser allowed to follow redirects on auth_server
  tamper_proxy  (function) support.tamper_proxy.TamperProxy: an OIDC issuer forging auth_server's ID tokens
  broker_factory (function) starts real token-broker processes against auth_server (support.broker)
  upstream      (function) support.recording_upstream.RecordingUpstream, an API on loopback keeping what it receives
  proxied       (function) proxied(extra="", env=None) -> (broker, app): a broker whose provider `dot`
                           has `upstream` as its API, and a signed-in app
  idpy_op       (session)  support.idpy_op.IdpyOP, idpyoidc's OpenID Provider (private_key_jwt, PAR,
                           back-channel logout), started, with users alice and bob
  postgres      (module)   support.postgres.PostgresCluster, a throwaway cluster
  instances     (function) (brokers, apps, start): three brokers on a fresh database of `postgres`
                           (test_broker_several_instances*.py); a test marked `instance_env` adds to
                           their environment
  store_env     (function) the broker's environment per store: {} (embedded), or a database on `postgres`
After every test that used auth_server, its run-time config (token lifetime, faults) is reset;
on a failure the server's log lines written during that test are added to the report.
"""

import os
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from support.authserver import AuthServer  # noqa: E402
from support.browser import Browser  # noqa: E402
from support.idpy_op import IdpyOP  # noqa: E402
from support.postgres import PostgresCluster  # noqa: E402
from support.tamper_proxy import TamperProxy  # noqa: E402
from support.broker import ADMIN_TOKEN, App, BrokerProcess, api, broker_config, free_port, provider_config  # noqa: E402
from support.recording_upstream import RecordingUpstream  # noqa: E402

USERS = {
    "alice": dict(password="alice-password", name="Alice Liddell", email="alice@example.test", email_verified=True),
    "bob": dict(password="bob-password", name="Bob Builder", email="bob@example.test", email_verified=False),
}

_LOG_OFFSET = pytest.StashKey[int]()
_server_holder: dict = {}


@pytest.fixture(scope="session")
def auth_server(request):
    server = AuthServer(access_token_lifetime=int(os.environ.get("OAUTH_TEST_ACCESS_TOKEN_LIFETIME", "3600")))
    server.start()
    _server_holder["server"] = server
    try:
        for username, u in USERS.items():
            server.create_user(
                username, u["password"], name=u["name"], email=u["email"], email_verified=u["email_verified"]
            )
        yield server
    finally:
        _server_holder.pop("server", None)
        failed = request.session.testsfailed > 0
        if failed or os.environ.get("OAUTH_TEST_KEEP_SERVER_DATA") == "1":
            server.keep_data = True
            sys.stderr.write(f"\n[authserver] data and log kept in {server.tmpdir}\n")
        server.stop()


@pytest.fixture(scope="session")
def idpy_op(request):
    op = IdpyOP()
    op.start()
    try:
        add_idpy_users(op)
        yield op
    finally:
        if request.session.testsfailed > 0:
            op.keep_data = True
            sys.stderr.write(f"\n[idpy OP] keys, log and configuration kept in {op.tmpdir}\n")
        op.stop()


def add_idpy_users(op: IdpyOP) -> None:
    """The users of USERS, with the same passwords, at an idpyoidc OP."""
    for username, u in USERS.items():
        op.create_user(username, u["password"], name=u["name"], email=u["email"], email_verified=u["email_verified"])


@pytest.fixture(autouse=True)
def _auth_server_per_test(request):
    """Remember where the server log stood, and restore the server's config afterwards."""
    if "auth_server" not in request.fixturenames:
        yield
        return
    server = request.getfixturevalue("auth_server")
    request.node.stash[_LOG_OFFSET] = server.log_size()
    yield
    if server.running:
        server.reset_config()


@pytest.fixture(scope="module")
def token_file():
    """A file holding ADMIN_TOKEN, as admin.token_file reads it (0600)."""
    directory = tempfile.TemporaryDirectory(prefix="admin-")
    path = Path(directory.name) / "admin-token"
    path.write_text(ADMIN_TOKEN + "\n")
    os.chmod(path, 0o600)
    yield str(path)
    directory.cleanup()


@pytest.fixture(scope="module")
def postgres():
    """A throwaway PostgreSQL cluster for a module's tests (support.postgres)."""
    with PostgresCluster() as cluster:
        yield cluster


@pytest.fixture(params=["embedded", "postgres"])
def store_env(request):
    """The broker's environment for each store: the embedded one, or a database of its own on
    the module's cluster."""
    if request.param == "embedded":
        yield {}
        return
    cluster = request.getfixturevalue("postgres")
    yield {"BROKER_STATE_BACKEND": "postgres", "BROKER_POSTGRES_URL": cluster.create_database(),
           "BROKER_POSTGRES_PASSWORD": cluster.password}


@pytest.fixture
def browser(auth_server):
    b = Browser(allowed_hosts=[auth_server.host])
    yield b
    b.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    server = _server_holder.get("server")
    if rep.failed and server is not None and rep.when in ("call", "setup", "teardown"):
        offset = item.stash.get(_LOG_OFFSET, 0)
        text = server.log_text(offset)
        lines = text.splitlines()
        if len(lines) > 300:
            lines = ["... (earlier lines in %s)" % server.log_path] + lines[-300:]
        rep.sections.append(("authserver log", "\n".join(lines) or "(empty)"))


@pytest.fixture
def tamper_proxy(auth_server):
    """support.tamper_proxy.TamperProxy in front of auth_server, started, mode "valid": an OIDC
    issuer of its own (proxy.issuer) whose token endpoint forges the real server's ID tokens."""
    with TamperProxy(auth_server) as proxy:
        yield proxy


@pytest.fixture
def broker_factory(auth_server, browser):
    """Starts brokers configured against the real server; stops them after the test.

    `broker_factory()` registers a confidential client at the server (redirect URI: the
    broker's /callback) and starts a broker with provider `dot` (by issuer) and app `web`;
    it returns `(broker, app, client_id, client_secret)`.
    """
    started = []

    def start(*, provider_extra="", scopes="[openid, profile, email, read]", issuer=None, client=None, env=None, config_extra=""):
        port = free_port()
        if client is None:
            client = auth_server.register_client([f"http://127.0.0.1:{port}/callback"])
        client_id, secret = client
        config = broker_config(provider_config(auth_server, client_id, issuer=issuer, scopes=scopes, extra=provider_extra)) + config_extra
        broker = BrokerProcess(config, env={"DOT_CLIENT_SECRET": secret, **(env or {})}, port=port)
        started.append(broker)
        return broker, App(broker, browser), client_id, secret

    yield start
    for broker in started:
        broker.stop()


@pytest.fixture
def upstream():
    server = RecordingUpstream()
    yield server
    server.close()


@pytest.fixture
def proxied(broker_factory, upstream):
    """A broker whose provider `dot` has the recording upstream as its API, and a signed-in app."""
    def start(extra="", env=None):
        broker, app, _, _ = broker_factory(provider_extra=api(upstream.base_url, extra=extra), env=env)
        app.login()
        return broker, app
    return start


@pytest.fixture
def instances(postgres, auth_server, browser, request):
    """Starts three brokers on a fresh database; returns (brokers, apps, start) where `start(port)`
    starts one more on the same database (`start(port, {...})`: with more environment). A test
    marked `instance_env` adds to their environment."""
    ports = [free_port() for _ in range(3)]
    client_id, secret = auth_server.register_client([f"http://127.0.0.1:{ports[1]}/callback"])
    # The provider's API is the authorization server itself (its userinfo), for the proxy.
    api = auth_server.userinfo_endpoint.rsplit("/userinfo/", 1)[0]
    extra = f"    api_base_url: {api}\n    api_allow_private_addresses: true\n"
    # `narrow`: the same client with fewer default scopes, for scopes added by a later sign-in.
    providers = provider_config(auth_server, client_id, extra=extra) + provider_config(
        auth_server, client_id, provider_id="narrow", scopes="[openid, read]")
    config = broker_config(providers) + "  tv:\n    device_flow: true\n"
    env = {
        "DOT_CLIENT_SECRET": secret, "BROKER_STATE_BACKEND": "postgres", "BROKER_POSTGRES_URL": postgres.create_database(),
        "BROKER_POSTGRES_PASSWORD": postgres.password, "BROKER_PUBLIC_URL": f"http://127.0.0.1:{ports[1]}",
    }
    marker = request.node.get_closest_marker("instance_env")
    env.update(marker.args[0] if marker else {})
    started = []

    def start(port, more_env=None):
        broker = BrokerProcess(config, env={**env, **(more_env or {})}, port=port)
        started.append(broker)
        return broker

    brokers = [start(port) for port in ports]
    apps = [App(broker, browser) for broker in brokers]
    yield brokers, apps, start
    for broker in started:
        broker.stop()


def pytest_configure(config):
    config.addinivalue_line("markers", "instance_env(env): extra environment for the brokers of the `instances` fixture")
