"""tests/fuzz/cover_merge.py - fold a grown fuzzing corpus back into the
small committed seed corpus (tests/fuzz/corpus/NAME), by edge coverage.

    /usr/bin/python3 tests/fuzz/cover_merge.py BIN SEEDS GROWN [--from-scratch] [--max N]

libFuzzer's -merge=1 keeps every input that adds a *feature* (edge hit-count
buckets included), which for a 10-minute campaign is several hundred files.
This runs BIN -merge=1 once only to get its control file (the PCs each
input covers), then picks a greedy set cover of the PCs: the existing seeds
are kept (they are named, hand-made cases) unless --from-scratch, then the
input adding the most new PCs (the smaller on ties) until nothing adds any,
at most --max files in all (default 200).  Picked inputs are copied into
SEEDS under their SHA-1 (libFuzzer's naming); with --from-scratch, seeds
not picked are deleted.  Prints what it did."""

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    scratch = "--from-scratch" in sys.argv
    cap = 200
    if "--max" in sys.argv:
        cap = int(sys.argv[sys.argv.index("--max") + 1])
        args.remove(str(cap))
    binary, seeds, grown = args
    tmp = tempfile.mkdtemp(prefix="cover-merge-")
    try:
        out = os.path.join(tmp, "out")
        os.mkdir(out)
        ctl = os.path.join(tmp, "control")
        subprocess.run([binary, "-merge=1", "-merge_control_file=" + ctl, "-max_len=65536",
                        "-rss_limit_mb=2048", "-timeout=10", out, seeds, grown],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        with open(ctl) as f:
            lines = f.read().split("\n")
        n = int(lines[0])
        files = lines[2:2 + n]
        cov = {}
        for ln in lines[2 + n:]:
            parts = ln.split()
            if len(parts) >= 2 and parts[0] == "COV":
                cov.setdefault(int(parts[1]), set()).update(parts[2:])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    seeds_abs = os.path.abspath(seeds)
    is_seed = [os.path.dirname(os.path.abspath(p)) == seeds_abs for p in files]
    size = [os.path.getsize(p) for p in files]
    covered, picked = set(), []
    if not scratch:
        for i, s in enumerate(is_seed):
            if s:
                covered |= cov.get(i, set())
                picked.append(i)
    total = set().union(*cov.values()) if cov else set()
    cands = [i for i in range(n) if i not in picked]
    while len(picked) < cap:
        best, gain = None, 0
        for i in cands:
            g = len(cov.get(i, set()) - covered)
            if g > gain or (g == gain and g > 0 and size[i] < size[best]):
                best, gain = i, g
        if best is None:
            break
        picked.append(best)
        covered |= cov[best]
        cands.remove(best)

    added = removed = 0
    keep = set()
    for i in picked:
        if is_seed[i]:
            keep.add(os.path.basename(files[i]))
            continue
        with open(files[i], "rb") as f:
            data = f.read()
        name = hashlib.sha1(data).hexdigest()
        keep.add(name)
        dst = os.path.join(seeds, name)
        if not os.path.exists(dst):
            with open(dst, "wb") as f:
                f.write(data)
            added += 1
    if scratch:
        for name in os.listdir(seeds):
            if name not in keep:
                os.unlink(os.path.join(seeds, name))
                removed += 1
    nbytes = sum(os.path.getsize(os.path.join(seeds, x)) for x in os.listdir(seeds))
    print("%s: %d inputs cover %d PCs; kept %d files (%d added, %d removed) covering %d PCs, %d bytes"
          % (os.path.basename(seeds.rstrip("/")), n, len(total), len(os.listdir(seeds)),
             added, removed, len(covered), nbytes))


if __name__ == "__main__":
    main()
