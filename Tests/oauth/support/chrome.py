"""Headless Chromium for the page tests (Debian's chromium and chromium-driver through selenium;
`make test` installs them): a window of a given width, the browser's console kept for checks."""

import shutil
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

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


def press(driver, selector: str) -> None:
    """Clicks the element and waits for the next page to replace this one and finish loading."""
    page = driver.find_element(By.TAG_NAME, "html")
    driver.find_element(By.CSS_SELECTOR, selector).click()

    def replaced(_) -> bool:
        try:
            page.is_enabled()
            return False
        except WebDriverException:
            # Stale, or (while the new document comes in) chromedriver's "node does not belong
            # to the document": either way the old page is gone.
            return True
    WebDriverWait(driver, 20).until(replaced)
    WebDriverWait(driver, 20).until(lambda d: d.execute_script("return document.readyState") == "complete")
