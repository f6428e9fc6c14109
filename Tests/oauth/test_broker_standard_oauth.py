"""The broker as an ordinary OAuth 2.0 authorization server for its apps (docs/api.md, "Using a
standard OAuth client"): clients nobody here wrote — authlib's OAuth2Session and
requests-oauthlib's — configured from the RFC 8414 metadata document alone (given the issuer URL
and the client id), run the whole flow against the broker in front of the real authorization
server: authorization URL with PKCE, sign-in in the scripted browser, code exchange, an API call
at the server's userinfo, an automatic refresh once the token expired, revocation. Then the
RFC 6749 errors for what a client can get wrong."""

import time
from urllib.parse import urlsplit

import pytest
import requests
from authlib.common.security import generate_token
from authlib.integrations.base_client.errors import OAuthError
from authlib.integrations.requests_client import OAuth2Session as AuthlibSession
from oauthlib.oauth2.rfc6749.errors import InvalidGrantError
from requests_oauthlib import OAuth2Session as OAuthlibSession

from support.browser import query_params

REDIRECT_URI = "http://127.0.0.1:9/cb"


def metadata(issuer: str) -> dict:
    """RFC 8414 §3: the well-known segment between the host and the issuer's path."""
    parts = urlsplit(issuer)
    answer = requests.get(f"{parts.scheme}://{parts.netloc}/.well-known/oauth-authorization-server{parts.path}", timeout=10)
    assert answer.status_code == 200 and answer.headers["Content-Type"].startswith("application/json")
    return answer.json()


@pytest.fixture
def issuer(broker_factory, auth_server):
    """A broker in front of the real server, whose tokens live 3 s (so that they expire during a
    test); the broker's issuer URL for provider `dot`."""
    auth_server.set_access_token_lifetime(3)
    broker, _, _, _ = broker_factory()
    return broker.url("/providers/dot")


def test_the_metadata_document_has_what_rfc_8414_requires(issuer):
    document = metadata(issuer)
    assert document["issuer"] == issuer
    parts = urlsplit(document["issuer"])
    assert parts.scheme in ("https", "http") and not parts.query and not parts.fragment
    for endpoint in ("authorization_endpoint", "token_endpoint", "revocation_endpoint"):
        assert urlsplit(document[endpoint]).netloc == parts.netloc
    assert document["response_types_supported"] == ["code"]
    assert document["code_challenge_methods_supported"] == ["S256"]
    assert set(document["grant_types_supported"]) == {"authorization_code", "refresh_token", "urn:ietf:params:oauth:grant-type:device_code"}
    assert document["device_authorization_endpoint"] == issuer + "/device_authorization"
    assert document["token_endpoint_auth_methods_supported"] == ["none"]
    assert document["authorization_response_iss_parameter_supported"] is True
    assert set(document["scopes_supported"]) == {"openid", "profile", "email", "read"}


def test_authlib_signs_in_calls_the_api_refreshes_and_revokes(issuer, browser, auth_server):
    document = metadata(issuer)
    updates = []
    client = AuthlibSession(
        client_id="web", scope="openid profile", redirect_uri=REDIRECT_URI,
        code_challenge_method=document["code_challenge_methods_supported"][0],
        token_endpoint_auth_method=document["token_endpoint_auth_methods_supported"][0],
        token_endpoint=document["token_endpoint"],
        update_token=lambda token, refresh_token=None, access_token=None: updates.append(token),
    )
    verifier = generate_token(48)
    url, state = client.create_authorization_url(document["authorization_endpoint"], code_verifier=verifier)
    location = browser.authorize(url, "alice", "alice-password")
    assert query_params(location)["iss"] == document["issuer"], "RFC 9207"
    token = client.fetch_token(document["token_endpoint"], authorization_response=location, code_verifier=verifier)
    assert token["token_type"].lower() == "bearer" and token["refresh_token"] and token["expires_in"] <= 3
    first = token["access_token"]
    assert requests.get(auth_server.userinfo_endpoint, headers={"Authorization": f"Bearer {first}"}, timeout=10).status_code == 200

    # The token is expired for authlib (3 s, within its 60 s leeway): the next call refreshes it
    # through grant_type=refresh_token, and the new token works at the server.
    answer = client.get(auth_server.userinfo_endpoint, timeout=10)
    assert answer.status_code == 200 and answer.json()["sub"]
    assert updates and updates[-1]["access_token"] != first
    assert updates[-1]["refresh_token"] == token["refresh_token"], "the refresh token stays the app's session"

    client.revoke_token(document["revocation_endpoint"], token=token["refresh_token"], token_type_hint="refresh_token")
    with pytest.raises(OAuthError) as refused:
        client.refresh_token(document["token_endpoint"], refresh_token=token["refresh_token"])
    assert refused.value.error == "invalid_grant"


