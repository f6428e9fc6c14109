"""The API proxy (docs/api.md, "Calling the provider's API through the broker"): requests an app sends
to /proxy/{provider}/{path} with its session token reach the provider's API with the provider's
token — against the real authorization server's userinfo, and a recording upstream on loopback
that keeps what it receives. The client's credentials and cookies never arrive; another
provider's session is refused; path tricks are refused before any connection; redirects are not
followed; a 401 from the API means one refresh and one retry (none for a body over the replay
cap); bodies over the caps are refused; a large answer passes whole; concurrent calls on an
expiring session share one refresh; no token reaches a log line."""

import concurrent.futures
import hashlib
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests

from support.broker import App, wait_for
from support.recording_upstream import MisbehavingUpstream, RecordingUpstream


@pytest.fixture
def upstream():
    server = RecordingUpstream()
    yield server
    server.close()


def api(base_url: str, allow_private: bool = True, extra: str = "") -> str:
    return f"    api_base_url: {base_url}\n" + ("    api_allow_private_addresses: true\n" if allow_private else "") + extra


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


@pytest.fixture
def proxied(broker_factory, upstream):
    """A broker whose provider `dot` has the recording upstream as its API, and a signed-in app."""
    def start(extra="", env=None):
        broker, app, _, _ = broker_factory(provider_extra=api(upstream.base_url, extra=extra), env=env)
        app.login()
        return broker, app
    return start


def raw_get(broker, target: str, token: str) -> int:
    """The status of a GET sent exactly as written (no client-side normalisation of the path)."""
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as connection:
        connection.sendall(f"GET {target} HTTP/1.1\r\nHost: {broker.host}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n".encode())
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    return int(answer.split(b" ", 2)[1])


def test_the_provider_token_reaches_the_real_servers_userinfo(broker_factory, auth_server):
    base = auth_server.userinfo_endpoint.rsplit("/userinfo/", 1)[0]
    broker, app, _, _ = broker_factory(provider_extra=api(base))
    app.login()
    answer = app.call("GET", "/proxy/dot/userinfo/")
    assert answer.status_code == 200, answer.text
    assert answer.json()["sub"] and answer.headers["Content-Type"].startswith("application/json")
    assert answer.headers["Cache-Control"] == "no-store" and answer.headers["X-Content-Type-Options"] == "nosniff"


def test_headers_are_filtered_both_ways(proxied, upstream):
    broker, app = proxied(extra="    api_headers: [X-Api-Version]\n")
    provider_token = app.call("GET", "/token").json()["access_token"]
    answer = app.call("GET", "/proxy/dot/json?page=2&per_page=50", headers={
        "Cookie": "broker=1", "X-Forwarded-For": "10.0.0.1", "Forwarded": "for=10.0.0.1", "Proxy-Authorization": "Basic eA==",
        "Accept": "application/json", "If-None-Match": '"v0"', "X-Api-Version": "2022-11-28", "X-Other": "no",
    })
    assert answer.status_code == 200 and answer.json() == {"ok": True}
    seen = upstream.last()
    assert seen["path"] == "/json?page=2&per_page=50"
    assert seen["headers"]["authorization"] == f"Bearer {provider_token}"
    for dropped in ("cookie", "x-forwarded-for", "forwarded", "proxy-authorization", "x-other"):
        assert dropped not in seen["header_names"], dropped
    assert seen["headers"]["accept"] == "application/json" and seen["headers"]["if-none-match"] == '"v0"'
    assert seen["headers"]["x-api-version"] == "2022-11-28"
    assert app.session_token not in str(seen)
    # Back: content headers, validators, links and rate limits; never Set-Cookie or other headers.
    assert answer.headers["ETag"] == '"v1"' and "rel=\"next\"" in answer.headers["Link"]
    assert answer.headers["X-RateLimit-Remaining"] == "4999"
    assert "Set-Cookie" not in answer.headers and "X-Internal" not in answer.headers
    assert answer.headers["X-Frame-Options"] == "DENY"


