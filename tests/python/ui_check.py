"""Drives weir's dashboard (`/ui`) in headless Chromium (Debian's chromium and chromium-driver,
through selenium) for tests/it/ui.rs, and checks what a user would see:

  * the page loads and its console stays free of errors (Chromium's browser log, captured with
    goog:loggingPrefs, holds nothing at SEVERE);
  * every node of the graph named by --graph is on the page (its box in the SVG and its row);
  * the figures change while load runs (the sample counter moves, a node's rows/s goes above 0);
  * with --gather-node, that gather's box shows joins per second above 0 and its row the joins;
  * with --replica-figures NODE/REPLICA, the replicas table shows that remote replica's executor
    as it reports itself: jobs served above 0 and when it was last heard from;
  * after --kill-pid is SIGKILLed, the replica --kill-replica of node --kill-node shows as down
    within --down-deadline-s (the DOM is polled, nothing sleeps a fixed time);
  * with --hams-node, the node shows its primary, and after --kill-pid dies the new primary
    (--hams-new-primary) within --down-deadline-s;
  * with --repository-task, the repository page (#repository) lists the task with an instance;
  * with --path-click, the request-path panel lists that id; clicked, its timeline shows a bar
    for every node of --path-nodes; with --path-type, the same for an id typed into the panel.

--no-load skips the figures check (a test that sends no load).

Screenshots go to --screenshots (one per stage). Prints one JSON line of findings and exits 0
when every check passed, 1 otherwise (the line says which failed).
"""

import argparse
import json
import os
import signal
import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By


def browser(chromium, chromedriver, profile):
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in [
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1400,900",
        f"--user-data-dir={profile}",
    ]:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(executable_path=chromedriver), options=options)


def wait_for(what, check, deadline_s, poll_s=0.05):
    """Polls `check` until it returns something truthy or the deadline passes. The page redraws
    its tables on every sample, so an element found a moment ago may be gone when it is read: that
    poll counts as "not yet"."""
    end = time.monotonic() + deadline_s
    while True:
        try:
            got = check()
        except StaleElementReferenceException:
            got = None
        if got:
            return got
        if time.monotonic() >= end:
            raise TimeoutError(f"{what}: not seen within {deadline_s} s")
        time.sleep(poll_s)


