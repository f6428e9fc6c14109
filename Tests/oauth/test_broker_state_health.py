"""/readyz reports a state that cannot be written: the broker runs with a file-size limit
(RLIMIT_FSIZE, SIGXFSZ ignored), so that its journal meets EFBIG as it would a full disk."""
import resource
import signal
import subprocess

import requests

from support.broker import BrokerProcess, wait_for
from support.dev_login import dev_login


def small_disk():
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    # The soft limit alone: the test raises it again, as an operator frees the disk.
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.RLIM_INFINITY))


def outcome(broker) -> str:
    """One sign-in: "saved", or "unsaved" when the broker says it could not save the handoff code
    (temporarily_unavailable back to the app) or the session (503)."""
    answer = dev_login(broker)
    if answer is None:
        return "unsaved"
    return {200: "saved", 503: "unsaved"}.get(answer.status_code, answer.text)


def write_failures(broker) -> dict[str, float]:
    """`broker_state_write_failures_total` by file, from /metrics."""
    counts = {}
    for line in requests.get(broker.url("/metrics"), timeout=10).text.splitlines():
        if line.startswith('broker_state_write_failures_total{file="'):
            labels, value = line.rsplit(" ", 1)
            counts[labels.split('"')[1]] = float(value)
    return counts


def test_readyz_fails_while_the_journal_cannot_be_written():
    """This instance's own disk: it is not ready while its journal cannot be written, and ready
    again once a snapshot has started a new journal — no client's write needed."""
    broker = BrokerProcess("", args=["--dev"], preexec_fn=small_disk, env={"BROKER_SNAPSHOT_INTERVAL_SECONDS": "1"})
    try:
        ready = requests.get(broker.url("/readyz"), timeout=10)
        assert ready.status_code == 200 and ready.json()["checks"]["state"] == {"status": "pass"}
        assert write_failures(broker) == {"journal": 0, "snapshot": 0}
        # Sign-ins fill the journal; a snapshot then starts a new one, and sign-ins are saved
        # again, until the state itself outgrows the limit: from then on every snapshot fails
        # too, and the instance stays not ready. Sign in until that is so.
        outcomes, failing = [], []

        def stuck_failing() -> bool:
            outcomes.append(outcome(broker))
            ready = requests.get(broker.url("/readyz"), timeout=10)
            if ready.status_code != 503 or not all(count > 0 for count in write_failures(broker).values()):
                return False
            failing.append(ready)
            return True

        assert wait_for(stuck_failing, 120), (outcomes, write_failures(broker))
        assert outcomes[0] == "saved" and set(outcomes) == {"saved", "unsaved"}, outcomes
        state = failing[0].json()["checks"]["state"]
        assert state["status"] == "fail" and "could not be written" in state["detail"], state
        assert failing[0].json()["status"] == "not_ready"
        # The disk is freed (the process may write files of any size again): the next snapshot
        # and its new journal are written, and the broker is ready — no client's write needed.
        subprocess.run(["prlimit", f"--pid={broker.process.pid}", "--fsize=unlimited"], check=True)
        assert wait_for(lambda: requests.get(broker.url("/readyz"), timeout=10).status_code == 200, 30)
        # Heard: as each failure began and as it mended (the journal's new file at each snapshot
        # is a write that works, until a frame outgrows the limit again: it may flap meanwhile).
        messages = [line["msg"] for line in broker.json_lines() if line["msg"].startswith("the state directory's")]
        for part in ("journal", "snapshot"):
            mine = [message for message in messages if part in message]
            assert mine[0] == f"the state directory's {part} is failing" and mine[-1] == f"the state directory's {part} works again", messages
    finally:
        broker.stop()
