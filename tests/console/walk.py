"""Walks the justonce console in a real Chromium, as a person would (driven by
tests/tests/console_browser.rs): a viewer logs in, opens a call's story, finds the
stuck effect and is refused its resolution; an operator resolves it after the
confirmation; a new call appears on the calls page without a reload; the operator's
token is revoked and its open session is refused at once. A screenshot of each page
goes to SHOTS. Prints "WAITING" and reads the new call's key from stdin when it is
ready for it, and "REVOKE" and reads a line once the token is revoked; exits
non-zero with the reason when a step fails.

usage: walk.py CHROMIUM BASE_URL VIEWER_TOKEN OPERATOR_TOKEN CALL_KEY EFFECT_KEY SHOTS
"""

import os
import sys

from playwright.sync_api import expect, sync_playwright

chromium, base, viewer, operator, call_key, effect_key, shots = sys.argv[1:8]
os.makedirs(shots, exist_ok=True)


def shot(page, name):
    page.screenshot(path=os.path.join(shots, name + ".png"), full_page=True)


def log_in(browser, token, name):
    page = browser.new_context().new_page()
    page.goto(base + "/console")
    expect(page.locator("h1")).to_have_text("Log in")
    if name == "viewer":
        shot(page, "01-login")
    page.fill("input[name=token]", token)
    page.click("button[type=submit]")
    expect(page.locator("h1")).to_have_text("Needs attention")
    expect(page.locator("nav .who")).to_contain_text(name)
    return page


with sync_playwright() as p:
    browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])

    # The viewer: the calls, one call's story, the stuck effect, and a refusal.
    page = log_in(browser, viewer, "viewer")
    # The stuck effect's call is the first thing the viewer sees.
    expect(page.locator(f'#attention tr[data-key="{call_key}"]')).to_be_visible()
    page.click("nav a:text-is('Calls')")
    expect(page.locator("h1")).to_have_text("Calls")
    shot(page, "02-calls")
    page.click(f'tr[data-key="{call_key}"] td.key a')
    expect(page.locator("h1")).to_have_text("Call")
    # The effect's key is shown short; its copy button carries the whole of it.
    expect(page.locator(f'section.effect button.copy[data-copy="{effect_key}"]')).to_have_count(1)
    shot(page, "03-story")
    page.click("text=Unresolved effects")
    row = page.locator(f'#unresolved tr[data-key="{effect_key}"]')
    expect(row).to_be_visible()
    expect(row.locator("a", has_text="Not performed")).to_have_count(0)
    shot(page, "04-unresolved-viewer")
    answer = page.goto(
        base + f"/console/confirm?action=resolve-not-performed&key={effect_key}"
    )
    assert answer.status == 403, f"the viewer got {answer.status}"
    expect(page.locator("p.message")).to_contain_text("only an operator")
    shot(page, "05-viewer-refused")

    # The operator: the same effect, a confirmation, the resolution, the audit.
    page = log_in(browser, operator, "operator")
    page.click("text=Unresolved effects")
    page.locator(f'#unresolved tr[data-key="{effect_key}"]').get_by_text(
        "Not performed"
    ).click()
    expect(page.locator("h1")).to_have_text("Resolve as not performed")
    shot(page, "06-confirm")
    page.click("#confirm")
    expect(page.locator("p.message")).to_contain_text("resolved as not_performed")
    shot(page, "07-resolved")
    page.click("text=Back to the call")
    expect(page.locator("table.operations td.by")).to_have_text("ops")
    shot(page, "08-story-audited")

    # The live view: a call made now appears without a reload.
    page.goto(base + "/console")
    page.wait_for_load_state("networkidle")
    print("WAITING", flush=True)
    new_key = sys.stdin.readline().strip()
    expect(page.locator(f'#calls tr[data-key="{new_key}"]')).to_be_visible(
        timeout=30_000
    )
    shot(page, "09-live")
    page.click("text=Charts")
    expect(page.locator("#per-tool")).to_contain_text("payments_refund")
    shot(page, "10-charts")

    # The operator's token is revoked: the session it opened ends with it.
    print("REVOKE", flush=True)
    sys.stdin.readline()
    answer = page.goto(base + "/console/unresolved")
    assert answer.status == 401, f"the revoked operator's session got {answer.status}"
    expect(page.locator("h1")).to_have_text("Log in")
    expect(page.locator("p.error")).to_contain_text("revoked")
    shot(page, "11-revoked")
    answer = page.goto(
        base + f"/console/confirm?action=forget&key={call_key}"
    )
    assert answer.status == 401, f"the revoked operator's confirm got {answer.status}"
    browser.close()
print("OK", flush=True)
