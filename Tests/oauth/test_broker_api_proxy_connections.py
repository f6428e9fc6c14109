"""The API proxy's connections and transfers (docs/api.md, "Connections: one pool per API"): bytes
an API sends past an answer never reach another request, over HTTP and HTTPS; connections speak
HTTP/1.1 though the API offers HTTP/2; a chunked answer's trailer fields are not its headers; a
101 or headers too large to read are a 502; the address policy holds on a reused connection; a name slow to resolve holds up no other
call; clients that do not read hold up no one else; a full line of transfers is a 503 with
Retry-After. (The proxy's requests and answers: test_broker_api_proxy.py.)"""

import subprocess
import threading
import time
from pathlib import Path

import pytest
import requests

from support.broker import App, api, wait_for
from support.private_ca import PrivateCA
from support.raw_http import open_request, read_head
from support.recording_upstream import MisbehavingUpstream


def second_provider(auth_server, name: str, api_lines: str) -> str:
    """Configuration of another provider at the tests' authorization server (client
    `<name>-client`, the same secret as the first) with its own API lines."""
    return f"""
  {name}:
    issuer: {auth_server.issuer}
    client_id: {name}-client
    client_secret_env: DOT_CLIENT_SECRET
    scopes: [openid, profile, email, read]
{api_lines}"""


def signed_in(broker, browser, auth_server, secret: str, name: str) -> App:
    """An app signed in through the provider `second_provider` configured, its client registered."""
    auth_server.register_client([broker.url("/callback")], client_id=f"{name}-client", client_secret=secret)
    app = App(broker, browser, provider=name)
    app.login()
    return app


@pytest.fixture(params=["http", "https"])
def misbehaving(request, tmp_path):
    """The misbehaving API, over HTTP and over HTTPS (its CA the provider's `ca_file`); `lines`
    is the provider's configuration of it."""
    ca = PrivateCA(tmp_path / "ca") if request.param == "https" else None
    server = MisbehavingUpstream(context=ca.server_context() if ca else None)
    server.lines = api(server.base_url) + (f"    ca_file: {ca.ca_file}\n" if ca else "")
    yield server
    server.close()


@pytest.mark.parametrize("method, path", [("GET", "/no-content"), ("GET", "/not-modified"), ("HEAD", "/json"), ("GET", "/extra-now"),
                                          ("GET", "/extra"), ("GET", "/extra-split")])
def test_bytes_after_an_answer_never_reach_another_request(broker_factory, browser, misbehaving, method, path):
    """An API that sends more after an answer — a body after a 204 or 304 or a HEAD answer, more
    than Content-Length in the same segment or a moment later, or the body's end and more together
    after its head (over TLS, one record: the rest waits inside TLS, not on the socket) — with both
    sessions on the API's one pool: the next request of either session gets its own answer, never
    those bytes. (Bytes that arrive after the next request was written on the connection cannot be
    told from its answer, on any HTTP/1.1 connection; here they arrive while it is idle, and a
    connection with bytes waiting is not reused.)"""
    broker, first, _, _ = broker_factory(provider_extra=misbehaving.lines)
    first.login()
    second = App(broker, browser)
    second.login("bob")
    answer = first.call(method, f"/proxy/dot{path}")
    assert answer.status_code in (200, 204, 304), answer.text
    if path.startswith("/extra"):
        # Sent on loopback: the bytes wait on the idle connection.
        assert wait_for(lambda: misbehaving.smuggled == 1, timeout=5)
    for app in (second, first):
        own = app.call("GET", "/proxy/dot/own")
        assert own.status_code == 200 and own.json()["path"] == "/own", own.text
        assert own.json()["auth"] == f"Bearer {app.call('GET', '/token').json()['access_token']}"


