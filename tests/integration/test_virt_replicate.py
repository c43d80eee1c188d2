"""Live storage migration on real QEMU (TCG) under a private libvirtd
(privlibvirt.py), driven through the real vdsmd in the engine's order
(LiveMigrateDiskCommand): VM.snapshot (a new leaf on the source domain),
Image.cloneStructure to the destination domain, VM.diskReplicateStart,
Image.syncData INTERNAL, VM.diskReplicateFinish.

The VM's disk is a COW volume with data written before the VM starts; the
"guest" writes through the running QEMU's block layer (HMP qemu-io on the
disk's qdev: the path a guest's writes take; the VM has no OS) after the
snapshot, during the replication and after the pivot.  Checked: the
destination chain equals the source chain at the pivot (qemu-img compare),
the VM runs on the destination volume after it (domain XML source, the
drive's metadata names the destination domain, the guest's next write lands
there and not on the source), vdsmd killed (-9) during the replication
finishes it after its restart (the record is in the drive's metadata); an
abort (Finish with dstDisk == srcDisk), a destination that cannot be
prepared and a copy job that vanished leave the VM on the source; the
refusals with VDSM's codes (unknown VM 1, unknown drive 13, already
replicating 55, not replicating 88).  The engine-forms corpus's entries
(tests/engine_forms/VM.json steps 310-313) are replayed here, where each
must answer 0 (libvirt's test driver has no block copy).  Skipped, with the
reason, where the private libvirtd or QEMU cannot start."""

import json
import os
import subprocess
import threading
import time
import unittest

import privlibvirt
import test_engine_forms as tef     # the engine-forms corpus and its replay
import vdsmtest as vt

VM = "7a000000-3333-4222-8333-444455556666"
SD1 = "7c2c0000-2c2e-4b8a-9b1f-2a1f6b9d7c31"
SD2 = "7c2c0000-2c2e-4b8a-9b1f-2a1f6b9d7c32"
IMG = "7d3d0000-d5e6-4f70-8a91-b2c3d4e5f631"
VOL = "7e4e0000-e6f7-4081-9a2b-c3d4e5f60731"
SNAP = "7f5f0000-e6f7-4081-9a2b-c3d4e5f60731"
IMG2 = "7d3d0000-d5e6-4f70-8a91-b2c3d4e5f632"   # a second disk, vdb: one volume
VOLB = "7e4e0000-e6f7-4081-9a2b-c3d4e5f60732"
BLANK = "00000000-0000-0000-0000-000000000000"
NOVM = "0badc0de-0000-4000-8000-000000000000"
COW, SPARSE = 4, 2
MIB = 1 << 20
SIZE = 16 * MIB

result, error_code = vt.result, vt.error_code


def vm_xml():
    return (
        '<?xml version="1.0" encoding="UTF-8"?><domain type="kvm" '
        'xmlns:ovirt-vm="http://ovirt.org/vm/1.0"><name>lsmvm</name><uuid>%s</uuid>'
        '<memory unit="MiB">64</memory><currentMemory unit="MiB">64</currentMemory>'
        '<vcpu>1</vcpu><os><type arch="x86_64" machine="pc">hvm</type></os>'
        '<devices><disk type="file" device="disk">'
        '<target dev="vda" bus="virtio"/><source file="/rhev/placeholder"/>'
        '<driver name="qemu" type="qcow2" cache="none"/><alias name="ua-%s"/>'
        '<serial>%s</serial></disk>'
        '<disk type="file" device="disk">'
        '<target dev="vdb" bus="virtio"/><source file="/rhev/placeholder"/>'
        '<driver name="qemu" type="qcow2" cache="none"/><alias name="ua-%s"/></disk>'
        '<memballoon model="none"/></devices>'
        '<metadata><ovirt-vm:vm>%s%s</ovirt-vm:vm></metadata></domain>'
        % (VM, IMG, IMG, IMG2, md_device("vda", IMG, VOL), md_device("vdb", IMG2, VOLB)))