def test_a_session_of_another_provider_is_refused(broker_factory, auth_server, upstream):
    other = f"""
  other:
    issuer: {auth_server.issuer}
    client_id: other
    client_secret_env: DOT_CLIENT_SECRET
{api(upstream.base_url)}"""
    broker, app, _, _ = broker_factory(provider_extra=api(upstream.base_url) + other)
    app.login()
    answer = app.call("GET", "/proxy/other/json")
    assert answer.status_code == 403 and answer.json()["error"] == "wrong_provider"
    assert app.call("GET", "/proxy/dot/json", token="tbs_" + "x" * 43).status_code == 401
    assert upstream.count() == 0


@pytest.mark.parametrize("target", [
    "/proxy/dot/../token", "/proxy/dot/a/../../token", "/proxy/dot/./json", "/proxy/dot/%2e%2e/token", "/proxy/dot/%2E/json",
    "/proxy/dot/a%2fb", "/proxy/dot/a%2Fb", "/proxy/dot/a%5cb", "/proxy/dot/a\\b", "/proxy/dot/user@evil.example",
    "/proxy/dot/a%40b", "/proxy/dot/a%00b", "/proxy/dot/a%0d%0aX:y", "/proxy/dot/a%252e%252e", "/proxy/dot//evil.example/x",
    "/proxy/dot/json?q=a#frag", "/proxy/dot/%zz", "/proxy/dotx/json", "/proxy/dot/..;/token", "/proxy/dot/%c0%ae%c0%ae/token",
    "/proxy/dot/%ef%bc%8e%ef%bc%8e/token", "/proxy/dot/%ff",
])
def test_path_tricks_are_refused_before_any_connection(proxied, upstream, target):
    broker, app = proxied()
    status = raw_get(broker, target, app.session_token)
    assert status in (400, 404), status
    assert upstream.count() == 0


def test_an_absolute_form_target_goes_nowhere(proxied, upstream):
    broker, app = proxied()
    status = raw_get(broker, f"http://evil.example/proxy/dot/json", app.session_token)
    assert status in (400, 404)
    assert upstream.count() == 0


def test_loopback_is_refused_unless_the_provider_allows_it(broker_factory, upstream):
    for base, extra in ((upstream.base_url, ""), (f"http://localhost:{upstream.port}", ""),
                        (f"http://[::ffff:127.0.0.1]:{upstream.port}", "    allow_insecure_http: true\n")):
        broker, app, _, _ = broker_factory(provider_extra=api(base, allow_private=False, extra=extra))
        app.login()
        answer = app.call("GET", "/proxy/dot/json")
        assert answer.status_code == 502 and answer.json()["error"] == "upstream_address_refused", (base, answer.text)
        assert wait_for(lambda: "API call failed" in broker.log_text), "an operator sees why"
        broker.stop()
    assert upstream.count() == 0


def test_a_redirect_goes_back_as_it_is_and_is_not_followed(proxied, upstream):
    broker, app = proxied()
    answer = app.call("GET", "/proxy/dot/redirect", allow_redirects=False)
    assert answer.status_code == 302
    assert answer.headers["Location"] == f"http://127.0.0.1:{upstream.port}/elsewhere"
    assert "Set-Cookie" not in answer.headers
    assert [r["path"] for r in upstream.requests] == ["/redirect"], "not followed"
    provider_token = app.call("GET", "/token").json()["access_token"]
    assert provider_token not in str(answer.headers) and provider_token.encode() not in answer.content


def test_a_401_from_the_api_means_one_refresh_and_one_retry(broker_factory, auth_server):
    base = auth_server.userinfo_endpoint.rsplit("/userinfo/", 1)[0]
    broker, app, _, _ = broker_factory(provider_extra=api(base))
    app.login()
    old = app.call("GET", "/token").json()["access_token"]
    auth_server.expire_access_token(old)  # the server no longer takes it; the broker does not know
    auth_server.reset_stats()
    answer = app.call("GET", "/proxy/dot/userinfo/")
    assert answer.status_code == 200, answer.text
    assert auth_server.stats().get("refresh_token") == 1
    assert auth_server.endpoint_stats().get("userinfo") == 2, "the refused call and one retry"
    assert app.call("GET", "/token").json()["access_token"] != old


