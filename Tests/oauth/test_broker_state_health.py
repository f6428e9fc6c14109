"""/readyz reports a state that cannot be written: the broker runs with a file-size limit
(RLIMIT_FSIZE, SIGXFSZ ignored), so that its journal meets EFBIG as it would a full disk."""
import resource
import signal

import requests

from support.broker import BrokerProcess
from support.dev_login import dev_login


def small_disk():
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))


def outcome(broker) -> str:
    """One sign-in: "saved", or "unsaved" when the broker says it could not save the handoff code
    (temporarily_unavailable back to the app) or the session (503)."""
    answer = dev_login(broker)
    if answer is None:
        return "unsaved"
    return {200: "saved", 503: "unsaved"}.get(answer.status_code, answer.text)


def test_readyz_fails_while_the_journal_cannot_be_written():
    broker = BrokerProcess("", args=["--dev"], preexec_fn=small_disk)
    try:
        ready = requests.get(broker.url("/readyz"), timeout=10)
        assert ready.status_code == 200 and ready.json()["checks"]["state"] == {"status": "pass"}
        outcomes = [outcome(broker) for _ in range(12)]
        assert outcomes[0] == "saved" and "unsaved" in outcomes, outcomes
        assert set(outcomes) == {"saved", "unsaved"}, outcomes
        ready = requests.get(broker.url("/readyz"), timeout=10)
        assert ready.status_code == 503
        state = ready.json()["checks"]["state"]
        assert state["status"] == "fail" and "could not be written" in state["detail"], state
        assert ready.json()["status"] == "not_ready"
    finally:
        broker.stop()
