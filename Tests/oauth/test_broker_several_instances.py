"""Three broker processes on one PostgreSQL database (state.backend: postgres), against the real
authorization server: any instance serves any step of a login and any request on a session;
one refresh for a crowd spread over all three; a revocation on one reaches the others; an
instance killed during refreshes loses nothing and holds no lock.

The three share one public URL (as behind a balancer): the provider sends the browser back to
the second instance's /callback, whichever instance began the login.
"""

import collections
import concurrent.futures
import hashlib
import os
import random
import signal
import subprocess
import threading
import time
from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest
import requests

from support.broker import STATE_KEY, App, BrokerProcess, broker_binary, broker_config, free_port, provider_config, wait_for
from support.browser import Browser, BrowserError
from support.device import DeviceClient, DevicePerson
from support.pkce import make_pkce
from support.postgres import PostgresCluster


@pytest.fixture(scope="module")
def postgres():
    with PostgresCluster() as cluster:
        yield cluster


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


def bearer(token):
    return {"Authorization": f"Bearer {token}"}


def test_a_state_key_put_first_on_one_instance_too_soon_ends_no_session(instances):
    """A rotation of the state key rolled out wrongly: one instance gets the new key first while
    the others have only the old one. Its refresh re-seals the session's row under the new key;
    an instance without that key answers 503 (retry) for the session — not 401, which would end
    it for the client — and once it has the new key too (after its own), it serves the session."""
    brokers, apps, start = instances
    new_key = subprocess.run([broker_binary(), "gen-key"], capture_output=True, text=True, check=True).stdout.strip()
    params, verifier = apps[0].sign_in("bob")
    redeemed = apps[0].redeem(params["code"], verifier)
    assert redeemed.status_code == 200, redeemed.text
    token = redeemed.json()["session_token"]
    assert requests.get(brokers[0].url("/token"), headers=bearer(token), timeout=10).status_code == 200

    ahead = start(free_port(), {"BROKER_STATE_KEY": f"{new_key},{STATE_KEY}"})
    refreshed = requests.post(ahead.url("/refresh"), headers=bearer(token), timeout=30)
    assert refreshed.status_code == 200, refreshed.text
    access = refreshed.json()["access_token"]

    answers = []

    def behind_stops_serving_its_copy():
        answers.append(requests.get(brokers[0].url("/token"), headers=bearer(token), timeout=10))
        return answers[-1].status_code != 200

    assert wait_for(behind_stops_serving_its_copy), "the change's notification reaches the instance without the key"
    behind = answers[-1]
    assert behind.status_code == 503, behind.text
    assert behind.json()["error"] == "temporarily_unavailable"
    assert behind.headers["Retry-After"] == "5"
    assert requests.post(brokers[2].url("/refresh"), headers=bearer(token), timeout=30).status_code == 503
    assert wait_for(lambda: any("sealed under a state key this instance does not have" in line for line in brokers[0].lines), 30)

    assert requests.get(ahead.url("/token"), headers=bearer(token), timeout=10).json()["access_token"] == access
    caught_up = start(free_port(), {"BROKER_STATE_KEY": f"{STATE_KEY},{new_key}"})
    answer = requests.get(caught_up.url("/token"), headers=bearer(token), timeout=10)
    assert answer.status_code == 200, answer.text
    assert answer.json()["access_token"] == access


def test_each_step_of_a_login_on_another_instance_and_the_session_everywhere(instances, auth_server):
    brokers, apps, _ = instances
    params, verifier = apps[0].sign_in("alice")  # /authorize on the first; /callback on the second
    assert "code" in params, params
    redeemed = apps[2].redeem(params["code"], verifier)  # POST /token on the third
    assert redeemed.status_code == 200, redeemed.text
    token = redeemed.json()["session_token"]
    access = redeemed.json()["access_token"]
    for broker in brokers:
        answer = requests.get(broker.url("/token"), headers=bearer(token), timeout=10)
        assert answer.status_code == 200 and answer.json()["access_token"] == access, answer.text
    assert requests.get(auth_server.userinfo_endpoint, headers=bearer(access), timeout=10).json()["sub"]
    assert requests.get(brokers[1].url("/session"), headers=bearer(token), timeout=10).json()["provider"] == "dot"
    assert requests.get(brokers[0].url("/profile"), headers=bearer(token), timeout=10).json()["email"] == "alice@example.test"

    refreshed = requests.post(brokers[1].url("/refresh"), headers=bearer(token), timeout=10)
    assert refreshed.status_code == 200 and refreshed.json()["access_token"] != access, refreshed.text
    new = refreshed.json()["access_token"]
    for broker in (brokers[0], brokers[2]):
        assert wait_for(lambda: requests.get(broker.url("/token"), headers=bearer(token), timeout=10).json()["access_token"] == new, 2)

    revoked = requests.post(brokers[2].url("/revoke"), headers=bearer(token), timeout=10)
    assert revoked.status_code == 200 and revoked.json()["provider_revocation"] == "succeeded"
    started = time.monotonic()
    for broker in (brokers[0], brokers[1]):
        assert wait_for(lambda: requests.get(broker.url("/token"), headers=bearer(token), timeout=10).status_code == 401, 2)
    assert time.monotonic() - started < 2


