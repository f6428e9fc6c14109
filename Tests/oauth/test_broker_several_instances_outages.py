"""Three broker processes on one PostgreSQL database (the `instances` fixture), through outages:
an instance killed while it holds a refresh lock loses nothing; while PostgreSQL is down cached
tokens are served and changes are 503; a refresh whose tokens cannot be saved yet keeps trying
and saves them; PostgreSQL restarted under load loses nothing a client was told of. (The steps
of a login and a session's requests across the instances: test_broker_several_instances.py.)
"""

import collections
import concurrent.futures
import hashlib
import random
import signal
import threading
import time

import pytest
import requests

from support.broker import App, bearer, free_port, wait_for
from support.browser import Browser, BrowserError


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
