"""The API proxy (docs/api.md, "Calling the provider's API through the broker"): requests an app sends
to /proxy/{provider}/{path} with its session token reach the provider's API with the provider's
token — against the real authorization server's userinfo, and a recording upstream on loopback
that keeps what it receives. The client's credentials and cookies never arrive; another
provider's session is refused; path tricks are refused before any connection; redirects are not
followed; a 401 from the API means one refresh and one retry (none for a body over the replay
cap); bodies over the caps are refused; a large answer passes whole; concurrent calls on an
expiring session share one refresh; no token reaches a log line. (Its connections and
transfers: test_broker_api_proxy_connections.py.)"""

import concurrent.futures
import hashlib
import http.client
import json
import signal
import time

import pytest
import requests

from support.broker import App, api, wait_for
from support.raw_http import open_request, raw_get, read_head


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


def test_headers_a_connection_header_names_stay_behind(proxied, upstream):
    """RFC 9110 §7.6.1: what a message's Connection lists is hop-by-hop for it, in either
    direction, even a header the proxy otherwise passes."""
    broker, app = proxied()
    answer = app.call("GET", "/proxy/dot/hop", headers={
        "Connection": "Accept, If-None-Match", "Accept": "application/json", "If-None-Match": '"v0"', "Accept-Language": "fr"})
    assert answer.status_code == 200 and answer.json() == {"ok": True}
    seen = upstream.last()
    # (libcurl sends its own Accept: */* when none is passed.)
    assert seen["headers"].get("accept") == "*/*" and "if-none-match" not in seen["header_names"], seen["headers"]
    assert seen["headers"]["accept-language"] == "fr"
    assert answer.headers["ETag"] == '"v1"' and "X-RateLimit-Remaining" not in answer.headers


def send_fields(broker, fields) -> tuple[int, bytes]:
    """A GET of /proxy/dot/json with these header field lines, as they are."""
    connection = http.client.HTTPConnection("127.0.0.1", broker.port, timeout=10)
    connection.putrequest("GET", "/proxy/dot/json", skip_accept_encoding=True)
    for name, value in fields:
        connection.putheader(name, value)
    connection.endheaders()
    answer = connection.getresponse()
    result = answer.status, answer.read()
    connection.close()
    return result


def test_a_header_sent_in_several_fields_reaches_the_api_whole(proxied, upstream):
    """RFC 9110 §5.3: a list sent in several field lines is one list; the API gets every member
    (here two validators and two languages), joined. A header that is no list, given twice, is
    a 400: which of its values stands is anyone's guess."""
    broker, app = proxied()
    bearer = ("Authorization", f"Bearer {app.session_token}")
    status, _ = send_fields(broker, [bearer, ("If-None-Match", '"a"'), ("If-None-Match", '"b"'), ("Accept-Language", "fr"),
                                     ("Accept-Language", "de")])
    assert status == 200
    seen = upstream.last()
    assert seen["headers"]["if-none-match"] == '"a", "b"' and seen["headers"]["accept-language"] == "fr, de", seen["headers"]
    assert seen["header_names"].count("if-none-match") == 1
    before = upstream.count()
    status, body = send_fields(broker, [bearer, ("Range", "bytes=0-1"), ("Range", "bytes=5-9")])
    assert status == 400 and json.loads(body)["error_description"] == "Range is given more than once.", body
    assert upstream.count() == before, "not sent"
    status, body = send_fields(broker, [bearer, ("Authorization", f"Bearer {app.session_token}")])
    assert status == 400 and json.loads(body)["error_description"] == "Authorization is given more than once.", body


def test_an_answer_whose_head_cannot_be_passed_on_is_a_502_never_a_closed_connection(proxied, upstream):
    """The client always gets an answer: headers within what the proxy passes go back (a name
    with a space before its colon, as RFC 9112 §5.1 asks of a proxy, without it); an answer with
    more header bytes than fit beside the request's head in a connection's memory is a 502, in
    the access log and metrics as what the client got."""
    broker, app = proxied()
    answer = app.call("GET", "/proxy/dot/spaced")
    assert answer.status_code == 200 and answer.headers["X-RateLimit-Limit"] == "5", answer.headers
    answer = app.call("POST", "/proxy/dot/link/4000", json={"a": 1})
    assert answer.status_code == 201 and len(answer.headers["Link"]) == 4000
    for target in ("link/9000", "link/60000", "link/9000?large"):  # the last one's body would stream
        answer = app.call("POST", f"/proxy/dot/{target}", json={"a": 1})
        assert answer.status_code == 502 and answer.json()["error"] == "upstream_error", answer.text
        assert "headers" in answer.json()["error_description"]
    assert app.call("GET", "/proxy/dot/link/4000?large").status_code == 201
    # Refused at its head, a streamed answer's transfer stops there, though the API then stalls.
    asked = time.monotonic()
    assert app.call("GET", "/proxy/dot/link/9000?stall").status_code == 502
    assert wait_for(lambda: len(upstream.bytes_ended) == 1, timeout=10) and upstream.bytes_ended[0] - asked < 5
    def logged():
        return [line["status"] for line in broker.json_lines() if line.get("msg") == "request" and line["path"].startswith("/proxy/dot/link/")]
    # (A streamed answer's line comes when its body has gone: the order may differ.)
    assert wait_for(lambda: sorted(logged()) == [201, 201, 502, 502, 502, 502]), logged()


def test_each_session_has_its_own_rate_limit(proxied, upstream, browser):
    broker, app = proxied(env={"BROKER_PROXY_REQUESTS_PER_MINUTE": "3"})
    answers = [app.call("GET", "/proxy/dot/json") for _ in range(4)]
    assert [answer.status_code for answer in answers] == [200, 200, 200, 429]
    assert answers[3].json()["error_description"] == "Too many requests of this session; retry later."
    assert int(answers[3].headers["Retry-After"]) >= 1
    other = App(broker, browser)
    other.login("bob")
    assert other.call("GET", "/proxy/dot/json").status_code == 200, "another session from the same address"


def test_the_access_log_counts_a_streamed_answers_body(proxied, upstream):
    """A streamed answer (over 256 KiB) is logged once its body has gone: its bytes, and a
    duration that covers them — as an answer held whole is."""
    broker, app = proxied()
    for size in (1000, 400000):
        answer = app.call("GET", f"/proxy/dot/bytes/{size}")
        assert answer.status_code == 200 and len(answer.content) == size
    def logged():
        return [(line["path"], line["bytes"]) for line in broker.json_lines()
                if line.get("msg") == "request" and line.get("path", "").startswith("/proxy/dot/bytes/")]
    assert wait_for(lambda: logged() == [("/proxy/dot/bytes/1000", 1000), ("/proxy/dot/bytes/400000", 400000)]), logged()


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
    status = raw_get(broker, "http://evil.example/proxy/dot/json", app.session_token)
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
    # A HEAD announces the length the API gave (RFC 9110 §8.6), under the cap or not: no body comes.
    for size in (1000, 2000000):
        sized = app.call("HEAD", f"/proxy/dot/bytes/{size}")
        assert sized.status_code == 200 and sized.headers["Content-Length"] == str(size) and sized.content == b"", sized.headers


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
