"""Live storage migration time of a 1 GiB disk against `qemu-img convert`
of the same data, same run (issue 24's figure).

A private libvirtd (tests/integration/privlibvirt.py) runs a QEMU/TCG VM on
a COW volume holding LSM_MIB MiB (default 1024) of data; vdsmd moves it to a
second file domain in the engine's order: VM.snapshot, Image.cloneStructure,
VM.diskReplicateStart, Image.syncData INTERNAL, VM.diskReplicateFinish
(asked again while it answers 40) - timed from the snapshot to the pivot.
Beside it, each round, the engine's current path (LiveMigrateDiskCommand,
corpus steps 530-537): Volume.create of each destination volume
(base first, legal: true) instead of Image.cloneStructure, and SDM.copy_data
of every volume but the leaf (a host job, polled in Host.getJobs) instead
of Image.syncData.  The baseline is `qemu-img convert -O qcow2` of the same
source chain to a new file in the same directory tree.  LSM_ROUNDS
(default 3) rounds, the three interleaved; medians, spread (min-max) and
the ratio of the medians.  Prints one "lsm" line per round and a "ratio"
line per path; exit 0 when skipped (no private libvirtd / QEMU)."""

import os
import shutil
import statistics
import subprocess
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
import privlibvirt   # noqa: E402
import vdsmtest as vt   # noqa: E402

BLANK = "00000000-0000-0000-0000-000000000000"
COW, SPARSE = 4, 2
MIB = 1 << 20
SD1, SD2 = str(uuid.uuid4()), str(uuid.uuid4())


def vm_xml(vm, img, vol):
    return (
        '<?xml version="1.0" encoding="UTF-8"?><domain type="kvm" '
        'xmlns:ovirt-vm="http://ovirt.org/vm/1.0"><name>lsm-%s</name><uuid>%s</uuid>'
        '<memory unit="MiB">64</memory><currentMemory unit="MiB">64</currentMemory>'
        '<vcpu>1</vcpu><os><type arch="x86_64" machine="pc">hvm</type></os>'
        '<devices><disk type="file" device="disk">'
        '<target dev="vda" bus="virtio"/><source file="/rhev/placeholder"/>'
        '<driver name="qemu" type="qcow2" cache="none"/></disk>'
        '<memballoon model="none"/></devices>'
        '<metadata><ovirt-vm:vm><ovirt-vm:device devtype="disk" name="vda">'
        '<ovirt-vm:poolID>%s</ovirt-vm:poolID><ovirt-vm:domainID>%s</ovirt-vm:domainID>'
        '<ovirt-vm:imageID>%s</ovirt-vm:imageID><ovirt-vm:volumeID>%s</ovirt-vm:volumeID>'
        '</ovirt-vm:device></ovirt-vm:vm></metadata></domain>'
        % (vm[:8], vm, BLANK, SD1, img, vol))


def ok(r):
    assert "result" in r, r
    return r["result"]


def task(c, tid, timeout=600):
    deadline = time.monotonic() + timeout
    while True:
        st = ok(c.call("Task.getStatus", [tid]))
        if st["taskState"] == "finished":
            assert st["code"] == 0 and st["taskResult"] == "success", st
            return
        assert time.monotonic() < deadline, st
        time.sleep(0.02)


def make_disk(d, c, size):
    img, base, leaf = str(uuid.uuid4()), str(uuid.uuid4()), str(uuid.uuid4())
    task(c, ok(c.call("Volume.create", {
        "volumeID": base, "storagedomainID": SD1, "imageID": img, "size": str(size),
        "volFormat": COW, "preallocate": SPARSE})))
    task(c, ok(c.call("Volume.create", {
        "volumeID": leaf, "storagedomainID": SD1, "imageID": img, "size": str(size),
        "volFormat": COW, "preallocate": SPARSE, "srcImgUUID": img, "srcVolUUID": base})))
    path = vt.volume_path(d, SD1, img, base)
    subprocess.run(["qemu-io", "-f", "qcow2", "-c", "write -P 0x5a 0 %d" % size, path],
                   check=True, capture_output=True, timeout=600)
    vt.open_for_qemu(d, [path, vt.volume_path(d, SD1, img, leaf)])
    return img, base, leaf


def start_vm(c, img, base, leaf):
    """VM.create, then VM.snapshot onto the leaf; returns the VM id and t0."""
    vm = str(uuid.uuid4())
    ok(c.call("VM.create", {"vmID": vm, "vmParams": {"vmId": vm, "xml": vm_xml(vm, img, base)}},
              timeout=60))
    job = str(uuid.uuid4())
    t0 = time.monotonic()
    ok(c.call("VM.snapshot", {"vmID": vm, "snapDrives": [{
        "domainID": SD1, "imageID": img, "volumeID": leaf, "baseVolumeID": base}],
        "jobUUID": job, "frozen": False}, timeout=60))
    wait_job(c, "virt", job)
    return vm, t0


def wait_job(c, kind, job, timeout=600):
    deadline = time.monotonic() + timeout
    while True:
        st = ok(c.call("Host.getJobs", {"job_type": kind, "job_ids": [job]}))[job]["status"]
        if st in ("done", "failed"):
            break
        assert time.monotonic() < deadline, st
        time.sleep(0.01)
    assert st == "done", st


