#!/usr/bin/env python3
"""Benchmarks `vipsload serve` against thumbor with wrk, in one run, on the same corpus and operation.

Run it through Benchmarks/serve.sh, which installs wrk, nginx, jemalloc and thumbor (in a venv),
builds `vipsload` in release and generates the corpus first. Standard library only.

Modes:
  bench (default)  cold, warm and remote-source runs; one table
  soak [MINUTES]   MINUTES (default 10) at saturation over a mixed corpus, once per allocator
                   setting; RSS every second; one table

The operation is the same for both servers: fit into W×H (W, H from 240 to 256, so every URL is
distinct and every request decodes, with the same JPEG shrink-on-load factor), EXIF orientation
applied, JPEG quality 80 out, baseline, metadata stripped.
  vipsload serve  /insecure/rs:fit:W:H/q:80/plain/local:///CLASS/FILE@jpg
  thumbor         /unsafe/fit-in/WxH/filters:quality(80):format(jpeg)/CLASS/FILE
With `--vipsload-urls fit,client`, vipsload gets a second row per class with the URLs the PyPI
`imgproxy` client (1.0.0) builds at its defaults, `rs:auto`, `g:ce`, no extension (the server
chooses the format), with `q:80` as its `advanced` option, the source base64-encoded:
  vipsload serve  /insecure/q:80/g:ce/rs:auto:W:H:0/BASE64(local:///CLASS/FILE)
`auto` on a box of the image's orientation is a fill (a crop to exactly W×H), so the row's output
differs from thumbor's fit-in; the column compares throughput per request, and `auto` with `fit`.
thumbor runs as its docs deploy it: `thumbor --processes N` (N = the cores, tornado's forked
processes sharing one socket), the file loader, no storage of originals, no result storage,
RESPECT_ORIENTATION on, PROGRESSIVE_JPEG off and the BICUBIC filter (VipsLoad's fast mode
reduces with a Catmull-Rom cubic; thumbor's default LANCZOS would cost it more).

Every server runs fresh for its row and is warmed with one request per file (at a size outside
the measured range) before wrk starts. Peak RSS and PSS are sampled from /proc over the server's
whole process tree (PSS counts pages shared by forked processes once), CPU is the tree's user +
system time over the run. The ratio column is VipsLoad ÷ thumbor (req/s), or remote ÷ local.
"""

import argparse
import base64
import json
import os
import pwd
import random
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
LUA = os.path.join(HERE, "serve.lua")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
CORES = len(os.sched_getaffinity(0))

# The measured range of boxes: widths and heights 240…256 (17 × 17 = 289 distinct boxes a file).
SIZES = range(240, 257)
# A size outside that range, for the warm-up requests (so they never serve a measured URL).
WARMUP_SIZE = 232


class Failure(Exception):
    """A step of the benchmark failed; the message says which and why."""


# ---------------------------------------------------------------------------------------------
# Processes: every one this script starts is a process group it kills on the way out.

children = []


def spawn(command, log, env=None, cwd=None):
    """Starts `command` in its own process group, output to `log`; killed by `stop` or at exit."""
    out = open(log, "ab")
    process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                               env=env, cwd=cwd, start_new_session=True)
    out.close()
    process.log = log
    children.append(process)
    return process


def stop(process, signal_number=signal.SIGTERM, grace=10):
    """Signals the process group, waits up to `grace` seconds, then kills what is left."""
    if process not in children:
        return process.returncode
    try:
        os.killpg(process.pid, signal_number)
    except ProcessLookupError:
        pass
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(process.pid, signal.SIGKILL)  # forked workers (thumbor's) outlive their parent
    except ProcessLookupError:
        pass
    process.wait()
    children.remove(process)
    return process.returncode


def stop_all():
    for process in list(children):
        stop(process, grace=3)


