"""Every page the broker shows a person, in a real headless browser (Debian's chromium through
chromedriver) at a phone's width (412 px) and a desktop's (1280 px): the sign-in error pages of
/callback, /authorize and the standard authorization endpoint (a browser gets a page, an API
client JSON), the device entry page and the development provider's sign-in and "sign out
everywhere". Each must carry a
viewport, apply the shared stylesheet under its Content-Security-Policy without a violation,
keep its card off the screen's edges and say what to do next. A screenshot of each is written
to PAGE_SCREENSHOTS (default .build/page-screenshots) for a person to look at."""

import json
import os
from pathlib import Path
from urllib.parse import urlencode

import pytest
import requests

from support.broker import BrokerProcess
from support.dev_login import dev_login

selenium = pytest.importorskip("selenium")
from selenium.common.exceptions import TimeoutException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.wait import WebDriverWait  # noqa: E402
from support.chrome import chrome_at_each_width, press  # noqa: E402

SCREENSHOTS = Path(os.environ.get("PAGE_SCREENSHOTS", Path(__file__).resolve().parents[2] / ".build" / "page-screenshots"))


chrome = chrome_at_each_width(SCREENSHOTS)


def look(driver, url: str, name: str, status_logged: bool = False) -> str:
    """Opens `url`, checks the page as a person sees it, saves a screenshot; the page's text."""
    driver.get(url)
    return inspect(driver, name, status_logged)


def inspect(driver, name: str, status_logged: bool = False) -> str:
    """Checks the page the browser shows as a person sees it, saves a screenshot; the page's text."""
    assert driver.find_element(By.CSS_SELECTOR, 'meta[name="viewport"]').get_attribute("content").startswith("width=device-width")
    main = driver.find_element(By.TAG_NAME, "main")
    assert main.value_of_css_property("max-width") == "448px", "the shared stylesheet applied"
    left = main.rect["x"]
    right = driver.execute_script("return document.documentElement.clientWidth") - (main.rect["x"] + main.rect["width"])
    assert left >= 12 and right >= 12, f"the card keeps off the edges ({left}, {right})"
    problems = [e["message"] for e in driver.get_log("browser")
                if e["level"] in ("SEVERE", "WARNING") and "/favicon.ico" not in e["message"]
                and not (status_logged and "the server responded with a status of" in e["message"])]
    assert not problems, problems
    driver.save_screenshot(str(SCREENSHOTS / f"{name}-{driver.width}.png"))
    return main.text


def test_the_sign_in_error_pages(chrome, broker_factory):
    """A person reads what went wrong in plain words; the API's sentence, which names parameters,
    is folded away for the app's makers."""
    broker, app, _, _ = broker_factory()
    text = look(chrome, broker.url("/callback?state=tbst_unknown&code=x"), "callback-error", status_logged=True)
    assert "Sign-in failed" in text and "Start again where you began" in text
    text = look(chrome, broker.url("/authorize?" + urlencode({"app": "web", "provider": "dot"})), "authorize-error", status_logged=True)
    assert "does not work" in text and "Go back to the app" in text
    assert "redirect_uri" not in text and "parameter" not in text, "no parameter names for the person"
    chrome.find_element(By.TAG_NAME, "summary").click()
    assert "Missing required parameter redirect_uri." in chrome.find_element(By.TAG_NAME, "details").text, "the detail, for the makers"
    text = look(chrome, broker.url("/providers/dot/authorize?" + urlencode({"client_id": "nobody", "response_type": "code"})),
                "standard-authorize-error", status_logged=True)
    assert "does not work" in text and "client_id" not in text
    # An API client still gets JSON for the same requests.
    for path in ("/authorize?app=nobody&provider=dot", "/providers/dot/authorize?client_id=nobody"):
        answer = requests.get(broker.url(path), timeout=10)
        assert answer.status_code == 400 and answer.json()["error"] == "invalid_request"


def test_a_person_past_the_sign_in_limit_reads_a_page(chrome, broker_factory):
    """Past `login_requests_per_minute`, /callback and /authorize answer a browser with a page in
    plain words, an API client with JSON."""
    broker, _, _, _ = broker_factory(env={"BROKER_LOGIN_REQUESTS_PER_MINUTE": "1"})
    look(chrome, broker.url("/callback?state=tbst_unknown&code=x"), "callback-error-first", status_logged=True)
    for path, name in (("/callback?state=tbst_unknown&code=x", "callback-limited"), ("/authorize?app=web&provider=dot", "authorize-limited")):
        text = look(chrome, broker.url(path), name, status_logged=True)
        assert "Too many sign-ins came from your network" in text, text
    answer = requests.get(broker.url("/authorize?app=web&provider=dot"), timeout=10)
    assert answer.status_code == 429 and answer.json()["error"] == "rate_limited"
    # A client naming JSON as much as HTML reads JSON at /authorize, as its answers are; media
    # types compare without case.
    both = requests.get(broker.url("/authorize?app=web&provider=dot"), headers={"Accept": "application/json, text/html"}, timeout=10)
    assert both.status_code == 429 and both.json()["error"] == "rate_limited"
    upper = requests.get(broker.url("/callback?state=tbst_unknown&code=x"), headers={"Accept": "TEXT/HTML"}, timeout=10)
    assert upper.status_code == 429 and "Too many sign-ins came from your network" in upper.text, upper.text