def test_calls_the_api_refuses_together_make_one_refresh(broker_factory, auth_server):
    """Calls sent at once with a token the API no longer takes: each is answered after one
    refresh in all — a call refused after the refresh takes the token it brought."""
    base = auth_server.userinfo_endpoint.rsplit("/userinfo/", 1)[0]
    broker, app, _, _ = broker_factory(provider_extra=api(base))
    app.login()
    old = app.call("GET", "/token").json()["access_token"]
    auth_server.expire_access_token(old)
    auth_server.reset_stats()
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: app.call("GET", "/proxy/dot/userinfo/"), range(8)))
    assert [answer.status_code for answer in answers] == [200] * 8, [answer.text for answer in answers]
    assert auth_server.stats().get("refresh_token") == 1
    assert auth_server.endpoint_stats().get("userinfo") <= 16, "each call sent at most twice"


def test_a_body_over_the_replay_cap_is_not_sent_again(proxied, upstream, auth_server):
    broker, app = proxied(env={"BROKER_PROXY_RETRY_MAX_BODY_BYTES": "8"})
    token = app.call("GET", "/token").json()["access_token"]
    upstream.refused_tokens.add(token)
    auth_server.reset_stats()
    answer = app.call("POST", "/proxy/dot/protected", data=b'{"a": "longer than eight bytes"}', headers={"Content-Type": "application/json"})
    assert answer.status_code == 401 and answer.json()["error"] == "token_refreshed"
    assert auth_server.stats().get("refresh_token") == 1
    assert upstream.count() == 1, "not replayed"
    # A short body is replayed with the new token.
    retried = app.call("POST", "/proxy/dot/protected", data=b"{}", headers={"Content-Type": "application/json"})
    assert retried.status_code == 200 and upstream.last()["body"] == b"{}"
    assert upstream.last()["headers"]["content-type"] == "application/json"


def test_bodies_over_the_caps_are_refused_never_truncated(proxied, upstream):
    broker, app = proxied(env={"BROKER_PROXY_MAX_RESPONSE_BYTES": "1048576", "BROKER_MAX_BODY_BYTES": "4096"})
    too_big = app.call("POST", "/proxy/dot/json", data=b"x" * 5000)
    assert too_big.status_code == 413
    answer = app.call("GET", "/proxy/dot/bytes/2000000")
    assert answer.status_code == 502 and answer.json()["error"] == "upstream_response_too_large"
    whole = app.call("GET", "/proxy/dot/bytes/1000000")
    assert whole.status_code == 200 and len(whole.content) == 1000000
    assert whole.headers.get("Transfer-Encoding") == "chunked", "streamed through"
    assert hashlib.sha256(whole.content).hexdigest() == hashlib.sha256(b"a" * 1000000).hexdigest()
    head = app.call("HEAD", "/proxy/dot/json")
    assert head.status_code == 200 and upstream.last()["method"] == "HEAD"


def test_an_answer_streams_through_and_one_over_the_cap_is_broken_off(proxied, upstream):
    broker, app = proxied(env={"BROKER_PROXY_MAX_RESPONSE_BYTES": "1048576"})
    # The first half reaches the client while the API still holds back the second.
    started = time.monotonic()
    answer = requests.get(broker.url("/proxy/dot/slow/200000"), headers={"Authorization": f"Bearer {app.session_token}"},
                          stream=True, timeout=30)
    assert answer.status_code == 200
    pieces = answer.iter_content(65536)
    first = next(pieces)
    assert first.startswith(b"b") and time.monotonic() - started < upstream.slow_pause, "the first bytes came before the pause ended"
    rest = b"".join(pieces)
    assert len(first) + len(rest) == 400000 and rest.endswith(b"c")
    # No length announced and over the cap: the body is broken off, never a short 200 taken for whole.
    with pytest.raises(requests.exceptions.ChunkedEncodingError):
        requests.get(broker.url("/proxy/dot/chunked/3000000"), headers={"Authorization": f"Bearer {app.session_token}"}, timeout=30).content
    assert app.call("GET", "/proxy/dot/json").status_code == 200, "the broker serves on"


