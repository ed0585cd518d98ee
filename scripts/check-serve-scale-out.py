#!/usr/bin/python3
"""Tries docs/serve.md's scale-out section as far as one machine allows (run it through
scripts/check-serve-scale-out.sh, which builds `vipsload` and installs nginx and python3-yaml).

1. The manifest: the YAML block's Deployment (apps/v1) must run `vipsload serve` in N ≥ 2
   replicas, probe readiness on /health at the port it serves, give
   terminationGracePeriodSeconds above --drain-timeout, request CPU and memory (which the
   container-aware defaults read from the cgroup), and mount a per-pod disk cache (--cache-dir
   on an emptyDir or hostPath volume).
2. The replicas: the container's command, as written, once per replica (up to 3) on 127.0.0.1, with
   the volumes at folders of this machine (one cache folder each, the image folder shared) and
   --port 0 in place of the pod's port; readiness is /health answering 200, as the probe asks.
3. The load balancer: the nginx block, its upstream servers replaced by the replicas and its
   listen port by a free one. Requests through it must all succeed and reach every replica.
4. The drain: one replica gets SIGTERM with a request in flight (its source held by an origin
   this check controls, so the request cannot finish before the signal). Then its /health must
   answer 503, a new request on an open connection 503, requests through nginx must still succeed
   (the other replicas answer), the request in flight must complete with 200 once its source is
   released, and the replica must exit 0 (within the drain timeout; the time is printed).
5. The per-node disk cache: the drained replica, restarted on its cache folder, serves a
   thumbnail it made before from disk without decoding it.

Exit status 0 when every check passes, 1 with the reason otherwise. Every process it starts is
ended on the way out, on errors and on SIGINT/SIGTERM too; its temporary folder is removed.
"""

import argparse
import urllib.parse
import http.client
import json
import os
import re
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
sys.path.insert(0, os.path.join(HERE, "..", "Tests", "Browser"))
from held_origin import HeldOrigin, OriginTimeout  # noqa: E402

WAIT = 60  # seconds any awaited event may take before the check fails (a loaded machine)
children = []


class Failure(Exception):
    """A check failed; the message says which."""


def on_signal(number, _frame):
    raise KeyboardInterrupt(f"signal {number}")


def say(text):
    print(f"check-serve-scale-out: {text}", flush=True)


def blocks(doc, language):
    """The fenced code blocks of `language` in the markdown file."""
    with open(doc) as f:
        text = f.read()
    return re.findall(rf"^```{language}\n(.*?)^```", text, re.M | re.S)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url, timeout=30):
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def wait_until(predicate, what):
    """Polls `predicate` (a server's state) until it holds."""
    deadline = time.monotonic() + WAIT
    while not predicate():
        if time.monotonic() > deadline:
            raise Failure(f"{what} did not happen within {WAIT} s")
        time.sleep(0.05)


# ---------------------------------------------------------------------------------------------
# 1. The manifest


def option(args, name, default=None):
    return args[args.index(name) + 1] if name in args else default


def check_manifest(doc):
    import yaml

    documents = [d for block in blocks(doc, "yaml") for d in yaml.safe_load_all(block) if d]
    deployments = [d for d in documents if d.get("kind") == "Deployment"]
    if not deployments:
        raise Failure(f"{doc} has no Kubernetes Deployment in a ```yaml block")
    deployment = deployments[0]
    assert_that(deployment.get("apiVersion") == "apps/v1", "the Deployment is apps/v1")
    spec = deployment["spec"]
    pod = spec["template"]["spec"]
    container = pod["containers"][0]
    args = list(container.get("command", [])) + list(container.get("args", []))
    assert_that(args[:2] == ["vipsload", "serve"], f"the container runs `vipsload serve` (it runs {args[:2]})")
    args = args[2:]
    replicas = int(spec.get("replicas", 1))
    assert_that(replicas >= 2, f"replicas ≥ 2 (it has {replicas})")
    port = int(option(args, "--port", 8080))
    probe = container.get("readinessProbe", {}).get("httpGet", {})
    assert_that(probe.get("path") == "/health", "the readiness probe asks /health")
    named = {p.get("name"): p.get("containerPort") for p in container.get("ports", []) if p.get("name")}
    probed = named.get(probe.get("port"), probe.get("port"))
    assert_that(str(probed) == str(port), f"the readiness probe asks the served port {port} (it asks {probed})")
    drain = float(option(args, "--drain-timeout", 10))
    grace = pod.get("terminationGracePeriodSeconds", 30)
    assert_that(grace > drain, f"terminationGracePeriodSeconds {grace} is above --drain-timeout {drain:g}")
    requests = container.get("resources", {}).get("requests", {})
    limits = container.get("resources", {}).get("limits", {})
    assert_that("cpu" in requests and "memory" in requests, "the container requests CPU and memory")
    # Requests equal to limits: the cgroup limits the defaults read are what the scheduler reserved.
    assert_that(all(str(limits.get(k)) == str(requests[k]) for k in ("cpu", "memory")),
                f"limits equal to requests (requests {requests}, limits {limits})")
    cache = option(args, "--cache-dir")
    assert_that(cache is not None, "the replicas keep a disk cache (--cache-dir)")
    mounts = {m["mountPath"]: m["name"] for m in container.get("volumeMounts", [])}
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    assert_that(cache in mounts, f"--cache-dir {cache} is a mounted volume")
    cache_volume = volumes.get(mounts[cache], {})
    assert_that("emptyDir" in cache_volume or "hostPath" in cache_volume,
                "the disk cache is per pod or node (emptyDir or hostPath), not shared storage")
    say(f"manifest: a Deployment of {replicas} replicas, readiness on /health:{port}, "
        f"terminationGracePeriodSeconds {grace} > --drain-timeout {drain:g}, requests = limits {requests}, "
        f"--cache-dir {cache} on {'emptyDir' if 'emptyDir' in cache_volume else 'hostPath'}")
    labels = spec["template"].get("metadata", {}).get("labels", {})
    for service in (d for d in documents if d.get("kind") == "Service"):
        selector = service["spec"].get("selector", {})
        assert_that(selector and all(labels.get(k) == v for k, v in selector.items()),
                    f"the Service's selector {selector} matches the pods' labels {labels}")
        for entry in service["spec"].get("ports", []):
            target = entry.get("targetPort", entry.get("port"))
            target = named.get(target, target)
            assert_that(str(target) == str(port), f"the Service's targetPort reaches the served port {port}")
        say(f"manifest: the Service selects the pods and forwards to port {port}")
    return args, replicas, drain, grace