def on_signal(number, _frame):
    raise KeyboardInterrupt(f"signal {number}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fetch(url, timeout=60):
    """(status, headers, body) of a GET, errors included."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()


def wait_ready(process, url, what, timeout=120):
    """Polls `url` until it answers 200 (the server's readiness), or fails if the process exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise Failure(f"{what} exited with status {process.returncode} before it was ready; "
                          f"its log:\n{tail(process.log)}")
        try:
            status, _, _ = fetch(url, timeout=2)
            if status == 200:
                return
        except OSError:
            pass
        time.sleep(0.1)  # polling a server that is starting; no measurement depends on it
    raise Failure(f"{what} was not ready at {url} within {timeout} s; its log:\n{tail(process.log)}")


def tail(path, lines=20):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return "(no log)"


# ---------------------------------------------------------------------------------------------
# /proc sampling of a process tree


def tree(root):
    """The pids of `root` and all its descendants."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                parents.setdefault(int(fields[1]), []).append(int(entry))
            except (OSError, IndexError, ValueError):
                pass
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(parents.get(pid, []))
    return found


def cpu_seconds(root):
    """User + system seconds of the tree's live processes, plus what the root reaped."""
    total = 0
    for pid in tree(root):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
            if pid == root:
                total += int(fields[13]) + int(fields[14])
        except (OSError, IndexError, ValueError):
            pass
    return total / CLOCK_TICKS


def cpu_by_process(root):
    """{pid: user + system seconds} of the tree's live processes."""
    result = {}
    for pid in tree(root):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            result[pid] = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
        except (OSError, IndexError, ValueError):
            pass
    return result


def memory(root):
    """(RSS, PSS) in bytes summed over the tree."""
    rss = pss = 0
    for pid in tree(root):
        try:
            with open(f"/proc/{pid}/statm") as f:
                rss += int(f.read().split()[1]) * PAGE
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        pss += int(line.split()[1]) * 1024
                        break
        except (OSError, IndexError, ValueError):
            pass
    return rss, pss


class Sampler(threading.Thread):
    """Samples a process tree's memory every `interval` seconds until stopped."""

    def __init__(self, root, interval, extra=None):
        super().__init__(daemon=True)
        self.root, self.interval, self.extra = root, interval, extra
        self.samples = []  # (seconds since start, rss, pss, extra() or 0)
        self.finished = threading.Event()
        self.start_time = time.monotonic()

    def sample(self):
        rss, pss = memory(self.root)
        value = 0
        if self.extra:
            try:
                value = self.extra()
            except OSError:
                pass
        self.samples.append((time.monotonic() - self.start_time, rss, pss, value))

    def run(self):
        while not self.finished.is_set():
            self.sample()
            self.finished.wait(self.interval)

    def stop(self):
        self.finished.set()
        self.join()
        self.sample()
        return self.samples


# ---------------------------------------------------------------------------------------------
# Corpus and URL lists


def corpus_classes(folder):
    """{class name: [relative paths]} of the corpus' subfolders."""
    classes = {}
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if os.path.isdir(path):
            files = sorted(f for f in os.listdir(path) if not f.startswith(".")
                           and os.path.isfile(os.path.join(path, f)))
            if files:
                classes[name] = [f"{name}/{f}" for f in files]
    if not classes:
        raise Failure(f"no image folders in {folder}")
    return classes


def distinct_jobs(files, seed, limit=None):
    """Every (file, width, height) of the measured sizes, shuffled with a fixed seed."""
    jobs = [(f, w, h) for f in files for w in SIZES for h in SIZES]
    random.Random(seed).shuffle(jobs)
    return jobs[:limit] if limit else jobs


class Server:
    """One server under test: how to start it and how to spell a request."""

    name = "server"

    def path(self, file, width, height):
        raise NotImplementedError

    def write_list(self, jobs, destination):
        with open(destination, "w") as f:
            for file, width, height in jobs:
                f.write(self.path(file, width, height) + "\n")
        return destination


class VipsLoadServer(Server):
    name = "vipsload"

    def __init__(self, args, work, origin=None, env_extra=None, label=None, extra_flags=(), urls="fit"):
        self.args, self.work, self.origin = args, work, origin
        self.urls = urls
        self.env_extra = env_extra or {}
        self.label = label or ("vipsload (remote)" if origin else
                               "vipsload (rs:auto, imgproxy client)" if urls == "client" else "vipsload")
        self.extra_flags = list(extra_flags)
        self.port = None
        self.process = None

    def path(self, file, width, height):
        source = f"{self.origin}/{file}" if self.origin else f"local:///{file}"
        if self.urls == "client":
            # imgproxy.ImgProxy(source, width=W, height=H)("q:80"): its path format, defaults kept.
            encoded = base64.urlsafe_b64encode(source.encode()).rstrip(b"=").decode()
            return f"/insecure/q:80/g:ce/rs:auto:{width}:{height}:0/{encoded}"
        return f"/insecure/rs:fit:{width}:{height}/q:80/plain/{source}@jpg"

    def command(self):
        # --quiet: no access log (thumbor logs errors only); --port 0: the server picks a free port
        # and says which when it is ready.
        command = [self.args.vipsload, "serve", "--root", self.args.corpus, "--port", "0", "--quiet"]
        if self.origin:
            command += ["--allow-source", "127.0.0.1:*", "--allow-private-sources"]
        return command + self.extra_flags + self.args.vipsload_flag

    def start(self):
        env = dict(os.environ, **self.env_extra)
        log = os.path.join(self.work, f"vipsload-{len(os.listdir(self.work))}.log")
        self.process = spawn(self.command(), log, env=env)
        deadline = time.monotonic() + 120
        while self.port is None:
            match = re.search(r"listening on http://[^\s]*:(\d+)", tail(log))
            if match:
                self.port = int(match.group(1))
            elif self.process.poll() is not None or time.monotonic() > deadline:
                raise Failure(f"vipsload serve did not start (status {self.process.poll()}); its log:\n{tail(log)}")
            else:
                time.sleep(0.05)  # the server is starting; no measurement depends on it
        wait_ready(self.process, f"http://127.0.0.1:{self.port}/health", "vipsload serve")
        return self

    def base(self):
        return f"http://127.0.0.1:{self.port}"

    def metrics(self):
        status, _, body = fetch(self.base() + "/metrics", timeout=10)
        if status != 200:
            return {}
        values = {}
        for line in body.decode(errors="replace").splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                try:
                    values[name] = float(value)
                except ValueError:
                    pass
        return values

    def described(self):
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env_extra.items())
        return (env + " " if env else "") + shlex.join(self.command())