def add_scope(starting, redeeming, token, scope):
    """An incremental sign-in of alice's session `token`: `POST /authorize` on `starting`'s
    instance, the provider's callback on the public URL's, the code redeemed on `redeeming`'s;
    the redemption's answer."""
    more_verifier, challenge = make_pkce()
    started = requests.post(starting.broker.url("/authorize"), headers=bearer(token), timeout=10, data={
        "scope": scope, "redirect_uri": starting.redirect_uri, "code_challenge": challenge,
        "code_challenge_method": "S256", "state": "more",
    })
    assert started.status_code == 200, started.text
    location = starting.browser.authorize(started.json()["authorization_url"], "alice", "alice-password")
    back = dict(parse_qsl(urlsplit(location).query))
    assert back.get("state") == "more" and "code" in back, back
    merged = redeeming.redeem(back["code"], more_verifier)
    assert merged.status_code == 200, merged.text
    return merged.json()


def test_a_code_replayed_without_its_verifier_ends_nothing_and_with_it_ends_the_session(instances):
    """A code redeemed on one instance and replayed on the others: by a request without its verifier
    (someone who only saw the code), refused and nothing ends; by one with it (the code leaked with
    its verifier), refused and the session it gave out ends on every instance."""
    brokers, apps, _ = instances
    params, verifier = apps[0].sign_in("alice")
    redeemed = apps[1].redeem(params["code"], verifier)
    assert redeemed.status_code == 200, redeemed.text
    token = redeemed.json()["session_token"]
    seen_only = apps[2].redeem(params["code"], make_pkce()[0])
    assert seen_only.status_code == 400 and seen_only.json()["error"] == "invalid_grant", seen_only.text
    assert all(requests.get(b.url("/token"), headers=bearer(token), timeout=10).status_code == 200 for b in brokers)
    leaked = apps[0].redeem(params["code"], verifier)
    assert leaked.status_code == 400 and "already used" in leaked.json()["error_description"], leaked.text
    assert wait_for(lambda: all(requests.get(b.url("/token"), headers=bearer(token), timeout=10).status_code == 401 for b in brokers))


def test_an_incremental_authorization_with_each_step_on_another_instance(instances, auth_server):
    """Sign in and add a scope through a round-robin balancer: the instance that takes the
    callback (the second) and the one that redeems the code (the third) never held the session in
    memory; they read it from the store."""
    brokers, apps, _ = instances
    params, verifier = apps[0].sign_in("alice", scope="read")
    redeemed = apps[0].redeem(params["code"], verifier)
    assert redeemed.status_code == 200, redeemed.text
    token = redeemed.json()["session_token"]
    merged = add_scope(apps[0], apps[2], token, "write")
    assert "session_token" not in merged and "write" in merged["scope"].split()
    for broker in brokers:
        assert wait_for(lambda: {"read", "write"} <= set(requests.get(broker.url("/session"), headers=bearer(token), timeout=10).json()["scopes"]), 2)


def test_a_profile_an_instance_cached_is_not_served_after_scopes_were_added_on_others(instances, browser):
    """The first instance caches the profile read under `openid read` (no email: the provider
    shows claims by scope); `email` is added by a sign-in whose callback and redemption happen on
    the two others; once the first instance hears of the change (the session notification, as
    for a refresh), its `/profile` has the email, well within the cache's 60 seconds."""
    brokers, _, _ = instances
    apps = [App(broker, browser, provider="narrow") for broker in brokers]
    params, verifier = apps[0].sign_in("alice")
    redeemed = apps[0].redeem(params["code"], verifier)
    assert redeemed.status_code == 200, redeemed.text
    token = redeemed.json()["session_token"]
    before = requests.get(brokers[0].url("/profile"), headers=bearer(token), timeout=10)
    assert before.status_code == 200 and before.json()["sub"] and before.json()["email"] is None, before.text
    assert "email" in add_scope(apps[1], apps[2], token, "email")["scope"].split()
    def profile():
        return requests.get(brokers[0].url("/profile"), headers=bearer(token), timeout=10)
    assert wait_for(lambda: profile().json()["email"] == "alice@example.test", 2), profile().text
    assert profile().json()["sub"] == before.json()["sub"]


