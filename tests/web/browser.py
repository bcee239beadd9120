"""A real browser for the dashboard's tests and benchmark: headless Chromium from the
system's packages, driven by Selenium with the system's chromedriver, so nothing is
downloaded. ``tests/web/install-browser.sh`` installs them; without them the browser tests
skip and say why.

The browser is Chromium's headless shell (``chromium-headless-shell``: the same Blink and
V8 as the browser, without its windowing and profile services; what Puppeteer runs for
headless tests) where it is installed, else ``chromium --headless=new``. Same pages, same
screenshots; the shell costs a third less CPU (the browser tests: 12.2 s of the machine's
CPU with the full browser, 9.0 s with the shell, 2026-11-28).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from selenium.webdriver.remote.webdriver import WebDriver

# The shell by its binary: Debian's /usr/bin/chromium-headless-shell is a script that runs
# it as a child (no exec), and chromedriver's quit would end the script, not the browser.
SHELL_PATHS = ("/usr/lib/chromium/chromium-headless-shell",)
FULL_PATHS = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
DRIVER_PATHS = ("/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver")
#: Where screenshots go (gitignored); $POKERALPH_SCREENSHOTS wins.
SCREENSHOTS = Path(os.environ.get("POKERALPH_SCREENSHOTS") or Path(__file__).parent / "screenshots")


def _first(paths: tuple[str, ...]) -> str | None:
    return next((p for p in paths if os.access(p, os.X_OK)), None)


def _binary(full: bool) -> str | None:
    """The browser to run: the shell where it is installed (unless ``full``), else the
    whole browser."""
    return _first(FULL_PATHS if full else (*SHELL_PATHS, *FULL_PATHS))


def missing(*, full: bool = False) -> str | None:
    """Why no browser (``full``: no whole browser) can run here, or None."""
    if _binary(full) is None:
        return "no chromium (run tests/web/install-browser.sh: apt-get install chromium)"
    if _first(DRIVER_PATHS) is None:
        return "no chromedriver (run tests/web/install-browser.sh: apt-get install chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[test]')"
    return None


class Browser:
    """One headless Chromium with a fresh profile; ``close`` ends it and removes it."""

    profile: str | None

    def __init__(self, width: int = 1400, height: int = 900, *, full: bool = False) -> None:
        """``full``: the whole browser even where the shell is installed (the benchmark
        measures what a person's browser does)."""
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        binary = _binary(full) or ""
        options = webdriver.ChromeOptions()
        options.binary_location = binary
        # The shell is headless by itself, and with a profile folder of ours it opens no
        # page for chromedriver to drive: it keeps chromedriver's own (fresh, removed at
        # quit). The full browser is told both.
        self.profile = None if binary in SHELL_PATHS else tempfile.mkdtemp(prefix="pokeralph-")
        own = () if self.profile is None else ("--headless=new", f"--user-data-dir={self.profile}")
        for flag in (
            *own,
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--disable-features=Translate,MediaRouter,OptimizationHints",
            f"--window-size={width},{height}",
        ):
            options.add_argument(flag)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        service = Service(executable_path=_first(DRIVER_PATHS))
        self.driver: WebDriver = webdriver.Chrome(options=options, service=service)
        self.driver.set_page_load_timeout(30)

    def close(self) -> None:
        try:
            self.driver.quit()
        finally:
            if self.profile is not None:
                shutil.rmtree(self.profile, ignore_errors=True)

    def shot(self, name: str) -> Path:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS / f"{name}.png"
        self.driver.save_screenshot(str(path))
        return path

    def js(self, script: str, *args: Any) -> Any:
        return self.driver.execute_script(script, *args)

    def console_errors(self) -> list[str]:
        logs = self.driver.get_log("browser")  # type: ignore[attr-defined]
        return [str(entry["message"]) for entry in logs if entry["level"] == "SEVERE"]