class ThumborServer(Server):
    name = "thumbor"

    def __init__(self, args, work, result_storage=False):
        self.args, self.work, self.result_storage = args, work, result_storage
        self.label = "thumbor + result storage" if result_storage else "thumbor"
        self.port = None
        self.process = None
        self.conf = None

    def path(self, file, width, height):
        return f"/unsafe/fit-in/{width}x{height}/filters:quality(80):format(jpeg)/{file}"

    def config_text(self):
        lines = [
            "LOADER = 'thumbor.loaders.file_loader'",
            f"FILE_LOADER_ROOT_PATH = {self.args.corpus!r}",
            "STORAGE = 'thumbor.storages.no_storage'",
            "QUALITY = 80",
            "PROGRESSIVE_JPEG = False",
            "RESPECT_ORIENTATION = True",
            "PILLOW_RESAMPLING_FILTER = 'BICUBIC'",
            "ALLOW_UNSAFE_URL = True",
            "SECURITY_KEY = 'serve-benchmark'",
            "MAX_AGE = 3600",
        ]
        if self.result_storage:
            root = os.path.join(self.work, f"thumbor-results-{self.port}")
            lines += ["RESULT_STORAGE = 'thumbor.result_storages.file_storage'",
                      f"RESULT_STORAGE_FILE_STORAGE_ROOT_PATH = {root!r}",
                      "RESULT_STORAGE_STORES_UNSAFE = True"]
        else:
            lines += ["RESULT_STORAGE = None"]
        return "\n".join(lines) + "\n"

    def command(self):
        return [self.args.thumbor, "--ip", "127.0.0.1", "--port", str(self.port), "--conf", self.conf,
                "--processes", str(self.args.thumbor_processes), "--log-level", "error"]

    def start(self):
        self.port = free_port()
        self.conf = os.path.join(self.work, f"thumbor-{self.port}.conf")
        with open(self.conf, "w") as f:
            f.write(self.config_text())
        self.process = spawn(self.command(), os.path.join(self.work, f"thumbor-{self.port}.log"))
        wait_ready(self.process, f"http://127.0.0.1:{self.port}/healthcheck", "thumbor")
        # --processes forks after the socket is bound: wait until every worker is there.
        deadline = time.monotonic() + 60
        while len(tree(self.process.pid)) < 1 + (self.args.thumbor_processes if self.args.thumbor_processes > 1
                                                  else 0):
            if time.monotonic() > deadline:
                raise Failure("thumbor's worker processes did not start")
            time.sleep(0.1)
        return self

    def base(self):
        return f"http://127.0.0.1:{self.port}"

    def metrics(self):
        return {}

    def described(self):
        return shlex.join(self.command()) + "\n" + "".join(
            f"    {line}\n" for line in self.config_text().splitlines()).rstrip("\n")


class Origin:
    """nginx on 127.0.0.1 serving the corpus (the remote sources' origin)."""

    def __init__(self, args, work):
        self.args, self.work = args, work
        self.port = free_port()
        self.prefix = os.path.join(work, "nginx")
        os.makedirs(os.path.join(self.prefix, "logs"), exist_ok=True)
        self.conf = os.path.join(self.prefix, "nginx.conf")
        # Run as root, nginx's workers would be "nobody" and could not read a corpus under a
        # private home folder: they run as the corpus's owner instead.
        user = f"user {pwd.getpwuid(os.stat(args.corpus).st_uid).pw_name};\n" if os.geteuid() == 0 else ""
        with open(self.conf, "w") as f:
            f.write(user + f"""worker_processes 1;
pid {self.prefix}/nginx.pid;
error_log {self.prefix}/logs/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 100000;
    types {{ image/jpeg jpg jpeg; image/png png; image/webp webp; }}
    default_type application/octet-stream;
    client_body_temp_path {self.prefix}/body;
    proxy_temp_path {self.prefix}/proxy;
    fastcgi_temp_path {self.prefix}/fastcgi;
    uwsgi_temp_path {self.prefix}/uwsgi;
    scgi_temp_path {self.prefix}/scgi;
    server {{
        listen 127.0.0.1:{self.port};
        root {args.corpus};
        location = /health {{ return 200 "ok"; }}
    }}
}}
""")
        self.command = [args.nginx, "-p", self.prefix, "-e", os.path.join(self.prefix, "logs/error.log"),
                        "-c", self.conf, "-g", "daemon off;"]
        self.process = spawn(self.command, os.path.join(self.prefix, "logs/stdout.log"))
        wait_ready(self.process, f"http://127.0.0.1:{self.port}/health", "nginx")

    def url(self):
        return f"http://127.0.0.1:{self.port}"


