"""Three broker processes on one PostgreSQL database (state.backend: postgres), against the real
authorization server: any instance serves any step of a login and any request on a session;
one refresh for a crowd spread over all three; a revocation on one reaches the others. (An
instance killed during refreshes, and PostgreSQL's outages: test_broker_several_instances_outages.py;
the state commands against PostgreSQL: test_broker_postgres_state.py.)

The three share one public URL (as behind a balancer): the provider sends the browser back to
the second instance's /callback, whichever instance began the login.
"""

import concurrent.futures
import subprocess
import time
from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest
import requests

from support.broker import STATE_KEY, App, bearer, broker_binary, free_port, wait_for
from support.device import DeviceClient, DevicePerson
from support.pkce import make_pkce


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
