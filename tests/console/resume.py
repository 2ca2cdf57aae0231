"""The operator's bad day in a real Chromium (driven by tests/tests/console_browser.rs):
the host that held a refund was killed; on another host's console the operator finds
the call in "needs attention" (the page a login lands on), opens it (one click),
sees the dead holder and its ended lease, presses "resume now" (two clicks),
confirms, and sees the call complete under the same key. A screenshot of each page
goes to SHOTS. Prints "OK" at the end; exits non-zero with the reason when a step
fails.

usage: resume.py CHROMIUM BASE_URL OPERATOR_TOKEN CALL_KEY SHOTS
"""

import os
import sys
import time

from playwright.sync_api import expect, sync_playwright

chromium, base, operator, call_key, shots = sys.argv[1:6]
os.makedirs(shots, exist_ok=True)


def shot(page, name):
    page.screenshot(path=os.path.join(shots, name + ".png"), full_page=True)


with sync_playwright() as p:
    browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
    page = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
    page.goto(base + "/console")
    page.fill("input[name=token]", operator)
    page.click("button[type=submit]")
    expect(page.locator("h1")).to_have_text("Needs attention")

    # The dead host's lease runs out within seconds: until then the call is
    # "running" (listed under "Running now", and under "Needs attention" too once
    # its effect's outcome counts as unknown); the page is read again until it is
    # listed as needing attention as stopped.
    row = page.locator(f'#attention tr[data-key="{call_key}"]')
    deadline = time.monotonic() + 30
    while not row.locator(".badge.b-stopped").is_visible():
        if time.monotonic() > deadline:
            raise SystemExit("the killed host's call never showed in needs attention")
        running = page.locator(f'#running tr[data-key="{call_key}"]')
        if running.is_visible() and not os.path.exists(os.path.join(shots, "19-attention-running.png")):
            expect(running.locator(".badge")).to_contain_text(["running"])
            shot(page, "19-attention-running")
        time.sleep(0.3)
        page.reload()
    expect(row.locator(".badge.b-stopped")).to_have_text("stopped")
    expect(row.locator("td.why")).to_contain_text("web-a")
    expect(row.locator("td.why")).to_contain_text("lease ended")
    shot(page, "20-attention")

    # Click one: the call's story, with who held it and when its lease ended.
    row.locator("td.key a").click()
    expect(page.locator("h1")).to_have_text("Call")
    expect(page.locator("dd.holding")).to_contain_text("web-a")
    expect(page.locator("dd.holding")).to_contain_text("lease ended")
    expect(page.locator("figure.timeline")).to_be_visible()
    expect(page.locator("section.effect .badge")).to_have_text("outcome unknown")
    shot(page, "21-story-stopped")

    # Click two: resume now; the confirmation says what will happen.
    page.click("#resume")
    expect(page.locator("h1")).to_have_text("Resume this call now")
    expect(page.locator("p.question")).to_contain_text("same idempotency key")
    shot(page, "22-confirm-resume")
    page.click("#confirm")
    expect(page.locator("h1")).to_have_text("Resumed")
    expect(page.locator("p.message")).to_contain_text("Resumed under the same key")
    expect(page.locator("p.message .badge")).to_have_text("completed")
    expect(page.locator("dd.summary")).to_have_text("success")
    shot(page, "23-resumed")

    # The story again: completed, the effect answered after two attempts.
    page.click("text=Back to the call")
    expect(page.locator(".headline .badge").first).to_have_text("completed")
    expect(page.locator("section.effect .badge")).to_have_text("answered")
    expect(page.locator("section.effect dl")).to_contain_text("2")
    # The story keeps who resumed it, where, and whose lease had ended.
    expect(page.locator("table.operations td.by")).to_have_text("ops")
    expect(page.locator("table.operations")).to_contain_text("web-b")
    expect(page.locator("ul.events")).to_contain_text("resume by ops")
    expect(page.locator("ul.events")).to_contain_text("web-a")
    shot(page, "24-story-completed")

    # Nothing needs attention any more.
    page.click("nav a:text-is('Needs attention')")
    expect(page.locator("p.all-clear")).to_be_visible()
    shot(page, "25-attention-clear")
    page.click("nav a:text-is('Charts')")
    expect(page.locator("h1")).to_have_text("Charts")
    shot(page, "26-charts")
    browser.close()
print("OK", flush=True)
