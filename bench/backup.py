"""bench/backup.py - incremental backup of 1 % changed blocks of a 1 GiB
disk against a full read of it (issue 24), run by bench/run.sh with
Debian's python3.

A real QEMU VM (TCG) under a private libvirtd (tests/integration/
privlibvirt.py) runs with one qcow2 volume made through vdsmd's storage
verbs, filled with data (16 patterns, one per 1/16 of the disk) before the
VM starts.  Each round, the rounds interleaving full and incremental:
  1. full: VM.start_backup (pull mode, vdsmd's scratch disk, a first
     checkpoint), the export read by bench/backup_read.c (libnbd: block
     status for base:allocation, then every allocated extent, 4 MiB
     synchronous preads, written into a raw file), VM.stop_backup;
     nbdcopy of the same export to null: beside it, for reference;
  2. the "guest" writes 1 % of the disk's blocks: BK_WRITE_KIB (64 KiB, the
     qcow2 cluster) ranges spread evenly over the disk, through the running
     QEMU's block layer (HMP qemu-io on the disk's qdev, as the guest's
     writes go, so the checkpoint's dirty bitmap sees them); a different
     offset inside each stride every round;
  3. incremental: VM.start_backup from that checkpoint, backup_read with
     qemu:dirty-bitmap:backup-vda, written over the round's full copy;
     VM.stop_backup.  The dirty bytes must equal the bytes written, and the
     restored file must compare equal to the disk (qemu-img compare -U);
     then VM.delete_checkpoints, so every round starts from none.
The table: per kind the median bytes read over NBD, the read time (block
status + reads, the data written into the backup file), the whole backup
(start_backup .. stop_backup) and their spread (min..max); the ratios of
the medians (incremental / full), and the incremental read against
nbdcopy's full read to null: (the fastest full read here, nothing
written), the conservative figure.

Skipped, with the reason printed, where the private libvirtd or QEMU cannot
run (no root, not installed) or a tool is missing.

Environment: BUILD (default build), BK_SIZE_MIB (1024), BK_ROUNDS (3),
BK_CHANGED_PCT (1), BK_WRITE_KIB (64), BK_JSON (a file for the result rows)."""

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
BUILD = os.environ.get("BUILD", "build")
os.environ.setdefault("VDSMD_BIN", os.path.join(REPO, BUILD, "vdsmd"))
import privlibvirt  # noqa: E402
import vdsmtest as vt  # noqa: E402

READER = os.path.join(REPO, BUILD, "bench", "backup_read")
MiB = 1 << 20
SIZE = int(os.environ.get("BK_SIZE_MIB", "1024")) * MiB
ROUNDS = int(os.environ.get("BK_ROUNDS", "3"))
PCT = float(os.environ.get("BK_CHANGED_PCT", "1"))
WRITE = int(os.environ.get("BK_WRITE_KIB", "64")) * 1024
VM = "7a000000-3333-4333-8333-444455556666"
POOL = "7b1b0000-626e-47cb-ad90-3ce782d83300"
SD = "7c2c0000-2c2e-4b8a-9b1f-2a1f6b9d7c33"
IMG = "7d3d0000-d5e6-4f70-8a91-b2c3d4e5f633"
VOL = "7e4e0000-e6f7-4081-9a2b-c3d4e5f60733"
COW, SPARSE = 4, 2
RESULT_RE = re.compile(r"^RESULT (.*)$", re.M)
result = vt.result


def vm_xml():
    return (
        '<?xml version="1.0" encoding="UTF-8"?><domain type="kvm" '
        'xmlns:ovirt-vm="http://ovirt.org/vm/1.0"><name>bkbench</name><uuid>%s</uuid>'
        '<memory unit="MiB">64</memory><currentMemory unit="MiB">64</currentMemory>'
        '<vcpu>1</vcpu><os><type arch="x86_64" machine="pc">hvm</type></os>'
        '<devices><disk type="file" device="disk">'
        '<target dev="vda" bus="virtio"/><source file="/rhev/placeholder"/>'
        '<driver name="qemu" type="qcow2" cache="none"/><alias name="ua-%s"/>'
        '<serial>%s</serial></disk><memballoon model="none"/></devices>'
        '<metadata><ovirt-vm:vm><ovirt-vm:device devtype="disk" name="vda">'
        '<ovirt-vm:poolID>%s</ovirt-vm:poolID><ovirt-vm:domainID>%s</ovirt-vm:domainID>'
        '<ovirt-vm:imageID>%s</ovirt-vm:imageID><ovirt-vm:volumeID>%s</ovirt-vm:volumeID>'
        '</ovirt-vm:device></ovirt-vm:vm></metadata></domain>'
        % (VM, IMG, IMG, POOL, SD, IMG, VOL))


def run(*argv, timeout=600):
    p = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise SystemExit("backup: %s failed (%d): %s" % (" ".join(map(str, argv)), p.returncode,
                                                         (p.stderr or p.stdout).strip()))
    return p.stdout


