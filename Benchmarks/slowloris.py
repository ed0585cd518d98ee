#!/usr/bin/env python3
"""Slowloris against `vipsload serve`, and what a normal client sees meanwhile. Standard library only.

    Benchmarks/slowloris.py --bin PATH [--bin-name NAME] [--connections 1024] [--addresses 9]
                            [--interval 5] [--duration 60] [--corpus DIR] [-- SERVE_FLAGS...]

Starts `PATH serve` on 127.0.0.1 (a free port, `--root` the corpus, `--quiet`, plus SERVE_FLAGS),
then, for --duration seconds:
- the attack: --connections sockets, bound round-robin to the loopback source addresses
  127.0.0.2 ... 127.0.0.(1 + --addresses), each sends `GET / HTTP/1.1\\r\\nX-Slow: ` and then one
  byte every --interval seconds (the sockets' phases spread evenly), a header that never ends. A
  socket the server closes is opened again (an attacker keeps its crowd up);
- a normal client, from 127.0.0.1, a fresh connection per request: GET /health once a second, and
  once a second an image (a JPEG of the corpus fitted into a box whose width changes every time,
  so each is made, not a cache hit), each with a 15 s limit.
Then it prints the normal requests' latencies (median, max) and failures, the attack's counts and
the server's slowloris counters from /metrics, stops the server (SIGTERM, then SIGKILL after 15 s)
and closes every socket. Only loopback addresses; everything it starts ends with it.
"""

import argparse
import errno
import os
import selectors
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request


def start_server(binary, corpus, extra):
    command = [binary, "serve", "--bind", "127.0.0.1", "--port", "0", "--root", corpus, "--quiet", *extra]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = server.stderr.readline()
        if not line:
            break
        if "listening on http://" in line:
            port = int(line.strip().rsplit(":", 1)[1])
            # Keep draining stderr so the server never blocks on a full pipe.
            threading.Thread(target=lambda: [None for _ in server.stderr], daemon=True).start()
            return server, port
    server.kill()
    raise SystemExit(f"slowloris: {' '.join(command)} did not start")


def stop_server(server):
    server.send_signal(signal.SIGTERM)
    try:
        server.wait(timeout=15)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


class Attack:
    """The trickling crowd, run by one thread over nonblocking sockets."""

    def __init__(self, port, connections, addresses, interval):
        self.port = port
        self.sources = [f"127.0.0.{2 + index}" for index in range(addresses)]
        self.count = connections
        self.interval = interval
        self.selector = selectors.DefaultSelector()
        self.sockets = [None] * connections
        self.next_send = [0.0] * connections
        self.connected = [False] * connections
        self.opened = 0
        self.closed_by_server = 0
        self.bytes_sent = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def open(self, index, now):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        sock.bind((self.sources[index % len(self.sources)], 0))
        code = sock.connect_ex(("127.0.0.1", self.port))
        if code not in (0, errno.EINPROGRESS):
            sock.close()
            self.sockets[index] = None
            self.next_send[index] = now + 1
            return
        self.sockets[index] = sock
        self.connected[index] = False
        self.selector.register(sock, selectors.EVENT_WRITE, index)
        self.opened += 1

    def drop(self, index, now, by_server):
        sock = self.sockets[index]
        if sock is not None:
            self.selector.unregister(sock)
            sock.close()
        self.sockets[index] = None
        self.connected[index] = False
        if by_server:
            self.closed_by_server += 1
        # Opened again on the next pass (not in a tight loop).
        self.next_send[index] = now + 0.05

    def run(self):
        start = time.monotonic()
        for index in range(self.count):
            self.open(index, start)
            self.next_send[index] = start + self.interval * (index + 1) / self.count
        while not self.stop.is_set():
            now = time.monotonic()
            for key, events in self.selector.select(timeout=0.05):
                index = key.data
                sock = self.sockets[index]
                if not self.connected[index]:
                    if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) != 0:
                        self.drop(index, now, by_server=True)
                        continue
                    try:
                        sock.send(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
                    except OSError:
                        self.drop(index, now, by_server=True)
                        continue
                    self.connected[index] = True
                    self.selector.modify(sock, selectors.EVENT_READ, index)
                    continue
                try:
                    data = sock.recv(4096)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if not data:
                    self.drop(index, now, by_server=True)
            now = time.monotonic()
            for index in range(self.count):
                if self.next_send[index] > now:
                    continue
                if self.sockets[index] is None:
                    self.open(index, now)
                    self.next_send[index] = now + self.interval
                    continue
                self.next_send[index] = now + self.interval
                if not self.connected[index]:
                    continue
                try:
                    self.sockets[index].send(b"a")
                    self.bytes_sent += 1
                except BlockingIOError:
                    pass
                except OSError:
                    self.drop(index, now, by_server=True)
        for index in range(self.count):
            if self.sockets[index] is not None:
                self.selector.unregister(self.sockets[index])
                self.sockets[index].close()

    def established(self):
        return sum(1 for flag in self.connected if flag)


def normal_client(port, path_for, results, stop, limit=15):
    """One request a second (a fresh connection each), latencies or failures into `results`."""
    tick = 0
    start = time.monotonic()
    while not stop.is_set():
        path = path_for(tick)
        began = time.monotonic()
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=limit) as response:
                response.read()
                status = response.status
            results.append(("ok" if status == 200 else f"status {status}", time.monotonic() - began))
        except Exception as error:  # noqa: BLE001 (every failure counts, whatever its kind)
            results.append((type(error).__name__, time.monotonic() - began))
        tick += 1
        delay = start + tick - time.monotonic()
        if delay > 0:
            stop.wait(delay)