def test_the_device_entry_and_the_development_sign_in(chrome):
    broker = BrokerProcess("", args=("--dev",))
    try:
        text = look(chrome, broker.url("/device"), "device-entry")
        assert "Eight letters" in text
        assert chrome.find_element(By.NAME, "user_code").get_attribute("placeholder") in (None, "")
        authorize = broker.url("/authorize?" + urlencode({
            "app": "demo", "provider": "dev", "redirect_uri": "http://127.0.0.1/callback", "state": "s",
            "code_challenge": "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM", "code_challenge_method": "S256"}))
        text = look(chrome, authorize, "development-sign-in")
        assert "Development identity provider" in text and chrome.find_element(By.NAME, "user").get_attribute("value") == "alice"
    finally:
        broker.stop()


def test_signing_out_everywhere_at_the_development_provider(chrome):
    """The button sends the broker a real logout token (signed by the provider's key): alice's
    sessions end, bob's do not."""
    broker = BrokerProcess("", args=("--dev",))
    try:
        alice = [dev_login(broker, "alice").json()["session_token"] for _ in range(2)]
        bob = dev_login(broker, "bob").json()["session_token"]
        token = lambda session: requests.get(broker.url("/token"), headers={"Authorization": f"Bearer {session}"}, timeout=10).status_code
        assert [token(s) for s in alice + [bob]] == [200, 200, 200]
        text = look(chrome, broker.url("/dev/logout"), "development-sign-out")
        assert "Sign out everywhere" in text and chrome.find_element(By.NAME, "user").get_attribute("value") == "alice"
        press(chrome, "button.go")
        text = inspect(chrome, "development-signed-out")
        assert "Signed out everywhere" in text and "alice" in text
        assert [token(s) for s in alice + [bob]] == [401, 401, 200]
        [line] = [line for line in broker.json_lines() if line.get("audit") == "backchannel_logout"]
        assert line["subject"] == "dev-alice" and line["ended"] == 2
    finally:
        broker.stop()


def test_addresses_that_are_not_endpoints_answer_a_browser_with_a_page(chrome, broker_factory):
    """The broker's address itself says what it is; an unknown path, or a provider it does not
    have, is a 404 page — for a browser. Every other client keeps the API's JSON."""
    broker, _, _, _ = broker_factory()
    text = look(chrome, broker.url("/"), "home")
    assert "Token broker" in text and "nothing to do here in a browser" in text
    for name, href in (("/healthz", "/healthz"), ("/readyz", "/readyz"), ("its OAuth metadata", "/.well-known/oauth-authorization-server/providers/dot")):
        assert chrome.find_element(By.LINK_TEXT, name).get_attribute("href") == broker.url(href)
    chrome.find_element(By.LINK_TEXT, "/healthz").click()
    WebDriverWait(chrome, 10).until(lambda driver: driver.current_url == broker.url("/healthz"))
    for path, name in (("/no/such/page", "not-found"), ("/providers/nobody/authorize?client_id=web", "unknown-provider")):
        text = look(chrome, broker.url(path), name, status_logged=True)
        assert "Page not found" in text and "go back to the app" in text
        chrome.find_element(By.LINK_TEXT, "What this service is").click()
        WebDriverWait(chrome, 10).until(lambda driver: driver.current_url == broker.url("/"))
    for path in ("/", "/no/such/page", "/providers/nobody/authorize?client_id=web"):
        for accept in (None, "application/json", "*/*"):
            answer = requests.get(broker.url(path), headers={"Accept": accept} if accept else {}, timeout=10)
            assert answer.status_code == 404 and answer.json()["error"] == "not_found", (path, accept)
    assert requests.get(broker.url("/"), headers={"Accept": "text/html"}, timeout=10).headers["Content-Type"].startswith("text/html")


class AppListener:
    """The app's end of a sign-in: an HTTP listener on loopback (an RFC 8252 redirect URI,
    `<origin>/callback`) that records the path of each request and answers `page` to all."""

    def __init__(self, page: bytes = b"<!doctype html><title>the app</title><p>Back in the app.</p>"):
        import http.server
        import threading
        received = self.received = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                received.append(self.path)
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(page)))
                self.end_headers()
                self.wfile.write(page)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.redirect_uri = f"{self.origin}/callback"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def dev_broker():
    broker = BrokerProcess("", args=("--dev",))
    yield broker
    broker.stop()