def test_connections_speak_http_1_1_and_trailers_are_not_headers(broker_factory, misbehaving):
    """The connection rules (one answer at a time; a client that does not read pausing only its own
    transfer) are HTTP/1.1's: the proxy does not take HTTP/2 when an API offers it. A chunked
    answer's trailer fields never join its head (RFC 9110 §6.5.1): in a 401, which the proxy
    holds whole (to refresh and retry), they are not passed to the app."""
    broker, app, _, _ = broker_factory(provider_extra=misbehaving.lines)
    app.login()
    answer = app.call("GET", "/proxy/dot/trailer")
    assert answer.status_code == 401 and answer.content == b"ok", answer.text
    assert answer.headers.get("WWW-Authenticate") == 'Bearer realm="api"' and "Location" not in answer.headers, answer.headers
    assert app.call("GET", "/proxy/dot/own").json()["path"] == "/own"
    if misbehaving.context is not None:
        assert misbehaving.protocols and set(misbehaving.protocols) == {"http/1.1"}, misbehaving.protocols


def test_a_switching_protocols_answer_is_a_502_at_once(broker_factory, misbehaving):
    broker, app, _, _ = broker_factory(provider_extra=misbehaving.lines)
    app.login()
    started = time.monotonic()
    answer = app.call("GET", "/proxy/dot/switch")
    assert answer.status_code == 502 and answer.json()["error"] == "upstream_error", answer.text
    assert time.monotonic() - started < 3, "not held until the upstream timeout"
    assert app.call("GET", "/proxy/dot/own").json()["path"] == "/own"


def test_an_answer_with_two_lengths_is_a_502(broker_factory, misbehaving):
    """RFC 9112 §6.3: differing Content-Length values leave an answer unframed — a 502, never a
    200 cut or stretched to whichever length came last; the same length repeated is one."""
    broker, app, _, _ = broker_factory(provider_extra=misbehaving.lines)
    app.login()
    answer = app.call("GET", "/proxy/dot/two-lengths")
    assert answer.status_code == 502 and answer.json()["error"] == "upstream_error", answer.text
    answer = app.call("GET", "/proxy/dot/same-lengths")
    assert answer.status_code == 200 and answer.content == b"ok", answer.text
    assert app.call("GET", "/proxy/dot/own").json()["path"] == "/own"


def test_an_answer_with_headers_too_large_to_read_is_a_502(broker_factory, misbehaving):
    """The API was reached and answered, with more headers than libcurl reads: its answer could not
    be read (502), not "could not be reached" (503), which would send clients to retry."""
    broker, app, _, _ = broker_factory(provider_extra=misbehaving.lines)
    app.login()
    answer = app.call("GET", "/proxy/dot/huge-headers")
    assert answer.status_code == 502 and answer.json()["error"] == "upstream_error", answer.text
    assert app.call("GET", "/proxy/dot/own").json()["path"] == "/own"


def test_the_address_policy_holds_on_a_reused_connection(broker_factory, browser, auth_server, upstream):
    """Two providers with one API host, one allowing private addresses and one not: a connection
    the first opened never carries the second's call past the address check."""
    strict = second_provider(auth_server, "strict", api(upstream.base_url, allow_private=False))
    broker, lenient, _, secret = broker_factory(provider_extra=api(upstream.base_url) + strict)
    lenient.login()
    refused = signed_in(broker, browser, auth_server, secret, "strict")
    assert lenient.call("GET", "/proxy/dot/json").status_code == 200
    answer = refused.call("GET", "/proxy/strict/json")
    assert answer.status_code == 502 and answer.json()["error"] == "upstream_address_refused", answer.text
    assert upstream.count() == 1