class ExternalOrigin:
    """An origin serving the corpus that someone else started (serve.sh: Benchmarks/nginx.sh)."""

    def __init__(self, url):
        self.base = url.rstrip("/")
        self.command = ["nginx"]
        self.conf = "Benchmarks/nginx.sh (nginx_serve CORPUS)"
        self.process = None

    def url(self):
        return self.base


# ---------------------------------------------------------------------------------------------
# Runs


def wrk(args, server, seconds, connections, url_list=None, single=None):
    """Runs wrk against `server` (a list of paths, or one path); returns its SERVEBENCH figures."""
    threads = max(1, min(CORES, connections))
    target = server.base() + (single or "/")
    command = [args.wrk, "-t", str(threads), "-c", str(connections), "-d", f"{seconds}s",
               "--timeout", "30s", "-s", LUA, target]
    env = dict(os.environ, SERVE_THREADS=str(threads), SERVE_URLS=url_list or "")
    run = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                           start_new_session=True)
    children.append(run)
    output, _ = run.communicate()
    children.remove(run)
    match = re.search(r"^SERVEBENCH (\{.*\})$", output, re.M)
    if run.returncode != 0 or not match:
        raise Failure(f"wrk failed (status {run.returncode}):\n{output}")
    figures = json.loads(match.group(1))
    figures["command"] = ((f"SERVE_URLS={url_list} SERVE_THREADS={threads} " if url_list else "")
                          + shlex.join(command))
    return figures


def measure(args, server, seconds, connections, url_list=None, single=None, interval=0.2, extra=None):
    """One wrk run with the server tree sampled: the row's figures."""
    root = server.process.pid
    before = cpu_seconds(root)
    split_before = cpu_by_process(root)
    metrics_before = server.metrics()
    sampler = Sampler(root, interval, extra)
    sampler.start()
    figures = wrk(args, server, seconds, connections, url_list=url_list, single=single)
    samples = sampler.stop()
    figures["cpu_s"] = cpu_seconds(root) - before
    split_after = cpu_by_process(root)
    figures["cpu_split"] = sorted((split_after[p] - split_before.get(p, 0) for p in split_after), reverse=True)
    figures["peak_rss"] = max(s[1] for s in samples)
    figures["peak_pss"] = max(s[2] for s in samples)
    figures["samples"] = samples
    metrics_after = server.metrics()
    figures["metrics"] = {k: metrics_after[k] - metrics_before.get(k, 0) for k in metrics_after}
    figures["metrics_end"] = metrics_after
    figures["server"] = server.label
    figures["server_command"] = server.described()
    if figures["requests"] == 0:
        raise Failure(f"{server.label}: wrk completed no request; its log:\n{tail(server.process.log)}")
    return figures


def warm_up(server, files):
    """One request per file at a size outside the measured range; checks each is a JPEG."""
    for file in files:
        status, headers, body = fetch(server.base() + server.path(file, WARMUP_SIZE, WARMUP_SIZE))
        image = body.startswith(b"\xff\xd8") or getattr(server, "urls", "fit") == "client" and body[:4] in (
            b"\x89PNG", b"RIFF", b"GIF8")
        if status != 200 or not image:
            raise Failure(f"{server.label}: {server.path(file, WARMUP_SIZE, WARMUP_SIZE)} answered {status} "
                          f"({headers.get('Content-Type')}): {body[:200]!r}; its log:\n{tail(server.process.log)}")


def jpeg_size(data):
    """(width, height) from a JPEG's SOF marker, or None."""
    i = 2
    while i + 9 < len(data):
        if data[i] != 0xFF:
            return None
        marker, length = data[i + 1], int.from_bytes(data[i + 2:i + 4], "big")
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            return int.from_bytes(data[i + 7:i + 9], "big"), int.from_bytes(data[i + 5:i + 7], "big")
        i += 2 + length
    return None


def same_output(servers, file):
    """Both servers answer the same box with a JPEG of the same size (like for like)."""
    sizes = {}
    for server in servers:
        status, _, body = fetch(server.base() + server.path(file, 256, 256))
        sizes[server.label] = jpeg_size(body) if status == 200 else f"status {status}"
    if len(set(sizes.values())) != 1:
        raise Failure(f"the servers disagree on {file} fitted to 256×256: {sizes}")
    return next(iter(sizes.values()))