def test_a_reader_slower_than_the_api_gets_every_byte(proxied, upstream):
    """The API sends far more than every buffer on the way holds, to a client that reads slowly:
    the transfer pauses (no thread waits for the client) and resumes as the client reads, many
    times over, and the body arrives whole; meanwhile other calls are served."""
    broker, app = proxied(env={"BROKER_UPSTREAM_TIMEOUT_SECONDS": "30", "BROKER_PROXY_MAX_RESPONSE_BYTES": "104857600"})
    size = 40_000_000
    connection = open_request(broker, f"/proxy/dot/bytes/{size}", app.session_token)
    status, head = read_head(connection)
    assert status == 200 and "Transfer-Encoding: chunked" in head, head
    raw = bytearray()
    pauses = 0
    while not raw.endswith(b"\r\n0\r\n\r\n"):
        piece = connection.recv(65536)
        assert piece, "the body ended early"
        raw += piece
        if len(raw) // 2_000_000 > pauses:  # every 2 MB the client stops reading for a while
            pauses += 1
            time.sleep(0.1)
            asked = time.monotonic()
            assert app.call("GET", "/proxy/dot/json").status_code == 200
            assert time.monotonic() - asked < 1
    assert pauses >= 19
    connection.close()
    body, rest = bytearray(), memoryview(raw)
    while True:  # the chunked framing, undone
        line_end = bytes(rest[:16]).index(b"\r\n")
        length = int(bytes(rest[:line_end]), 16)
        if length == 0:
            break
        body += rest[line_end + 2:line_end + 2 + length]
        rest = rest[line_end + 4 + length:]
    assert len(body) == size and body.count(b"a") == size


def test_the_broker_stops_cleanly_while_an_answer_streams(proxied, upstream):
    broker, app = proxied()
    upstream.slow_pause = 8  # longer than the broker's 2 s grace: the body is cut by the stop
    answer = requests.get(broker.url("/proxy/dot/slow/100000"), headers={"Authorization": f"Bearer {app.session_token}"},
                          stream=True, timeout=30)
    pieces = answer.iter_content(65536)
    assert answer.status_code == 200 and next(pieces)
    started = time.monotonic()
    assert broker.stop(signal.SIGTERM, timeout=15) == 0, "no abort with a stream open"
    assert time.monotonic() - started < upstream.slow_pause
    with pytest.raises(requests.exceptions.ChunkedEncodingError):
        b"".join(pieces)


def test_concurrent_calls_on_an_expiring_session_share_one_refresh(proxied, upstream, auth_server):
    auth_server.set_access_token_lifetime(30)  # inside the 60 s skew: due for a refresh
    broker, app = proxied(env={"BROKER_MAX_CONNECTIONS_PER_IP": "1024"})
    auth_server.reset_stats()
    before = upstream.count()
    with concurrent.futures.ThreadPoolExecutor(20) as pool:
        answers = list(pool.map(lambda _: app.call("GET", "/proxy/dot/json"), range(20)))
    assert all(a.status_code == 200 for a in answers)
    assert auth_server.stats().get("refresh_token") == 1
    tokens = {r["headers"]["authorization"] for r in upstream.requests[before:]}
    assert len(tokens) == 1