@pytest.mark.instance_env({"BROKER_TOKEN_REQUESTS_PER_MINUTE": "2"})
def test_a_backend_redeems_codes_on_every_instance_beyond_the_limit_and_guesses_spend_one_instances_budget(instances):
    """Codes that work, redeemed from one address through a round-robin balancer, spend nothing
    however many there are; guesses spend the budget of the instance that refused them (each
    instance keeps its own), which then refuses that address's next code (429) while the others
    take theirs."""
    brokers, apps, _ = instances
    tokens = set()
    for n in range(6):  # three times the budget, begun and redeemed on different instances
        params, verifier = apps[n % 3].sign_in("alice")
        redeemed = apps[(n + 1) % 3].redeem(params["code"], verifier)
        assert redeemed.status_code == 200, redeemed.text
        tokens.add(redeemed.json()["session_token"])
    assert len(tokens) == 6
    params, verifier = apps[0].sign_in("alice")
    for n in range(2):
        guess = apps[2].redeem(f"guessed-{n}", verifier)
        assert guess.status_code == 400 and guess.json()["error"] == "invalid_grant", guess.text
    limited = apps[2].redeem(params["code"], verifier)
    assert limited.status_code == 429 and limited.json()["error"] == "rate_limited", limited.text
    taken = apps[0].redeem(params["code"], verifier)
    assert taken.status_code == 200, "the code the third instance refused with 429 was left as it was"


def test_the_standard_endpoints_and_the_proxy_with_each_step_on_another_instance(instances, auth_server):
    """A standard client through a round-robin balancer: the authorization endpoint of the first,
    the callback on the second, the code at the third's token endpoint, a refresh at the first
    (no client_id), API calls through each one's proxy, revocation at the second."""
    brokers, apps, _ = instances
    verifier, challenge = make_pkce()
    query = urlencode({"client_id": "web", "redirect_uri": apps[0].redirect_uri, "response_type": "code", "state": "std",
                       "code_challenge": challenge, "code_challenge_method": "S256", "scope": "openid read"})
    location = apps[0].browser.authorize(brokers[0].url("/providers/dot/authorize?" + query), "alice", "alice-password")
    back = dict(parse_qsl(urlsplit(location).query))
    assert back.get("state") == "std" and "code" in back, back
    exchanged = requests.post(brokers[2].url("/providers/dot/token"), timeout=10, data={
        "grant_type": "authorization_code", "code": back["code"], "code_verifier": verifier,
        "redirect_uri": apps[0].redirect_uri, "client_id": "web"})
    assert exchanged.status_code == 200, exchanged.text
    refresh_token = exchanged.json()["refresh_token"]
    refreshed = requests.post(brokers[0].url("/providers/dot/token"), timeout=10,
                              data={"grant_type": "refresh_token", "refresh_token": refresh_token})
    assert refreshed.status_code == 200 and refreshed.json()["refresh_token"] == refresh_token, refreshed.text
    for broker in brokers:
        answer = requests.get(broker.url("/proxy/dot/userinfo/"), headers=bearer(refresh_token), timeout=10)
        assert answer.status_code == 200 and answer.json()["sub"], answer.text
    revoked = requests.post(brokers[1].url("/providers/dot/revoke"), data={"token": refresh_token, "client_id": "web"}, timeout=10)
    assert revoked.status_code == 200
    for broker in (brokers[0], brokers[2]):
        assert wait_for(lambda: requests.get(broker.url("/proxy/dot/userinfo/"), headers=bearer(refresh_token), timeout=10).status_code == 401, 2)


def test_a_device_signs_in_with_each_step_on_another_instance(instances, auth_server):
    brokers, _, _ = instances
    cli = DeviceClient(brokers[0])  # codes from the first
    codes = cli.request_codes()
    person = DevicePerson(brokers[2], auth_server)  # /device on the third; /callback on the second
    try:
        assert "Device signed in" in person.approve(codes["user_code"]).text
    finally:
        person.close()
    cli.broker = brokers[1]
    answer = cli.poll()  # collected on the second
    assert answer.status_code == 200, answer.text
    assert requests.get(auth_server.userinfo_endpoint, headers=bearer(answer.json()["access_token"]), timeout=10).status_code == 200
    cli.broker = brokers[0]
    assert cli.poll().json()["error"] == "invalid_grant", "collected once, whichever instance is asked"
    assert requests.get(brokers[2].url("/token"), headers=bearer(answer.json()["session_token"]), timeout=10).status_code == 200