def test_a_name_slow_to_resolve_holds_up_no_other_call(broker_factory, browser, auth_server, upstream, tmp_path):
    """One API host whose name takes seconds to resolve (an interposed getaddrinfo): its call ends
    by its own timeout, and the calls of other providers, which share the proxy's one event loop,
    are answered meanwhile — the loop never waits for the resolver."""
    library = tmp_path / "slow_dns.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-o", str(library),
                    str(Path(__file__).parent / "support" / "slow_dns.c"), "-ldl"], check=True)
    stuck = second_provider(auth_server, "stuck", api("https://api.slow-dns.test", allow_private=False))
    broker, app, _, secret = broker_factory(provider_extra=api(upstream.base_url) + stuck,
                                            env={"LD_PRELOAD": str(library), "SLOW_DNS_SECONDS": "5", "BROKER_UPSTREAM_TIMEOUT_SECONDS": "2"})
    app.login()
    waiting = signed_in(broker, browser, auth_server, secret, "stuck")
    outcome = {}
    caller = threading.Thread(target=lambda: outcome.update(answer=waiting.call("GET", "/proxy/stuck/anything"), at=time.monotonic()))
    started = time.monotonic()
    caller.start()
    time.sleep(1.5)  # past its connect timeout (half the upstream timeout): libcurl has given it up
    for _ in range(5):
        asked = time.monotonic()
        assert app.call("GET", "/proxy/dot/json").status_code == 200
        assert time.monotonic() - asked < 0.5, "another provider's call waited for the resolver"
    caller.join(timeout=10)
    assert outcome["answer"].status_code == 503 and outcome["answer"].json()["error"] == "upstream_unavailable", outcome["answer"].text
    assert outcome["at"] - started < 3, "the slow name's call ended by its own timeout"


def test_clients_that_do_not_read_hold_up_no_one_else(proxied, upstream, browser):
    """Connections that ask for a large answer and never read it, or trickle it: each session holds
    at most its bound of transfers, another session's call is served at once, and every held
    transfer ends by the upstream timeout."""
    broker, reader = proxied(env={"BROKER_UPSTREAM_TIMEOUT_SECONDS": "3", "BROKER_PROXY_MAX_TRANSFERS": "8",
                                  "BROKER_PROXY_MAX_TRANSFERS_PER_SESSION": "2", "BROKER_PROXY_MAX_TRANSFERS_PER_IP": "6",
                                  "BROKER_PROXY_MAX_RESPONSE_BYTES": "104857600"})
    stalled, trickler = App(broker, browser), App(broker, browser)
    stalled.login("bob")
    trickler.login("bob")
    big = "/proxy/dot/bytes/60000000"
    started = time.monotonic()
    held = [open_request(broker, big, stalled.session_token) for _ in range(6)]
    statuses = [read_head(connection) for connection in held]
    assert sorted(status for status, _ in statuses) == [200, 200, 429, 429, 429, 429], statuses
    assert all("Retry-After:" in head for status, head in statuses if status == 429)
    trickled = [open_request(broker, big, trickler.session_token) for _ in range(2)]
    assert [read_head(connection)[0] for connection in trickled] == [200, 200]
    stop = threading.Event()

    def trickle(connection):
        try:
            while not stop.is_set() and connection.recv(256):
                time.sleep(0.2)
        except OSError:
            pass
    threads = [threading.Thread(target=trickle, args=(connection,), daemon=True) for connection in trickled]
    for thread in threads:
        thread.start()
    assert wait_for(lambda: upstream.count() >= 4, timeout=5)
    # Another session, from the same address: served at once.
    asked = time.monotonic()
    answer = reader.call("GET", "/proxy/dot/json")
    assert answer.status_code == 200 and time.monotonic() - asked < 1.5
    # Every held transfer ends by the upstream timeout (the API sees its connection closed).
    assert wait_for(lambda: len(upstream.bytes_ended) >= 4, timeout=8)
    assert max(upstream.bytes_ended) - started < 3 + 2, "within the upstream timeout"
    stop.set()
    for connection in held + trickled:
        connection.close()
    assert stalled.call("GET", "/proxy/dot/json").status_code == 200, "the session's transfers are its own again"