def md_device(dev, img, vol):
    return ('<ovirt-vm:device devtype="disk" name="%s">'
            '<ovirt-vm:poolID>%s</ovirt-vm:poolID><ovirt-vm:domainID>%s</ovirt-vm:domainID>'
            '<ovirt-vm:imageID>%s</ovirt-vm:imageID><ovirt-vm:volumeID>%s</ovirt-vm:volumeID>'
            '</ovirt-vm:device>' % (dev, BLANK, SD1, img, vol))


def spec(sd, vol=SNAP, img=IMG):
    """A DriveSpecVolume as VmReplicateDiskVDSCommand builds it."""
    return {"device": "disk", "poolID": BLANK, "domainID": sd, "imageID": img, "volumeID": vol}


def run(*argv, timeout=60):
    r = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, (argv, r.stdout, r.stderr)
    return r.stdout


def source_of(xml, dev="vda"):
    for part in xml.split("<disk ")[1:]:
        part = part[:part.index("</disk>")]
        if "dev='%s'" % dev in part:
            i = part.index("<source file='") + len("<source file='")
            return part[i:part.index("'", i)]
    return None


class QemuReplicate(tef.Replay, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.lv = privlibvirt.start_or_skip()
        cls.d = vt.Daemon(libvirt_uri=cls.lv.uri)
        cls.c, cls.ev = vt.vm_connections(cls.d)
        c = cls.c
        for sd, name in ((SD1, "lsmsrc"), (SD2, "lsmdst")):
            assert "result" in c.call("StorageDomain.create", [sd, 4, "", name, 1])
        vt.wait_task(c, result(c.call("Volume.create", {
            "volumeID": VOL, "storagedomainID": SD1, "imageID": IMG, "size": str(SIZE),
            "volFormat": COW, "preallocate": SPARSE})))
        vt.wait_task(c, result(c.call("Volume.create", {
            "volumeID": SNAP, "storagedomainID": SD1, "imageID": IMG, "size": str(SIZE),
            "volFormat": COW, "preallocate": SPARSE, "srcImgUUID": IMG, "srcVolUUID": VOL})))
        vt.wait_task(c, result(c.call("Volume.create", {
            "volumeID": VOLB, "storagedomainID": SD1, "imageID": IMG2, "size": str(SIZE),
            "volFormat": COW, "preallocate": SPARSE})))
        cls.src = {v: vt.volume_path(cls.d, SD1, IMG, v) for v in (VOL, SNAP)}
        cls.dst = {v: vt.volume_path(cls.d, SD2, IMG, v) for v in (VOL, SNAP)}
        cls.src[VOLB] = vt.volume_path(cls.d, SD1, IMG2, VOLB)
        cls.dst[VOLB] = vt.volume_path(cls.d, SD2, IMG2, VOLB)
        run("qemu-io", "-f", "qcow2", "-c", "write -P 0x77 0 %d" % (2 * MIB), cls.src[VOLB])
        # what the VM's disk holds before it starts
        run("qemu-io", "-f", "qcow2", "-c", "write -P 0x11 0 %d" % (4 * MIB), cls.src[VOL])
        vt.open_for_qemu(cls.d, cls.src.values())

    @classmethod
    def tearDownClass(cls):
        for x in ("c", "ev"):
            if hasattr(cls, x):
                getattr(cls, x).close()
        if hasattr(cls, "d") and os.environ.get("LSM_DEBUG"):   # the logs, to debug a failure
            print("\n".join(cls.d._lines[-40:]))
        if hasattr(cls, "d"):
            cls.d.__exit__(None, None, None)
        cls.lv.stop()

    def reconnect(self):
        self.c.close()
        self.ev.close()
        type(self).c, type(self).ev = vt.vm_connections(self.d)

    def guest_write(self, off, length, pattern):
        r = self.lv.virsh("qemu-monitor-command", "lsmvm", "--hmp",
                          'qemu-io -d /machine/peripheral/ua-%s/virtio-backend "write -P %d %d %d"'
                          % (IMG, pattern, off, length))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("rror", r.stdout, r.stdout)

    def xml(self):
        return result(self.c.call("Host.dumpxmls", {"vmList": [VM]}))[VM]

    def metadata(self):
        x = self.xml()
        return x[x.index("<metadata"):x.index("</metadata>")]

    def qemu_jobs(self):
        r = self.lv.virsh("qemu-monitor-command", "lsmvm", '{"execute":"query-block-jobs"}')
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)["return"]

    def wait_ready(self, dev="vda", timeout=60):
        """Until QEMU's mirror job of the disk is ready and caught up, in 4
        reads 0.1 s apart (QEMU counts the guest's last writes in its next
        round: the engine would just ask again, on 40)."""
        deadline = time.monotonic() + timeout
        seen = 0
        while time.monotonic() < deadline and seen < 4:
            jobs = [j for j in self.qemu_jobs() if j["device"].startswith("copy-%s-" % dev)]
            seen = seen + 1 if jobs and jobs[0].get("ready") and \
                jobs[0]["offset"] == jobs[0]["len"] else 0
            time.sleep(0.1)
        self.assertEqual(seen, 4, "the mirror never caught up: %r" % jobs)

    def assert_on(self, sd, replicating=False):
        x = self.xml()
        paths = self.src if sd == SD1 else self.dst
        self.assertEqual(source_of(x), paths[SNAP])
        self.assertIn(paths[VOL], x)          # its backing store
        md = self.metadata()
        self.assertIn("<ovirt-vm:domainID>%s</ovirt-vm:domainID>" % sd, md)
        self.assertEqual("diskReplicate" in md, replicating, md)
        self.assertEqual(vt.vm_stats(self.c, VM)["status"], "Up")

    def compare(self, a, b):
        return subprocess.run(["qemu-img", "compare", "-U", "-f", "qcow2", "-F", "qcow2", a, b],
                              capture_output=True, text=True, timeout=120)

    def legality(self, sd, img, vol):
        return result(self.c.call("Volume.getInfo", [vol, BLANK, sd, img]))["legality"]

    def test_live_storage_migration(self):
        c = self.c
        r = result(c.call("VM.create", {"vmID": VM, "vmParams": {"vmId": VM, "xml": vm_xml()}},
                          timeout=60))
        self.assertEqual(r["status"], "WaitForLaunch")
        self.addCleanup(lambda: self.c.call("VM.destroy", {"vmID": VM}, timeout=30))
        # the engine's order: a live snapshot first (the new leaf SNAP)
        job = "7a5a0000-0000-4000-8000-000000000031"
        self.assertIs(result(c.call("VM.snapshot", {"vmID": VM, "snapDrives": [{
            "domainID": SD1, "imageID": IMG, "volumeID": SNAP, "baseVolumeID": VOL}],
            "jobUUID": job, "frozen": False}, timeout=30)), True)
        deadline = time.monotonic() + 30
        while True:
            st = result(c.call("Host.getJobs", {"job_type": "virt", "job_ids": [job]}))[job]
            if st["status"] in ("done", "failed") or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        self.assertEqual(st["status"], "done", st)
        self.guest_write(4 * MIB, MIB, 0x22)                 # into the new leaf
        self.assertEqual(source_of(self.xml()), self.src[SNAP])
        # the chain on the destination, empty
        vt.wait_task(c, result(c.call("Image.cloneStructure", [IMG, BLANK, SD1, SD2])),
                     "Image.cloneStructure")
        vt.open_for_qemu(self.d, [self.dst[VOL], self.dst[SNAP]])
        self.assertEqual(self.legality(SD2, IMG, SNAP), "LEGAL")   # as VDSM's clone

        # refusals: nothing changes
        for verb in ("VM.diskReplicateStart", "VM.diskReplicateFinish"):
            self.assertEqual(error_code(c.call(verb, {
                "vmID": NOVM, "srcDisk": spec(SD1), "dstDisk": spec(SD2)})), 1, verb)
            self.assertEqual(error_code(c.call(verb, {
                "vmID": VM, "srcDisk": spec(SD2), "dstDisk": spec(SD2)})), 13, verb)
            self.assertEqual(error_code(c.call(verb, {
                "vmID": VM, "srcDisk": {"domainID": SD1}, "dstDisk": spec(SD2)})), -32602, verb)
        self.assertEqual(error_code(c.call("VM.diskReplicateFinish", {
            "vmID": VM, "srcDisk": spec(SD1), "dstDisk": spec(SD2)})), 88)
        # a destination volume that does not exist: 55, still on the source
        self.assertEqual(error_code(c.call("VM.diskReplicateStart", {
            "vmID": VM, "srcDisk": spec(SD1), "dstDisk": spec(SD2, NOVM)})), 55)
        self.assert_on(SD1)

        # the engine's abort (corpus steps 312, 313): Finish with dst == src
        ph = {"vmId": VM, "spUUID": BLANK, "sdUUID": SD1, "sd2UUID": SD2, "imgUUID": IMG,
              "volUUID": SNAP}
        self.vds, self.irs = tef.hf_conns(self.d)
        entries = {e["step"]: {k: v for k, v in e.items() if k != "expect"}
                   for e in tef.load_corpus()
                   if e["verb"].startswith("VM.diskReplicate") and not e.get("flow")}
        self.assertEqual(sorted(entries), [310, 311, 312, 313])
        self.assertEqual(self.replay([entries[312]], ph), [])
        self.assert_on(SD1, replicating=True)
        self.assertIn("<ovirt-vm:diskReplicate>", self.metadata())
        self.assertIn("<ovirt-vm:domainID>%s</ovirt-vm:domainID>" % SD2,
                      self.metadata().split("<ovirt-vm:diskReplicate>")[1])
        self.assertEqual(error_code(c.call("VM.diskReplicateStart", {
            "vmID": VM, "srcDisk": spec(SD1), "dstDisk": spec(SD2)})), 55)   # running already
        self.wait_ready()
        self.assertEqual(self.replay([entries[313]], ph), [])
        self.assert_on(SD1)
        self.assertEqual(self.lv.virsh("qemu-monitor-command", "lsmvm",
                                       '{"execute":"query-block-jobs"}').stdout.count("device"), 0)

        # the copy vanished behind vdsmd's back (qemu failed it): 55, the
        # record goes, still on the source
        # (two Starts at once, on two connections: one runs, one is refused)
        conns = [vt.vm_connections(self.d) for _ in range(2)]
        answers = [None, None]

        def start(i):
            answers[i] = conns[i][0].call("VM.diskReplicateStart", {
                "vmID": VM, "srcDisk": spec(SD1), "dstDisk": spec(SD2)}, timeout=60)
        threads = [threading.Thread(target=start, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for pair in conns:
            for x in pair:
                x.close()
        self.assertEqual(sorted(a.get("result") is True or a["error"]["code"] for a in answers),
                         [True, 55], answers)
        self.assert_on(SD1, replicating=True)
        self.wait_ready()
        self.assertEqual(self.lv.virsh("blockjob", "lsmvm", "vda", "--abort").returncode, 0)
        self.assertEqual(error_code(c.call("VM.diskReplicateFinish", {
            "vmID": VM, "srcDisk": spec(SD1), "dstDisk": spec(SD2)})), 55)
        self.assert_on(SD1)
        self.assertEqual(error_code(c.call("VM.diskReplicateFinish", {
            "vmID": VM, "srcDisk": spec(SD1), "dstDisk": spec(SD2)})), 88)

        # the migration (corpus step 310), the guest writing meanwhile, vdsmd
        # killed during it
        t0 = time.monotonic()
        self.assertEqual(self.replay([entries[310]], ph), [])
        self.guest_write(6 * MIB, MIB, 0x33)
        self.vds.close()
        self.irs.close()
        vt.restart(self.d)
        self.reconnect()
        c = self.c
        self.assert_on(SD1, replicating=True)
        vt.wait_task(c, result(c.call("Image.syncData", [IMG, BLANK, SD1, SD2, "INTERNAL"])),
                     "Image.syncData", timeout=120)
        self.guest_write(8 * MIB, MIB, 0x44)
        self.wait_ready()
        self.vds, self.irs = tef.hf_conns(self.d)
        self.addCleanup(self.vds.close)
        self.addCleanup(self.irs.close)
        self.assertEqual(self.replay([entries[311]], ph), [])   # the pivot
        lsm_ms = (time.monotonic() - t0) * 1000
        self.assert_on(SD2)
        # the leaf the copy wrote is LEGAL on the destination, so the VM's next
        # start prepares it
        self.assertEqual(self.legality(SD2, IMG, SNAP), "LEGAL")
        # at the pivot the destination chain holds what the source chain does
        r = self.compare(self.src[SNAP], self.dst[SNAP])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        for off, pat in ((0, 0x11), (4 * MIB, 0x22), (6 * MIB, 0x33), (8 * MIB, 0x44)):
            run("qemu-io", "-U", "-r", "-f", "qcow2", "-c",
                "read -P %d %d %d" % (pat, off, MIB), self.dst[SNAP])
        # the guest goes on writing to the destination only
        self.guest_write(10 * MIB, MIB, 0x55)
        out = run("qemu-io", "-U", "-r", "-f", "qcow2", "-c",
                  "read -P %d %d %d" % (0x55, 10 * MIB, MIB), self.dst[SNAP])
        self.assertNotIn("failed", out)
        r = subprocess.run(["qemu-io", "-U", "-r", "-f", "qcow2", "-c",
                            "read -P %d %d %d" % (0x55, 10 * MIB, MIB), self.src[SNAP]],
                           capture_output=True, text=True, timeout=60)
        self.assertIn("Pattern verification failed", r.stdout)
        self.assertNotEqual(self.compare(self.src[SNAP], self.dst[SNAP]).returncode, 0)
        # nothing left to finish; the source spec names no drive any more
        self.assertEqual(error_code(c.call("VM.diskReplicateFinish", {
            "vmID": VM, "srcDisk": spec(SD2), "dstDisk": spec(SD2)})), 88)
        self.assertEqual(error_code(c.call("VM.diskReplicateFinish", {
            "vmID": VM, "srcDisk": spec(SD1), "dstDisk": spec(SD2)})), 13)
        # vdsmd stops after libvirt pivoted vdb and before the metadata said
        # so (the pivot done behind its back here): the next Finish finds the
        # disk on the recorded destination and completes the metadata
        vt.wait_task(c, result(c.call("Image.cloneStructure", [IMG2, BLANK, SD1, SD2])),
                     "Image.cloneStructure")
        vt.open_for_qemu(self.d, [self.dst[VOLB]])
        b1, b2 = spec(SD1, VOLB, IMG2), spec(SD2, VOLB, IMG2)
        self.assertIs(result(c.call("VM.diskReplicateStart", {
            "vmID": VM, "srcDisk": b1, "dstDisk": b2, "needExtend": False})), True)
        self.wait_ready("vdb")
        self.assertEqual(self.lv.virsh("blockjob", "lsmvm", "vdb", "--pivot").returncode, 0)
        self.assertEqual(source_of(self.xml(), "vdb"), self.dst[VOLB])
        self.assertIn("diskReplicate", self.metadata())
        self.assertIs(result(c.call("VM.diskReplicateFinish", {
            "vmID": VM, "srcDisk": b1, "dstDisk": b2})), True)
        md = self.metadata()
        self.assertNotIn("diskReplicate", md)
        vdb = md[md.index('name="vdb"'):]
        self.assertIn("<ovirt-vm:domainID>%s</ovirt-vm:domainID>" % SD2, vdb)
        self.assertNotIn(SD1, vdb)
        self.assert_on(SD2)
        self.assertEqual(self.legality(SD2, IMG2, VOLB), "LEGAL")
        r = self.compare(self.src[VOLB], self.dst[VOLB])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        print("\nQEMU/TCG: live storage migration of a %d MiB disk (start, kill -9 and restart "
              "of vdsmd, syncData, pivot) %.0f ms" % (SIZE // MIB, lsm_ms))


if __name__ == "__main__":
    unittest.main()