def test_calls_the_api_refuses_on_every_instance_make_one_refresh(instances, auth_server):
    """The provider stops taking the session's access token: calls through each instance's proxy
    at once are all answered, after one refresh in all — an instance refused after another
    refreshed takes the token that refresh stored."""
    brokers, apps, _ = instances
    apps[0].login("alice")
    token = apps[0].session_token
    old = requests.get(brokers[0].url("/token"), headers=bearer(token), timeout=10).json()["access_token"]
    auth_server.expire_access_token(old)
    auth_server.reset_stats()
    with concurrent.futures.ThreadPoolExecutor(12) as pool:
        answers = list(pool.map(
            lambda i: requests.get(brokers[i % 3].url("/proxy/dot/userinfo/"), headers=bearer(token), timeout=20), range(12)))
    assert [answer.status_code for answer in answers] == [200] * 12, [answer.text for answer in answers]
    assert auth_server.stats().get("refresh_token") == 1
    new = requests.get(brokers[1].url("/token"), headers=bearer(token), timeout=10).json()["access_token"]
    assert new != old and requests.get(auth_server.userinfo_endpoint, headers=bearer(new), timeout=10).status_code == 200


@pytest.mark.instance_env({"BROKER_REFRESH_REQUESTS_PER_MINUTE": "0", "BROKER_MAX_CONNECTIONS_PER_IP": "1024"})
def test_a_crowd_on_three_instances_makes_one_refresh(instances, auth_server):
    brokers, apps, _ = instances
    apps[0].login("alice")
    token = apps[0].session_token
    auth_server.reset_stats()
    # Every caller wants a token valid longer than the provider gives: each instance would
    # refresh; the instances' shared lock and bound make it one refresh in all.
    urls = [broker.url("/token?min_ttl=7200") for broker in brokers] * 334

    def get(url):
        return requests.get(url, headers=bearer(token), timeout=30)

    with concurrent.futures.ThreadPoolExecutor(48) as pool:
        answers = list(pool.map(get, urls))
    assert all(answer.status_code == 200 for answer in answers), {(a.status_code, a.text) for a in answers if a.status_code != 200}
    assert auth_server.stats().get("refresh_token") == 1
    assert len({answer.json()["access_token"] for answer in answers}) == 1
    metrics = "".join(requests.get(broker.url("/metrics"), timeout=10).text for broker in brokers)
    assert "broker_refresh_lock_wait_seconds_count" in metrics
    assert 'broker_state_store_call_duration_seconds_count{operation="write"}' in metrics


@pytest.mark.instance_env({"BROKER_UPSTREAM_TIMEOUT_SECONDS": "5"})
def test_an_instance_killed_while_it_holds_a_refresh_lock_loses_nothing(instances, auth_server):
    """The first instance holds the session's refresh lock and lease while the provider takes 3 s
    (then answers 503, so no token is rotated); it is killed meanwhile. Its lock goes with its
    connection; its lease (it might have rotated the token) runs out after the upstream timeout
    + 5 s. The next instance's refresh waits for that, then succeeds, and the session is intact
    everywhere."""
    brokers, apps, start = instances
    apps[0].login("alice")
    token = apps[0].session_token
    auth_server.inject_fault("token", status=503, body='{"error":"temporarily_unavailable"}', delay=3.0)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pending = pool.submit(requests.post, brokers[0].url("/refresh"), headers=bearer(token), timeout=30)
        time.sleep(1.0)
        brokers[0].stop(signal.SIGKILL)
        with pytest.raises(requests.RequestException):
            pending.result()
    auth_server.reset_stats()
    asked = time.monotonic()
    answer = requests.post(brokers[1].url("/refresh"), headers=bearer(token), timeout=30)
    assert answer.status_code == 200, answer.text
    assert time.monotonic() - asked < 10, "the lease runs out 10 s after it was taken"
    assert auth_server.stats().get("refresh_token") == 1
    assert requests.get(brokers[2].url("/token"), headers=bearer(token), timeout=10).json()["access_token"] == answer.json()["access_token"]
    replacement = start(free_port())
    assert requests.get(replacement.url("/token"), headers=bearer(token), timeout=10).status_code == 200