def row(args, make_server, cls, files, url_list_for, seconds, connections):
    server = make_server().start()
    try:
        warm_up(server, files)
        url_list = url_list_for(server)
        figures = measure(args, server, seconds, connections, url_list=url_list)
        figures["class"] = cls
        return figures
    finally:
        stop(server.process)


def bench(args, work):
    classes = corpus_classes(args.corpus)
    chosen = [c for c in args.classes if c in classes] if args.classes else list(classes)
    origin = None
    if "remote" in args.scenarios and "vipsload" in args.servers:
        origin = ExternalOrigin(args.origin) if args.origin else Origin(args, work)
    results = {"cold": [], "warm": [], "remote": []}
    read_corpus(args.corpus)

    # Like for like: both servers answer the same box with the same JPEG size.
    check = []
    try:
        if "vipsload" in args.servers:
            check.append(VipsLoadServer(args, work).start())
        if "thumbor" in args.servers:
            check.append(ThumborServer(args, work).start())
        agreed = {cls: same_output(check, classes[cls][-1]) for cls in chosen}
    finally:
        for server in check:
            stop(server.process)
    print(f"serve: {' and '.join(s.label for s in check)} fit "
          f"{', '.join(f'{c} → {w}×{h}' for c, (w, h) in agreed.items())} (256×256 box)", file=sys.stderr)

    for index, cls in enumerate(chosen):
        files = classes[cls]
        jobs = distinct_jobs(files, seed=index)

        def url_list_for(server, cls=cls, jobs=jobs):
            return server.write_list(jobs, os.path.join(work, f"{cls}-{re.sub('[^a-z]+', '-', server.label)}.txt"))

        if "cold" in args.scenarios or "remote" in args.scenarios:
            plan = []
            if "vipsload" in args.servers:
                # No memory cache in the cold rows: with one, a box near an earlier one is resized
                # from the decoded bitmap it keeps (no decode), and a repeated URL is a response
                # hit, which thumbor without result storage cannot do. So every request decodes.
                cold_flags = ["--memory-cache", "0"]
                for style in args.vipsload_urls:
                    plan.append(("vipsload" if style == "fit" else "vipsload-" + style,
                                 lambda style=style: VipsLoadServer(args, work, extra_flags=cold_flags, urls=style)))
                if "remote" in args.scenarios:
                    plan.append(("remote", lambda: VipsLoadServer(args, work, origin=origin.url(),
                                                                  extra_flags=cold_flags)))
            if "cold" in args.scenarios and "thumbor" in args.servers:
                plan.append(("thumbor", lambda: ThumborServer(args, work)))
            if index % 2:
                plan.reverse()  # alternate the order so drift in the machine's load hits both sides
            for key, make in plan:
                print(f"serve: cold {cls}: {key} ({args.seconds} s, {args.connections} connections)",
                      file=sys.stderr)
                figures = row(args, make, cls, files, url_list_for, args.seconds, args.connections)
                figures["key"] = key
                if key == "remote":
                    figures["origin_command"] = (shlex.join(origin.command) + f"   # {origin.conf}"
                                                 if origin.process else f"# origin: {origin.conf} at {origin.url()}")
                results["cold"].append(figures)

    if "warm" in args.scenarios:
        file = classes[chosen[0]][0]
        makers = []
        if "vipsload" in args.servers:
            makers.append(lambda: VipsLoadServer(args, work))
        if "thumbor" in args.servers:
            makers += [lambda: ThumborServer(args, work, result_storage=True), lambda: ThumborServer(args, work)]
        for make in makers:
            server = make().start()
            try:
                single = server.path(file, 256, 256)
                for _ in range(2):  # the first makes it, the second is a hit
                    status, _, _ = fetch(server.base() + single)
                    if status != 200:
                        raise Failure(f"{server.label}: {single} answered {status}")
                print(f"serve: warm: {server.label} ({args.warm_seconds} s, {args.warm_connections} connections)",
                      file=sys.stderr)
                figures = measure(args, server, args.warm_seconds, args.warm_connections, single=single)
                figures["class"] = chosen[0]
                results["warm"].append(figures)
            finally:
                stop(server.process)

    if origin and origin.process:
        stop(origin.process)
    report_bench(args, results, work)


def read_corpus(folder):
    """Reads every corpus file once, so all rows start from a warm page cache."""
    for base, _, names in os.walk(folder):
        for name in names:
            with open(os.path.join(base, name), "rb") as f:
                while f.read(1 << 20):
                    pass


# ---------------------------------------------------------------------------------------------
# Soak


ALLOCATORS = {
    "glibc-tuned": ("glibc as `vipsload` configures it (2 arenas, 256 KiB mmap threshold)", {}),
    "arena-max-2": ("glibc with MALLOC_ARENA_MAX=2 only (dynamic mmap threshold)", {"MALLOC_ARENA_MAX": "2"}),
    "jemalloc": ("jemalloc 5 (libjemalloc2) by LD_PRELOAD", None),
    "glibc-default": (f"glibc's own defaults: MALLOC_ARENA_MAX={8 * CORES} (8 a core), dynamic mmap threshold",
                      {"MALLOC_ARENA_MAX": str(8 * CORES)}),
}


