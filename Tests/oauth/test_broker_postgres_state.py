"""The state commands against PostgreSQL (state.backend: postgres): `state migrate` applies the
schema once and refuses a newer one; `state import` moves an embedded deployment over and
`state inspect` reads it; a TLS-only database is reached as `sslmode` says.
"""

import os
import subprocess

import requests

from support.broker import STATE_KEY, App, BrokerProcess, bearer, broker_binary, broker_config, free_port, provider_config, wait_for
from support.postgres import PostgresCluster


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
    # A queued revocation is a sealed row too: the old key is not to be removed while one waits
    # under it (its next attempt seals it again under the current key).
    postgres.sql("INSERT INTO broker_revocations (id, key_id, sealed, provider, due_at) "
                 "VALUES ('\\x01', 12345, '\\x00', 'dot', extract(epoch from now()) + 3600)", database=database)
    waiting = run_broker("state", "inspect", env=postgres_env(postgres, url))
    assert waiting.returncode == 1 and "rows sealed under key" in waiting.stderr and "NOT CONFIGURED" in waiting.stderr, \
        waiting.stdout + waiting.stderr


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