def test_requests_oauthlib_signs_in_calls_the_api_refreshes_and_revokes(issuer, browser, auth_server, monkeypatch):
    monkeypatch.setenv("OAUTHLIB_INSECURE_TRANSPORT", "1")  # oauthlib's switch for plain HTTP on loopback
    document = metadata(issuer)
    updates = []
    session = OAuthlibSession(
        # oauthlib refuses an answer whose scope differs from the request's: ask for the
        # provider's scopes, which the broker always requests.
        "web", redirect_uri=REDIRECT_URI, scope=document["scopes_supported"], pkce="S256",
        auto_refresh_url=document["token_endpoint"], auto_refresh_kwargs={"client_id": "web"}, token_updater=updates.append,
    )
    url, state = session.authorization_url(document["authorization_endpoint"])
    location = browser.authorize(url, "alice", "alice-password")
    assert query_params(location)["iss"] == document["issuer"] and query_params(location)["state"] == state
    token = session.fetch_token(document["token_endpoint"], authorization_response=location)
    assert session.get(auth_server.userinfo_endpoint, timeout=10).status_code == 200

    wait_until_expired(token)
    answer = session.get(auth_server.userinfo_endpoint, timeout=10)
    assert answer.status_code == 200
    assert updates and updates[-1]["access_token"] != token["access_token"]

    revoked = requests.post(document["revocation_endpoint"], timeout=10,
                            data={"token": token["refresh_token"], "token_type_hint": "refresh_token", "client_id": "web"})
    assert revoked.status_code == 200
    with pytest.raises(InvalidGrantError):
        session.refresh_token(document["token_endpoint"], client_id="web")


def wait_until_expired(token: dict) -> None:
    """Sleeps until requests-oauthlib sees `token` as expired (its `expires_at`)."""
    time.sleep(max(0.0, token["expires_at"] - time.time()) + 0.5)


def authorize(issuer: str, **params) -> requests.Response:
    defaults = {"client_id": "web", "redirect_uri": REDIRECT_URI, "response_type": "code", "state": "s1",
                "code_challenge": "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM", "code_challenge_method": "S256"}
    query = {k: v for k, v in (defaults | params).items() if v is not None}
    return requests.get(metadata(issuer)["authorization_endpoint"], params=query, allow_redirects=False, timeout=10)


def test_a_client_or_redirect_uri_it_does_not_know_is_answered_here_never_redirected(issuer):
    for params in ({"client_id": "nobody"}, {"redirect_uri": "https://attacker.example/cb"}, {"client_id": None}):
        answer = authorize(issuer, **params)
        assert answer.status_code == 400 and "Location" not in answer.headers, params
        assert answer.json()["error"] == "invalid_request"


