#!/usr/bin/python3
"""An HTTP origin on 127.0.0.1 that a test controls: it holds downloads until told to answer.

    GET /now/NAME     the file NAME at once
    GET /hold/NAME    the file NAME once released; until then the request is held, and a client
                      that hangs up meanwhile is recorded as gone (its download was cancelled)
    GET /page/NAME    a page the test registered (HeldOrigin.pages)

Used in-process by serve_browser.py (HeldOrigin), and as a process by
scripts/check-serve-scale-out.sh:

    held_origin.py DIR PORT_FILE    serves DIR's files; writes its port to PORT_FILE when ready;
                                    GET /control/state gives {"started", "gone", "answered"} (JSON
                                    lists of paths), GET /control/release answers every held request

Standard library only. Any query string is ignored when finding the file, so one file can be asked
for under many distinct URLs.
"""

import http.server
import json
import os
import select
import signal
import socket
import sys
import threading


class OriginTimeout(Exception):
    """An awaited event did not happen in time; the message says which."""


class HeldOrigin:
    def __init__(self, sources, wait=60, pages=None):
        self.sources, self.wait, self.pages = sources, wait, pages if pages is not None else {}
        self.condition = threading.Condition()
        self.started, self.gone, self.answered = [], [], []
        self.released = False
        origin = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                origin.handle(self)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def note(self, events, path):
        with self.condition:
            events.append(path)
            self.condition.notify_all()

    def wait_for(self, predicate, what):
        """Waits (on the origin's own events) until `predicate()` holds."""
        with self.condition:
            if not self.condition.wait_for(predicate, timeout=self.wait):
                raise OriginTimeout(f"the origin did not see {what} within {self.wait} s "
                                    f"(started {self.started}, gone {self.gone})")

    def release_all(self):
        with self.condition:
            self.released = True
            self.condition.notify_all()

    def state(self):
        with self.condition:
            return {"started": list(self.started), "gone": list(self.gone), "answered": list(self.answered)}

    def handle(self, request):
        path = request.path
        if path.startswith("/page/") and path[6:] in self.pages:
            self.send(request, "text/html; charset=utf-8", self.pages[path[6:]].encode())
            return
        if path == "/control/state":
            self.send(request, "application/json", json.dumps(self.state()).encode())
            return
        if path == "/control/release":
            self.release_all()
            self.send(request, "text/plain", b"released\n")
            return
        kind, _, name = path[1:].partition("/")
        name = name.split("?")[0]
        if kind not in ("now", "hold") or name not in self.sources:
            self.send(request, "text/plain", b"no such thing\n", status=404)
            return
        if kind == "hold" and not self.hold(request, path):
            return
        with open(self.sources[name], "rb") as f:
            body = f.read()
        self.send(request, "application/octet-stream", body)
        self.note(self.answered, path)

    def hold(self, request, path):
        """Holds until released (True) or until the client hangs up (False, recorded as gone)."""
        self.note(self.started, path)
        while True:
            with self.condition:
                if self.released:
                    return True
            readable, _, _ = select.select([request.connection], [], [], 0.05)
            if readable:
                try:
                    hung_up = not request.connection.recv(1, socket.MSG_PEEK)
                except OSError:
                    hung_up = True
                if hung_up:
                    self.note(self.gone, path)
                    request.close_connection = True
                    return False

    @staticmethod
    def send(request, content_type, body, status=200):
        try:
            request.send_response(status)
            request.send_header("Content-Type", content_type)
            request.send_header("Content-Length", str(len(body)))
            request.end_headers()
            request.wfile.write(body)
        except OSError:
            request.close_connection = True

    def stop(self):
        self.release_all()
        self.server.shutdown()
        self.server.server_close()


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    folder, port_file = sys.argv[1:]
    sources = {name: os.path.join(folder, name) for name in os.listdir(folder)}
    origin = HeldOrigin(sources)
    stopped = threading.Event()
    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, lambda *_: stopped.set())
    with open(port_file + ".part", "w") as f:
        f.write(f"{origin.port}\n")
    os.replace(port_file + ".part", port_file)
    stopped.wait()
    origin.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
