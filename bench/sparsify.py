"""SDM.sparsify_volume of a 1 GiB qcow2 against `qemu-img convert -O qcow2`
of the same image to a new file (which drops zero clusters too), same run.

Each round makes a fresh 1 GiB COW volume on a file domain of a real vdsmd,
writes SP_MIB MiB (default 512) of data with qemu-io and overwrites half of
it with allocated zeros (write -P 0); then, interleaved, the baseline
converts the volume to a new qcow2 file and vdsmd sparsifies it in place
(timed from the call to the job's done in Host.getJobs).  Reported: bytes
reclaimed (st_blocks before - after; the baseline: the source's st_blocks -
the copy's) and time, per round, then medians, spread (min-max) and the
ratio of the median times.  SP_ROUNDS (default 3) rounds."""

import os
import statistics
import subprocess
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
import vdsmtest as vt   # noqa: E402
from test_storage import BLANK, call_ready, connect, result, wait_task   # noqa: E402

MIB = 1 << 20
COW, SPARSE = 4, 2
SD = str(uuid.uuid4())


def used(path):
    return os.stat(path).st_blocks * 512


def one_round(c, root, mib):
    img, vol = str(uuid.uuid4()), str(uuid.uuid4())
    st = wait_task(c, result(c.call("Volume.create", [vol, BLANK, SD, img, str(1024 * MIB),
                                                      COW, SPARSE, "DATA", "bench", BLANK,
                                                      BLANK])), timeout=120)
    assert st["taskResult"] == "success", st
    path = os.path.join(root, SD, "images", img, vol)
    half = mib // 2
    subprocess.run(["qemu-io", "-f", "qcow2", "-c", "write -P 0x5a 0 %dM" % mib, "-c",
                    "write -P 0 %dM %dM" % (half // 2, half), path], check=True,
                   stdout=subprocess.DEVNULL)
    os.sync()
    before = used(path)
    copy = path + ".copy"
    t0 = time.monotonic()
    out = subprocess.run(["qemu-img", "convert", "-U", "-f", "qcow2", "-O", "qcow2", path,
                          copy], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    os.sync()
    conv_t = time.monotonic() - t0
    conv_b = before - used(copy)
    os.unlink(copy)
    jid = str(uuid.uuid4())
    t0 = time.monotonic()
    assert result(c.call("SDM.sparsify_volume", [jid, {"sd_id": SD, "img_id": img,
                                                        "vol_id": vol}])) is True
    while True:
        j = result(c.call("Host.getJobs", ["storage", [jid]]))[jid]
        if j["status"] not in ("pending", "running"):
            break
        time.sleep(0.01)
    sp_t = time.monotonic() - t0
    assert j["status"] == "done", j
    sp_b = before - used(path)
    print("sparsify round: %d MiB written, %d MiB of it zeros; sparsify_volume reclaimed "
          "%.1f MiB in %.2f s; qemu-img convert dropped %.1f MiB in %.2f s"
          % (mib, half, sp_b / MIB, sp_t, conv_b / MIB, conv_t), flush=True)
    return sp_t, sp_b, conv_t, conv_b


def spread(xs):
    return "%.2f-%.2f" % (min(xs), max(xs))


def main():
    mib = int(os.environ.get("SP_MIB", "512"))
    rounds = int(os.environ.get("SP_ROUNDS", "3"))
    with vt.Daemon() as d:
        c = connect(d)
        root = os.path.join(d.tmp, "dom")
        os.mkdir(root, 0o755)
        assert result(call_ready(c, "StorageDomain.create",
                                 [SD, 4, root, "bench", 1, "5", 0, 250])) is True
        rows = [one_round(c, root, mib) for _ in range(rounds)]
        c.close()
    sp_t = [r[0] for r in rows]
    conv_t = [r[2] for r in rows]
    sp_b = [r[1] / MIB for r in rows]
    conv_b = [r[3] / MIB for r in rows]
    print("ratio sparsify 1 GiB qcow2, %d MiB data, %d MiB zeros, median of %d rounds: "
          "sparsify_volume %.2f s (%s) reclaiming %.1f MiB (%s), qemu-img convert %.2f s (%s) "
          "dropping %.1f MiB (%s); time %.2fx the convert"
          % (mib, mib // 2, rounds, statistics.median(sp_t), spread(sp_t),
             statistics.median(sp_b), spread(sp_b), statistics.median(conv_t), spread(conv_t),
             statistics.median(conv_b), spread(conv_b),
             statistics.median(sp_t) / statistics.median(conv_t)))


if __name__ == "__main__":
    main()
