"""/readyz reports a state that cannot be written: the broker runs with a file-size limit
(RLIMIT_FSIZE, SIGXFSZ ignored), so that its journal meets EFBIG as it would a full disk."""
import resource
import signal
from urllib.parse import urlencode

import requests

from support.broker import BrokerProcess
from support.browser import query_params
from test_broker_development_mode import pkce


def small_disk():
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))


def dev_login(broker) -> str:
    """One sign-in through the development provider: "saved", or "unsaved" when the broker says it
    could not save the handoff code (a server_error back to the app) or the session (503)."""
    verifier, challenge = pkce()
    query = urlencode({"provider": "dev", "app": "demo", "redirect_uri": "http://127.0.0.1/callback",
                       "code_challenge": challenge, "code_challenge_method": "S256"})
    sign_in = requests.get(broker.url("/authorize?" + query), allow_redirects=False, timeout=10).headers["Location"]
    callback = requests.post(sign_in, data={"user": "alice", "decision": "allow"}, allow_redirects=False, timeout=10)
    back = query_params(requests.get(callback.headers["Location"], allow_redirects=False, timeout=10).headers["Location"])
    if back.get("error") == "server_error":
        return "unsaved"
    answer = requests.post(broker.url("/token"), data={
        "grant_type": "authorization_code", "code": back["code"], "code_verifier": verifier,
        "redirect_uri": "http://127.0.0.1/callback", "app": "demo"}, timeout=10)
    return {200: "saved", 503: "unsaved"}.get(answer.status_code, answer.text)


def test_readyz_fails_while_the_journal_cannot_be_written():
    broker = BrokerProcess("", args=["--dev"], preexec_fn=small_disk)
    try:
        ready = requests.get(broker.url("/readyz"), timeout=10)
        assert ready.status_code == 200 and ready.json()["checks"]["state"] == {"status": "pass"}
        outcomes = [dev_login(broker) for _ in range(12)]
        assert outcomes[0] == "saved" and "unsaved" in outcomes, outcomes
        assert set(outcomes) == {"saved", "unsaved"}, outcomes
        ready = requests.get(broker.url("/readyz"), timeout=10)
        assert ready.status_code == 503
        state = ready.json()["checks"]["state"]
        assert state["status"] == "fail" and "could not be written" in state["detail"], state
        assert ready.json()["status"] == "not_ready"
    finally:
        broker.stop()
