#!/usr/bin/env python3
"""The pile-up of issue 30, finding 2, against a `vipsload serve` it starts (loopback only).

Heavy requests (`rs:fit:8192:8192:0:1`: a 4000x3000 JPEG extended onto an 8192x8192 canvas, encoded as AVIF) a few at a time, then
ordinary uncached thumbnails one after another; prints the server's peak RSS (VmHWM), the
heavy and thumbnail statuses and latencies, and the seconds from the last heavy answer until
the server's CPU time stops growing for a second (sampled every 100 ms from /proc/PID/stat).

    python3 Benchmarks/pileup.py --binary .build/release/vipsload [--timeout 5]
        [--memory-budget MB] [--photo photo.jpg] [--serve-arg=--flag ...]

`--measure-encoders` instead makes one large image per output format, each in a fresh server,
and prints VmHWM's growth over a warmed-up server per output pixel (the figures behind
RenderMemoryEstimate.encoderBytesPerPixel).

Everything is bounded in time: every request has a client timeout, the idle wait stops after
--idle-limit seconds, and the server is killed at the end whatever happened.
"""

import argparse
import concurrent.futures
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

TICKS = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def make_photo(path):
    """A photo-like 4000x3000 JPEG: blurred colour noise (needs the `vips` CLI)."""
    folder = tempfile.mkdtemp(prefix="pileup-photo-")
    try:
        for band in "rgb":
            subprocess.run(["vips", "gaussnoise", f"{folder}/{band}.v", "4000", "3000", "--sigma", "60",
                            "--mean", "128"], check=True)
        subprocess.run(["vips", "bandjoin", f"{folder}/r.v {folder}/g.v {folder}/b.v", f"{folder}/rgb.v"],
                       check=True)
        subprocess.run(["vips", "gaussblur", f"{folder}/rgb.v", f"{folder}/blur.v", "2"], check=True)
        subprocess.run(["vips", "cast", f"{folder}/blur.v", f"{folder}/u.v", "uchar"], check=True)
        subprocess.run(["vips", "copy", f"{folder}/u.v", f"{path}[Q=85]"], check=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def status_field(pid, name):
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith(name + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def cpu_seconds(pid):
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICKS
    except (OSError, IndexError, ValueError):
        return None


class Server:
    def __init__(self, binary, root, args):
        self.port = free_port()
        command = [binary, "serve", "--port", str(self.port), "--root", root] + args
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit("server exited: " + self.process.stderr.read().decode(errors="replace"))
            try:
                if self.get("/health", 2)[0] == 200:
                    return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise SystemExit("server did not answer /health within 20 s")

    @property
    def pid(self):
        return self.process.pid

    def get(self, path, timeout):
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            start = time.monotonic()
            connection.request("GET", path)
            response = connection.getresponse()
            body = response.read()
            return response.status, time.monotonic() - start, body
        finally:
            connection.close()

    def metric(self, name):
        _, _, body = self.get("/metrics", 5)
        for line in body.decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        return None

    def stop(self):
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=10)


def timed_get(server, path, timeout):
    try:
        status, seconds, _ = server.get(path, timeout)
        return status, seconds, time.monotonic()
    except OSError as error:
        return f"error:{type(error).__name__}", None, time.monotonic()


def pileup(options, root):
    server = Server(options.binary, root, ["--timeout", str(options.timeout)] + options.serve_arg)
    try:
        heavy_path = "/unsafe/rs:fit:8192:8192:0:1/plain/local:///photo.jpg@avif"
        client_timeout = options.timeout + 30
        samples = []
        stop = threading.Event()

        def sample():
            while not stop.is_set():
                samples.append((time.monotonic(), cpu_seconds(server.pid)))
                time.sleep(0.1)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        heavy = []
        started = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(options.concurrency) as pool:
            # Each heavy request is distinct (a cache buster), so none is coalesced or cached.
            futures = [pool.submit(timed_get, server, f"/unsafe/cb:h{i}" + heavy_path[len("/unsafe"):],
                                   client_timeout) for i in range(options.heavy)]
            for future in futures:
                heavy.append(future.result())
        last_heavy = max(answered for _, _, answered in heavy)
        heavy_metrics = {name: server.metric(name) for name in (
            "vipsload_memory_admission_budget_bytes", "vipsload_memory_admission_refusals_total")}
        thumbs = []
        for i in range(options.thumbs):
            thumbs.append(timed_get(server, f"/unsafe/rs:fit:300:300/cb:t{i}/plain/local:///photo.jpg@jpg",
                                    client_timeout))
        thumbs_done = time.monotonic()
        # Idle: CPU time has not grown for a whole second.
        deadline = time.monotonic() + options.idle_limit
        idle_at = None
        while time.monotonic() < deadline:
            time.sleep(0.1)
            recent = [cpu for at, cpu in samples if at >= time.monotonic() - 1.0]
            if len(recent) >= 9 and recent[0] is not None and recent[-1] == recent[0]:
                window_start = time.monotonic() - 1.0
                grown = [at for (at, cpu), (_, nxt) in zip(samples, samples[1:]) if nxt != cpu]
                idle_at = max([a for a in grown if a <= window_start] + [last_heavy])
                break
        stop.set()
        sampler.join()
        result = {
            "binary": options.binary,
            "serve_args": ["--timeout", str(options.timeout)] + options.serve_arg,
            "peak_rss_mib": round(status_field(server.pid, "VmHWM") / 2**20, 1),
            "heavy_statuses": [s for s, _, _ in heavy],
            "heavy_latencies_s": [round(t, 2) if t is not None else None for _, t, _ in heavy],
            "heavy_phase_s": round(last_heavy - started, 2),
            "thumb_statuses": [s for s, _, _ in thumbs],
            "thumb_latencies_s": [round(t, 3) if t is not None else None for _, t, _ in thumbs],
            "thumbs_done_after_last_heavy_s": round(thumbs_done - last_heavy, 2),
            "idle_after_last_heavy_s": round(idle_at - last_heavy, 1) if idle_at else f">{options.idle_limit}",
            "metrics": heavy_metrics,
        }
        print(json.dumps(result, indent=1))
    finally:
        server.stop()


def measure_encoders(options, root):
    # Bitmaps the 4096-px enlargement holds besides the encoder: the 4000x3000 decode and the 4096x3072 result.
    side = options.encoder_side
    out_pixels = side * (side * 3 // 4)
    bitmaps = (4000 * 3000 + out_pixels) * 3
    for extension in ("jpg", "png", "webp", "avif"):
        server = Server(options.binary, root, ["--timeout", "120"] + options.serve_arg)
        try:
            server.get("/unsafe/rs:fit:300:300/plain/local:///photo.jpg@jpg", 60)
            before = status_field(server.pid, "VmHWM")
            status, seconds, body = server.get(
                f"/unsafe/rs:fit:{side}:{side}:1/plain/local:///photo.jpg@{extension}", 300)
            after = status_field(server.pid, "VmHWM")
            per_pixel = (after - before - bitmaps) / out_pixels
            print(f"{extension}: status {status}, {seconds:.1f} s, {len(body)} bytes, VmHWM {before >> 20} -> "
                  f"{after >> 20} MiB, encoder ~{per_pixel:.2f} B per output pixel ({out_pixels / 1e6:.1f} MP)")
        finally:
            server.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", default=".build/release/vipsload")
    parser.add_argument("--photo", help="a 4000x3000 JPEG (default: one is generated with the vips CLI)")
    parser.add_argument("--timeout", type=int, default=5)
    parser.add_argument("--heavy", type=int, default=16)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--thumbs", type=int, default=20)
    parser.add_argument("--idle-limit", type=float, default=180)
    parser.add_argument("--serve-arg", action="append", default=[], help="another flag for serve (repeat)")
    parser.add_argument("--measure-encoders", action="store_true")
    parser.add_argument("--encoder-side", type=int, default=4096)
    options = parser.parse_args()
    root = tempfile.mkdtemp(prefix="pileup-root-")
    try:
        photo = os.path.join(root, "photo.jpg")
        if options.photo:
            shutil.copy(options.photo, photo)
        else:
            make_photo(photo)
        if options.measure_encoders:
            measure_encoders(options, root)
        else:
            pileup(options, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