def test_while_postgres_is_down_cached_tokens_are_served_and_changes_are_503(instances, auth_server, postgres):
    brokers, apps, _ = instances
    apps[0].login("alice")
    token = apps[0].session_token
    access = requests.get(brokers[1].url("/token"), headers=bearer(token), timeout=10).json()["access_token"]
    postgres.stop(mode="fast")
    try:
        served = requests.get(brokers[1].url("/token"), headers=bearer(token), timeout=10)
        assert served.status_code == 200 and served.json()["access_token"] == access, "a cached, valid token"
        refused = requests.post(brokers[1].url("/refresh"), headers=bearer(token), timeout=30)
        assert refused.status_code == 503 and refused.headers.get("Retry-After"), refused.text
        assert refused.json()["error"] == "temporarily_unavailable"
        # The database is every instance's: each stays ready (a Service keeps its endpoints, and
        # cached tokens keep answering), and says what is wrong.
        def state_check():
            ready = requests.get(brokers[1].url("/readyz"), timeout=10)
            assert ready.status_code == 200 and ready.json()["status"] == "ready", ready.text
            return ready.json()["checks"]["state"]
        assert wait_for(lambda: state_check()["status"] == "warn", 5)
        login = requests.get(brokers[2].url("/authorize"), params={
            "provider": "dot", "app": "web", "redirect_uri": "http://127.0.0.1:9/cb",
            "code_challenge": "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM", "code_challenge_method": "S256",
        }, allow_redirects=False, timeout=30)
        assert login.status_code == 503, "a login that cannot be stored does not go to the provider"
    finally:
        postgres.restart()
    # Seen back without any client's call (a probe each second), and heard: one line as the
    # outage began, one as it ended.
    assert wait_for(lambda: state_check() == {"status": "pass"}, 15)
    lines = brokers[1].json_lines()
    assert [line["msg"] for line in lines if "PostgreSQL state store" in line["msg"]] == [
        "the PostgreSQL state store is failing", "the PostgreSQL state store works again"]
    back = next(line for line in lines if line["msg"] == "the PostgreSQL state store works again")
    assert back["down_seconds"] > 0 and back["failures"] >= 1
    renewed = requests.post(brokers[1].url("/refresh"), headers=bearer(token), timeout=30)
    assert renewed.status_code == 200 and renewed.json()["access_token"] != access, renewed.text
    assert requests.get(brokers[0].url("/token"), headers=bearer(token), timeout=10).json()["access_token"] == renewed.json()["access_token"]


def refresh_while_postgres_is_down(instances, auth_server, postgres, provider_delay, down):
    """`POST /refresh` whose answer from the provider takes `provider_delay` s, with PostgreSQL
    stopped (as by a crash) for `down` s from the moment the provider has it: answered 200 once the
    database is back, with the rotated tokens saved — every instance serves them, and the session
    refreshes again at the provider (its latest refresh token was kept)."""
    brokers, apps, _ = instances
    apps[0].login("alice")
    token = apps[0].session_token
    before = requests.get(brokers[0].url("/token"), headers=bearer(token), timeout=10).json()["access_token"]
    auth_server.reset_stats()
    auth_server.inject_fault("token", delay=provider_delay, count=1)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        asked = time.monotonic()
        pending = pool.submit(requests.post, brokers[0].url("/refresh"), headers=bearer(token), timeout=down + 75)
        assert wait_for(lambda: auth_server.stats().get("refresh_token") == 1, 3), "the provider has the refresh"
        postgres.stop(mode="immediate")
        try:
            time.sleep(down)
        finally:
            postgres.restart()
        answer = pending.result()
    assert answer.status_code == 200, answer.text
    assert time.monotonic() - asked > down, "answered after the database came back"
    refreshed = answer.json()["access_token"]
    assert refreshed != before
    assert wait_for(lambda: all(requests.get(b.url("/readyz"), timeout=10).status_code == 200 for b in brokers), 20)
    assert requests.get(brokers[2].url("/token"), headers=bearer(token), timeout=10).json()["access_token"] == refreshed
    renewed = requests.post(brokers[1].url("/refresh"), headers=bearer(token), timeout=30)
    assert renewed.status_code == 200, f"the session lost its refresh token: {renewed.text}"


@pytest.mark.instance_env({"BROKER_MIN_REFRESH_INTERVAL_SECONDS": "0"})
def test_a_refresh_whose_tokens_cannot_be_saved_yet_keeps_trying_while_its_lease_holds(instances, auth_server, postgres):
    """The provider takes 3 s to rotate the refresh token, and PostgreSQL stops meanwhile for
    6 s — longer than an ordinary update keeps trying (3 s). The refresh holds the session's lease
    (15 s with the default upstream timeout: no other instance refreshes the session until it runs
    out), so its write keeps trying until the database is back: the rotated tokens are saved and
    answered, and the session refreshes again everywhere. Given up sooner, the provider's only
    working refresh token would be lost, and with it the session (this provider ends the grant when
    an old one is replayed)."""
    refresh_while_postgres_is_down(instances, auth_server, postgres, provider_delay=3.0, down=6)