@pytest.mark.parametrize("endpoint", ["broker", "standard"])
@pytest.mark.parametrize("decision", ["allow", "deny"])
def test_a_first_sign_in_in_a_browser_reaches_the_app(chrome, dev_broker, endpoint, decision):
    """The whole app flow in Chromium, from /authorize (or the standard authorization endpoint) to
    the app's loopback redirect URI: the development provider's form, its redirect to /callback and
    the broker's redirect to the app — a chain the page's Content-Security-Policy must let through.
    Allowed, the app gets a code that redeems to a session; denied, `access_denied`."""
    from support.pkce import make_pkce
    app = AppListener()
    try:
        verifier, challenge = make_pkce()
        if endpoint == "broker":
            url = dev_broker.url("/authorize?" + urlencode({
                "app": "demo", "provider": "dev", "redirect_uri": app.redirect_uri, "state": "app-state",
                "code_challenge": challenge, "code_challenge_method": "S256"}))
        else:
            url = dev_broker.url("/providers/dev/authorize?" + urlencode({
                "client_id": "demo", "response_type": "code", "redirect_uri": app.redirect_uri, "state": "app-state",
                "code_challenge": challenge, "code_challenge_method": "S256", "scope": "openid"}))
        look(chrome, url, f"first-sign-in-{endpoint}")
        chrome.find_element(By.CSS_SELECTOR, f'button[value="{decision}"]').click()
        try:
            WebDriverWait(chrome, 15).until(lambda driver: app.received)
        except TimeoutException:
            pytest.fail(f"the browser never reached the app; its console: {[e['message'] for e in chrome.get_log('browser')]}")
        assert "Back in the app" in chrome.find_element(By.TAG_NAME, "body").text
        chrome.save_screenshot(str(SCREENSHOTS / f"first-sign-in-{endpoint}-{decision}-app-{chrome.width}.png"))
        [path] = [path for path in app.received if path.startswith("/callback")]  # not the browser's /favicon.ico
        from urllib.parse import parse_qs, urlsplit
        query = {name: values[0] for name, values in parse_qs(urlsplit(path).query).items()}
        assert query["state"] == "app-state" and query["iss"] == dev_broker.url("/providers/dev")
        if decision == "deny":
            assert query["error"] == "access_denied" and "code" not in query
            return
        form = {"grant_type": "authorization_code", "code": query["code"], "code_verifier": verifier, "redirect_uri": app.redirect_uri}
        token_url = dev_broker.url("/token") if endpoint == "broker" else dev_broker.url("/providers/dev/token")
        form.update({"app": "demo"} if endpoint == "broker" else {"client_id": "demo"})
        redeemed = requests.post(token_url, data=form, timeout=10)
        assert redeemed.status_code == 200, redeemed.text
        problems = [e["message"] for e in chrome.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
        assert not problems, problems
    finally:
        app.close()


def test_a_browser_app_binds_its_session_to_a_key_it_cannot_export(chrome):
    """A single-page app on another origin signs in (the development provider's page, in
    Chromium), redeems its code with a DPoP proof made by WebCrypto with a key the page cannot
    export, and calls the broker with proofs: CORS lets the DPoP header through, the session is
    bound, and the same token sent as a bearer token is refused — the browser reads why. The app is
    Tests/oauth/spa/dpop-app.html at the demo app's redirect URI, on a port of its own (RFC 8252 §7.3)."""
    spa = AppListener((Path(__file__).resolve().parent / "spa" / "dpop-app.html").read_bytes())
    broker = BrokerProcess("", args=("--dev",), env={"BROKER_CORS_ORIGINS": spa.origin})
    try:
        look(chrome, f"{spa.redirect_uri}?" + urlencode({"broker": broker.base_url}), "spa-sign-in")
        chrome.find_element(By.CSS_SELECTOR, 'button[value="allow"]').click()
        try:
            WebDriverWait(chrome, 20).until(lambda driver: driver.find_element(By.ID, "result").text not in ("", "working"))
        except TimeoutException:
            pytest.fail(f"the app never finished; its console: {[e['message'] for e in chrome.get_log('browser')]}")
        chrome.save_screenshot(str(SCREENSHOTS / f"spa-dpop-{chrome.width}.png"))
        outcome = json.loads(chrome.find_element(By.ID, "result").text)
        assert outcome["redeemed"] == 200 and outcome["session_token_type"] == "DPoP", outcome
        assert outcome["session"] == 200 and outcome["subject"] and outcome["token"] == 200, outcome
        assert outcome["bearer"] == 401 and outcome["bearer_challenge"].startswith('DPoP error="invalid_token"'), outcome
    finally:
        broker.stop()
        spa.close()