def test_answers_admitted_together_stream_within_the_address_bound(proxied, upstream, browser):
    """Three sessions of one address each ask for two large answers at once, before any has
    begun to stream: each session is within its bound, and so is the address when they are
    admitted; as the GETs' answers begin, only the address's bound of them streams, and the rest
    are 429s whose API transfers stop. A POST's call has done its work at the API when its answer
    begins: it streams all the same (a 429 would have its client send it again)."""
    broker, first = proxied(env={"BROKER_UPSTREAM_TIMEOUT_SECONDS": "3", "BROKER_PROXY_MAX_TRANSFERS_PER_SESSION": "2",
                                 "BROKER_PROXY_MAX_TRANSFERS_PER_IP": "3", "BROKER_PROXY_MAX_RESPONSE_BYTES": "104857600"})
    apps = [first, App(broker, browser), App(broker, browser)]
    for app in apps[1:]:
        app.login("bob")
    # The API answers none before all six have reached it: every call is admitted while nothing
    # streams yet, so the bound can hold only when the answers begin.
    big = "/proxy/dot/gate/60000000"
    upstream.hold_gate(6)
    held = [open_request(broker, big, app.session_token) for app in apps for _ in range(2)]
    statuses = [read_head(connection) for connection in held]
    assert sorted(status for status, _ in statuses) == [200, 200, 200, 429, 429, 429], statuses
    assert all("Retry-After:" in head for status, head in statuses if status == 429)
    for connection in held:
        connection.close()
    assert wait_for(lambda: first.call("GET", "/proxy/dot/json").status_code == 200, timeout=8), "the places come back"
    upstream.hold_gate(6)
    posted = [open_request(broker, big, app.session_token, method="POST") for app in apps for _ in range(2)]
    assert [read_head(connection)[0] for connection in posted] == [200] * 6
    for connection in posted:
        connection.close()


def test_an_answer_refused_as_it_begins_stops_its_transfer_at_once(proxied, upstream, browser):
    """A GET refused when its answer begins (the address has its bound streaming) stops its API
    transfer at the answer's head, not at the first body bytes: an API that sends the head and
    then nothing would otherwise hold the transfer until the upstream timeout."""
    broker, first = proxied(env={"BROKER_UPSTREAM_TIMEOUT_SECONDS": "20", "BROKER_PROXY_MAX_TRANSFERS_PER_SESSION": "2",
                                 "BROKER_PROXY_MAX_TRANSFERS_PER_IP": "3", "BROKER_PROXY_MAX_RESPONSE_BYTES": "104857600"})
    apps = [first, App(broker, browser), App(broker, browser)]
    for app in apps[1:]:
        app.login("bob")
    upstream.hold_gate(6)
    started = time.monotonic()
    held = [open_request(broker, "/proxy/dot/gate/60000000?stall", app.session_token) for app in apps for _ in range(2)]
    statuses = [read_head(connection)[0] for connection in held]
    assert sorted(statuses) == [200, 200, 200, 429, 429, 429], statuses
    # The three refused transfers close their API connections; the three streaming ones wait.
    assert wait_for(lambda: len(upstream.bytes_ended) >= 3, timeout=10), "the refused transfers still hold their connections"
    assert max(upstream.bytes_ended) - started < 10, "stopped at the head, long before the upstream timeout"
    assert len(upstream.bytes_ended) == 3
    for connection in held:
        connection.close()


def requests_in_flight(broker) -> float:
    """`broker_http_requests_in_flight` from /metrics (the scrape itself counts)."""
    for line in requests.get(broker.url("/metrics"), timeout=10).text.splitlines():
        if line.startswith("broker_http_requests_in_flight "):
            return float(line.split()[1])
    return 0.0


def test_a_full_line_of_transfers_is_a_503_with_retry_after(proxied, upstream):
    broker, app = proxied(env={"BROKER_UPSTREAM_TIMEOUT_SECONDS": "3", "BROKER_PROXY_MAX_TRANSFERS": "1",
                               "BROKER_PROXY_MAX_RESPONSE_BYTES": "104857600"})
    running = open_request(broker, "/proxy/dot/bytes/60000000", app.session_token)
    assert read_head(running)[0] == 200
    waiting = open_request(broker, "/proxy/dot/json", app.session_token)  # the one place in line
    # Both received (and this scrape): the waiting one has taken the place in line.
    assert wait_for(lambda: requests_in_flight(broker) >= 3, timeout=10)
    asked = time.monotonic()
    answer = app.call("GET", "/proxy/dot/json")
    assert answer.status_code == 503 and answer.json()["error"] == "proxy_busy", answer.text
    assert answer.headers["Retry-After"] and time.monotonic() - asked < 1.5
    # The running transfer ends by its deadline; the line moves.
    status, _ = read_head(waiting)
    assert status in (200, 503)
    running.close()
    waiting.close()
    assert wait_for(lambda: app.call("GET", "/proxy/dot/json").status_code == 200, timeout=6)
