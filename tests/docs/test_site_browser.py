"""The documentation site as a user sees it (slow tier): built strictly, served over HTTP on the loopback address and
opened in headless Chromium (Debian's, driven by playwright). No page logs an error, the navigation reaches every
page of ``mkdocs.yml``'s nav, and the search finds a flag by name."""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The site built with ``mkdocs build --strict``, served on 127.0.0.1; yields its base URL."""
    pytest.importorskip("mkdocs", reason="mkdocs is not installed (pip install 'embedscope[docs]')")
    folder = tmp_path_factory.mktemp("site") / "site"
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(folder)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert built.returncode == 0, built.stderr[-3000:]
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("no chromium on this machine (Debian: apt-get install chromium)")
    with sync_api.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            yield launched
        finally:
            launched.close()


def _nav_paths() -> list[str]:
    """Each page of ``mkdocs.yml``'s nav as the URL path MkDocs gives it (``data/formats.md`` → ``data/formats/``)."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("tag:", lambda loader, suffix, node: None)
    nav = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=Loader)["nav"]

    def walk(item: Any) -> list[str]:
        if isinstance(item, str):
            return [item]
        if isinstance(item, list):
            return [p for i in item for p in walk(i)]
        return [p for v in item.values() for p in walk(v)] if isinstance(item, dict) else []

    return ["" if p == "index.md" else p.removesuffix(".md") + "/" for p in walk(nav)]


def test_the_navigation_reaches_every_page_and_no_page_logs_an_error(site: str, browser: Any) -> None:
    page = browser.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(f"{page.url}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"{page.url}: {e}"))
    seen: set[str] = set()
    todo = [site]
    while todo:
        url = todo.pop()
        if url in seen:
            continue
        seen.add(url)
        response = page.goto(url)
        assert response is not None and response.ok, url
        links = page.eval_on_selector_all("nav.md-nav--primary a.md-nav__link[href]", "as => as.map(a => a.href)")
        todo += [link.split("#")[0] for link in links if link.startswith(site) and link.split("#")[0] not in seen]
    reached = {url.removeprefix(site) for url in seen}
    assert set(_nav_paths()) <= reached, f"not reached through the navigation: {set(_nav_paths()) - reached}"
    assert errors == []


def test_search_finds_a_flag_by_name(site: str, browser: Any) -> None:
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(site)
    meta = ".md-search-result__meta"
    page.wait_for_function(
        f"() => !document.querySelector('{meta}').innerText.includes('Initializing')", timeout=120_000
    )
    page.click("input.md-search__input", timeout=10_000)
    page.keyboard.type("tune-folds", delay=20)  # as a user types: the search listens to the keys
    # The search answers each key as it comes: the first results shown may be those of "tune". Wait for the answer
    # to the whole name, then for the CLI reference among its hits (a timeout fails with what was found instead).
    found = "() => [...document.querySelectorAll('.md-search-result__item a')].map(a => a.href)"
    page.wait_for_function(f"() => ({found})().some(h => h.includes('folds'))", timeout=60_000)
    try:
        page.wait_for_function(f"() => ({found})().some(h => h.includes('reference/cli/'))", timeout=30_000)
    except Exception:  # noqa: BLE001 - playwright's TimeoutError; the assertion below says what was found
        pass
    hits = page.evaluate(found)
    assert any("reference/cli/" in h for h in hits), hits
    assert errors == []


_OVERFLOW = """() => {
  const column = document.querySelector('.md-content__inner').getBoundingClientRect();
  const found = [];
  if (document.documentElement.scrollWidth > window.innerWidth) {
    found.push(`the page scrolls sideways (${document.documentElement.scrollWidth} px)`);
  }
  for (const code of document.querySelectorAll('.md-content__inner pre > code')) {
    const x = getComputedStyle(code).overflowX;
    if (code.scrollWidth > code.clientWidth + 1 && x !== 'auto' && x !== 'scroll') {
      found.push(`a code block without a scrollbar: ${code.textContent.slice(0, 60)}`);
    }
  }
  for (const code of document.querySelectorAll('.md-content__inner :not(pre) > code')) {
    let scrolls = false;  // in a table's scroll wrapper, or another box that scrolls
    for (let a = code.parentElement; a && a !== document.body; a = a.parentElement) {
      const x = getComputedStyle(a).overflowX;
      if (x === 'auto' || x === 'scroll') { scrolls = true; break; }
    }
    if (!scrolls && [...code.getClientRects()].some(r => r.right > column.right + 8)) {
      found.push(`inline code past the column: ${code.textContent.slice(0, 60)}`);
    }
  }
  return found;
}"""


@pytest.mark.parametrize("width", [1280, 390], ids=["desktop", "phone"])
def test_no_code_overflows_its_column(site: str, browser: Any, width: int) -> None:
    """A long code line scrolls inside its block (``docs/css/extra.css``); no page scrolls sideways."""
    page = browser.new_page(viewport={"width": width, "height": 900})
    found = []
    for path in _nav_paths():
        page.goto(site + path)
        found += [f"{path or 'index'}: {what}" for what in page.evaluate(_OVERFLOW)]
    assert found == []