@pytest.mark.parametrize("params,error", [
    ({"code_challenge": None}, "invalid_request"),
    ({"code_challenge_method": "plain"}, "invalid_request"),
    ({"code_challenge_method": None}, "invalid_request"),
    ({"response_type": "token"}, "unsupported_response_type"),
    ({"response_type": None}, "invalid_request"),
])
def test_the_other_authorization_errors_go_back_to_the_app_with_state_and_iss(issuer, params, error):
    answer = authorize(issuer, **params)
    assert answer.status_code == 302, answer.text
    back = query_params(answer.headers["Location"])
    assert answer.headers["Location"].startswith(REDIRECT_URI)
    assert back["error"] == error and back["state"] == "s1" and back["iss"] == issuer


def test_token_endpoint_errors_are_rfc_6749_section_5_2(issuer):
    token_endpoint = metadata(issuer)["token_endpoint"]

    def post(**form):
        return requests.post(token_endpoint, data=form, timeout=10)

    cases = [
        (post(grant_type="password", client_id="web"), 400, "unsupported_grant_type"),
        (post(grant_type="authorization_code", client_id="web", code="tbh_unknown", code_verifier="v" * 43,
              redirect_uri=REDIRECT_URI), 400, "invalid_grant"),
        (post(grant_type="refresh_token", client_id="web", refresh_token="tbs_" + "x" * 43), 400, "invalid_grant"),
        (post(grant_type="refresh_token", client_id="nobody", refresh_token="tbs_" + "x" * 43), 401, "invalid_client"),
        # A public client's refresh token names its app: without client_id it is looked up.
        (post(grant_type="refresh_token", refresh_token="tbs_" + "x" * 43), 400, "invalid_grant"),
        (post(grant_type="authorization_code", code="tbh_unknown", code_verifier="v" * 43, redirect_uri=REDIRECT_URI), 400, "invalid_request"),
        (requests.post(token_endpoint, data={"grant_type": "refresh_token", "refresh_token": "x"}, auth=("web", "a-secret"), timeout=10),
         401, "invalid_client"),
        # A secret is refused wherever it is sent: the broker's clients are public.
        (post(grant_type="refresh_token", refresh_token="x", client_id="web", client_secret="a-secret"), 401, "invalid_client"),
        (requests.post(metadata(issuer)["revocation_endpoint"], data={"token": "x", "client_id": "web", "client_secret": "a-secret"},
                       timeout=10), 401, "invalid_client"),
        # An empty one is none (some libraries send it so for a public client).
        (post(grant_type="refresh_token", refresh_token="tbs_" + "x" * 43, client_id="web", client_secret=""), 400, "invalid_grant"),
    ]
    for answer, status, error in cases:
        assert answer.status_code == status and answer.json()["error"] == error, answer.text
        assert answer.headers["Cache-Control"] == "no-store"
        if status == 401:
            assert answer.headers["WWW-Authenticate"].startswith("Basic")


def test_revoking_another_clients_token_changes_nothing_and_says_nothing(broker_factory):
    """RFC 7009 §2.2: the answer is 200 whether the token is unknown or another client's, so a
    caller cannot learn that a token exists; another client's token is not revoked."""
    broker, app, _, _ = broker_factory(config_extra="  other:\n    redirect_uris: [http://127.0.0.1/other]\n")
    app.login()
    revoke = metadata(broker.url("/providers/dot"))["revocation_endpoint"]
    unknown = requests.post(revoke, data={"token": "tbs_" + "x" * 43, "client_id": "other"}, timeout=10)
    others = requests.post(revoke, data={"token": app.session_token, "client_id": "other"}, timeout=10)
    assert unknown.status_code == others.status_code == 200 and unknown.content == others.content == b""
    assert app.call("GET", "/token").status_code == 200, "another client's token stays"
    own = requests.post(revoke, data={"token": app.session_token, "client_id": "web"}, timeout=10)
    assert own.status_code == 200
    assert app.call("GET", "/token").status_code == 401


