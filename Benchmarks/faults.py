#!/usr/bin/env python3
"""The kernel's share of `vipsload thumb`, per class: minor page faults, system and user CPU time
per image and peak RSS, for one or more builds run side by side (interleaved, same corpus, same run).

Run it through Benchmarks/faults.sh, which builds `vipsload` in release first:

    Benchmarks/faults.sh                          # the default corpus, this tree's release build
    Benchmarks/faults.sh DIR --bin old=PATH       # another folder; an older build beside this one

Each run is `vipsload thumb --size S --out NEW_DIR --format jpeg --quality 75 FILES...` over one
class (the classes `Benchmarks/peers.sh` uses: subfolders, loose files by format, JPEG classes also
split into baseline and progressive), as peers.sh runs it: one process, its default threads. The
figures come from the child's own resource usage (wait4): ru_minflt, ru_stime, ru_utime, ru_maxrss.
Each figure is the median of --repeat runs, per image, with the spread (lowest–highest) beside it.
A fresh-memory tax shows as faults: every first touch of a freshly mapped page is one minor fault
(4 KiB zeroed by the kernel), so faults × 4 KiB is the memory mapped anew per image.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import discover, warm_page_cache  # noqa: E402  (the same classes as peers.py)


def run_once(binary, cls, size, scratch, env):
    out = tempfile.mkdtemp(dir=scratch)
    command = [binary, "thumb", "--size", str(size), "--out", out, "--format", "jpeg", "--quality", "75",
               *cls.files]
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(child.pid, 0)
    error = child.stderr.read().decode(errors="replace")
    child.stderr.close()
    shutil.rmtree(out, ignore_errors=True)
    if status != 0:
        raise SystemExit(f"faults: {' '.join(command[:2])} failed on {cls.name} (status {status}): {error[-400:]}")
    count = len(cls.files)
    return {
        "faults": usage.ru_minflt / count,
        "sys_ms": usage.ru_stime * 1000 / count,
        "user_ms": usage.ru_utime * 1000 / count,
        "rss_mb": usage.ru_maxrss / 1024,
    }


def spread(values, digits):
    median = statistics.median(values)
    return f"{median:.{digits}f} ({min(values):.{digits}f}–{max(values):.{digits}f})"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dir", help="folder of images (faults.sh passes the default corpus when none is named)")
    parser.add_argument("--bin", action="append", required=True, metavar="NAME=PATH",
                        help="a vipsload build to measure; repeat to compare builds side by side")
    parser.add_argument("--size", type=int, default=256, help="fit thumbnails into SIZE×SIZE (default 256)")
    parser.add_argument("--repeat", type=int, default=5, help="runs per class and build (default 5)")
    parser.add_argument("--env", action="append", default=[], metavar="NAME:VAR=VALUE",
                        help="an environment variable for one build's runs (e.g. old:MALLOC_ARENA_MAX=2)")
    args = parser.parse_args()

    builds = []
    for item in args.bin:
        name, _, path = item.partition("=")
        if not path or not os.access(path, os.X_OK):
            raise SystemExit(f"faults: --bin {item}: not NAME=EXECUTABLE")
        builds.append((name, path))
    extra = {}
    for item in args.env:
        name, _, assignment = item.partition(":")
        variable, _, value = assignment.partition("=")
        if not variable:
            raise SystemExit(f"faults: --env {item}: not NAME:VAR=VALUE")
        extra.setdefault(name, {})[variable] = value

    classes = discover(args.dir)
    if not classes:
        raise SystemExit(f"faults: no images in {args.dir}")
    warm_page_cache(classes)
    scratch = tempfile.mkdtemp(prefix="vipsload-faults-")
    try:
        results = {}
        for cls in classes:
            for _ in range(args.repeat):
                for name, path in builds:  # interleaved, so load drifts hit every build alike
                    env = dict(os.environ, **extra.get(name, {}))
                    results.setdefault((cls.name, name), []).append(run_once(path, cls, args.size, scratch, env))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    print(f"Per image, median of {args.repeat} runs (lowest–highest); `vipsload thumb --size {args.size}`, "
          f"{os.cpu_count()} CPUs.\n")
    print("| class | build | minor faults | system ms | user ms | peak RSS MB |")
    print("|---|---|---:|---:|---:|---:|")
    for cls in classes:
        for name, _ in builds:
            runs = results[(cls.name, name)]
            print(f"| {cls.name} ({len(cls.files)}) | {name} | {spread([r['faults'] for r in runs], 0)} | "
                  f"{spread([r['sys_ms'] for r in runs], 2)} | {spread([r['user_ms'] for r in runs], 1)} | "
                  f"{spread([r['rss_mb'] for r in runs], 0)} |")


if __name__ == "__main__":
    main()
