"""The /device pages in a real headless browser (Debian's chromium through chromedriver): the
whole device flow against the real authorization server as a person does it, at a phone's width
(412 px) and a desktop's (1280 px) — the prefilled code, the confirmation with its warning, the
sign-in and consent at the server, the account to confirm, the closing page — then a refusal and
a wrong code; and a provider whose sign-in redirects to another origin. The browser must apply
the pages' stylesheet under their Content-Security-Policy and log no violation. A screenshot of every page is written to
DEVICE_SCREENSHOTS (default .build/device-screenshots), at a phone's width and a desktop's, for
a person to look at."""

import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import requests

from support.broker import BrokerProcess, broker_config, free_port
from support.device import DeviceClient

selenium = pytest.importorskip("selenium")
from selenium.webdriver.common.by import By  # noqa: E402
from support.chrome import chrome_at_each_width, new_chrome, press  # noqa: E402

SCREENSHOTS = Path(os.environ.get("DEVICE_SCREENSHOTS", Path(__file__).resolve().parents[2] / ".build" / "device-screenshots"))


chrome = chrome_at_each_width(SCREENSHOTS)


@pytest.fixture
def other_chrome():
    """A second browser, with cookies of its own: someone else's."""
    driver = new_chrome()
    yield driver
    driver.quit()


def shot(driver, name: str) -> None:
    driver.save_screenshot(str(SCREENSHOTS / f"{name}-{driver.width}.png"))


def assert_styled_and_clean(driver) -> None:
    """The stylesheet applied (its hash is in the page's CSP) and nothing was blocked."""
    assert driver.find_element(By.TAG_NAME, "main").value_of_css_property("max-width") == "448px"
    problems = [entry["message"] for entry in driver.get_log("browser")
                if entry["level"] in ("SEVERE", "WARNING") and "/favicon.ico" not in entry["message"]]  # the broker has none
    assert not problems, problems


def sign_in_at_the_server(driver, username: str = "alice") -> None:
    """The authorization server's own pages: sign in, then consent."""
    driver.find_element(By.NAME, "username").send_keys(username)
    driver.find_element(By.NAME, "password").send_keys(f"{username}-password")
    press(driver, "#login-form input[type=submit]")
    press(driver, "input[name=allow]")


def test_a_person_signs_a_device_in_with_a_browser(chrome, broker_factory, auth_server):
    broker, _, _, _ = broker_factory(
        provider_extra="    display_name: Test Identity\n",
        config_extra="  tv:\n    device_flow: true\n    display_name: Living-room TV\nsessions:\n  device_poll_interval_seconds: 1\n")
    cli = DeviceClient(broker)
    codes = cli.request_codes()

    chrome.get(codes["verification_uri_complete"])
    field = chrome.find_element(By.NAME, "user_code")
    assert field.get_attribute("value") == codes["user_code"], "verification_uri_complete fills the code in"
    assert_styled_and_clean(chrome)
    shot(chrome, "1-enter-code")
    press(chrome, "button.go")

    # The question has an address of its own: a reload asks it again, with no form sent twice.
    assert chrome.current_url.startswith(broker.url("/device/decision?")), chrome.current_url
    chrome.refresh()
    assert chrome.find_element(By.TAG_NAME, "h1").text == "Sign in a device?"
    page = chrome.find_element(By.TAG_NAME, "main").text
    # The configured display names, not the ids.
    for shown in ("Living-room TV", "Test Identity", "openid", codes["user_code"], "Never enter a code that someone sent you"):
        assert shown in page
    assert_styled_and_clean(chrome)
    shot(chrome, "2-confirm")
    if chrome.width == 1280:
        # On a laptop's screen both choices show without scrolling.
        chrome.set_window_size(1280, 800)
        refuse = chrome.find_element(By.CSS_SELECTOR, "button[value=deny]")
        fold = chrome.execute_script("return window.innerHeight")
        assert refuse.rect["y"] + refuse.rect["height"] <= fold, f"Refuse ends at {refuse.rect['y'] + refuse.rect['height']} of {fold}"
        shot(chrome, "2-confirm-800")
        chrome.set_window_size(1280, 915)
    press(chrome, "button[value=approve]")

    # Back from the provider's sign-in page: the question again, as it was, and Continue still works.
    chrome.find_element(By.NAME, "username")
    chrome.back()
    assert chrome.find_element(By.TAG_NAME, "h1").text == "Sign in a device?"
    assert_styled_and_clean(chrome)
    press(chrome, "button[value=approve]")

    sign_in_at_the_server(chrome)

    # Back at the broker: the account that signed in, to confirm before the device gets it, at
    # an address of its own — a reload (or a restored tab) asks the same question again.
    assert chrome.current_url.startswith(broker.url("/device/confirm?")), chrome.current_url
    for _ in range(2):
        assert chrome.find_element(By.TAG_NAME, "h1").text == "Is this the right account?"
        assert "alice@example.test" in chrome.find_element(By.CSS_SELECTOR, ".account").text
        assert "Living-room TV" in chrome.find_element(By.TAG_NAME, "main").text
        assert_styled_and_clean(chrome)
        chrome.refresh()
    shot(chrome, "3-confirm-account")
    assert cli.poll().json()["error"] == "authorization_pending"
    press(chrome, "button[value=approve]")

    assert chrome.find_element(By.TAG_NAME, "h1").text == "Device signed in"
    assert_styled_and_clean(chrome)
    shot(chrome, "4-signed-in")
    chrome.back()  # the question again, answered: it says so
    chrome.refresh()
    assert chrome.find_element(By.TAG_NAME, "h1").text == "Device signed in"

    answer = cli.poll_until_done()
    assert answer.status_code == 200, answer.text
    userinfo = requests.get(auth_server.userinfo_endpoint, headers={"Authorization": f"Bearer {answer.json()['access_token']}"}, timeout=10)
    assert userinfo.status_code == 200

    # A second device, refused by its person.
    refused_cli = DeviceClient(broker)
    refused = refused_cli.request_codes()
    chrome.get(broker.url("/device"))
    chrome.find_element(By.NAME, "user_code").send_keys(refused["user_code"].lower())
    press(chrome, "button.go")
    press(chrome, "button[value=deny]")
    assert chrome.find_element(By.TAG_NAME, "h1").text == "Device not signed in"
    shot(chrome, "5-refused")
    # A page of its own: a reload shows it again, with no form sent twice.
    assert chrome.current_url == broker.url("/device/refused"), chrome.current_url
    chrome.refresh()
    assert chrome.find_element(By.TAG_NAME, "h1").text == "Device not signed in"
    assert_styled_and_clean(chrome)
    assert refused_cli.poll().json()["error"] == "access_denied"

    # A code nobody was given.
    chrome.get(broker.url("/device"))
    chrome.find_element(By.NAME, "user_code").send_keys("BCDF-GHJK")
    press(chrome, "button.go")
    assert "unknown, expired or already used" in chrome.find_element(By.CSS_SELECTOR, ".error").text
    assert chrome.find_element(By.NAME, "user_code").get_attribute("value") == "BCDF-GHJK", "kept, to correct one letter"
    # The 400 itself is logged by the browser as a failed load; anything else would be a problem.
    problems = [e["message"] for e in chrome.get_log("browser")
                if e["level"] == "SEVERE" and "400" not in e["message"] and "/favicon.ico" not in e["message"]]
    assert not problems, problems
    shot(chrome, "6-wrong-code")


