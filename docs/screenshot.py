"""Screenshots of an HTML report in headless Chromium (Debian's package), for the README:

    python docs/screenshot.py report.html docs/report.png
"""

import sys

from playwright.sync_api import sync_playwright

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def main(html: str, png: str) -> None:
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto("file://" + __import__("os").path.abspath(html))
        page.wait_for_selector(".passage")
        page.locator(".s").nth(5).click()
        page.evaluate("document.getElementById('highlighted').scrollIntoView()")
        page.screenshot(path=png)
        browser.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
