"""Opening an offline HTML page in headless Chromium (Debian's, driven by playwright), for the report tests."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest


@dataclass
class OpenPage:
    """A page and what it did: console and page errors, and every URL it requested."""

    page: Any
    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    def screenshot(self, name: str) -> Path:
        """A full-page PNG in the test artifacts folder (``$EMBEDSCOPE_TEST_ARTIFACTS`` or ``test-artifacts/``)."""
        artifacts = Path(
            os.environ.get("EMBEDSCOPE_TEST_ARTIFACTS", Path(__file__).resolve().parents[2] / "test-artifacts")
        )
        artifacts.mkdir(parents=True, exist_ok=True)
        shot = self.page.screenshot(path=str(artifacts / name), full_page=True)
        assert shot[:8] == b"\x89PNG\r\n\x1a\n"
        return artifacts / name


@contextmanager
def headless_page(path: Path) -> Iterator[OpenPage]:
    """``path`` opened in headless Chromium (the test skips when playwright or chromium is missing)."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("no chromium on this machine (Debian: apt-get install chromium)")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        opened = OpenPage(browser.new_page())
        opened.page.on("console", lambda m: opened.errors.append(m.text) if m.type == "error" else None)
        opened.page.on("pageerror", lambda e: opened.errors.append(str(e)))
        opened.page.on("request", lambda r: opened.requests.append(r.url))
        opened.page.goto(path.as_uri())
        try:
            yield opened
        finally:
            browser.close()
