#!/usr/bin/python3
"""A real browser against `vipsload serve`: headless Chromium (Debian's chromium and
chromium-driver, driven by Debian's python3-selenium; nothing is downloaded) loads two pages.

1. The gallery: GALLERY (240) lazy-loaded `<img loading="lazy">`, every one a distinct thumbnail
   of a generated JPEG, PNG or WebP under `--root`. The page is scrolled to the end a viewport at
   a time, each step waiting until every image that came into view (an IntersectionObserver marks
   them) has finished. Every image that came into view must have loaded (`naturalWidth > 0`) and
   none may be broken (an `error` event, or complete with no width).

2. The recycled cells (seed 004's table view): CELLS `<img>` elements whose `src` is changed, as a
   virtualised list reuses its cells, ROUNDS times. The sources of every round but the last come
   from an origin this script runs, which holds each download until its client goes away, so a
   cell's previous request is always still in flight when the cell is reused: abandonment is
   deterministic, no timing decides it. Each round waits for the events that prove the chain:
   the browser cancels the old request, `vipsload serve` counts the hang-up
   (`vipsload_cancelled_total`) and cancels its download (the origin sees its connection close).
   The last round's sources are served at once; its images must load, and then the server must be
   idle again (`vipsload_queue_depth` 0, no request in flight), the decodes freed.

Screenshots of both pages are saved under --out (gallery.png, recycle.png). Exit status 0 when
every check passes, 1 with the reason otherwise. Every process it starts (the server, chromedriver
and Chromium) is ended on the way out, on errors and on SIGINT/SIGTERM too; its temporary folder
is removed.

    Tests/Browser/serve_browser.py --vipsload .build/debug/vipsload --out .build/browser-test
"""

import argparse
import urllib.parse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from held_origin import HeldOrigin, OriginTimeout  # noqa: E402

GALLERY = 240
CELLS = 4
ROUNDS = 4
WAIT = 90  # seconds any one awaited event may take before the test fails (a loaded CI machine)


class Failure(Exception):
    """A check failed; the message says which."""


def on_signal(number, _frame):
    raise KeyboardInterrupt(f"signal {number}")


# ---------------------------------------------------------------------------------------------
# Images: generated with libvips' command line, one hue each, in three formats.


