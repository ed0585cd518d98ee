#!/usr/bin/env python3
"""Times VipsLoad and the tools a user would otherwise pick, on the same images and thumbnail size.

Run it through Benchmarks/peers.sh, which installs the peers and builds `vipsload` first. This file
uses only the standard library; the Pillow and pyvips peers are the small worker scripts beside it,
run with --python (by default this interpreter, peers.sh's venv).

Every peer does the whole job a thumbnailer does for each file of a class: decode, fit into
SIZE×SIZE, encode JPEG (quality 75 where the tool takes one) and write it into a fresh temporary
folder; only the djpeg floor decodes without writing, since it is the lower bound for JPEG.
"One per core" splits the files of a class into N shards (round robin) run as N concurrent
processes; the time is the wall time over all of them, the peak RSS the largest of any process.

Peers (--peers takes these keys):
  vipsload          `vipsload thumb --size S --out DIR --format jpeg --quality 75 FILES...`, one process
                    (VipsLoad spreads the work over the cores itself)
  vipsthumbnail     `vipsthumbnail -s S -o DIR/%s.jpg[Q=75] FILES...`, one process
  vipsthumbnail-pc  the same, one process per core, each given a shard
  pyvips            pyvips.Image.thumbnail(file, S) -> write_to_file, one process
  pillow            Image.open, draft('RGB', fitted size) for JPEG, thumbnail, save JPEG, one process
  pillow-pc         the same, one process per core
  opencv            cv2.imread with IMREAD_REDUCED_COLOR_2/4/8 chosen from the header, resize INTER_AREA,
                    imwrite JPEG quality 75, cv2.setNumThreads(1), one process
  opencv-pc         the same, one process per core
  magick            `mogrify -path DIR -define jpeg:size=2Sx2S -auto-orient -thumbnail SxS
                    -quality 75 -format jpg FILES...`: ImageMagick's own batch form, one process
                    (ImageMagick threads some operations with OpenMP itself)
  magick-pc         the same, one mogrify per core, each given a shard
  djpeg             JPEG classes only: `djpeg -scale M/8 -outfile /dev/null FILE`, one process per
                    file, one per core at a time; M/8 is the smallest libjpeg scale whose result still
                    covers SIZE, so this is the decode-only floor, not a thumbnailer

Classes: each subfolder of DIR that holds images is a class; images directly in DIR are grouped by
their format. A JPEG class with both baseline and progressive files (told apart by the SOF marker)
also gets the rows NAME/baseline and NAME/progressive.

Measuring: the files are read once first (warm page cache); every measurement is repeated
(--repeat, default 3; repeats interleaved across peers) and the median images/s is shown with the
spread of the runs. Peak RSS is the largest ru_maxrss of any process of a run (os.wait4), over all
runs; CPU ms/image sums user+system time of every process. Other processes' CPU use during each run
is measured from /proc/stat; a run they disturbed (> --busy-limit of the cores) is redone up to
--retry-busy times, the least disturbed attempt kept, and the report states how busy they were.

The table's last column is VipsLoad's images/s divided by the peer's, so above 1 VipsLoad is faster.
"""

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# ---------------------------------------------------------------------------------------------
# Corpus


def sniff_format(path):
    """The image format by magic bytes ('JPEG', 'PNG', ...) or None for anything else."""
    try:
        with open(path, "rb") as f:
            head = f.read(32)
    except OSError:
        return None
    if head.startswith(b"\xff\xd8\xff"):
        return "JPEG"
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "PNG"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "WebP"
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return "GIF"
    if head[:4] in (b"II*\x00", b"MM\x00*"):
        return "TIFF"
    if head[4:8] == b"ftyp" and head[8:12] in (b"heic", b"heix", b"mif1", b"msf1", b"avif", b"avis"):
        return "AVIF" if head[8:12] in (b"avif", b"avis") else "HEIF"
    return None


