"""Live disk snapshots and live merge on real QEMU (TCG) under a private
libvirtd (privlibvirt.py), driven through the real vdsmd as the engine
does: the VM's disk is a RAW volume made through the storage verbs, the
engine's snapshot volume a COW volume on top of it (Volume.create with the
base as parent); VM.snapshot switches the running disk to it as a virt host
job (Host.getJobs, |jobs|status| events) and the metadata names it; a
second snapshot with memory (dump and conf volumes) adds a layer; VM.merge
commits the middle layer's data into the base (internal commit, relative
backing kept) as a block job seen in the VM stats' vmJobs, followed to its
end by a restarted vdsmd (the job is in the domain's metadata), then the active
layer (active commit + pivot), after which the disk and its metadata are on
the base again.  Skipped, with the reason, where the private libvirtd or
QEMU cannot start."""

import os
import subprocess
import time
import unittest

import privlibvirt
import vdsmtest as vt

VM = "7a000000-1111-4222-8333-444455556666"
POOL = "7b1b0000-626e-47cb-ad90-3ce782d831b3"
SD = "7c2c0000-2c2e-4b8a-9b1f-2a1f6b9d7c11"
IMG = "7d3d0000-d5e6-4f70-8a91-b2c3d4e5f607"
BASE = "7e4e0000-e6f7-4081-9a2b-c3d4e5f60718"
TOP = "7f5f0000-e6f7-4081-9a2b-c3d4e5f60718"
TOP2 = "80600000-e6f7-4081-9a2b-c3d4e5f60718"
DUMP = ("81710000-d5e6-4f70-8a91-b2c3d4e5f607", "82820000-e6f7-4081-9a2b-c3d4e5f60718")
CONF = ("83930000-d5e6-4f70-8a91-b2c3d4e5f607", "84a40000-e6f7-4081-9a2b-c3d4e5f60718")
BLANK = "00000000-0000-0000-0000-000000000000"
RAW, COW, SPARSE = 5, 4, 2
SIZE = 2 << 20   # 2 s of merge at 1 MiB/s


def result(r):
    assert "result" in r, r
    return r["result"]


def error_code(r):
    assert "error" in r, r
    return r["error"]["code"]


def vm_xml(path):
    return (
        '<?xml version="1.0" encoding="UTF-8"?><domain type="kvm" '
        'xmlns:ovirt-vm="http://ovirt.org/vm/1.0"><name>snapvm</name><uuid>%s</uuid>'
        '<memory unit="MiB">64</memory><currentMemory unit="MiB">64</currentMemory>'
        '<vcpu>1</vcpu><os><type arch="x86_64" machine="pc">hvm</type></os>'
        '<devices><disk type="file" device="disk">'
        '<target dev="vda" bus="virtio"/><source file="%s"/>'
        '<driver name="qemu" type="raw" cache="none"/><alias name="ua-%s"/>'
        '<serial>%s</serial></disk>'
        '<disk type="file" device="cdrom"><target dev="hdc" bus="ide"/><readonly/></disk>'
        '<memballoon model="none"/></devices>'
        '<metadata><ovirt-vm:vm><ovirt-vm:device devtype="disk" name="vda">'
        '<ovirt-vm:poolID>%s</ovirt-vm:poolID><ovirt-vm:domainID>%s</ovirt-vm:domainID>'
        '<ovirt-vm:imageID>%s</ovirt-vm:imageID><ovirt-vm:volumeID>%s</ovirt-vm:volumeID>'
        '</ovirt-vm:device></ovirt-vm:vm></metadata></domain>'
        % (VM, path, IMG, IMG, POOL, SD, IMG, BASE))


def source_of(xml, dev):
    """The <source file=...> of the disk whose target is dev (live XML)."""
    for part in xml.split("<disk ")[1:]:
        part = part[:part.index("</disk>")]
        if "dev='%s'" % dev in part:
            i = part.index("<source file='") + len("<source file='")
            return part[i:part.index("'", i)]
    return None


