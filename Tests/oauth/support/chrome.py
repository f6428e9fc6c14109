"""Headless Chromium for the page tests (Debian's chromium and chromium-driver through selenium;
`make test` installs them): a window of a given width, the browser's console kept for checks."""

import shutil
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

# The widths a page is checked at: a phone's and a desktop's.
WIDTHS = [412, 1280]
WIDTH_IDS = ["phone", "desktop"]


def chrome_at_each_width(screenshots: Path):
    """A pytest fixture: a new browser at each of WIDTHS, its screenshots going to `screenshots`."""
    @pytest.fixture(params=WIDTHS, ids=WIDTH_IDS)
    def chrome(request):
        screenshots.mkdir(parents=True, exist_ok=True)
        driver = new_chrome(request.param)
        yield driver
        driver.quit()
    return chrome


def new_chrome(width: int = 412):
    """A new browser with a profile (cookies) of its own; `driver.width` is its window's width."""
    if not shutil.which("chromium") or not shutil.which("chromedriver"):
        pytest.fail("chromium and chromium-driver are needed (make test installs them)")
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", f"--window-size={width},915", "--lang=en"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    driver.set_page_load_timeout(30)
    driver.width = width
    return driver