@pytest.mark.instance_env({"BROKER_MIN_REFRESH_INTERVAL_SECONDS": "0", "BROKER_UPSTREAM_TIMEOUT_SECONDS": "5"})
def test_a_refresh_whose_lease_runs_out_while_the_database_is_down_still_saves_its_tokens(instances, auth_server, postgres):
    """The same with a shorter lease (10 s: a 5 s upstream timeout) and PostgreSQL down for 13 s
    from the moment the provider has the refresh — a failover outlasts the lease. The rotated tokens
    are only in the refreshing instance's memory; it keeps offering them to the database past the
    lease (no other instance took one meanwhile), so they are saved once it is back, and the
    session lives on. Given up at the lease's end, the client would get a 503 and then lose the
    session to the provider's reuse detection."""
    refresh_while_postgres_is_down(instances, auth_server, postgres, provider_delay=1.0, down=13)


@pytest.mark.instance_env({"BROKER_REFRESH_REQUESTS_PER_MINUTE": "0", "BROKER_LOGIN_REQUESTS_PER_MINUTE": "0",
                            "BROKER_TOKEN_REQUESTS_PER_MINUTE": "0", "BROKER_MIN_REFRESH_INTERVAL_SECONDS": "0",
                            "BROKER_MAX_CONNECTIONS_PER_IP": "1024"})
def test_postgres_restarted_under_load_loses_nothing_acknowledged(instances, auth_server, postgres):
    """Four clients sign in, refresh and read tokens on all three instances while PostgreSQL is
    stopped as by a crash (`-m immediate`) and started again. A request that overlaps the outage
    answers 200 or 503 (a login: 503, or a refusal in the browser); before and after, everything
    is 200; afterwards every session a client was told of works on every instance — with the
    refresh token the provider rotated last, which a refresh at the provider proves."""
    brokers, apps, _ = instances
    apps[0].login("alice")
    probe = apps[0].session_token  # refreshed by nobody but the probe during the outage
    sessions: set[str] = set()  # session tokens a client was told of
    lock, stop = threading.Lock(), threading.Event()
    epoch = [0]  # 0 before the outage, 1 during, 2 after
    outcomes = {"steady": collections.Counter(), "outage": collections.Counter()}
    odd = []  # answers other than 200 and 503, with their error, for a failure's report
    began = time.monotonic()

    def worker(seed):
        rng = random.Random(seed)
        browser = Browser(allowed_hosts=[auth_server.host] + [broker.host for broker in brokers])
        while not stop.is_set():
            broker = rng.choice(brokers)
            with lock:
                known = list(sessions)
            started = epoch[0]
            try:
                if not known or rng.random() < 0.15:
                    body = App(broker, browser).login("alice")
                    outcome, token = "login 200", body["session_token"]
                else:
                    token = rng.choice(known)
                    answer = (requests.post(broker.url("/refresh"), headers=bearer(token), timeout=30) if rng.random() < 0.5
                              else requests.get(broker.url("/token"), headers=bearer(token), timeout=30))
                    outcome = f"{answer.request.method} {answer.status_code}"
                    if answer.status_code not in (200, 503):
                        odd.append(f"{time.monotonic() - began:.2f}s epoch {epoch[0]} broker {brokers.index(broker)} {outcome} "
                                   f"session {hashlib.sha256(token.encode()).hexdigest()[:12]}: {answer.text}")
            except BrowserError:
                outcome = "login refused in the browser"
            except AssertionError as failure:  # App.login: no code, or its exchange was not a 200
                outcome = "login temporarily_unavailable" if "temporarily_unavailable" in str(failure) else f"login failed: {failure}"
            except requests.RequestException as failure:
                outcome = f"failed: {type(failure).__name__}"
            phase = "outage" if started <= 1 <= epoch[0] else "steady"
            with lock:
                outcomes[phase][outcome] += 1
                if outcome == "login 200":
                    sessions.add(token)

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    try:
        time.sleep(3)
        epoch[0] = 1
        postgres.stop(mode="immediate")
        phases = [f"stopped {time.monotonic() - began:.2f}s"]
        # The database comes back after a second whatever the probe does: a probe that waited
        # on a refresh under way would otherwise keep it down past the refresh's lease.
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            probing = pool.submit(requests.post, brokers[0].url("/refresh"), headers=bearer(probe), timeout=30)
            time.sleep(1)
            postgres.restart()
            phases.append(f"started {time.monotonic() - began:.2f}s")
            refused = probing.result()
        assert wait_for(lambda: all(requests.get(b.url("/readyz"), timeout=10).status_code == 200 for b in brokers), 20)
        phases.append(f"ready {time.monotonic() - began:.2f}s")
        epoch[0] = 2
        time.sleep(3)
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)
    print(f"\noutage under load: {outcomes}, {len(sessions)} sessions; PostgreSQL {', '.join(phases)}")
    # Shown when the test fails: what the odd answers said, and what the brokers warned of.
    print("\n".join(odd))
    for n, broker in enumerate(brokers):
        print(f"broker {n}:\n" + "\n".join(line for line in broker.lines if '"level":"info"' not in line and '"level":"debug"' not in line))
    steady, outage = outcomes["steady"], outcomes["outage"]
    assert set(steady) <= {"login 200", "POST 200", "GET 200"}, steady
    assert steady["POST 200"] > 0 and steady["login 200"] > 0
    # A login's 503 at /authorize reaches the scripted browser, which gives up; one whose code
    # could not be stored comes back to the app as temporarily_unavailable, or its code exchange
    # is a 503.
    assert set(outage) <= {"login 200", "POST 200", "GET 200", "POST 503", "GET 503", "login refused in the browser",
                           "login temporarily_unavailable"}, outage
    assert refused.status_code == 503 and refused.headers.get("Retry-After"), f"during the outage: {refused.status_code}"
    for token in sessions:
        answers = [requests.get(b.url("/token"), headers=bearer(token), timeout=10) for b in brokers]
        assert all(answer.status_code == 200 for answer in answers), [(answer.status_code, answer.text) for answer in answers]
        assert len({answer.json()["access_token"] for answer in answers}) == 1, "every instance answers the same access token"
        renewed = requests.post(brokers[0].url("/refresh"), headers=bearer(token), timeout=30)
        assert renewed.status_code == 200, f"a session lost its refresh token: {renewed.text}"