def make_sources(folder, count):
    """`count` 640×480 images (JPEG, PNG, WebP in turn) in `folder`; their names."""
    names = []
    for index in range(count):
        # A hue per image and a vertical ramp, so the screenshot shows which image is which.
        r, g, b = [(index * step) % 256 for step in (67, 131, 199)]
        ppm = os.path.join(folder, f"source-{index}.ppm")
        with open(ppm, "wb") as f:
            f.write(b"P6 640 480 255\n")
            for y in range(480):
                shade = 96 + y * 159 // 479
                f.write(bytes([r * shade // 255, g * shade // 255, b * shade // 255]) * 640)
        extension = ("jpg", "png", "webp")[index % 3]
        name = f"source-{index}.{extension}"
        subprocess.run(["vips", "copy", ppm, os.path.join(folder, name)], check=True)
        os.remove(ppm)
        names.append(name)
    return names


# ---------------------------------------------------------------------------------------------
# The server under test


class ImageServer:
    def __init__(self, binary, root, work, extra):
        self.log = os.path.join(work, "serve.log")
        self.command = [binary, "serve", "--port", "0", "--root", root, "--allow-source", "127.0.0.1:*",
                        "--allow-private-sources"] + extra
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(self.command, stdout=out, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True)
        self.base = None
        deadline = time.monotonic() + WAIT
        while self.base is None:
            match = re.search(r"listening on (http://\S+)", self.read_log())
            if match:
                self.base = match.group(1).rstrip("/")
            elif self.process.poll() is not None:
                raise Failure(f"vipsload serve exited with {self.process.returncode}:\n{self.read_log()}")
            elif time.monotonic() > deadline:
                raise Failure(f"vipsload serve did not say where it listens:\n{self.read_log()}")
            else:
                time.sleep(0.05)  # reading a log the server is about to write; nothing measured
        status, _ = self.get("/health")
        if status != 200:
            raise Failure(f"/health answered {status}")

    def read_log(self):
        with open(self.log, errors="replace") as f:
            return f.read()

    def get(self, path):
        try:
            with urllib.request.urlopen(self.base + path, timeout=30) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()

    def metrics(self):
        status, body = self.get("/metrics")
        if status != 200:
            raise Failure(f"/metrics answered {status}")
        values = {}
        for line in body.decode().splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                values[name] = float(value)
        return values

    def metric(self, name):
        return sum(v for k, v in self.metrics().items() if k == name or k.startswith(name + "{"))

    def wait_metric(self, name, predicate, what):
        """Polls /metrics until `predicate(value)`: waiting for the server's state, not for time."""
        deadline = time.monotonic() + WAIT
        while True:
            value = self.metric(name)
            if predicate(value):
                return value
            if time.monotonic() > deadline:
                raise Failure(f"{what}: {name} is {value} after {WAIT} s")
            time.sleep(0.05)

    def stop(self):
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        return self.process.returncode


def thumbnail_path(source, width, height):
    # A plain source is percent-encoded (imgproxy's rule): its own query would end the path.
    return f"/insecure/rs:fit:{width}:{height}/q:80/plain/{urllib.parse.quote(source, safe=':/')}@jpg"


# ---------------------------------------------------------------------------------------------
# Pages

STYLE = """<style>
body { margin: 0; font: 14px sans-serif; background: #222; color: #eee; }
h1 { font-size: 16px; margin: 8px; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, 256px); gap: 6px; padding: 6px; }
img { width: 256px; height: 192px; background: #444; display: block; }
</style>"""


def gallery_page(server, names):
    items = []
    for index in range(GALLERY):
        name = names[index % len(names)]
        # Distinct boxes, so every image is a cache miss and a decode of its own.
        width = 256 - index // len(names)
        src = server.base + thumbnail_path(f"local:///{name}", width, 192)
        items.append(f'<img loading="lazy" alt="{index}" data-index="{index}" src="{src}">')
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>gallery</title>{STYLE}</head>
<body><h1>{GALLERY} lazy-loaded thumbnails from vipsload serve</h1><div class="grid">
{chr(10).join(items)}
</div>
<script>
window.broken = [];
for (const img of document.images) img.addEventListener("error", () => window.broken.push(img.dataset.index));
// Marks the images now in the viewport as seen (called by the test after each scroll, so what
// counts as "came into view" does not depend on when an observer's callback runs).
window.markInView = () => {{
  for (const img of document.images) {{
    const r = img.getBoundingClientRect();
    if (r.bottom > 0 && r.top < window.innerHeight && r.right > 0 && r.left < window.innerWidth)
      img.dataset.seen = "1";
  }}
  return true;
}};
</script></body></html>"""


def recycle_page():
    cells = "".join(f'<img id="cell{i}" alt="cell {i}">' for i in range(CELLS))
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>recycle</title>{STYLE}</head>
<body><h1>{CELLS} recycled cells, {ROUNDS} rounds</h1><div class="grid">{cells}</div>
<script>
window.broken = [];
for (const img of document.images) img.addEventListener("error", () => {{
  if (img.getAttribute("src")) window.broken.push(img.getAttribute("src"));
}});
// A virtualised list reusing its cells, as seed 004's table view does: a reused cell first drops
// its image (removing src aborts the request still in flight, the HTML standard's "abort the image
// request", with no error event; Chromium keeps loading an image whose src is merely replaced),
// then, on the next frame, shows the next row's.
window.reuse = sources => {{
  sources.forEach((src, i) => {{ document.getElementById("cell" + i).removeAttribute("src"); }});
  requestAnimationFrame(() => sources.forEach((src, i) => {{ document.getElementById("cell" + i).src = src; }}));
}};
</script></body></html>"""


# ---------------------------------------------------------------------------------------------
# The browser


def start_browser(args, work):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = args.chromium
    # eager: get() returns at DOMContentLoaded, so held images never make a page-load timeout
    # stop the page (which would cancel them for another reason).
    options.page_load_strategy = "eager"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--no-first-run", "--disable-background-networking", "--disable-extensions",
                 "--disable-component-update", "--hide-scrollbars", "--window-size=1100,900",
                 f"--user-data-dir={os.path.join(work, 'chromium-profile')}"):
        options.add_argument(flag)
    service = Service(executable_path=args.chromedriver, log_output=os.path.join(work, "chromedriver.log")) \
        if "log_output" in Service.__init__.__code__.co_varnames else \
        Service(executable_path=args.chromedriver, log_path=os.path.join(work, "chromedriver.log"))
    return webdriver.Chrome(service=service, options=options)


def wait_js(driver, script, what):
    """Waits until `script` (an expression) is true in the page, polling it."""
    deadline = time.monotonic() + WAIT
    while not driver.execute_script(f"return !!({script});"):
        if time.monotonic() > deadline:
            raise Failure(f"{what} did not happen within {WAIT} s")
        time.sleep(0.05)


def gallery(driver, server, origin, out):
    driver.get(f"http://127.0.0.1:{origin.port}/page/gallery.html")
    wait_js(driver, f"document.images.length === {GALLERY}", "the gallery page's images")
    settled = "window.markInView() && [...document.querySelectorAll('img[data-seen]')].every(i => i.complete)"
    steps = 0
    while True:
        wait_js(driver, settled, f"the images in view after {steps} scrolls finishing")
        at_end = driver.execute_script(
            "return window.scrollY + window.innerHeight >= document.documentElement.scrollHeight - 1;")
        if at_end:
            break
        driver.execute_script("window.scrollBy(0, Math.floor(window.innerHeight * 0.8));")
        steps += 1
        if steps == 3:
            driver.save_screenshot(os.path.join(out, "gallery.png"))
    report = driver.execute_script("""
      const seen = [...document.querySelectorAll('img[data-seen]')];
      return { seen: seen.length,
               loaded: seen.filter(i => i.complete && i.naturalWidth > 0).length,
               unloaded: seen.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.dataset.index),
               broken: window.broken, widths: seen.slice(0, 3).map(i => i.naturalWidth) };""")
    report["broken"] = report["broken"][:10] + (["…"] if len(report["broken"]) > 10 else [])
    report["unloaded"] = report["unloaded"][:10] + (["…"] if len(report["unloaded"]) > 10 else [])
    driver.save_screenshot(os.path.join(out, "gallery-end.png"))
    print(f"gallery: {steps} scrolls, {report['seen']} of {GALLERY} images came into view, "
          f"{report['loaded']} loaded (first widths {report['widths']}), broken {report['broken']}")
    if report["seen"] != GALLERY:
        raise Failure(f"only {report['seen']} of {GALLERY} images came into view while scrolling to the end")
    if report["unloaded"] or report["broken"]:
        raise Failure(f"images in view that did not load: {report['unloaded']}; broken: {report['broken']}")


def recycle(driver, server, origin, out, names):
    cancelled_before = server.metric("vipsload_cancelled_total")
    driver.get(f"http://127.0.0.1:{origin.port}/page/recycle.html")
    wait_js(driver, "typeof window.reuse === 'function'", "the recycle page's script")
    abandoned = 0
    previous = []
    for round_index in range(ROUNDS):
        last = round_index == ROUNDS - 1
        kind = "now" if last else "hold"
        sources = [f"http://127.0.0.1:{origin.port}/{kind}/{names[(round_index * CELLS + i) % len(names)]}"
                   f"?round={round_index}" for i in range(CELLS)]
        paths = [s.split(str(origin.port), 1)[1] for s in sources]
        driver.execute_script("window.reuse(arguments[0]);",
                              [server.base + thumbnail_path(s, 240, 180) for s in sources])
        if previous:
            # The old requests were in flight (held at the origin): the reuse abandons them, and
            # the server must cancel their downloads; the origin sees each connection close.
            origin.wait_for(lambda p=previous: all(x in origin.gone for x in p),
                            f"round {round_index - 1}'s downloads cancelled")
            abandoned += len(previous)
            server.wait_metric("vipsload_cancelled_total", lambda v, a=abandoned: v - cancelled_before >= a,
                               f"the {abandoned} abandoned requests counted as cancelled")
        if not last:
            origin.wait_for(lambda p=paths: all(x in origin.started for x in p),
                            f"round {round_index}'s downloads arriving")
            previous = paths
    wait_js(driver, "[...document.images].every(i => i.complete && i.naturalWidth > 0)",
            "the last round's images loading")
    broken = driver.execute_script("return window.broken;")
    if broken:
        raise Failure(f"broken images on the recycle page: {broken}")
    driver.save_screenshot(os.path.join(out, "recycle.png"))
    # The abandoned decodes are freed: nothing is queued or in flight any more, and a new request
    # (a thumbnail not asked for before) completes.
    server.wait_metric("vipsload_queue_depth", lambda v: v == 0, "the queue emptying")
    server.wait_metric("vipsload_http_requests_in_flight", lambda v: v <= 1, "the requests in flight ending")
    status, body = server.get(thumbnail_path(f"local:///{names[0]}", 100, 100))
    if status != 200 or not body.startswith(b"\xff\xd8"):
        raise Failure(f"a request after the recycling answered {status}")
    cancelled = server.metric("vipsload_cancelled_total") - cancelled_before
    print(f"recycle: {ROUNDS} rounds of {CELLS} cells, {abandoned} requests abandoned while in flight, "
          f"vipsload_cancelled_total +{cancelled:.0f}, origin saw {len(origin.gone)} downloads cancelled, "
          f"queue depth back to 0, a later request answered 200")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vipsload", required=True)
    parser.add_argument("--out", required=True, help="folder for the screenshots (created)")
    parser.add_argument("--chromium", default="/usr/lib/chromium/chromium")
    parser.add_argument("--chromedriver", default="/usr/bin/chromedriver")
    parser.add_argument("--serve-flag", action="append", default=[], help="an extra `vipsload serve` argument")
    args = parser.parse_args()
    for tool, package in ((args.chromium, "chromium"), (args.chromedriver, "chromium-driver")):
        if not os.access(tool, os.X_OK):
            print(f"serve_browser: {tool} is missing (apt-get install {package}; scripts/test.sh installs it)",
                  file=sys.stderr)
            return 1
    os.makedirs(args.out, exist_ok=True)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    work = tempfile.mkdtemp(prefix="vipsload-browser-")
    server = origin = driver = None
    status = 1
    try:
        root = os.path.join(work, "images")
        os.makedirs(root)
        names = make_sources(root, 24)
        sources = {name: os.path.join(root, name) for name in names}
        origin = HeldOrigin(sources, wait=WAIT)
        server = ImageServer(args.vipsload, root, work, args.serve_flag)
        origin.pages["gallery.html"] = gallery_page(server, names)
        origin.pages["recycle.html"] = recycle_page()
        driver = start_browser(args, work)
        gallery(driver, server, origin, args.out)
        recycle(driver, server, origin, args.out, names)
        status = 0
    except (Failure, OriginTimeout) as failure:
        print(f"serve_browser: FAILED: {failure}", file=sys.stderr)
        if server:
            print("--- vipsload serve's log (last lines) ---\n" + "\n".join([l for l in server.read_log().splitlines() if "GET /metrics" not in l][-30:]),
                  file=sys.stderr)
    except KeyboardInterrupt as interrupt:
        print(f"serve_browser: interrupted ({interrupt})", file=sys.stderr)
        status = 130
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if driver:
            driver.quit()
        if origin:
            origin.release_all()
        if server:
            exit_status = server.stop()
            if exit_status != 0:
                print(f"serve_browser: FAILED: vipsload serve exited {exit_status} after SIGTERM", file=sys.stderr)
                status = status or 1
        if origin:
            origin.stop()
        shutil.rmtree(work, ignore_errors=True)
    if status == 0:
        print(f"serve_browser: passed; screenshots in {args.out}")
    return status


if __name__ == "__main__":
    sys.exit(main())