def jemalloc_path():
    for candidate in ("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", "/usr/lib/aarch64-linux-gnu/libjemalloc.so.2"):
        if os.path.exists(candidate):
            return candidate
    found = subprocess.run(["sh", "-c", "ldconfig -p | awk '/libjemalloc.so.2/ {print $NF; exit}'"],
                           capture_output=True, text=True).stdout.strip()
    if not found:
        raise Failure("libjemalloc.so.2 not found (apt-get install libjemalloc2)")
    return found


def soak_jobs(classes, seed):
    """A mixed corpus: every class, boxes from 64 to 1024 (many sizes, as a site's pages ask),
    interleaved and shuffled; 200,000 distinct paths, more than a run asks for."""
    rng = random.Random(seed)
    jobs, seen = [], set()
    files = [f for cls in classes.values() for f in cls]
    while len(jobs) < 200_000:
        file = rng.choice(files)
        width, height = rng.randint(64, 1024), rng.randint(64, 1024)
        if (file, width, height) not in seen:
            seen.add((file, width, height))
            jobs.append((file, width, height))
    return jobs


def soak(args, work):
    classes = corpus_classes(args.corpus)
    read_corpus(args.corpus)
    jobs = soak_jobs(classes, seed=20)
    rows = []
    for key in args.allocators:
        description, env = ALLOCATORS[key]
        if env is None:
            env = {"LD_PRELOAD": jemalloc_path()}
        flags = (["--memory-cache", str(args.soak_memory_cache)] if args.soak_memory_cache is not None else [])
        server = VipsLoadServer(args, work, env_extra=env, label=key, extra_flags=flags + args.soak_flag).start()
        try:
            url_list = server.write_list(jobs, os.path.join(work, "soak.txt"))
            print(f"serve: soak {key}: {args.minutes} min, {args.soak_connections} connections", file=sys.stderr)
            figures = measure(args, server, int(args.minutes * 60), args.soak_connections, url_list=url_list,
                              interval=1.0,
                              extra=lambda s=server: s.metrics().get("vipsload_response_cache_bytes", 0))
            figures["key"], figures["description"] = key, description
            rows.append(figures)
            write_series(args, key, figures["samples"])
        finally:
            stop(server.process)
    report_soak(args, rows, work)


def write_series(args, key, samples):
    if not args.out:
        return
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"soak-{key}.csv"), "w") as f:
        f.write("seconds,rss_bytes,pss_bytes,response_cache_bytes\n")
        for t, rss, pss, cache in samples:
            f.write(f"{t:.1f},{rss},{pss},{cache:.0f}\n")


# ---------------------------------------------------------------------------------------------
# Reports


def mb(value):
    return f"{value / 1e6:.0f}"


def ms(us):
    return f"{us / 1000:.1f}" if us < 100_000 else f"{us / 1000:.0f}"


def rate(f):
    return f["requests"] / (f["duration_us"] / 1e6)


def errors(f):
    n = f["connect_errors"] + f["read_errors"] + f["write_errors"] + f["status_errors"] + f["timeouts"]
    return str(n)