def test_no_token_or_query_reaches_a_log_line(proxied, upstream):
    broker, app = proxied()
    provider_token = app.call("GET", "/token").json()["access_token"]
    assert app.call("GET", "/proxy/dot/json?api_key=do-not-log-me").status_code == 200
    assert wait_for(lambda: '"path":"/proxy/dot/json"' in broker.log_text), "the access log names the path"
    log = broker.log_text
    for secret in (provider_token, app.session_token, "do-not-log-me"):
        assert secret not in log
    metrics = requests.get(broker.url("/metrics"), timeout=10).text
    assert 'broker_proxy_requests_total{provider="dot",status_class="2xx"} 1' in metrics


def test_a_provider_without_an_api_has_no_proxy(broker_factory):
    broker, app, _, _ = broker_factory()
    app.login()
    answer = app.call("GET", "/proxy/dot/anything")
    assert answer.status_code == 404 and "api_base_url" in answer.json()["error_description"]


@pytest.fixture
def misbehaving():
    server = MisbehavingUpstream()
    yield server
    server.close()


@pytest.mark.parametrize("method, path", [("GET", "/no-content"), ("GET", "/not-modified"), ("HEAD", "/json"), ("GET", "/extra-now"),
                                          ("GET", "/extra")])
def test_bytes_after_an_answer_never_reach_another_request(broker_factory, browser, misbehaving, method, path):
    """An API that sends more after an answer — a body after a 204 or 304 or a HEAD answer, more
    than Content-Length in the same segment or a moment later — with both sessions on the API's
    one pool: the next request of either session gets its own answer, never those bytes. (Bytes
    that arrive after the next request was written on the connection cannot be told from its
    answer, on any HTTP/1.1 connection; here they arrive while it is idle, and a connection with
    bytes waiting is not reused.)"""
    broker, first, _, _ = broker_factory(provider_extra=api(misbehaving.base_url))
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


def test_a_switching_protocols_answer_is_a_502_at_once(broker_factory, misbehaving):
    broker, app, _, _ = broker_factory(provider_extra=api(misbehaving.base_url))
    app.login()
    started = time.monotonic()
    answer = app.call("GET", "/proxy/dot/switch")
    assert answer.status_code == 502 and answer.json()["error"] == "upstream_error", answer.text
    assert time.monotonic() - started < 3, "not held until the upstream timeout"
    assert app.call("GET", "/proxy/dot/own").json()["path"] == "/own"


def test_an_answer_with_headers_too_large_to_read_is_a_502(broker_factory, misbehaving):
    """The API was reached and answered, with more headers than libcurl reads: its answer could not
    be read (502), not "could not be reached" (503), which would send clients to retry."""
    broker, app, _, _ = broker_factory(provider_extra=api(misbehaving.base_url))
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


def open_request(broker, target: str, token: str, source: str = "127.0.0.1") -> socket.socket:
    """A connection that sends a GET and reads nothing yet (a small receive window)."""
    connection = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    connection.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    connection.bind((source, 0))
    connection.settimeout(10)
    connection.connect(("127.0.0.1", broker.port))
    connection.sendall(f"GET {target} HTTP/1.1\r\nHost: {broker.host}\r\nAuthorization: Bearer {token}\r\n\r\n".encode())
    return connection


def read_head(connection: socket.socket) -> tuple[int, str]:
    """The status and head of the answer, reading byte by byte so that no body is taken."""
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        byte = connection.recv(1)
        if not byte:
            break
        head += byte
    return int(head.split(b" ", 2)[1]), head.decode("latin-1")


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


def test_a_full_line_of_transfers_is_a_503_with_retry_after(proxied, upstream):
    broker, app = proxied(env={"BROKER_UPSTREAM_TIMEOUT_SECONDS": "3", "BROKER_PROXY_MAX_TRANSFERS": "1",
                               "BROKER_PROXY_MAX_RESPONSE_BYTES": "104857600"})
    running = open_request(broker, "/proxy/dot/bytes/60000000", app.session_token)
    assert read_head(running)[0] == 200
    waiting = open_request(broker, "/proxy/dot/json", app.session_token)  # the one place in line
    time.sleep(0.3)
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