def postgres_env(postgres, url):
    return {"BROKER_STATE_BACKEND": "postgres", "BROKER_POSTGRES_URL": url, "BROKER_POSTGRES_PASSWORD": postgres.password,
            "BROKER_STATE_KEY": STATE_KEY}


def run_broker(*args, env):
    child = {k: v for k, v in os.environ.items() if not k.startswith("BROKER_")}
    child.update(env)
    return subprocess.run([broker_binary(), *args], env=child, capture_output=True, text=True, timeout=60)


def test_state_migrate_applies_the_schema_once_and_a_newer_schema_is_refused(postgres, tmp_path):
    url = postgres.create_database()
    env = postgres_env(postgres, url)
    first = run_broker("state", "migrate", env=env)
    assert first.returncode == 0 and "applied 1, 2, 3" in first.stdout, first.stdout + first.stderr
    again = run_broker("state", "migrate", env=env)
    assert again.returncode == 0 and "up to date" in again.stdout, again.stdout + again.stderr
    database = url.rsplit("/", 1)[1]
    latest = int(postgres.sql("SELECT max(version) FROM broker_schema", database=database).strip())
    # A newer version that declares this broker may run on it (additive: a rolling upgrade's
    # older instances, a rollback) is used as it is; one that does not is refused.
    postgres.sql(f"INSERT INTO broker_schema (version, oldest_reader) VALUES ({latest + 1}, {latest})", database=database)
    beside = run_broker("state", "migrate", env=env)
    assert beside.returncode == 0 and f"schema version {latest + 1}, newer than this broker's ({latest}), which may run on it" in beside.stdout, \
        beside.stdout + beside.stderr
    postgres.sql("INSERT INTO broker_schema (version) VALUES (99)", database=database)
    refused = run_broker("state", "migrate", env=env)
    assert refused.returncode == 1 and "version 99, newer than this broker knows" in refused.stderr, refused.stderr
    config = tmp_path / "broker.yaml"
    config.write_text("providers: {}\napps: {}\n")
    serve = run_broker("serve", "--config", str(config), "--listen", "127.0.0.1:0", env=env)
    # No retry can mend it: exit 2, which the systemd unit does not restart.
    assert serve.returncode == 2 and "newer than this broker knows" in serve.stdout + serve.stderr
    assert postgres.password not in serve.stdout + serve.stderr


def directory_bytes(directory):
    """Every file's name and content under `directory`."""
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir()) if path.is_file()}