def assert_that(condition, what):
    if not condition:
        raise Failure(f"manifest: expected {what}")


# ---------------------------------------------------------------------------------------------
# 2. The replicas


class Replica:
    def __init__(self, binary, args, work, index, images, cache, extra):
        self.index, self.work = index, work
        self.cache = cache
        mapped = list(args)
        for name, value in (("--bind", "127.0.0.1"), ("--port", "0"), ("--root", images), ("--cache-dir", self.cache)):
            if name in mapped:
                mapped[mapped.index(name) + 1] = value
            else:
                mapped += [name, value]
        self.command = [binary, "serve"] + mapped + extra
        self.start()

    def start(self):
        self.log = os.path.join(self.work, f"replica-{self.index}-{time.monotonic_ns()}.log")
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(self.command, stdout=out, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True)
        children.append(self.process)
        self.port = None
        deadline = time.monotonic() + WAIT
        while self.port is None:
            match = re.search(r"listening on http://[^\s]*:(\d+)", self.read_log())
            if match:
                self.port = int(match.group(1))
            elif self.process.poll() is not None or time.monotonic() > deadline:
                raise Failure(f"replica {self.index} did not start (status {self.process.poll()}):\n{self.read_log()}")
            else:
                time.sleep(0.05)  # the replica is starting; it says where it listens when ready

    def read_log(self):
        with open(self.log, errors="replace") as f:
            return f.read()

    @property
    def base(self):
        return f"http://127.0.0.1:{self.port}"

    def metric(self, name):
        status, body = get(self.base + "/metrics")
        if status != 200:
            raise Failure(f"replica {self.index}: /metrics answered {status}")
        total = 0.0
        for line in body.decode().splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                total += float(line.rpartition(" ")[2])
        return total

    def stop(self, number=signal.SIGTERM):
        if self.process.poll() is None:
            os.killpg(self.process.pid, number)
        try:
            self.process.wait(WAIT)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        if self.process in children:
            children.remove(self.process)
        return self.process.returncode


def thumbnail(source, width=200, height=200):
    # A plain source is percent-encoded (imgproxy's rule): its own query would end the path.
    return f"/insecure/rs:fit:{width}:{height}/q:80/plain/{urllib.parse.quote(source, safe=':/')}@jpg"


# ---------------------------------------------------------------------------------------------
# 3. The load balancer


# What stands in for the Service when the doc shows no nginx block: round robin over the replicas,
# the next one tried when a replica refuses (a draining one stops accepting) or answers 503, as
# a Service stops sending to a pod whose readiness fails.
STAND_IN = """upstream vipsload {
    server 127.0.0.1:8080;
    keepalive 16;
}
server {
    listen 80;
    location / {
        proxy_pass http://vipsload;
        proxy_http_version 1.1;
        proxy_set_header Connection "";
        proxy_next_upstream error timeout http_503;
    }
}
"""