class QemuSnapshot(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.lv = privlibvirt.PrivateLibvirt()
        if cls.lv.skip_reason:
            reason = cls.lv.skip_reason
            cls.lv.stop()
            raise unittest.SkipTest("private libvirtd: " + reason)
        cls.d = vt.Daemon(libvirt_uri=cls.lv.uri)
        cls.connect()
        cls.make_volumes()

    @classmethod
    def connect(cls):
        cls.c = cls.d.stomp()
        cls.c.connect()
        cls.c.subscribe(vt.RESPONSES, "r", receipt="r1")
        cls.ev = cls.d.stomp()
        cls.ev.connect()
        cls.ev.subscribe(vt.EVENTS, "ev", receipt="e1")
        vt.call_ready(cls.c, "Host.getVMList")

    @classmethod
    def make_volumes(cls):
        """The base (RAW) and the engine's snapshot layer (COW, parent the
        base) through the storage verbs; then the pool (volume changes in a
        pool need the SPM, so they come first).  QEMU runs as nobody: the
        paths are opened up for it."""
        c = cls.c
        assert "result" in c.call("StorageDomain.create", [SD, 4, "", "snapdom", 1])
        cls.paths = {}
        for img, vol, fmt, parent, size in (
                (IMG, BASE, RAW, BLANK, SIZE), (IMG, TOP, COW, BASE, SIZE),
                (IMG, TOP2, COW, TOP, SIZE), (DUMP[0], DUMP[1], RAW, BLANK, 256 << 20),
                (CONF[0], CONF[1], RAW, BLANK, SIZE)):
            args = {"volumeID": vol, "storagedomainID": SD, "imageID": img, "size": str(size),
                    "volFormat": fmt, "preallocate": SPARSE}
            if parent != BLANK:
                args.update(srcImgUUID=IMG, srcVolUUID=parent)
            tid = result(c.call("Volume.create", args))
            deadline = time.monotonic() + 20
            while result(c.call("Task.getStatus", [tid]))["taskState"] != "finished":
                assert time.monotonic() < deadline, "Volume.create did not finish"
                time.sleep(0.02)
            cls.paths[vol] = os.path.join(cls.d.tmp, "storage", SD, "images", img, vol)
        assert result(c.call("StoragePool.create",
                             [POOL, "Default", SD, 1, [SD], 5, 60, 10, 3])) is True
        # data in the snapshot layer (what the guest would have written
        # after the snapshot): the merge must carry it into the base
        r = subprocess.run(["qemu-io", "-f", "qcow2", "-c", "write -P 0x5a 0 %d" % SIZE,
                            cls.paths[TOP]], capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        for path in cls.paths.values():
            d = path
            while d != os.path.dirname(cls.d.tmp):
                d = os.path.dirname(d)
                os.chmod(d, os.stat(d).st_mode | 0o005)
            os.chmod(path, 0o666)

    @classmethod
    def tearDownClass(cls):
        for x in ("c", "ev"):
            if hasattr(cls, x):
                getattr(cls, x).close()
        if hasattr(cls, "d"):
            cls.d.__exit__(None, None, None)
        cls.lv.stop()

    def job_events(self, job, timeout=30):
        """|jobs|status|<job> params until one says done or failed."""
        got = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                f = self.ev.read_frame(max(0.05, deadline - time.monotonic()))
            except Exception:
                break
            if f.cmd == "MESSAGE" and f.json().get("method") == "|jobs|status|" + job:
                got.append(f.json()["params"])
                if got[-1]["status"] in ("done", "failed"):
                    break
        return got

    def xml(self):
        return result(self.c.call("Host.dumpxmls", {"vmList": [VM]}))[VM]

    def vm_jobs(self):
        for v in result(self.c.call("Host.getAllVmStats")):
            if v["vmId"] == VM:
                return v.get("vmJobs")
        return None

    def test_snapshot_then_merge(self):
        r = result(self.c.call("VM.create", {"vmID": VM, "vmParams": {
            "vmId": VM, "xml": vm_xml("/rhev/placeholder")}}, timeout=60))
        self.assertEqual(r["status"], "WaitForLaunch")
        self.assertEqual(source_of(self.xml(), "vda"), self.paths[BASE])

        drive = {"domainID": SD, "imageID": IMG, "volumeID": TOP, "baseVolumeID": BASE}
        # refused before any job starts
        self.assertEqual(error_code(self.c.call("VM.snapshot", {
            "vmID": VM, "snapDrives": [drive], "timeout": 0})), -32602)
        self.assertEqual(error_code(self.c.call("VM.snapshot", {
            "vmID": VM, "snapDrives": [{"domainID": SD}]})), -32602)
        self.assertEqual(error_code(self.c.call("VM.snapshot", {
            "vmID": VM, "snapDrives": [dict(drive, baseVolumeID=TOP, volumeID=BLANK)]})), 48)
        self.assertEqual(error_code(self.c.call("VM.snapshot", {
            "vmID": "0badc0de-0000-4000-8000-000000000000", "snapDrives": [drive]})), 1)

        job = "7a5a0000-0000-4000-8000-000000000001"
        t0 = time.monotonic()
        self.assertIs(result(self.c.call("VM.snapshot", {
            "vmID": VM, "snapDrives": [drive], "jobUUID": job, "frozen": False},
            timeout=30)), True)
        evs = self.job_events(job)
        snap_ms = (time.monotonic() - t0) * 1000
        self.assertEqual(evs[-1]["status"], "done", evs)
        self.assertEqual(evs[-1]["job_type"], "virt")
        jobs = result(self.c.call("Host.getJobs", {"job_type": "virt", "job_ids": [job]}))
        self.assertEqual(jobs[job]["status"], "done")
        self.assertEqual(jobs[job]["description"], "snapshot_vm")
        self.assertEqual(result(self.c.call("Host.getJobs", {"job_type": "storage",
                                                             "job_ids": [job]})), {})
        x = self.xml()
        self.assertEqual(source_of(x, "vda"), self.paths[TOP])
        self.assertIn(self.paths[BASE], x)          # its backing store
        md = x[x.index("<metadata"):x.index("</metadata>")]
        self.assertIn(TOP + "</ovirt-vm:volumeID>", md)
        self.assertNotIn(BASE + "</ovirt-vm:volumeID>", md)
        with open(self.paths[TOP], "rb") as f:
            self.assertEqual(f.read(4), b"QFI\xfb")
        # the same request again: the disk is already on the volume
        job2 = "7a5a0000-0000-4000-8000-000000000002"
        self.assertIs(result(self.c.call("VM.snapshot", {
            "vmID": VM, "snapDrives": [drive], "jobUUID": job2})), True)
        self.assertEqual(self.job_events(job2)[-1]["status"], "done")
        self.assertEqual(source_of(self.xml(), "vda"), self.paths[TOP])
        self.assertEqual(error_code(self.c.call("VM.snapshot", {
            "vmID": VM, "snapDrives": [drive], "jobUUID": job2})), 48)   # job id taken

        # with memory: the VM's state goes to the dump volume too
        job3 = "7a5a0000-0000-4000-8000-000000000003"
        handle = ",".join((SD, POOL, DUMP[0], DUMP[1], CONF[0], CONF[1]))
        t0 = time.monotonic()
        self.assertIs(result(self.c.call("VM.snapshot", {
            "vmID": VM, "snapDrives": [dict(drive, volumeID=TOP2, baseVolumeID=TOP)],
            "snapMemory": handle, "jobUUID": job3}, timeout=30)), True)
        evs = self.job_events(job3)
        mem_ms = (time.monotonic() - t0) * 1000
        self.assertEqual(evs[-1]["status"], "done", evs)
        self.assertEqual(source_of(self.xml(), "vda"), self.paths[TOP2])
        with open(self.paths[DUMP[1]], "rb") as f:
            self.assertTrue(f.read(16).startswith(b"LibvirtQemudSave"))
        with open(self.paths[CONF[1]], "rb") as f:
            self.assertIn(("vmId=" + VM).encode(), f.read(4096))
        # live merge, internal: the middle layer TOP (holding the data) into
        # BASE while the disk runs on TOP2; 1 MiB/s: a second or two, seen in
        # vmJobs.  The chain becomes BASE <- TOP2.
        mjob = "7a5a0000-0000-4000-8000-0000000000aa"
        spec = {"domainID": SD, "imageID": IMG, "volumeID": TOP2, "poolID": POOL}
        self.assertEqual(error_code(self.c.call("VM.merge", {
            "vmID": VM, "drive": dict(spec, volumeID=BASE), "baseVolUUID": BASE,
            "topVolUUID": TOP})), 13)
        with open(self.paths[BASE], "rb") as f:
            self.assertEqual(f.read(SIZE), bytes(SIZE))
        t0 = time.monotonic()
        self.assertIs(result(self.c.call("VM.merge", {
            "vmID": VM, "drive": spec, "baseVolUUID": BASE, "topVolUUID": TOP,
            "bandwidth": 1, "jobUUID": mjob}, timeout=30)), True)
        j = self.vm_jobs()[mjob]
        self.assertEqual((j["id"], j["jobType"], j["blockJobType"], j["imgUUID"], j["drive"]),
                         (mjob, "block", "commit", IMG, "vda"))
        self.assertIsInstance(j["cur"], str)
        self.assertIsInstance(j["end"], str)
        self.assertEqual(error_code(self.c.call("VM.merge", {
            "vmID": VM, "drive": spec, "baseVolUUID": BASE, "topVolUUID": TOP})), 52)
        # vdsmd restarts while libvirt commits: the new one follows the job
        # (from the domain's metadata) to its end
        self.c.close()
        self.ev.close()
        vt.restart(self.d, sig=15)
        type(self).connect()
        self.assertTrue(self.d.wait_log("following again merge job " + mjob, timeout=10),
                        "\n".join(self.d.log_lines()[-20:]))
        deadline = time.monotonic() + 30
        while mjob in (self.vm_jobs() or {}) and time.monotonic() < deadline:
            time.sleep(0.05)
        merge_ms = (time.monotonic() - t0) * 1000
        self.assertNotIn(mjob, self.vm_jobs())
        x = self.xml()
        self.assertEqual(source_of(x, "vda"), self.paths[TOP2])
        self.assertNotIn(self.paths[TOP], x)
        self.assertIn(self.paths[BASE], x)
        with open(self.paths[BASE], "rb") as f:
            self.assertEqual(f.read(SIZE), b"\x5a" * SIZE)
        r = subprocess.run(["qemu-img", "info", "-U", "--output=json", self.paths[TOP2]],
                           capture_output=True, text=True, timeout=30)
        self.assertIn('"backing-filename": "%s"' % BASE, r.stdout)   # still relative

        # live merge, active: TOP2 into BASE, then the disk pivots to BASE
        m2 = "7a5a0000-0000-4000-8000-0000000000ab"
        t0 = time.monotonic()
        self.assertIs(result(self.c.call("VM.merge", {
            "vmID": VM, "drive": spec, "baseVolUUID": BASE, "topVolUUID": TOP2,
            "jobUUID": m2}, timeout=30)), True)
        deadline = time.monotonic() + 30
        while m2 in (self.vm_jobs() or {}) and time.monotonic() < deadline:
            time.sleep(0.05)
        active_ms = (time.monotonic() - t0) * 1000
        self.assertNotIn(m2, self.vm_jobs())
        x = self.xml()
        self.assertEqual(source_of(x, "vda"), self.paths[BASE])
        self.assertNotIn(self.paths[TOP2], x)
        md = x[x.index("<metadata"):x.index("</metadata>")]
        self.assertIn(BASE + "</ovirt-vm:volumeID>", md)
        self.assertNotIn(TOP2 + "</ovirt-vm:volumeID>", md)
        self.assertNotIn("http://ovirt.org/vdsmd/jobs/1.0", x)   # no job kept
        print("\nQEMU/TCG: VM.snapshot (1 disk) -> job done %.0f ms, with memory %.0f ms; "
              "VM.merge internal (2 MiB at 1 MiB/s) -> job gone %.0f ms, active (empty "
              "layer, pivot) %.0f ms" % (snap_ms, mem_ms, merge_ms, active_ms))
        self.assertIs(result(self.c.call("VM.destroy", {"vmID": VM})), True)


if __name__ == "__main__":
    unittest.main()