def metric(port, names):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=15) as response:
            text = response.read().decode()
    except Exception as error:  # noqa: BLE001
        return {"error": type(error).__name__}
    values = {}
    for line in text.splitlines():
        for name in names:
            if line.startswith(name + " ") or line.startswith(name + "{"):
                values[line.rsplit(" ", 1)[0]] = line.rsplit(" ", 1)[1]
    return values


def summary(name, results):
    times = [seconds for outcome, seconds in results if outcome == "ok"]
    failures = [outcome for outcome, _ in results if outcome != "ok"]
    kinds = {kind: failures.count(kind) for kind in sorted(set(failures))}
    median = f"{statistics.median(times) * 1000:.1f} ms" if times else "-"
    worst = f"{max(times) * 1000:.1f} ms" if times else "-"
    slowest = f"{max(s for _, s in results) * 1000:.0f} ms" if results else "-"
    return (f"{name:8} requests {len(results):3}  ok {len(times):3}  median {median:>9}  max {worst:>9}  "
            f"failures {len(failures)} {kinds if kinds else ''}  (slowest incl. failures {slowest})")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", required=True, help="the vipsload binary to attack")
    parser.add_argument("--bin-name", default=None, help="its name in the output")
    parser.add_argument("--connections", type=int, default=1024)
    parser.add_argument("--addresses", type=int, default=9, help="source addresses 127.0.0.2 on")
    parser.add_argument("--interval", type=float, default=5, help="seconds between a socket's bytes")
    parser.add_argument("--duration", type=float, default=60)
    parser.add_argument("--corpus", default=None, help="folder with jpeg-small/ (default: `vipsload corpus`)")
    parser.add_argument("serve_flags", nargs="*", help="more `vipsload serve` flags (after --)")
    options = parser.parse_args()
    if not 1 <= options.addresses <= 250:
        raise SystemExit("slowloris: --addresses must be 1 to 250 (127.0.0.2 ... 127.0.0.251)")
    corpus = options.corpus or subprocess.run(
        [options.bin, "corpus"], check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
    image = sorted(os.listdir(os.path.join(corpus, "jpeg-small")))[0]
    server, port = start_server(options.bin, corpus, options.serve_flags)
    attack = Attack(port, options.connections, options.addresses, options.interval)
    stop = threading.Event()
    health, images = [], []
    try:
        attack.thread.start()
        # The crowd first: the table fills within a few seconds.
        time.sleep(min(5, options.duration / 4))
        established = attack.established()
        clients = [
            threading.Thread(target=normal_client, args=(port, lambda _: "/health", health, stop), daemon=True),
            threading.Thread(
                target=normal_client,
                args=(port, lambda tick: f"/_/rs:fit:{200 + tick % 200}:600/plain/local:///jpeg-small/{image}@jpg",
                      images, stop),
                daemon=True),
        ]
        for client in clients:
            client.start()
        stop.wait(options.duration)
        stop.set()
        for client in clients:
            client.join(timeout=20)
        counters = metric(port, ["vipsload_http_header_timeouts_total", "vipsload_http_connections_evicted_total",
                                 "vipsload_http_connections", "process_cpu_seconds_total"])
    finally:
        stop.set()
        attack.stop.set()
        attack.thread.join(timeout=10)
        stop_server(server)
    name = options.bin_name or options.bin
    print(f"{name}: {options.connections} trickling connections from {options.addresses} addresses, "
          f"1 byte every {options.interval:g} s, {options.duration:g} s")
    print(f"  attack: {established} connected after the ramp, {attack.opened} opened in all, "
          f"{attack.closed_by_server} closed by the server, {attack.bytes_sent} bytes trickled")
    print("  " + summary("/health", health))
    print("  " + summary("image", images))
    print(f"  /metrics at the end: {counters}")


if __name__ == "__main__":
    sys.exit(main())