def header(args):
    load = os.getloadavg()
    revision = os.environ.get("SERVE_REVISION", "unknown")
    print(f"`{os.environ.get('SERVE_INVOCATION', 'Benchmarks/serve.py')}` · revision {revision} · "
          f"{CORES} cores · load average before the run {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print()


ROW_HEADER = ("| class | server | req/s | p50 ms | p95 ms | p99 ms | peak RSS MB | peak PSS MB | CPU % | "
              "CPU ms/req | errors | ratio |")
ROW_RULE = "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"


def table_row(f, ratio):
    seconds = f["duration_us"] / 1e6
    return (f"| {f['class']} | {f['server']} | {rate(f):.1f} | {ms(f['p50_us'])} | {ms(f['p95_us'])} | "
            f"{ms(f['p99_us'])} | {mb(f['peak_rss'])} | {mb(f['peak_pss'])} | {100 * f['cpu_s'] / seconds:.0f} | "
            f"{1000 * f['cpu_s'] / max(1, f['requests']):.1f} | {errors(f)} | {ratio} |")


def report_bench(args, results, work):
    header(args)
    cold = results["cold"]
    if cold:
        print(f"### Cold: every URL distinct, {args.connections} connections, {args.seconds} s a row "
              "(vipsload with --memory-cache 0, thumbor without result storage: every request decodes)")
        print()
        print(ROW_HEADER)
        print(ROW_RULE)
        for cls in dict.fromkeys(f["class"] for f in cold):
            rows = {f["key"]: f for f in cold if f["class"] == cls}
            thumbor = rows.get("thumbor")
            for key in ("vipsload", "vipsload-client", "thumbor"):
                if key in rows:
                    f = rows[key]
                    ratio = f"**{rate(f) / rate(thumbor):.2f}×**" if key != "thumbor" and thumbor else ""
                    if key == "vipsload-client" and "vipsload" in rows:
                        ratio += f" ({rate(f) / rate(rows['vipsload']):.2f}× fit)"
                    print(table_row(f, ratio))
        print()
        notes = []
        for f in cold:
            if f["wrapped"]:
                notes.append(f"{f['class']} {f['server']}: {f['wrapped']} requests repeated a URL (the list ran out)")
            hits = sum(v for k, v in f["metrics"].items() if k.startswith("vipsload_cache_hits_total"))
            if hits:
                notes.append(f"{f['class']} {f['server']}: {hits:.0f} cache hits")
            if f["key"] == "thumbor" and len(f["cpu_split"]) > 1:
                split = ", ".join(f"{s:.1f}" for s in f["cpu_split"] if s > 0.05)
                notes.append(f"{f['class']} thumbor: CPU seconds by process {split}")
        for note in notes:
            print(f"- {note}")
        if notes:
            print()
    remote = [f for f in cold if f["key"] == "remote"]
    if remote:
        print(f"### Remote sources: nginx on 127.0.0.1 as the origin, against the same files on disk "
              f"({args.connections} connections)")
        print()
        print("| class | source | req/s | p50 ms | p95 ms | p99 ms | peak RSS MB | CPU % (vipsload) | "
              "downloads | MB/s from origin | errors | remote ÷ local |")
        print("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
        for f in remote:
            local = next((g for g in cold if g["class"] == f["class"] and g["key"] == "vipsload"), None)
            for g, label in ((local, "local:///"), (f, "http://127.0.0.1 (nginx)")):
                if g is None:
                    continue
                seconds = g["duration_us"] / 1e6
                downloads = g["metrics"].get("vipsload_downloads_total", 0)
                source_bytes = g["metrics"].get("vipsload_source_bytes_total", 0)
                ratio = f"**{rate(f) / rate(local):.2f}×**" if g is f and local else ""
                print(f"| {g['class']} | {label} | {rate(g):.1f} | {ms(g['p50_us'])} | {ms(g['p95_us'])} | "
                      f"{ms(g['p99_us'])} | {mb(g['peak_rss'])} | {100 * g['cpu_s'] / seconds:.0f} | "
                      f"{downloads:.0f} | {f'{source_bytes / 1e6 / seconds:.0f}' if g is f else '–'} | {errors(g)} | "
                      f"{ratio} |")
        print()
    warm = results["warm"]
    if warm:
        print(f"### Warm: one URL, keep-alive, {args.warm_connections} connections, {args.warm_seconds} s a row")
        print()
        print(ROW_HEADER)
        print(ROW_RULE)
        vips = next((f for f in warm if f["server"] == "vipsload"), None)
        for f in warm:
            ratio = f"{rate(vips) / rate(f):.1f}× (VipsLoad ÷ this)" if vips and f is not vips else ""
            print(table_row(f, ratio))
        print()
        if vips:
            hits = sum(v for k, v in vips["metrics"].items() if k.startswith("vipsload_cache_hits_total"))
            print(f"- vipsload: {hits:.0f} of {vips['requests']} answers were memory-cache hits "
                  f"({vips['metrics'].get('vipsload_decodes_total', 0):.0f} decodes)")
            print()
    print_commands(results["cold"] + results["warm"], work)


def print_commands(rows, work):
    """Each distinct command once, with the temporary folder as $WORK and ports as PORT."""
    print(f"### Commands ($WORK: the run's temporary folder, removed at the end)")
    print()
    seen = set()
    for f in rows:
        for key in ("server_command", "origin_command", "command"):
            text = f.get(key)
            if not text:
                continue
            text = text.replace(work, "$WORK")
            text = re.sub(r"(--port |127\.0\.0\.1:|-)\d{4,5}\b", r"\1PORT", text)
            if text not in seen:
                seen.add(text)
                print("    " + text.replace("\n", "\n    "))
    print()


def report_soak(args, rows, work):
    header(args)
    print(f"### Soak: {args.minutes:g} min at saturation over the mixed corpus ({args.soak_connections} connections, "
          f"boxes 64–1024, every URL distinct, --memory-cache {args.soak_memory_cache} MB); "
          "RSS of the server every second")
    print()
    print("| allocator | req/s | p99 ms | RSS after 1 min MB | RSS at the end MB | end ÷ 1 min | peak RSS MB | "
          "CPU ms/req | response cache MB (1 min → end) | errors |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    for f in rows:
        samples = f["samples"]
        minute = next((s for s in samples if s[0] >= 60), samples[-1])
        # The last sample taken while wrk ran (the final one is taken after it stopped).
        end = samples[-2] if len(samples) > 1 else samples[-1]
        print(f"| {f['key']} | {rate(f):.1f} | {ms(f['p99_us'])} | {mb(minute[1])} | {mb(end[1])} | "
              f"**{end[1] / max(1, minute[1]):.2f}** | {mb(max(s[1] for s in samples))} | "
              f"{1000 * f['cpu_s'] / max(1, f['requests']):.1f} | {mb(minute[3])} → {mb(end[3])} | {errors(f)} |")
    print()
    for f in rows:
        print(f"- {f['key']}: {f['description']}")
    print()
    print_commands(rows, work)


# ---------------------------------------------------------------------------------------------


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", nargs="?", default="bench", choices=["bench", "soak"])
    parser.add_argument("minutes", nargs="?", type=float, default=10.0, help="soak: minutes per allocator")
    parser.add_argument("--vipsload", required=True, help="the vipsload binary (serve.sh passes its release build)")
    parser.add_argument("--thumbor", required=True, help="the thumbor executable (serve.sh's venv)")
    parser.add_argument("--corpus", required=True, help="the corpus folder (serve.sh passes `vipsload corpus`)")
    parser.add_argument("--wrk", default=shutil.which("wrk") or "wrk")
    parser.add_argument("--nginx", default=shutil.which("nginx") or "/usr/sbin/nginx")
    parser.add_argument("--origin", help="the corpus served over HTTP at this URL (default: an nginx of its own)")
    parser.add_argument("--quick", action="store_true", help="short rows (5 s cold, 3 s warm), for development")
    parser.add_argument("--seconds", type=int, help="seconds per cold row (default 20; 5 with --quick)")
    parser.add_argument("--warm-seconds", type=int, help="seconds per warm row (default 10; 3 with --quick)")
    parser.add_argument("--connections", type=int, default=2 * CORES,
                        help=f"wrk connections of the cold and remote rows (default 2 × cores = {2 * CORES})")
    parser.add_argument("--warm-connections", type=int, default=64, help="wrk connections of the warm rows")
    parser.add_argument("--soak-connections", type=int, default=2 * CORES)
    parser.add_argument("--scenarios", default="cold,remote,warm", help="any of cold,remote,warm")
    parser.add_argument("--servers", default="vipsload,thumbor", help="the servers to run (default both)")
    parser.add_argument("--classes", help="corpus classes, comma-separated (default: all)")
    parser.add_argument("--vipsload-urls", default="fit",
                        help="vipsload's cold rows, comma-separated: fit (rs:fit, the default) and/or client "
                             "(rs:auto as the PyPI imgproxy client builds it)")
    parser.add_argument("--thumbor-processes", type=int, default=CORES,
                        help=f"thumbor --processes (default: the cores, {CORES})")
    parser.add_argument("--allocators", default="glibc-tuned,arena-max-2,jemalloc",
                        help=f"soak: any of {','.join(ALLOCATORS)}")
    parser.add_argument("--vipsload-flag", action="append", default=[],
                        help="an extra argument for `vipsload serve` (repeat for more)")
    parser.add_argument("--soak-memory-cache", type=int, default=32,
                        help="soak: `vipsload serve --memory-cache MB` (default 32, full within the first "
                             "minute, so later growth is the allocator's, not the cache filling)")
    parser.add_argument("--soak-flag", action="append", default=[],
                        help="an extra argument for `vipsload serve` in the soak only")
    parser.add_argument("--out", help="folder for the soak's RSS series (CSV) and the raw figures (JSON)")
    args = parser.parse_args()
    args.scenarios = [s for s in args.scenarios.split(",") if s]
    args.servers = [s for s in args.servers.split(",") if s]
    args.classes = [c for c in args.classes.split(",") if c] if args.classes else None
    args.vipsload_urls = [u for u in args.vipsload_urls.split(",") if u]
    if not args.vipsload_urls or any(u not in ("fit", "client") for u in args.vipsload_urls):
        parser.error("--vipsload-urls takes fit and/or client")
    args.allocators = [a for a in args.allocators.split(",") if a]
    for a in args.allocators:
        if a not in ALLOCATORS:
            parser.error(f"unknown allocator {a!r} (known: {', '.join(ALLOCATORS)})")
    if args.seconds is None:
        args.seconds = 5 if args.quick else 20
    if args.warm_seconds is None:
        args.warm_seconds = 3 if args.quick else 10
    if args.quick and args.mode == "soak" and "minutes" not in sys.argv:
        args.minutes = min(args.minutes, 2.0)
    args.corpus = os.path.abspath(args.corpus)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    work = tempfile.mkdtemp(prefix="vipsload-serve-bench-")
    try:
        (soak if args.mode == "soak" else bench)(args, work)
    except Failure as failure:
        print(f"serve: {failure}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as interrupt:
        print(f"serve: interrupted ({interrupt})", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        stop_all()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