def text(driver, css):
    found = driver.find_elements(By.CSS_SELECTOR, css)
    return found[0].text if found else None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--graph", required=True)
    p.add_argument("--nodes", required=True, help="comma-separated node ids")
    p.add_argument("--screenshots", required=True)
    p.add_argument("--kill-pid", type=int)
    p.add_argument("--kill-node")
    p.add_argument("--kill-replica")
    p.add_argument("--hams-node")
    p.add_argument("--hams-new-primary")
    p.add_argument("--repository-task")
    p.add_argument("--down-deadline-s", type=float, default=2.0)
    p.add_argument("--no-load", action="store_true")
    p.add_argument("--gather-node")
    p.add_argument("--replica-figures")
    p.add_argument("--path-click")
    p.add_argument("--path-type")
    p.add_argument("--path-nodes", default="")
    p.add_argument("--chromium", default="/usr/bin/chromium")
    p.add_argument("--chromedriver", default="/usr/bin/chromedriver")
    a = p.parse_args()
    os.makedirs(a.screenshots, exist_ok=True)
    findings = {"failed": [], "screenshots": []}

    def shot(name):
        path = os.path.join(a.screenshots, name + ".png")
        driver.save_screenshot(path)
        findings["screenshots"].append(path)

    def check(name, fn):
        try:
            findings[name] = fn()
        except Exception as e:  # a failed check is reported, the others still run
            findings["failed"].append(f"{name}: {e}")

    driver = browser(a.chromium, a.chromedriver, os.path.join(a.screenshots, "profile"))
    try:
        driver.get(f"{a.url}/ui#graph/{a.graph}")
        nodes = a.nodes.split(",")

        def all_nodes():
            for n in nodes:
                box = driver.find_elements(By.CSS_SELECTOR, f'svg g.node[data-node="{n}"]')
                row = driver.find_elements(By.CSS_SELECTOR, f'#nodes tr[data-node="{n}"]')
                if not box or not row:
                    return None
            return nodes

        check("nodes_on_page", lambda: wait_for("every node", all_nodes, 30))

        def moving():
            first = wait_for("a sample", lambda: text(driver, "#sample") not in (None, "–") and text(driver, "#sample"), 30)
            rows = wait_for(
                "rows/s above 0",
                lambda: next(
                    (
                        t
                        for t in (c.text for c in driver.find_elements(By.CSS_SELECTOR, "#nodes td.rows_per_s, #nodes td.jobs_per_s, #requests-per-s"))
                        if t not in ("", "–") and float(t) > 0
                    ),
                    None,
                ),
                30,
            )
            later = wait_for("a later sample", lambda: (text(driver, "#sample") or first) != first and text(driver, "#sample"), 30)
            return {"sample_from": first, "sample_to": later, "rows_per_s": rows}

        def number(t):
            try:
                return float(t)
            except (TypeError, ValueError):
                return None

        def gather_joins():
            fig = text(driver, f'svg text.figures[data-node="{a.gather_node}"]') or ""
            joins = number(fig.split(" joins/s")[0]) if " joins/s" in fig else None
            row = text(driver, f'#nodes tr[data-node="{a.gather_node}"] td.mech') or ""
            return joins and joins > 0 and row.startswith("joins ") and {"figures": fig, "row": row}

        def replica_figures():
            node, replica = a.replica_figures.split("/", 1)
            row = f'#replicas tr[data-node="{node}"][data-replica="{replica}"]'
            cells = {c: text(driver, f"{row} td.{c}") for c in ("alive", "heard_ms", "served", "errors", "in_flight", "rows_per_s")}
            served, heard = number(cells["served"]), number(cells["heard_ms"])
            return served and served > 0 and heard is not None and cells["alive"] == "alive" and cells

        if not a.no_load:
            check("figures_change", moving)
            if a.gather_node:
                check("gather_figures", lambda: wait_for("the gather's joins", gather_joins, 30))
            if a.replica_figures:
                check("replica_figures", lambda: wait_for("the executor's own figures", replica_figures, 30))
            shot("ui-under-load")

        def timeline_of(request_id):
            """Waits for the panel to show `request_id` with a bar per node of --path-nodes."""
            want = [n for n in a.path_nodes.split(",") if n]

            def shown():
                note = text(driver, "#path-note") or ""
                if not note.startswith(request_id + " "):
                    return None
                hops = driver.find_elements(By.CSS_SELECTOR, "#path-timeline g.hop")
                nodes = sorted({h.get_attribute("data-node") for h in hops})
                if not all(n in nodes for n in want):
                    return None
                bars = driver.find_elements(By.CSS_SELECTOR, "#path-timeline g.hop rect.bar")
                return {"id": request_id, "nodes": nodes, "bars": len(bars), "note": note}

            return wait_for(f"the timeline of {request_id}", shown, 30)

        if a.path_click:
            link = f'#path-ids a[data-request="{a.path_click}"]'

            def clicked():
                wait_for("the id in the panel's list", lambda: driver.find_elements(By.CSS_SELECTOR, link), 30)
                wait_for("a click on it", lambda: [e.click() for e in driver.find_elements(By.CSS_SELECTOR, link)[:1]], 30)
                return timeline_of(a.path_click)

            check("path_clicked", clicked)
            shot("ui-request-path")

        if a.path_type:
            def typed():
                box = driver.find_element(By.CSS_SELECTOR, "#path-id")
                box.clear()
                box.send_keys(a.path_type)
                driver.find_element(By.CSS_SELECTOR, "#path-show").click()
                return timeline_of(a.path_type)

            check("path_typed", typed)

        if a.hams_node:
            sel = f'svg text.mech[data-node="{a.hams_node}"]'
            def named_primary():
                t = text(driver, sel) or ""
                return t.startswith("primary ") and not t.startswith("primary none") and t

            check("hams_primary", lambda: wait_for("a primary", named_primary, 30))

        if a.kill_pid:
            if a.kill_replica:
                sel = f'circle.replica[data-node="{a.kill_node}"][data-replica="{a.kill_replica}"]'
                check("replica_alive_before", lambda: wait_for("replica alive", lambda: driver.find_elements(By.CSS_SELECTOR, sel + '[data-alive="true"]'), 30) and True)
            os.kill(a.kill_pid, signal.SIGKILL)
            killed = time.monotonic()
            if a.kill_replica:
                def down():
                    wait_for("replica down", lambda: driver.find_elements(By.CSS_SELECTOR, sel + '[data-alive="false"]'), a.down_deadline_s, 0.02)
                    return round(time.monotonic() - killed, 3)

                check("replica_down_after_s", down)
            if a.hams_new_primary:
                sel = f'svg text.mech[data-node="{a.hams_node}"]'
                want = f"primary {a.hams_new_primary} "
                check("new_primary", lambda: wait_for("the new primary", lambda: (text(driver, sel) or "").startswith(want) and text(driver, sel), a.down_deadline_s, 0.02))
            shot("ui-after-kill")

        if a.repository_task:
            driver.get(f"{a.url}/ui#repository")
            # The task, with an instance loaded (the test queried it once).
            task = f'.task[data-task="{a.repository_task}"]'
            check("repository_instance", lambda: wait_for("the task's instance", lambda: (text(driver, task + " span.state[data-worker]") or None), 30))
            shot("ui-repository")

        severe = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
        findings["console_errors"] = [e.get("message") for e in severe]
        if severe:
            findings["failed"].append(f"console errors: {findings['console_errors']}")
    finally:
        driver.quit()
    print(json.dumps(findings))
    sys.exit(1 if findings["failed"] else 0)


if __name__ == "__main__":
    main()