def start_nginx(doc, replicas, work, nginx):
    found = blocks(doc, "nginx")
    config = found[0] if found else STAND_IN
    upstream = "".join(f"    server 127.0.0.1:{r.port};\n" for r in replicas)
    config, count = re.subn(r"(upstream\s+\w+\s*\{\n)(?:\s*server\s+[^;]+;\n)+", lambda m: m.group(1) + upstream,
                            config)
    if count != 1:
        raise Failure("the nginx block's upstream has no `server` lines to replace")
    port = free_port()
    config, count = re.subn(r"listen\s+\d+\s*;", f"listen 127.0.0.1:{port};", config)
    if count != 1:
        raise Failure("the nginx block has no `listen PORT;` to replace")
    prefix = os.path.join(work, "nginx")
    os.makedirs(prefix, exist_ok=True)
    temp = "".join(f"    {kind}_temp_path {prefix}/{kind};\n" for kind in ("client_body", "proxy", "fastcgi", "uwsgi",
                                                                                "scgi"))
    path = os.path.join(prefix, "nginx.conf")
    with open(path, "w") as f:
        f.write(f"worker_processes 1;\npid {prefix}/nginx.pid;\nerror_log {prefix}/error.log warn;\n"
                f"events {{ worker_connections 256; }}\nhttp {{\n    access_log off;\n{temp}{config}\n}}\n")
    process = subprocess.Popen([nginx, "-p", prefix, "-e", f"{prefix}/error.log", "-c", path, "-g", "daemon off;"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True)
    children.append(process)
    base = f"http://127.0.0.1:{port}"

    def ready():
        if process.poll() is not None:
            with open(f"{prefix}/error.log", errors="replace") as log:
                raise Failure(f"nginx exited with {process.returncode}:\n{log.read()}")
        try:
            return get(base + "/health", timeout=5)[0] == 200
        except OSError:
            return False

    wait_until(ready, "nginx answering")
    return process, base, "the doc's nginx block" if found else "nginx standing in for the Service"


def through(base, paths):
    statuses = [get(base + p)[0] for p in paths]
    bad = [(p, s) for p, s in zip(paths, statuses) if s != 200]
    if bad:
        raise Failure(f"through nginx: {len(bad)} of {len(paths)} requests failed, e.g. {bad[:3]}")


# ---------------------------------------------------------------------------------------------
# 4. The drain, 5. the disk cache


def drain(replica, others, origin, base, names, drain_timeout, grace):
    # Keep-alive connections opened before the signal, for the 503s on open connections (a
    # draining replica accepts no new connection: a new probe is refused).
    connections = []
    for _ in range(2):
        connection = http.client.HTTPConnection("127.0.0.1", replica.port, timeout=30)
        connection.request("GET", "/health")
        response = connection.getresponse()
        response.read()
        if response.status != 200:
            raise Failure(f"replica {replica.index}: /health answered {response.status} before the drain")
        connections.append(connection)
    held = f"/hold/{names[0]}?drain"
    in_flight = {}

    def request_in_flight():
        try:
            in_flight["status"], body = get(replica.base + thumbnail(f"http://127.0.0.1:{origin.port}{held}"), timeout=WAIT)
            in_flight["jpeg"] = body.startswith(b"\xff\xd8")
        except OSError as error:
            in_flight["error"] = error

    thread = threading.Thread(target=request_in_flight, daemon=True)
    thread.start()
    origin.wait_for(lambda: held in origin.started, "the in-flight request's download")
    signalled = time.monotonic()
    os.killpg(replica.process.pid, signal.SIGTERM)
    wait_until(lambda: health(replica) in (503, None),
               f"replica {replica.index} refusing new connections (or answering /health 503) while draining")
    for connection, target in zip(connections, ["/health", thumbnail(f"local:///{names[1]}")]):
        connection.request("GET", target)
        response = connection.getresponse()
        response.read()
        if response.status != 503:
            raise Failure(f"replica {replica.index}: {target} on an open connection answered {response.status}, "
                          "not 503, while draining")
        connection.close()
    through(base, [thumbnail(f"local:///{names[i % len(names)]}", 150 + i, 150) for i in range(12)])
    if thread.is_alive() is False:
        raise Failure(f"the request in flight ended before its source was released: {in_flight}")
    origin.release_all()
    thread.join(WAIT)
    if in_flight.get("status") != 200 or not in_flight.get("jpeg"):
        raise Failure(f"the request in flight during the drain did not complete with a JPEG: {in_flight}")
    # Kubernetes kills the pod terminationGracePeriodSeconds after SIGTERM: it must be gone by then.
    try:
        replica.process.wait(max(0.0, grace - (time.monotonic() - signalled)))
    except subprocess.TimeoutExpired:
        raise Failure(f"replica {replica.index} had not exited {grace} s after SIGTERM (the grace period)") from None
    elapsed = time.monotonic() - signalled
    children.remove(replica.process)
    if replica.process.returncode != 0:
        raise Failure(f"replica {replica.index} exited {replica.process.returncode} after SIGTERM:\n{replica.read_log()}")
    for other in others:
        if health(other) != 200:
            raise Failure(f"replica {other.index} is not ready any more")
    say(f"drain: replica {replica.index} refused new connections, answered 503 to /health and to an image on "
        f"open connections, nginx went on "
        f"answering from the others, the request in flight completed with 200, exit 0 {elapsed:.1f} s after "
        f"SIGTERM (--drain-timeout {drain_timeout:g}, grace period {grace} s)")


def health(replica):
    try:
        return get(replica.base + "/health", timeout=5)[0]
    except OSError:
        return None


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vipsload", required=True)
    parser.add_argument("--doc", default=os.path.join(HERE, "..", "docs", "serve.md"))
    parser.add_argument("--nginx", default=shutil.which("nginx") or "/usr/sbin/nginx")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    work = tempfile.mkdtemp(prefix="vipsload-serve-scale-out-")
    origin = None
    replicas = []
    status = 1
    try:
        command, count, drain_timeout, grace = check_manifest(args.doc)
        images = os.path.join(work, "images")
        os.makedirs(images)
        names = []
        for i in range(6):
            name = f"photo-{i}.jpg"
            subprocess.run(["vips", "gaussnoise", os.path.join(images, name), str(800 + 16 * i), "600"], check=True)
            names.append(name)
        origin = HeldOrigin({n: os.path.join(images, n) for n in names}, wait=WAIT)
        # The drain check's source comes from this machine's origin, which a replica refuses by default.
        extra = ["--allow-source", "127.0.0.1:*", "--allow-private-sources"]
        # One machine is one node: the replicas share its cache folder, as the hostPath volume does.
        cache = os.path.join(work, "node-cache")
        os.makedirs(cache)
        for index in range(min(count, 3)):
            replicas.append(Replica(args.vipsload, command, work, index, images, cache, extra))
        for replica in replicas:
            wait_until(lambda r=replica: health(r) == 200, f"replica {replica.index}'s readiness (/health 200)")
        say(f"replicas: {len(replicas)} running `{' '.join(['vipsload', 'serve'] + command)}` (volumes and port "
            "mapped), each ready on /health")
        nginx, base, balancer = start_nginx(args.doc, replicas, work, args.nginx)
        before = [r.metric("vipsload_http_requests_total") for r in replicas]
        paths = [thumbnail(f"local:///{names[i % len(names)]}", 200 + i, 200) for i in range(30)]
        through(base, paths)
        reached = [r.metric("vipsload_http_requests_total") - b for r, b in zip(replicas, before)]
        if min(reached) < 1:
            raise Failure(f"nginx did not spread the requests over every replica: {reached}")
        say(f"load balancer ({balancer}): 30 requests, all 200, spread over the replicas as {reached} "
            "(each count includes this check's /metrics and /health reads)")
        # A thumbnail the first replica makes before its drain, for the disk-cache check after it.
        kept = thumbnail(f"local:///{names[2]}", 180, 180)
        if get(replicas[0].base + kept)[0] != 200:
            raise Failure(f"replica 0 did not answer {kept}")
        drain(replicas[0], replicas[1:], origin, base, names, drain_timeout, grace)
        # The node's disk cache: the drained replica, restarted on it, serves that thumbnail from disk.
        replicas[0].start()
        wait_until(lambda: health(replicas[0]) == 200, "the restarted replica's readiness")
        status_code, body = get(replicas[0].base + kept)
        hits = replicas[0].metric('vipsload_cache_hits_total{tier="disk"}')
        decodes = replicas[0].metric("vipsload_decodes_total")
        if status_code != 200 or not body.startswith(b"\xff\xd8") or hits != 1 or decodes != 0:
            raise Failure(f"the restarted replica answered {status_code} with {hits:.0f} disk-cache hits and "
                          f"{decodes:.0f} decodes for a thumbnail it made before (expected 200, 1, 0)")
        say("disk cache: restarted on the node's cache folder, the drained replica served a thumbnail it had "
            "made before from disk, with no decode")
        nginx.terminate()
        nginx.wait(WAIT)
        children.remove(nginx)
        for replica in replicas:
            code = replica.stop()
            if code != 0:
                raise Failure(f"replica {replica.index} exited {code} after SIGTERM")
        status = 0
    except (Failure, OriginTimeout) as failure:
        print(f"check-serve-scale-out: FAILED: {failure}", file=sys.stderr)
    except KeyboardInterrupt as interrupt:
        print(f"check-serve-scale-out: interrupted ({interrupt})", file=sys.stderr)
        status = 130
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if origin:
            origin.release_all()
        for process in list(children):
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait()
        if origin:
            origin.stop()
        shutil.rmtree(work, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