def nbd_uri(url):
    """VDSM's nbd:unix:<path>:exportname=<name> as an NBD URI."""
    if not url.startswith("nbd:unix:"):
        raise SystemExit("backup: unexpected export url %r" % url)
    path, export = url[len("nbd:unix:"):].rsplit(":exportname=", 1)
    return "nbd+unix:///%s?socket=%s" % (export, path)


def read_export(url, context, out):
    """backup_read's RESULT line as a dict (numbers as floats)."""
    m = RESULT_RE.search(run(READER, nbd_uri(url), context, out))
    if not m:
        raise SystemExit("backup: backup_read printed no RESULT")
    return {k: (v if k == "context" else float(v))
            for k, v in (kv.split("=", 1) for kv in m.group(1).split())}


def call(c, method, params, timeout=120):
    r = c.call(method, params, timeout=timeout)
    if "result" not in r:
        raise SystemExit("backup: %s: %r" % (method, r.get("error", r)))
    return r["result"]


class Bench:
    def __init__(self, lv, work):
        self.lv = lv
        self.work = work
        self.run_dir = os.path.join(work, "run")
        os.makedirs(os.path.join(self.run_dir, "backup"))
        os.chmod(work, 0o755)
        os.chmod(self.run_dir, 0o755)
        os.chmod(os.path.join(self.run_dir, "backup"), 0o777)   # QEMU (nobody) binds there
        self.d = vt.Daemon("--run-dir", self.run_dir, libvirt_uri=lv.uri)
        self.c, self.ev = vt.vm_connections(self.d)

    def close(self):
        self.c.call("VM.destroy", {"vmID": VM}, timeout=30)
        self.c.close()
        self.ev.close()
        self.d.__exit__(None, None, None)

    def make_disk(self):
        c = self.c
        call(c, "StorageDomain.create", [SD, 4, "", "bkbench", 1])
        vt.wait_task(c, call(c, "Volume.create", {
            "volumeID": VOL, "storagedomainID": SD, "imageID": IMG, "size": str(SIZE),
            "volFormat": COW, "preallocate": SPARSE}), timeout=60)
        if call(c, "StoragePool.create", [POOL, "Default", SD, 1, [SD], 5, 60, 10, 3]) is not True:
            raise SystemExit("backup: StoragePool.create did not answer true")
        self.path = vt.volume_path(self.d, SD, IMG, VOL)
        part = SIZE // 16
        cmds = []
        for i in range(16):
            cmds += ["-c", "write -P %d %d %d" % (0x40 + i, i * part, part)]
        run("qemu-io", "-f", "qcow2", *cmds, self.path)
        vt.open_for_qemu(self.d, [self.path])
        r = call(self.c, "VM.create", {"vmID": VM, "vmParams": {"vmId": VM, "xml": vm_xml()}})
        if r.get("status") != "WaitForLaunch":
            raise SystemExit("backup: VM.create: %r" % r)

    def guest_write(self, off, length, pattern):
        r = self.lv.virsh("qemu-monitor-command", "bkbench", "--hmp",
                          'qemu-io -d /machine/peripheral/ua-%s/virtio-backend '
                          '"write -P %d %d %d"' % (IMG, pattern, off, length))
        if r.returncode != 0 or "rror" in r.stdout:
            raise SystemExit("backup: guest write: %s %s" % (r.stdout, r.stderr))

    def backup(self, mode, to_cp, from_cp, out, context):
        """One backup: start, read, stop; returns backup_read's figures
        with the whole backup's wall time in 'backup_s'."""
        disk = {"domainID": SD, "imageID": IMG, "volumeID": VOL, "checkpoint": True,
                "backup_mode": mode}
        bid = str(uuid.uuid4())
        t0 = time.monotonic()
        info = call(self.c, "VM.start_backup", {"vmID": VM, "config": {
            "backup_id": bid, "disks": [disk], "from_checkpoint_id": from_cp,
            "to_checkpoint_id": to_cp, "parent_checkpoint_id": from_cp,
            "require_consistency": False}})
        url = info["disks"][IMG]
        fig = read_export(url, context, out)
        if call(self.c, "VM.stop_backup", {"vmID": VM, "backup_id": bid}).get("code") != 0:
            raise SystemExit("backup: VM.stop_backup did not answer its Done status")
        fig["backup_s"] = time.monotonic() - t0
        fig["url"] = url
        return fig

    def nbdcopy_full(self):
        """nbdcopy of a full backup's export to null: (reference only)."""
        bid = str(uuid.uuid4())
        disk = {"domainID": SD, "imageID": IMG, "volumeID": VOL, "checkpoint": False,
                "backup_mode": "full"}
        info = call(self.c, "VM.start_backup", {"vmID": VM, "config": {
            "backup_id": bid, "disks": [disk], "from_checkpoint_id": None,
            "to_checkpoint_id": None, "require_consistency": False}})
        t0 = time.monotonic()
        run("nbdcopy", nbd_uri(info["disks"][IMG]), "null:")
        secs = time.monotonic() - t0
        call(self.c, "VM.stop_backup", {"vmID": VM, "backup_id": bid})
        return secs

    def round(self, r):
        full_out = os.path.join(self.work, "full.raw")
        cp1, cp2 = str(uuid.uuid4()), str(uuid.uuid4())
        full = self.backup("full", cp1, None, full_out, "base:allocation")
        nbdcopy_s = self.nbdcopy_full()
        n = max(1, round(SIZE * PCT / 100 / WRITE))
        stride = SIZE // n // WRITE * WRITE            # cluster-aligned ranges
        shift = r * WRITE if (r + 1) * WRITE <= stride else 0
        for i in range(n):
            self.guest_write(i * stride + shift, WRITE, 0x10 + r)
        inc = self.backup("incremental", cp2, cp1, full_out, "qemu:dirty-bitmap:backup-vda")
        if inc["bytes"] != n * WRITE:
            raise SystemExit("backup: incremental read %d dirty bytes, the guest wrote %d"
                             % (inc["bytes"], n * WRITE))
        run("qemu-img", "compare", "-q", "-U", "-f", "raw", "-F", "qcow2", full_out, self.path)
        got = call(self.c, "VM.delete_checkpoints", {"vmID": VM, "checkpoint_ids": [cp1, cp2]})
        if got != {"checkpoint_ids": [cp1, cp2]}:
            raise SystemExit("backup: VM.delete_checkpoints: %r" % got)
        os.unlink(full_out)
        return full, inc, nbdcopy_s, n