def test_state_import_moves_an_embedded_deployment_to_postgres(postgres, auth_server, browser, tmp_path):
    port = free_port()
    client_id, secret = auth_server.register_client([f"http://127.0.0.1:{port}/callback"])
    config = broker_config(provider_config(auth_server, client_id))
    state = tmp_path / "state"
    embedded = BrokerProcess(config, env={"DOT_CLIENT_SECRET": secret}, port=port, state_dir=str(state))
    app = App(embedded, browser)
    app.login("alice")
    access = app.call("GET", "/token").json()["access_token"]
    url = postgres.create_database()
    busy = run_broker("state", "import", "--from", str(state), env=postgres_env(postgres, url))
    assert busy.returncode == 1 and f"is using {state}: stop it first" in busy.stderr, busy.stdout + busy.stderr
    assert embedded.stop() == 0
    before = directory_bytes(state)
    imported = run_broker("state", "import", "--from", str(state), env=postgres_env(postgres, url))
    assert imported.returncode == 0 and "imported 1 sessions" in imported.stdout, imported.stdout + imported.stderr
    again = run_broker("state", "import", "--from", str(state), env=postgres_env(postgres, url))
    assert again.returncode == 0 and "imported 0 sessions" in again.stdout and "1 were there already" in again.stdout
    # The source is read, never written: the old broker can still roll back onto it.
    assert directory_bytes(state) == before
    for wrong in (tmp_path / "no-such-state", tmp_path / "empty"):
        if wrong.name == "empty":
            wrong.mkdir()
        refused = run_broker("state", "import", "--from", str(wrong), env=postgres_env(postgres, url))
        assert refused.returncode == 1 and "nothing to import" in refused.stderr, refused.stdout + refused.stderr
    assert not (tmp_path / "no-such-state").exists() and not any((tmp_path / "empty").iterdir())
    database = url.rsplit("/", 1)[1]
    assert access not in postgres.sql("SELECT encode(sealed, 'escape') FROM broker_sessions", database=database), "sealed rows"
    shared = BrokerProcess(config, env={"DOT_CLIENT_SECRET": secret, **postgres_env(postgres, url)}, port=port)
    try:
        answer = requests.get(shared.url("/token"), headers=bearer(app.session_token), timeout=10)
        assert answer.status_code == 200 and answer.json()["access_token"] == access, answer.text
    finally:
        shared.stop()
    inspected = run_broker("state", "inspect", env=postgres_env(postgres, url))
    assert inspected.returncode == 0, inspected.stdout + inspected.stderr
    assert "sessions: 1 live" in inspected.stdout and "provider dot, app web: 1" in inspected.stdout, inspected.stdout
    assert "(current)" in inspected.stdout and "schema version 6" in inspected.stdout, inspected.stdout
    assert "device codes: 0 waiting for their user (0 rows)" in inspected.stdout, inspected.stdout
    assert access not in inspected.stdout and app.session_token not in inspected.stdout
    other_key = subprocess.run([broker_binary(), "gen-key"], capture_output=True, text=True, check=True).stdout.strip()
    unopened = run_broker("state", "inspect", env=postgres_env(postgres, url) | {"BROKER_STATE_KEY": other_key})
    assert unopened.returncode == 1 and "NOT CONFIGURED" in unopened.stderr, unopened.stdout + unopened.stderr


def test_a_tls_only_database_is_reached_as_sslmode_says(tmp_path):
    """PostgreSQL accepting TLS connections only: sslmode=disable is refused by the server,
    verify-full against its certificate works (a broker serves and is ready), and verify-full
    against another certificate is refused by the broker — each with the reason, never the
    password."""
    other = tmp_path / "other.crt"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(tmp_path / "other.key"),
                    "-out", str(other)], check=True, capture_output=True)
    with PostgresCluster(tls=True) as cluster:
        url = cluster.create_database()
        plain = run_broker("state", "migrate", env=postgres_env(cluster, url + "?sslmode=disable"))
        assert plain.returncode == 1 and "no encryption" in plain.stderr, plain.stderr
        verified = url + f"?sslmode=verify-full&sslrootcert={cluster.certificate}"
        migrated = run_broker("state", "migrate", env=postgres_env(cluster, verified))
        assert migrated.returncode == 0 and "applied 1, 2, 3" in migrated.stdout, migrated.stdout + migrated.stderr
        wrong = run_broker("state", "migrate", env=postgres_env(cluster, url + f"?sslmode=verify-full&sslrootcert={other}"))
        assert wrong.returncode == 1 and "certificate verify failed" in wrong.stderr, wrong.stderr
        for result in (plain, migrated, wrong):
            assert cluster.password not in result.stdout + result.stderr
        broker = BrokerProcess(broker_config(""), env={k: v for k, v in postgres_env(cluster, verified).items() if k != "BROKER_STATE_KEY"})
        try:
            # Ready once its notification connection is up too (TLS as well).
            assert wait_for(lambda: requests.get(broker.url("/readyz"), timeout=10).status_code == 200, 10)
        finally:
            broker.stop()
