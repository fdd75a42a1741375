"""The service's pages in headless Chromium (Debian's package, through Playwright): the dashboard renders its plots
with no console errors, and a reviewer opens a flagged answer in the review queue, marks a sentence, and the review
is in the database with who made it. Screenshots go to $HALLUSCOPE_SCREENSHOTS when set (README's are made so)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import sqlalchemy as sa

from browser import chromium_page
from serve_helpers import Server
from test_serve import SHORT, _wiki


@pytest.fixture(scope="module")
def filled(tmp_path_factory, _wikibio_cached):
    dbf = str(tmp_path_factory.mktemp("web") / "web.db")
    s = Server(dbf).start()
    with s.client() as c:
        for model, start in (("gpt-3", 0), ("gpt-3.5", 3)):
            c.wait(c.submit(_wiki(_wikibio_cached, 3, samples=3, start=start), tags={"model": model})["id"],
                   poll=0.5, timeout=300)
        c.check(**SHORT[1], tags={"model": "gpt-3.5"})
        reviewer = c.request("POST", "/v1/keys", json={"name": "rev-browser", "scopes": ["review"]})["key"]
    yield s, dbf, reviewer
    s.stop()


def _browse(key: str, url: str, actions) -> list[str]:
    """Open ``url`` with the API key in the page's storage, run ``actions(page)``; the console errors."""
    with chromium_page(1280, 900, f"localStorage.setItem('halluscope-key', {key!r})") as (page, errors):
        page.goto(url)
        actions(page)
        return errors


def _shots() -> Path | None:
    d = os.environ.get("HALLUSCOPE_SCREENSHOTS")
    return Path(d) if d else None


def test_dashboard_renders_plots(filled, tmp_path):
    s, _, _ = filled

    def act(page):
        page.wait_for_selector("#rate svg circle")
        page.wait_for_selector("#hist svg rect", state="attached")
        heights = page.eval_on_selector_all("#hist svg rect", "els => els.map(e => e.getBBox().height)")
        assert len(heights) == 10 and sum(h > 0 for h in heights) >= 1  # ten bins, the answers' ones drawn
        assert page.locator("#rate svg path").count() == 2  # one line per model tag
        assert "7 answers in the last 7 days" in page.inner_text("#summary")  # a window by default, not all time
        assert page.locator("#flagged tr").count() >= 1
        assert page.inner_text("#flagged tr td").endswith(" UTC")  # times say their zone (they were bare)
        assert page.locator("#rate svg text.xtick").count() >= 1 and "UTC" in page.text_content("#rate svg")
        # the time axis of a longer range: round UTC times between the ends, the date where it is needed
        labels = page.evaluate("""() => { const d = document.createElement('div'); document.body.append(d);
            d.innerHTML = HS.lineChart({a: [{t: '2026-11-28T10:00:00Z', rate: 0.2, n: 3},
                                            {t: '2026-11-28T16:20:00Z', rate: 0.4, n: 2}]}, 560, 220, 36e5);
            return [...d.querySelectorAll('text.xtick')].map(e => e.textContent); }""")
        assert labels == ["11-28 12:00", "15:00"]
        week = page.evaluate("HS.timeTicks(Date.parse('2026-11-20T09:10:00Z'), Date.parse('2026-11-27T08:00:00Z'))")
        assert week["step"] == 2 * 864e5 and 2 <= len(week["ticks"]) <= 4
        years = page.evaluate("""() => { const r = HS.timeTicks(Date.parse('2025-01-01'), Date.parse('2026-12-31'));
            return [r.ticks.length, HS.tickLabel(r.ticks[0], r.step, true)]; }""")
        assert years[0] <= 5 and years[1].startswith("2025-")  # two years: few ticks, each with its year
        page.screenshot(path=str((_shots() or tmp_path) / "serve-dashboard.png"), full_page=True)

    assert _browse(s.admin_key, s.url + "/", act) == []


def test_review_queue_marks_a_sentence(filled, tmp_path):
    s, dbf, reviewer = filled
    seen = {}

    def act(page):
        page.wait_for_selector("#queue a")
        page.wait_for_selector("#answer .sent")
        seen["id"] = page.eval_on_selector("#queue a.open", "a => a.dataset.id")
        colours = page.eval_on_selector_all(".sent", "els => els.map(e => getComputedStyle(e).backgroundColor)")
        assert len(colours) >= 2
        page.locator(".sent").nth(1).locator("button.inacc").click()
        page.wait_for_selector(".sent:nth-of-type(2) button.inacc.chosen, [data-i='1'] button.inacc.chosen")
        page.screenshot(path=str((_shots() or tmp_path) / "serve-review.png"), full_page=False)

    assert _browse(reviewer, s.url + "/review", act) == []
    eng = sa.create_engine(f"sqlite:///{dbf}")
    with eng.connect() as c:
        rows = c.execute(sa.text("SELECT r.uid, v.sentence, v.label, v.reviewer, v.created_at FROM reviews v "
                                 "JOIN results r ON r.id = v.result_id")).all()
    assert [(u, n, lab, who) for u, n, lab, who, _ in rows] == [(seen["id"], 1, "inaccurate", "rev-browser")]
    assert rows[0][4] is not None


def test_docs_render_from_the_server_itself(filled, tmp_path):
    """/docs (Swagger UI) renders the API from assets the service serves: every request the browser makes goes to
    the server itself, none fails, and no console error."""
    from urllib.parse import urlsplit

    import httpx

    s, _, _ = filled
    host = urlsplit(s.url).netloc
    seen, failed = [], []
    with chromium_page(1280, 900) as (page, errors):
        page.on("request", lambda r: seen.append(r.url))
        page.on("requestfailed", lambda r: failed.append(r.url))
        page.goto(s.url + "/docs")
        page.wait_for_selector(".swagger-ui .opblock-summary-path", timeout=30000)
        paths = page.eval_on_selector_all(".opblock-summary-path", "els => els.map(e => e.dataset.path)")
        assert {"/v1/check", "/v1/jobs", "/v1/stats", "/v1/admin/reload"} <= set(paths)
        page.screenshot(path=str(tmp_path / "docs.png"))
    assert any(u.endswith("swagger-ui-bundle.js") for u in seen) and any(u.endswith("swagger-ui.css") for u in seen)
    assert [u for u in seen if urlsplit(u).netloc != host and not u.startswith(("data:", "blob:"))] == []
    assert failed == [] and errors == []
    assert httpx.get(s.url + "/redoc").status_code == 404  # not served: ReDoc's bundle fetches a logo from a CDN