def test_revoking_without_client_id_ends_the_session_its_token_names(broker_factory):
    """As at the refresh grant, the token names its client: RFC 7009 clients that send only the
    token (requests-oauthlib's revoke has no client authentication of its own) revoke it."""
    broker, app, _, _ = broker_factory()
    app.login()
    revoke = metadata(broker.url("/providers/dot"))["revocation_endpoint"]
    answer = requests.post(revoke, data={"token": app.session_token, "token_type_hint": "refresh_token"}, timeout=10)
    assert answer.status_code == 200 and answer.content == b""
    assert app.call("GET", "/token").status_code == 401


def test_a_device_signs_in_from_the_metadata_alone_and_refreshes_with_its_refresh_token(broker_factory, auth_server, monkeypatch):
    """RFC 8628 as a standard client does it, from the issuer's metadata: the device
    authorization endpoint (no broker-specific parameter: the provider is the issuer's), the
    person at /device in a browser, polls with oauthlib's DeviceClient at the token endpoint, and
    a refresh_token — the session token — that requests-oauthlib refreshes with its defaults."""
    from oauthlib.oauth2 import DeviceClient
    from support.device import DevicePerson

    monkeypatch.setenv("OAUTHLIB_INSECURE_TRANSPORT", "1")  # oauthlib's switch for plain HTTP on loopback
    auth_server.set_access_token_lifetime(3)
    broker, _, _, _ = broker_factory(config_extra="  tv:\n    device_flow: true\nsessions:\n  device_poll_interval_seconds: 1\n")
    document = metadata(broker.url("/providers/dot"))
    assert document["device_authorization_endpoint"] == broker.url("/providers/dot/device_authorization")
    assert "urn:ietf:params:oauth:grant-type:device_code" in document["grant_types_supported"]

    client = DeviceClient("tv")
    started = requests.post(document["device_authorization_endpoint"], data={"client_id": "tv", "scope": "read"}, timeout=10)
    assert started.status_code == 200, started.text
    codes = started.json()
    assert codes["verification_uri"] == broker.url("/device")
    body = client.prepare_request_body(device_code=codes["device_code"], include_client_id=True)
    poll = lambda: requests.post(document["token_endpoint"], data=body, timeout=10,  # noqa: E731
                                 headers={"Content-Type": "application/x-www-form-urlencoded"})
    first = poll()
    assert first.status_code == 400 and first.json()["error"] == "authorization_pending"

    person = DevicePerson(broker, auth_server)
    try:
        assert "Device signed in" in person.approve(codes["user_code"]).text
    finally:
        person.close()
    time.sleep(codes["interval"])
    answer = poll()
    assert answer.status_code == 200, answer.text
    token = client.parse_request_body_response(answer.text)
    assert token["refresh_token"].startswith("tbs_") and "session_token" not in token and "read" in token["scope"]  # oauthlib splits it
    assert requests.get(auth_server.userinfo_endpoint, headers={"Authorization": f"Bearer {token['access_token']}"}, timeout=10).status_code == 200
    again = poll()
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant", "collected once"

    # requests-oauthlib's refresh_token() as it comes: no client_id, no HTTP Basic.
    time.sleep(max(0.0, token["expires_in"]) + 0.5)
    refreshed = OAuthlibSession("tv", token=token).refresh_token(document["token_endpoint"])
    assert refreshed["access_token"] != token["access_token"] and refreshed["refresh_token"] == token["refresh_token"]
    assert requests.get(auth_server.userinfo_endpoint, headers={"Authorization": f"Bearer {refreshed['access_token']}"}, timeout=10).status_code == 200
    # A client_id that names another app is still refused.
    other = requests.post(document["token_endpoint"], timeout=10,
                          data={"grant_type": "refresh_token", "refresh_token": token["refresh_token"], "client_id": "web"})
    assert other.status_code == 400 and other.json()["error"] == "invalid_grant"
    # An app not registered for the device flow gets no codes.
    web = requests.post(document["device_authorization_endpoint"], data={"client_id": "web"}, timeout=10)
    assert web.status_code == 400 and web.json()["error"] == "unauthorized_client"