def test_a_provider_link_opened_in_another_browser_signs_nothing_in(chrome, other_chrome, broker_factory, auth_server):
    """The link to the provider that one browser was sent to, finished in another browser (by a
    person someone sent it to), ends on the broker's error page; the device gets nothing."""
    broker, _, _, _ = broker_factory(config_extra="  tv:\n    device_flow: true\nsessions:\n  device_poll_interval_seconds: 1\n")
    cli = DeviceClient(broker)
    codes = cli.request_codes()
    chrome.get(codes["verification_uri_complete"])
    press(chrome, "button.go")
    press(chrome, "button[value=approve]")
    link = chrome.current_url  # the provider's sign-in, leading to its authorization URL
    assert link.startswith(auth_server.issuer.split("/o")[0])

    other_chrome.get(link)
    sign_in_at_the_server(other_chrome, "bob")
    assert other_chrome.current_url.startswith(broker.url("/callback"))
    assert "started in another browser" in other_chrome.find_element(By.CSS_SELECTOR, ".error").text
    assert not other_chrome.find_elements(By.CSS_SELECTOR, "form")
    assert other_chrome.find_element(By.CSS_SELECTOR, "a.button").text == "Enter a code", "a button, as on the other pages"
    shot(other_chrome, "7-other-browser")
    time.sleep(codes["interval"])
    assert cli.poll().json()["error"] == "authorization_pending", "the device got nothing"


class VanityRedirect:
    """The provider's sign-in behind an address of another origin that redirects to it — a vanity
    domain, a federating identity provider, Dex's one connector — as many deployments have: an
    HTTP 302 on 127.0.0.2 to the real authorization server on 127.0.0.1, with the query."""

    def __init__(self, target: str):
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(302)
                self.send_header("Location", target + ("?" + self.path.split("?", 1)[1] if "?" in self.path else ""))
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.2", 0), Handler)
        self.url = f"http://127.0.0.2:{self.server.server_address[1]}/authorize"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_continue_reaches_a_sign_in_that_redirects_to_another_origin(auth_server):
    """The question page's form leads to the provider's sign-in, whose first address may redirect
    to another origin before any page: the browser follows (the page's CSP names no form-action
    source list that such a hop would break) and the device is signed in."""
    vanity = VanityRedirect(auth_server.authorization_endpoint)
    port = free_port()
    client_id, secret = auth_server.register_client([f"http://127.0.0.1:{port}/callback"])
    provider = f"""
  dot:
    authorization_endpoint: {vanity.url}
    token_endpoint: {auth_server.token_endpoint}
    userinfo_endpoint: {auth_server.userinfo_endpoint}
    client_id: {client_id}
    client_secret_env: DOT_CLIENT_SECRET
    scopes: [openid, profile, email, read]
"""
    broker = BrokerProcess(broker_config(provider) + "  tv:\n    device_flow: true\nsessions:\n  device_poll_interval_seconds: 1\n",
                           env={"DOT_CLIENT_SECRET": secret}, port=port)
    driver = new_chrome()
    try:
        cli = DeviceClient(broker)
        codes = cli.request_codes()
        driver.get(codes["verification_uri_complete"])
        press(driver, "button.go")
        press(driver, "button[value=approve]")
        sign_in_at_the_server(driver)
        assert driver.current_url.startswith(broker.url("/device/confirm?")), driver.current_url
        press(driver, "button[value=approve]")
        assert driver.find_element(By.TAG_NAME, "h1").text == "Device signed in"
        assert cli.poll_until_done().status_code == 200
    finally:
        driver.quit()
        broker.stop()
        vanity.close()