def finish(c, vm, src, dst):
    while True:
        r = c.call("VM.diskReplicateFinish", {"vmID": vm, "srcDisk": src, "dstDisk": dst},
                   timeout=60)
        if r.get("error", {}).get("code") != 40:
            break
        time.sleep(0.05)
    ok(r)


def migrate(d, c, size, path):
    """One live storage migration by path ("syncData" or "copy_data"):
    seconds from VM.snapshot to the pivot."""
    img, base, leaf = make_disk(d, c, size)
    vm, t0 = start_vm(c, img, base, leaf)
    try:
        src = {"device": "disk", "poolID": BLANK, "domainID": SD1, "imageID": img, "volumeID": leaf}
        dst = dict(src, domainID=SD2)
        if path == "syncData":
            task(c, ok(c.call("Image.cloneStructure", [img, BLANK, SD1, SD2])))
        else:
            for vol, parent, seq in ((base, BLANK, 0), (leaf, base, 1)):
                task(c, ok(c.call("Volume.create", {
                    "volumeID": vol, "storagepoolID": BLANK, "storagedomainID": SD2,
                    "imageID": img, "size": str(size), "volFormat": COW, "preallocate": SPARSE,
                    "diskType": "DATA", "desc": "",
                    "srcImgUUID": img if parent != BLANK else BLANK, "srcVolUUID": parent,
                    "sequence": seq, "addBitmaps": False, "legal": True})))
        vt.open_for_qemu(d, [vt.volume_path(d, SD2, img, v) for v in (base, leaf)])
        ok(c.call("VM.diskReplicateStart", {"vmID": vm, "srcDisk": src, "dstDisk": dst,
                                            "needExtend": False}, timeout=60))
        if path == "syncData":
            task(c, ok(c.call("Image.syncData", [img, BLANK, SD1, SD2, "INTERNAL"])))
        else:
            copy_data(c, img, base)
        finish(c, vm, src, dst)
        secs = time.monotonic() - t0
    finally:
        c.call("VM.destroy", {"vmID": vm}, timeout=30)
    for sd in (SD1, SD2):
        shutil.rmtree(os.path.dirname(vt.volume_path(d, sd, img, leaf)), ignore_errors=True)
    return secs


def copy_data(c, img, vol):
    """SDM.copy_data of vol to SD2 as the engine sends it, its job waited for."""
    gen = int(ok(c.call("Volume.getInfo", {
        "storagepoolID": BLANK, "storagedomainID": SD2, "imageID": img,
        "volumeID": vol}))["generation"])
    job = str(uuid.uuid4())
    ok(c.call("SDM.copy_data", {
        "source": {"endpoint_type": "div", "sd_id": SD1, "img_id": img, "vol_id": vol,
                   "prepared": True},
        "destination": {"endpoint_type": "div", "sd_id": SD2, "img_id": img,
                        "vol_id": vol, "prepared": True, "generation": gen},
        "job_id": job, "copy_bitmaps": False, "legal": True}))
    wait_job(c, "storage", job)


def convert(d, c, size):
    """The baseline: qemu-img convert of the same data (a fresh chain)."""
    img, base, leaf = make_disk(d, c, size)
    src = vt.volume_path(d, SD1, img, leaf)
    out = os.path.join(os.path.dirname(src), "convert.qcow2")
    t0 = time.monotonic()
    subprocess.run(["qemu-img", "convert", "-f", "qcow2", "-O", "qcow2", src, out],
                   check=True, capture_output=True, timeout=600)
    secs = time.monotonic() - t0
    shutil.rmtree(os.path.dirname(src), ignore_errors=True)
    return secs


def spread(xs):
    return "%.2f-%.2f" % (min(xs), max(xs))


def main():
    size = int(os.environ.get("LSM_MIB", "1024")) * MIB
    rounds = int(os.environ.get("LSM_ROUNDS", "3"))
    try:
        lv = privlibvirt.start_or_skip()
    except Exception as e:      # unittest.SkipTest: no private libvirtd here
        print("lsm: skipped: %s" % e)
        return 0
    d = vt.Daemon(libvirt_uri=lv.uri)
    try:
        c, ev = vt.vm_connections(d)
        for sd, name in ((SD1, "lsmsrc"), (SD2, "lsmdst")):
            ok(c.call("StorageDomain.create", [sd, 4, "", name, 1]))
        lsm, cpd, conv = [], [], []
        for i in range(rounds):
            lsm.append(migrate(d, c, size, "syncData"))
            cpd.append(migrate(d, c, size, "copy_data"))
            conv.append(convert(d, c, size))
            print("lsm round %d: %d MiB disk, live storage migration %.2f s (syncData), "
                  "%.2f s (copy_data), qemu-img convert %.2f s"
                  % (i + 1, size // MIB, lsm[-1], cpd[-1], conv[-1]), flush=True)
        mc = statistics.median(conv)
        for name, xs in (("syncData", lsm), ("copy_data", cpd)):
            m = statistics.median(xs)
            print("ratio lsm %d MiB, median of %d interleaved rounds: live storage migration "
                  "(%s) %.2f s (%s) / qemu-img convert %.2f s (%s) = %.2fx" % (
                      size // MIB, rounds, name, m, spread(xs), mc, spread(conv), m / mc))
        c.close()
        ev.close()
    finally:
        d.__exit__(None, None, None)
        lv.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