def spread(xs, fmt="%.2f"):
    return (fmt + " (" + fmt + ".." + fmt + ")") % (statistics.median(xs), min(xs), max(xs))


def report(rows, nbdcopy_s, n):
    print("backup: %d MiB qcow2 disk, %d writes of %d KiB (%.2f %% of it) between a full and an"
          " incremental backup; %d rounds, medians (min..max)"
          % (SIZE // MiB, n, WRITE // 1024, 100.0 * n * WRITE / SIZE, len(rows["full"])))
    print("  %-12s %12s %9s %24s %24s" % ("kind", "bytes read", "extents", "read s (status+reads)",
                                           "whole backup s"))
    med = {}
    for kind in ("full", "incremental"):
        f = rows[kind]
        med[kind] = {k: statistics.median([x[k] for x in f]) for k in ("bytes", "total_s", "backup_s")}
        print("  %-12s %12d %9d %24s %24s" % (
            kind, med[kind]["bytes"], statistics.median([x["extents"] for x in f]),
            spread([x["total_s"] for x in f], "%.3f"), spread([x["backup_s"] for x in f], "%.3f")))
    print("  %-12s %12s %9s %24s" % ("nbdcopy full", "", "", spread(nbdcopy_s, "%.3f")))
    fm, im = med["full"], med["incremental"]
    print("backup: incremental / full: bytes %.4f (%.1fx fewer), read time %.4f (%.1fx faster),"
          " whole backup %.3f (%.1fx faster)" % (
              im["bytes"] / fm["bytes"], fm["bytes"] / im["bytes"],
              im["total_s"] / fm["total_s"], fm["total_s"] / im["total_s"],
              im["backup_s"] / fm["backup_s"], fm["backup_s"] / im["backup_s"]))
    nc = statistics.median(nbdcopy_s)
    print("backup: incremental read / nbdcopy's full read to null: time %.4f (%.1fx faster;"
          " nbdcopy: 4 connections, requests in flight, nothing written)"
          % (im["total_s"] / nc, nc / im["total_s"]))
    path = os.environ.get("BK_JSON")
    if path:
        with open(path, "a") as f:
            for kind in ("full", "incremental"):
                for x in rows[kind]:
                    f.write(json.dumps({"bench": "backup", "kind": kind, "size": SIZE,
                                        **{k: v for k, v in x.items() if k != "url"}}) + "\n")


def main():
    for tool in ("qemu-io", "qemu-img", "nbdcopy"):
        if not shutil.which(tool):
            print("backup: skipped: %s is not installed" % tool)
            return 0
    if not os.access(READER, os.X_OK):
        print("backup: skipped: %s is not built (make bench-build)" % READER)
        return 0
    lv = privlibvirt.PrivateLibvirt()
    if lv.skip_reason:
        print("backup: skipped: private libvirtd: %s" % lv.skip_reason)
        lv.stop()
        return 0
    work = tempfile.mkdtemp(prefix="vdsmd-bench-bk-")
    b = None
    try:
        b = Bench(lv, work)
        b.make_disk()
        rows = {"full": [], "incremental": []}
        nbdcopy_s = []
        for r in range(ROUNDS):
            full, inc, nc, n = b.round(r)
            rows["full"].append(full)
            rows["incremental"].append(inc)
            nbdcopy_s.append(nc)
        report(rows, nbdcopy_s, n)
    finally:
        if b:
            b.close()
        lv.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