# Start-of-frame markers (C0–CF except DHT C4, JPG C8, DAC CC); C2, C6, CA, CE are progressive.
SOF_MARKERS = set(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
PROGRESSIVE_SOF = {0xC2, 0xC6, 0xCA, 0xCE}


def jpeg_frame(path):
    """(progressive, width, height) from a JPEG's SOF segment, or None when there is none."""
    with open(path, "rb") as f:
        if f.read(2) != b"\xff\xd8":
            return None
        while True:
            byte = f.read(1)
            if not byte:
                return None
            if byte != b"\xff":
                continue  # not at a marker: scan on
            marker = f.read(1)
            while marker == b"\xff":  # fill bytes
                marker = f.read(1)
            if not marker:
                return None
            m = marker[0]
            if m == 0x01 or 0xD0 <= m <= 0xD8:
                continue  # markers without a length
            if m in (0xD9, 0xDA):
                return None  # end of image or start of scan before any frame header
            length = int.from_bytes(f.read(2), "big")
            if m in SOF_MARKERS:
                segment = f.read(5)
                if len(segment) < 5:
                    return None
                height = int.from_bytes(segment[1:3], "big")
                width = int.from_bytes(segment[3:5], "big")
                return m in PROGRESSIVE_SOF, width, height
            f.seek(length - 2, os.SEEK_CUR)


class ImageClass:
    """A named list of image files benchmarked together."""

    def __init__(self, name, files):
        self.name = name
        self.files = files
        self.formats = sorted({sniff_format(p) for p in files})
        self.frames = {p: jpeg_frame(p) for p in files} if self.formats == ["JPEG"] else {}

    @property
    def is_jpeg(self):
        return self.formats == ["JPEG"]

    def describe(self, dimensions):
        """'24 JPEG, 4000×3000' (the most common size, '~' when sizes differ)."""
        sizes = [dimensions[p] for p in self.files if p in dimensions]
        text = f"{len(self.files)} {'/'.join(self.formats)}"
        if sizes:
            common = max(set(sizes), key=sizes.count)
            text += f", {'~' if len(set(sizes)) > 1 else ''}{common[0]}×{common[1]}"
        return text


def images_in(folder):
    paths = []
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        if entry.is_file() and not entry.name.startswith(".") and sniff_format(entry.path):
            paths.append(entry.path)
    return paths


def discover(root):
    """The classes of a corpus folder: its subfolders, then its loose files grouped by format."""
    classes = []
    for entry in sorted(os.scandir(root), key=lambda e: e.name):
        if entry.is_dir() and not entry.name.startswith("."):
            files = images_in(entry.path)
            if files:
                classes.append(ImageClass(entry.name, files))
    loose = {}
    for path in images_in(root):
        loose.setdefault(sniff_format(path), []).append(path)
    for fmt in sorted(loose):
        classes.append(ImageClass(fmt.lower(), loose[fmt]))
    split = []
    for cls in classes:
        split.append(cls)
        if cls.is_jpeg and all(cls.frames.values()):
            progressive = [p for p in cls.files if cls.frames[p][0]]
            baseline = [p for p in cls.files if not cls.frames[p][0]]
            if progressive and baseline:
                split.append(ImageClass(cls.name + "/baseline", baseline))
                split.append(ImageClass(cls.name + "/progressive", progressive))
    return split


def warm_page_cache(classes):
    """Reads every file once so no peer pays for the first read from disk."""
    total = 0
    for cls in classes:
        for path in cls.files:
            with open(path, "rb") as f:
                while chunk := f.read(1 << 20):
                    total += len(chunk)
    return total


def dimensions_of(paths):
    """{path: (width, height)} as libvips reads them (vipsheader), for the table and the checks."""
    result = {}
    if not paths or not shutil.which("vipsheader"):
        return result
    for start in range(0, len(paths), 200):
        chunk = paths[start:start + 200]
        run = subprocess.run(["vipsheader", *chunk], capture_output=True, text=True)
        for line in run.stdout.splitlines():
            # "path: 4000x3000 uchar, 3 bands, srgb, jpegload"
            path, sep, rest = line.rpartition(": ")
            if sep and "x" in rest.split(" ", 1)[0]:
                w, h = rest.split(" ", 1)[0].split("x")
                if w.isdigit() and h.isdigit():
                    result[path] = (int(w), int(h))
    return result


# ---------------------------------------------------------------------------------------------
# Running


class Outcome:
    def __init__(self, wall, peak_rss_kib, cpu_seconds, others=None, error=None):
        self.wall = wall
        self.peak_rss_kib = peak_rss_kib
        self.cpu_seconds = cpu_seconds
        self.others = others  # share of the machine's CPU that other processes used meanwhile
        self.error = error


def busy_cpu_seconds():
    """CPU seconds the whole machine has spent busy since boot (/proc/stat), or None."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    # user nice system idle iowait irq softirq steal ...: all but idle and iowait is busy
    # (steal too: the hypervisor giving the CPU to someone else is contention as well).
    busy = sum(fields[:8]) - fields[3] - fields[4]
    return busy / os.sysconf("SC_CLK_TCK")


def others_share(busy_before, busy_after, own_cpu, wall):
    """The share of all cores that processes other than ours kept busy during a run."""
    if busy_before is None or busy_after is None or wall <= 0:
        return None
    return max(0.0, (busy_after - busy_before) - own_cpu) / (wall * os.cpu_count())


def wait_for_quiet(limit_seconds, threshold=0.15):
    """Waits (up to `limit_seconds`) until other processes use less than `threshold` of the CPU."""
    deadline = time.monotonic() + limit_seconds
    while True:
        before, start = busy_cpu_seconds(), time.monotonic()
        time.sleep(5)
        share = others_share(before, busy_cpu_seconds(), 0, time.monotonic() - start)
        if share is None or share < threshold or time.monotonic() >= deadline:
            return share
        print(f"peers: the machine is {share:.0%} busy with other work; waiting", file=sys.stderr)


def run_processes(commands, limit, log_path):
    """Runs argv lists, at most `limit` at a time; wall time over all, max RSS and summed CPU.

    Children are spawned directly and reaped with os.wait4, whose rusage is that child's own
    (plus any children it waited for): nothing of this orchestrator is counted.
    """
    env = dict(os.environ)
    pending = list(commands)
    running = {}
    peak = 0
    cpu = 0.0
    failures = []
    busy_before = busy_cpu_seconds()
    started = time.perf_counter()
    while pending or running:
        while pending and len(running) < limit:
            argv = pending.pop(0)
            actions = [
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                (os.POSIX_SPAWN_OPEN, 2, log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644),
            ]
            try:
                pid = os.posix_spawnp(argv[0], argv, env, file_actions=actions)
            except OSError as error:
                failures.append(f"{argv[0]}: {error}")
                continue
            running[pid] = argv
        if not running:
            break
        pid, status, usage = os.wait4(-1, 0)
        argv = running.pop(pid, None)
        if argv is None:
            continue
        peak = max(peak, usage.ru_maxrss)
        cpu += usage.ru_utime + usage.ru_stime
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            failures.append(f"{os.path.basename(argv[0])} exited with {code}")
    wall = time.perf_counter() - started
    others = others_share(busy_before, busy_cpu_seconds(), cpu, wall)
    error = None
    if failures:
        with open(log_path, errors="replace") as f:
            tail = [line.strip() for line in f.read().splitlines() if line.strip()][-2:]
        error = "; ".join(failures[:2] + tail)
    return Outcome(wall, peak, cpu, others, error)


def shards(files, count):
    count = max(1, min(count, len(files)))
    return [files[i::count] for i in range(count)]


def output_files(folder):
    """The thumbnails written under `folder` (not `vipsload thumb`'s hidden `.vipsload-journal`)."""
    found = []
    for base, _, names in os.walk(folder):
        found.extend(os.path.join(base, n) for n in names if not n.startswith("."))
    return found


def djpeg_scale(frame, size):
    """Smallest M in 1…8 whose M/8 scale still leaves the longer side at least `size`."""
    if not frame:
        return 8
    longest = max(frame[1], frame[2])
    for m in range(1, 9):
        if -(-longest * m // 8) >= size:
            return m
    return 8


class Peer:
    """One tool in one configuration; `commands` gives the argv lists and the concurrency."""

    def __init__(self, key, label, processes, commands, writes=True, applies=lambda cls: True):
        self.key = key
        self.label = label
        self.processes = processes
        self.commands = commands
        self.writes = writes
        self.applies = applies
        self.unavailable = None  # the reason, when the tool is missing


def make_peers(args, jobs):
    size = args.size
    py = args.python
    magick = resolve_imagemagick()

    def vipsload(cls, out):
        return [[args.vipsload, "thumb", "--size", str(size), "--out", out, "--format", "jpeg",
                 "--quality", "75", *cls.files]], 1

    def vipsthumbnail(n):
        def commands(cls, out):
            parts = shards(cls.files, n)
            return [["vipsthumbnail", "-s", str(size), "-o", os.path.join(out, "%s.jpg[Q=75]"), *p]
                    for p in parts], len(parts)
        return commands

    def python_worker(script, n):
        def commands(cls, out):
            parts = shards(cls.files, n)
            return [[py, os.path.join(HERE, script), out, str(size), *p] for p in parts], len(parts)
        return commands

    def mogrify(n):
        def commands(cls, out):
            parts = shards(cls.files, n)
            return [[*(magick or ["mogrify"]), "-path", out, "-define", f"jpeg:size={2 * size}x{2 * size}",
                     "-auto-orient", "-thumbnail", f"{size}x{size}", "-quality", "75", "-format", "jpg", *p]
                    for p in parts], len(parts)
        return commands

    def djpeg(cls, out):
        return [["djpeg", "-scale", f"{djpeg_scale(cls.frames.get(p), size)}/8", "-outfile", os.devnull, p]
                for p in cls.files], jobs

    peers = [
        Peer("vipsload", "VipsLoad `thumb`", "1", vipsload),
        Peer("vipsthumbnail", "vipsthumbnail", "1", vipsthumbnail(1)),
        Peer("vipsthumbnail-pc", "vipsthumbnail", f"{jobs} (per core)", vipsthumbnail(jobs)),
        Peer("pyvips", "pyvips `thumbnail`", "1", python_worker("pyvips_worker.py", 1)),
        Peer("pillow", "Pillow `draft`+`thumbnail`", "1", python_worker("pillow_worker.py", 1)),
        Peer("pillow-pc", "Pillow `draft`+`thumbnail`", f"{jobs} (per core)", python_worker("pillow_worker.py", jobs)),
        Peer("opencv", "OpenCV `imread` reduced + `INTER_AREA`", "1", python_worker("opencv_worker.py", 1)),
        Peer("opencv-pc", "OpenCV `imread` reduced + `INTER_AREA`", f"{jobs} (per core)", python_worker("opencv_worker.py", jobs)),
        Peer("magick", "ImageMagick `mogrify -thumbnail`", "1", mogrify(1)),
        Peer("magick-pc", "ImageMagick `mogrify -thumbnail`", f"{jobs} (per core)", mogrify(jobs)),
        Peer("djpeg", "djpeg `-scale M/8` (decode only: floor)", f"{jobs} at a time, 1 per file", djpeg,
             writes=False, applies=lambda cls: cls.is_jpeg),
    ]
    for peer in peers:
        if peer.key.startswith("vipsthumbnail") and not shutil.which("vipsthumbnail"):
            peer.unavailable = "vipsthumbnail not found (apt-get install libvips-tools)"
        elif peer.key.startswith("magick") and not magick:
            peer.unavailable = "ImageMagick not found (apt-get install imagemagick)"
        elif peer.key == "djpeg" and not shutil.which("djpeg"):
            peer.unavailable = "djpeg not found (apt-get install libjpeg-turbo-progs)"
        elif peer.key == "pyvips" and not python_has(py, "pyvips"):
            peer.unavailable = f"{py} cannot import pyvips (run through Benchmarks/peers.sh)"
        elif peer.key.startswith("opencv") and not python_has(py, "cv2"):
            peer.unavailable = f"{py} cannot import cv2 (run through Benchmarks/peers.sh)"
        elif peer.key.startswith("pillow") and not python_has(py, "PIL"):
            peer.unavailable = f"{py} cannot import PIL (run through Benchmarks/peers.sh)"
    return peers


def resolve_imagemagick():
    """argv prefix for ImageMagick's mogrify (IM7's `magick mogrify`, else IM6's `mogrify`)."""
    for prefix in (["magick", "mogrify"], ["mogrify"]):
        if shutil.which(prefix[0]):
            run = subprocess.run([*prefix, "-version"], capture_output=True, text=True)
            if run.returncode == 0 and "ImageMagick" in run.stdout:
                return prefix
    return None


def python_has(python, module):
    return subprocess.run([python, "-c", f"import {module}"], capture_output=True).returncode == 0


def probe_vipsload(args, cls, scratch):
    """None when `vipsload thumb` thumbnails a file into --out, else why not."""
    if not args.vipsload:
        return "no --vipsload binary given"
    if not os.access(args.vipsload, os.X_OK):
        return f"{args.vipsload} is not an executable"
    out = tempfile.mkdtemp(prefix="probe-", dir=scratch)
    try:
        run = subprocess.run([args.vipsload, "thumb", "--size", str(args.size), "--out", out, "--format", "jpeg",
                              "--quality", "75",
                              cls.files[0]], capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return "`vipsload thumb` did not finish within 300 s on one file"
    written = output_files(out)
    shutil.rmtree(out, ignore_errors=True)
    if run.returncode != 0 or not written:
        detail = (run.stderr.strip().splitlines() or ["no thumbnail written"])[-1]
        return f"this build has no working `vipsload thumb` ({detail[:120]})"
    return None


# ---------------------------------------------------------------------------------------------
# Measuring and reporting


def run_once(peer, cls, args, scratch, checked, notes):
    """One timed run of a peer on a class, with its output counted (and, the first time, sized)."""
    out = tempfile.mkdtemp(prefix=f"{peer.key}-", dir=scratch)
    commands, limit = peer.commands(cls, out)
    handle, log = tempfile.mkstemp(prefix=f"{peer.key}-", suffix=".log", dir=scratch)
    os.close(handle)
    outcome = run_processes(commands, limit, log)
    os.remove(log)
    written = output_files(out)
    expected = len({os.path.splitext(os.path.basename(p))[0] for p in cls.files})
    if peer.key == "vipsload":
        expected = len(cls.files)  # its naming is its own: count files, not names
    if not outcome.error and peer.writes and len(written) != expected:
        outcome.error = f"wrote {len(written)} thumbnails for {expected} files"
    if not outcome.error and peer.writes and (cls.name, peer.key) not in checked:
        checked.add((cls.name, peer.key))
        wrong = [p for p, (w, h) in dimensions_of(written).items() if max(w, h) != args.size]
        if wrong:
            notes.append(f"{peer.label} ×{peer.processes} on {cls.name}: {len(wrong)} thumbnail(s) "
                         f"not {args.size} px on the longer side, e.g. {os.path.basename(wrong[0])}")
    shutil.rmtree(out, ignore_errors=True)
    return outcome


def measure(peers, classes, args, scratch):
    """{(class name, peer key): [Outcome...]}: every peer on every class, repeats interleaved.

    A run during which other processes kept more than --busy-limit of the cores busy is redone
    (up to --retry-busy times) and the least disturbed attempt is kept: the selection is by the
    others' CPU use, never by the speed measured.
    """
    results = {}
    checked = set()
    notes = []
    redone = 0
    for rep in range(args.repeat):
        for cls in classes:
            for peer in peers:
                if peer.unavailable or not peer.applies(cls):
                    continue
                previous = results.get((cls.name, peer.key), [])
                if previous and previous[-1].error:
                    continue  # failed once: no point repeating it
                attempts = []
                while True:
                    outcome = run_once(peer, cls, args, scratch, checked, notes)
                    attempts.append(outcome)
                    others = f"  others {outcome.others:4.0%}" if outcome.others is not None else ""
                    status = f"error: {outcome.error}" if outcome.error else \
                        f"{len(cls.files) / outcome.wall:8.1f} img/s  {outcome.peak_rss_kib / 1024:7.1f} MiB{others}"
                    print(f"  [{rep + 1}/{args.repeat}] {cls.name:<24} {peer.key:<17} {status}", file=sys.stderr)
                    disturbed = outcome.others is not None and outcome.others > args.busy_limit
                    if outcome.error or not disturbed or len(attempts) > args.retry_busy:
                        break
                    redone += 1
                # Only the last attempt can have failed (a failure stops the retries); keep it then.
                best = outcome if outcome.error else min(attempts, key=lambda o: o.others or 0)
                results.setdefault((cls.name, peer.key), []).append(best)
    if redone:
        notes.append(f"{redone} run(s) were redone because other processes kept more than "
                     f"{args.busy_limit:.0%} of the cores busy meanwhile (the least disturbed attempt is kept)")
    return results, notes


def summarise(outcomes, files):
    """(images/s median, its spread in %, peak RSS MiB max, CPU ms/image median) or the error.

    The spread is (fastest − slowest) ÷ median of the runs: how far apart the repeats were.
    """
    failed = [o for o in outcomes if o.error]
    if failed:
        return None, failed[0].error
    rates = [files / o.wall for o in outcomes]
    cpu = [o.cpu_seconds * 1000 / files for o in outcomes]
    median = statistics.median(rates)
    spread = (max(rates) - min(rates)) / median * 100
    return (median, spread, max(o.peak_rss_kib for o in outcomes) / 1024, statistics.median(cpu)), None


def versions(args, magick):
    def first_line(argv, stream="stdout"):
        try:
            run = subprocess.run(argv, capture_output=True, text=True)
        except OSError:
            return None
        text = (run.stdout if stream == "stdout" else run.stderr).strip()
        return text.splitlines()[0] if text else None

    found = []
    if os.environ.get("PEERS_REVISION"):
        found.append(f"VipsLoad {os.environ['PEERS_REVISION']}")
    if (vips := first_line(["vips", "--version"])):
        found.append(vips.replace("vips-", "libvips "))
    if magick and (im := first_line([*magick, "-version"])):
        found.append(im.replace("Version: ", "").split(" https")[0])
    if shutil.which("djpeg") and (dj := first_line(["djpeg", "-version"], "stderr")):
        found.append(dj.split(" (")[0])
    py = subprocess.run([args.python, "-c",
                         "import PIL, pyvips, platform; print('Pillow', PIL.__version__, '· pyvips', "
                         "pyvips.__version__, '· Python', platform.python_version())"],
                        capture_output=True, text=True)
    if py.returncode == 0:
        found.append(py.stdout.strip())
    return found


def machine():
    """'CPU model, memory, OS' from /proc and /etc/os-release, as far as they can be read."""
    parts = []
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), None)
        if model:
            parts.append(model)
    except OSError:
        pass
    try:
        with open("/proc/meminfo") as f:
            kib = int(next(line.split()[1] for line in f if line.startswith("MemTotal:")))
        parts.append(f"{kib / 1024 / 1024:.1f} GiB RAM")
    except (OSError, StopIteration, ValueError):
        pass
    try:
        with open("/etc/os-release") as f:
            name = next((line.split("=", 1)[1].strip().strip('"') for line in f if line.startswith("PRETTY_NAME=")), None)
        if name:
            parts.append(name)
    except OSError:
        pass
    parts.append(f"{os.uname().sysname} {os.uname().release} {os.uname().machine}")
    return ", ".join(parts)


def contention(results):
    """How much CPU other processes took while runs were timed: the honesty line of the report."""
    shares = sorted(o.others for runs in results.values() for o in runs if o.others is not None)
    if not shares:
        return "unknown (no /proc/stat)"
    busy = sum(1 for x in shares if x > 0.10)
    return (f"median {statistics.median(shares):.0%}, max {shares[-1]:.0%} of all cores "
            f"({busy} of {len(shares)} runs above 10%)")


def load_average():
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def report(peers, classes, results, notes, args, context):
    lines = []
    lines.append(f"Thumbnails fitting {args.size}×{args.size}, JPEG out; median of {args.repeat} runs "
                 "(spread: fastest − slowest run ÷ median), page cache warm. Peak RSS: the largest process, "
                 "over all runs.")
    lines.append("")
    for key, value in context:
        lines.append(f"- {key}: {value}")
    lines.append("")
    lines.append("| class | peer | processes | images/s | spread | peak RSS (MiB) | CPU ms/image "
                 "| VipsLoad ÷ peer (images/s; > 1: VipsLoad faster) |")
    lines.append("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for cls in classes:
        own = None
        if results.get((cls.name, "vipsload")):
            own, _ = summarise(results[(cls.name, "vipsload")], len(cls.files))
        for peer in peers:
            if not peer.applies(cls):
                continue
            where = f"{cls.name} ({context_dims(cls)})"
            if peer.unavailable:
                lines.append(f"| {where} | {peer.label} | {peer.processes} | n/a | | n/a | n/a | n/a |")
                continue
            outcomes = results.get((cls.name, peer.key))
            if not outcomes:
                continue
            summary, error = summarise(outcomes, len(cls.files))
            if error:
                lines.append(f"| {where} | {peer.label} | {peer.processes} | failed | | | | |")
                notes.append(f"{peer.label} ×{peer.processes} on {cls.name} failed: {error}")
                continue
            rate, spread, rss, cpu = summary
            ratio = f"{own[0] / rate:.2f}" if own else "n/a"
            lines.append(f"| {where} | {peer.label} | {peer.processes} | {rate:.1f} | {spread:.0f}% | {rss:.1f} "
                         f"| {cpu:.1f} | {ratio} |")
    unavailable = [f"{p.label} ×{p.processes}: {p.unavailable}" for p in peers if p.unavailable]
    if unavailable or notes:
        lines.append("")
        for note in unavailable + notes:
            lines.append(f"- {note}")
    return "\n".join(lines)


def svg_chart(peers, classes, results):
    """An SVG bar chart of the run, made with the standard library only: per class, images/s and
    CPU ms/image, one bar per peer, VipsLoad highlighted."""
    from xml.sax.saxutils import escape

    rows = []  # (class label, [(peer label, images/s, CPU ms, is VipsLoad)])
    for cls in classes:
        bars = []
        for peer in peers:
            outcomes = results.get((cls.name, peer.key))
            if peer.unavailable or not peer.applies(cls) or not outcomes:
                continue
            summary, error = summarise(outcomes, len(cls.files))
            if error:
                continue
            name = f"{peer.label} ×{peer.processes}".replace("`", "")
            bars.append((name, summary[0], summary[3], peer.key == "vipsload"))
        if bars:
            rows.append((f"{cls.name} ({context_dims(cls)})", bars))
    bar, gap, label_width, panel_width, top = 16, 4, 430, 300, 40
    height = top + sum(34 + len(bars) * (bar + gap) for _, bars in rows) + 20
    width = label_width + 2 * (panel_width + 90)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="11">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{label_width}" y="20" font-size="13" font-weight="bold">images/s (higher is better)</text>',
           f'<text x="{label_width + panel_width + 90}" y="20" font-size="13" font-weight="bold">'
           'CPU ms/image (lower is better)</text>']
    y = top
    for title, bars in rows:
        out.append(f'<text x="4" y="{y + 14}" font-weight="bold">{escape(title)}</text>')
        y += 22
        most_rate = max(b[1] for b in bars) or 1
        most_cpu = max(b[2] for b in bars) or 1
        for name, rate, cpu, ours in bars:
            colour = "#d9480f" if ours else "#868e96"
            weight = ' font-weight="bold"' if ours else ""
            out.append(f'<text x="{label_width - 6}" y="{y + bar - 4}" text-anchor="end"{weight}>{escape(name)}</text>')
            for offset, value, most, text in ((0, rate, most_rate, f"{rate:.1f}"),
                                              (panel_width + 90, cpu, most_cpu, f"{cpu:.1f}")):
                length = max(1.0, value / most * panel_width)
                x = label_width + offset
                out.append(f'<rect x="{x}" y="{y}" width="{length:.1f}" height="{bar}" fill="{colour}"/>')
                out.append(f'<text x="{x + length + 4:.1f}" y="{y + bar - 4}"{weight}>{text}</text>')
            y += bar + gap
        y += 12
    out.append("</svg>")
    return "\n".join(out) + "\n"


_descriptions = {}


def context_dims(cls):
    return _descriptions.get(cls.name, f"{len(cls.files)} files")


def default_corpus(args):
    if not args.vipsload:
        sys.exit("peers: give a DIR of images (no --vipsload to ask for its corpus)")
    try:
        run = subprocess.run([args.vipsload, "corpus"], capture_output=True, text=True, timeout=1800)
    except (OSError, subprocess.TimeoutExpired) as error:
        sys.exit(f"peers: `vipsload corpus` failed ({error}); give a DIR of images instead")
    lines = [line.strip() for line in run.stdout.splitlines() if line.strip()]
    if run.returncode != 0 or not lines or not os.path.isdir(lines[-1]):
        detail = (run.stderr.strip().splitlines() or ["no folder printed"])[-1]
        sys.exit(f"peers: `vipsload corpus` gave no corpus folder ({detail[:160]}); give a DIR of images instead")
    return lines[-1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog="Peers: " + ", ".join(
                                         ["vipsload", "vipsthumbnail", "vipsthumbnail-pc", "pyvips", "pillow",
                                          "pillow-pc", "opencv", "opencv-pc", "magick", "magick-pc", "djpeg"]) + ". See the top of peers.py.")
    parser.add_argument("dir", nargs="?", help="folder of images (default: the folder `vipsload corpus` prints)")
    parser.add_argument("--size", type=int, default=256, help="fit thumbnails into SIZE×SIZE (default 256)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement; the median is shown (default 3)")
    parser.add_argument("--peers", help="comma-separated subset of the peer keys (default: all)")
    parser.add_argument("--classes", help="comma-separated subset of the class names (default: all)")
    parser.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)),
                        help="processes for the one-per-core peers (default: the cores this process may use)")
    parser.add_argument("--vipsload", help="the vipsload binary (peers.sh passes its release build)")
    parser.add_argument("--python", default=sys.executable,
                        help="interpreter with Pillow and pyvips for their workers (default: this one)")
    parser.add_argument("--wait-quiet", type=float, default=0, metavar="SECONDS",
                        help="first wait up to SECONDS until other processes use < 15%% of the CPU (default 0)")
    parser.add_argument("--busy-limit", type=float, default=0.2, metavar="SHARE",
                        help="a run during which other processes used more than this share of the cores is "
                             "redone (default 0.2)")
    parser.add_argument("--retry-busy", type=int, default=2, metavar="N",
                        help="redo a disturbed run at most N times, keeping the least disturbed (default 2)")
    parser.add_argument("--scratch", help="where thumbnails are written (default: a new folder in $TMPDIR)")
    parser.add_argument("--svg", metavar="FILE", help="also write the run as an SVG bar chart to FILE")
    args = parser.parse_args()
    if args.size < 1 or args.repeat < 1 or args.jobs < 1:
        parser.error("--size, --repeat and --jobs must be at least 1")

    root = os.path.abspath(args.dir) if args.dir else default_corpus(args)
    classes = discover(root)
    if args.classes:
        wanted = [c.strip() for c in args.classes.split(",") if c.strip()]
        unknown = sorted(set(wanted) - {c.name for c in classes})
        if unknown:
            parser.error(f"no class {', '.join(unknown)} in {root} (there are: {', '.join(c.name for c in classes)})")
        classes = [c for c in classes if c.name in wanted]
    if not classes:
        sys.exit(f"peers: no images in {root}")

    peers = make_peers(args, args.jobs)
    if args.peers:
        wanted = [p.strip() for p in args.peers.split(",") if p.strip()]
        unknown = sorted(set(wanted) - {p.key for p in peers})
        if unknown:
            parser.error(f"unknown peer {', '.join(unknown)} (there are: {', '.join(p.key for p in peers)})")
        peers = [p for p in peers if p.key in wanted]

    # SIGTERM ends the run like Ctrl-C does: through the finally below, which removes the scratch folder.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    scratch = tempfile.mkdtemp(prefix="vipsload-peers-", dir=args.scratch)
    try:
        print(f"peers: {root}: " + ", ".join(f"{c.name} ({len(c.files)})" for c in classes), file=sys.stderr)
        warmed = warm_page_cache(classes)
        dims = dimensions_of(sorted({p for c in classes for p in c.files}))
        for cls in classes:
            _descriptions[cls.name] = cls.describe(dims)
        for peer in peers:
            if peer.key == "vipsload" and not peer.unavailable:
                peer.unavailable = probe_vipsload(args, classes[0], scratch)
        if args.wait_quiet > 0:
            wait_for_quiet(args.wait_quiet)
        load_before = load_average()
        results, notes = measure(peers, classes, args, scratch)
        load_after = load_average()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    invocation = os.environ.get("PEERS_INVOCATION") or " ".join(["Benchmarks/peers.py", *sys.argv[1:]])
    context = [
        ("command", f"`{invocation}`"),
        ("machine", f"{os.cpu_count()} cores ({args.jobs} used for the per-core peers), {machine()}"),
        ("corpus", f"`{root}`, {sum(len(c.files) for c in classes)} files in the rows, "
                   f"{warmed / 1e6:.0f} MB read to warm the page cache"),
        ("versions", " · ".join(versions(args, resolve_imagemagick()))),
        ("load average (1, 5, 15 min) before / after", f"{load_before} / {load_after}"),
        ("other processes during the runs", contention(results)),
        ("date", time.strftime("%Y-%m-%d %H:%M %Z")),
    ]
    print(report(peers, classes, results, notes, args, context))
    if args.svg:
        with open(args.svg, "w") as f:
            f.write(svg_chart(peers, classes, results))
        print(f"peers: chart written to {args.svg}", file=sys.stderr)


if __name__ == "__main__":
    main()
