"""Power loss: only what was synced survives. kill -9 keeps the page cache, so it cannot show that
the broker syncs before it answers; here an LD_PRELOAD interposer (support/powerloss.c) records
each file's length at every fsync/fdatasync, and after the kill every state file is cut back to
its last synced length, as a power loss could leave it. Every session a client was answered about
must survive, and a revocation must stay revoked. The same run with the syncs dropped (the broker
as it would be without them) must lose sessions: the check can fail."""
import os
import signal
import subprocess
import tempfile
from pathlib import Path

import pytest
import requests

from support.broker import BrokerProcess
from support.dev_login import dev_login

SOURCE = Path(__file__).parent / "support" / "powerloss.c"


@pytest.fixture(scope="module")
def interposer(tmp_path_factory) -> str:
    library = tmp_path_factory.mktemp("powerloss") / "powerloss.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-o", str(library), str(SOURCE), "-ldl"], check=True)
    return str(library)


def lose_power(state_dir: str, log: str) -> None:
    synced: dict[int, int] = {}
    if os.path.exists(log):
        for line in Path(log).read_text().splitlines():
            inode, length = map(int, line.split())
            synced[inode] = length
    for name in os.listdir(state_dir):
        path = os.path.join(state_dir, name)
        os.truncate(path, synced.get(os.stat(path).st_ino, 0))


def session_alive(broker, token: str) -> bool:
    return requests.get(broker.url("/session"), headers={"Authorization": f"Bearer {token}"}, timeout=10).status_code == 200


def sign_in_kill_and_lose_power(interposer: str, drop_syncs: bool) -> tuple[list[str], list[str], bool]:
    """Five sign-ins and one revocation, then a power loss: (sessions answered, sessions alive
    after the restart, whether the revoked one came back)."""
    state_dir = tempfile.mkdtemp(prefix="broker-power-")
    log = state_dir + ".synced"
    env = {"LD_PRELOAD": interposer, "POWERLOSS_LOG": log, "POWERLOSS_DROP_SYNCS": "1" if drop_syncs else "0"}
    broker = BrokerProcess("", args=["--dev"], env=env, state_dir=state_dir)
    tokens = []
    for _ in range(5):
        answer = dev_login(broker)
        assert answer is not None and answer.status_code == 200
        tokens.append(answer.json()["session_token"])
    revoked = tokens.pop()
    assert requests.post(broker.url("/revoke"), headers={"Authorization": f"Bearer {revoked}"}, timeout=10).json()["revoked"]
    broker.process.send_signal(signal.SIGKILL)
    broker.process.wait()
    broker.stop()

    lose_power(state_dir, log)
    restarted = BrokerProcess("", args=["--dev"], state_dir=state_dir)
    try:
        alive = [token for token in tokens if session_alive(restarted, token)]
        return tokens, alive, session_alive(restarted, revoked)
    finally:
        assert restarted.stop() == 0


def test_a_power_loss_keeps_every_acknowledged_change(interposer):
    tokens, alive, revoked_back = sign_in_kill_and_lose_power(interposer, drop_syncs=False)
    assert alive == tokens
    assert not revoked_back


def test_without_its_syncs_the_broker_would_lose_acknowledged_sessions(interposer):
    tokens, alive, _ = sign_in_kill_and_lose_power(interposer, drop_syncs=True)
    assert len(alive) < len(tokens), "the power-loss simulation lost nothing although nothing was synced"
