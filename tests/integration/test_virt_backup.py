"""Live incremental backup on real QEMU (TCG) under a private libvirtd
(privlibvirt.py), driven through the real vdsmd as the engine drives it
(VM.start_backup / backup_info / stop_backup, then the checkpoint verbs).

The VM's disk is a COW (qcow2) volume made through the storage verbs, with
data written into it before the VM starts.  A full backup with a first
checkpoint exports the disk over NBD on a unix socket under vdsmd's run_dir,
its writes going to the engine's scratch disk; nbdcopy reads it.  The
"guest" then writes two ranges: the writes go through the running QEMU's
block layer (HMP qemu-io on the disk's qdev, the path a guest's writes take,
so the checkpoint's dirty bitmap sees them; the VM has no OS to write with).
An incremental backup from that checkpoint (scratch disk made by vdsmd)
exports the dirty bitmap: its dirty extents are exactly the written ranges,
and the full copy with only those extents applied from the incremental
export compares equal (qemu-img compare) to the disk.  The checkpoints
survive a kill -9 of vdsmd, are redefined (from their XML and from a backup
config) after libvirt forgot them, and delete_checkpoints removes them with
their bitmaps.  Refusals: an unknown VM, a second backup while one runs, no
disks, an unknown disk, incremental without a checkpoint, info of no backup.
The engine-forms corpus's backup entries (tests/engine_forms/VM.json, steps
240-249: the engine's exact parameters and reading rules) are replayed here
too, where each must answer 0 (libvirt's test driver, in
test_engine_forms, cannot back up).
Skipped, with the reason, where the private libvirtd or QEMU cannot start."""

import json
import os
import shutil
import subprocess
import tempfile
import time
import unittest

import privlibvirt
import test_engine_forms as tef     # the engine-forms corpus and its replay
import vdsmtest as vt

VM = "7a000000-2222-4222-8333-444455556666"
POOL = "7b1b0000-626e-47cb-ad90-3ce782d83200"
SD = "7c2c0000-2c2e-4b8a-9b1f-2a1f6b9d7c22"
IMG = "7d3d0000-d5e6-4f70-8a91-b2c3d4e5f622"
VOL = "7e4e0000-e6f7-4081-9a2b-c3d4e5f60722"
# what VM.stop_backup answers, as VDSM's Bridge (VM_stop_backup: 'ret': 'status')
DONE = {"code": 0, "message": "Done"}
BK1 = "b1000000-0000-4000-8000-000000000001"
BK2 = "b1000000-0000-4000-8000-000000000002"
BK3 = "b1000000-0000-4000-8000-000000000003"
CP1 = "c1000000-0000-4000-8000-000000000001"
CP2 = "c1000000-0000-4000-8000-000000000002"
CP3 = "c1000000-0000-4000-8000-000000000003"
NOVM = "0badc0de-0000-4000-8000-000000000000"
COW, SPARSE = 4, 2
MIB = 1 << 20
SIZE = 4 * MIB
# what the "guest" writes after the first checkpoint (64 KiB clusters)
WRITES = [(MIB + 64 * 1024, 128 * 1024), (3 * MIB, 64 * 1024)]

result, error_code = vt.result, vt.error_code


def vm_xml():
    return (
        '<?xml version="1.0" encoding="UTF-8"?><domain type="kvm" '
        'xmlns:ovirt-vm="http://ovirt.org/vm/1.0"><name>bkvm</name><uuid>%s</uuid>'
        '<memory unit="MiB">64</memory><currentMemory unit="MiB">64</currentMemory>'
        '<vcpu>1</vcpu><os><type arch="x86_64" machine="pc">hvm</type></os>'
        '<devices><disk type="file" device="disk">'
        '<target dev="vda" bus="virtio"/><source file="/rhev/placeholder"/>'
        '<driver name="qemu" type="qcow2" cache="none"/><alias name="ua-%s"/>'
        '<serial>%s</serial></disk>'
        '<memballoon model="none"/></devices>'
        '<metadata><ovirt-vm:vm><ovirt-vm:device devtype="disk" name="vda">'
        '<ovirt-vm:poolID>%s</ovirt-vm:poolID><ovirt-vm:domainID>%s</ovirt-vm:domainID>'
        '<ovirt-vm:imageID>%s</ovirt-vm:imageID><ovirt-vm:volumeID>%s</ovirt-vm:volumeID>'
        '</ovirt-vm:device></ovirt-vm:vm></metadata></domain>'
        % (VM, IMG, IMG, POOL, SD, IMG, VOL))


def nbd_uri(url):
    """VDSM's nbd:unix:<path>:exportname=<name> as an NBD URI."""
    assert url.startswith("nbd:unix:"), url
    path, export = url[len("nbd:unix:"):].rsplit(":exportname=", 1)
    return "nbd+unix:///%s?socket=%s" % (export, path)


def run(*argv, timeout=60):
    r = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, (argv, r.stdout, r.stderr)
    return r.stdout


def disk(checkpoint=True, **kw):
    d = {"domainID": SD, "imageID": IMG, "volumeID": VOL, "checkpoint": checkpoint}
    d.update(kw)
    return d


class QemuBackup(tef.Replay, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.lv = privlibvirt.start_or_skip()
        cls.run_dir = tempfile.mkdtemp(prefix="vdsmd-run-")
        os.chmod(cls.run_dir, 0o755)
        os.mkdir(os.path.join(cls.run_dir, "backup"))
        os.chmod(os.path.join(cls.run_dir, "backup"), 0o777)   # QEMU (nobody) binds there
        cls.work = tempfile.mkdtemp(prefix="vdsmd-bk-")
        cls.d = vt.Daemon("--run-dir", cls.run_dir, libvirt_uri=cls.lv.uri)
        cls.c, cls.ev = vt.vm_connections(cls.d)
        c = cls.c
        assert "result" in c.call("StorageDomain.create", [SD, 4, "", "bkdom", 1])
        vt.wait_task(c, result(c.call("Volume.create", {
            "volumeID": VOL, "storagedomainID": SD, "imageID": IMG, "size": str(SIZE),
            "volFormat": COW, "preallocate": SPARSE})))
        assert result(c.call("StoragePool.create",
                             [POOL, "Default", SD, 1, [SD], 5, 60, 10, 3])) is True
        cls.path = vt.volume_path(cls.d, SD, IMG, VOL)
        run("qemu-io", "-f", "qcow2", "-c", "write -P 0x5a 0 %d" % MIB, cls.path)
        vt.open_for_qemu(cls.d, [cls.path])

    @classmethod
    def tearDownClass(cls):
        for x in ("c", "ev"):
            if hasattr(cls, x):
                getattr(cls, x).close()
        if hasattr(cls, "d") and os.environ.get("BK_DEBUG"):   # the logs, to debug a failure
            print("\n".join(cls.d._lines[-40:]))
            print(cls.lv.log_tail(3000))
        if hasattr(cls, "d"):
            cls.d.__exit__(None, None, None)
        cls.lv.stop()
        for p in ("run_dir", "work"):
            if hasattr(cls, p):
                shutil.rmtree(getattr(cls, p), ignore_errors=True)

    def reconnect(self):
        self.c.close()
        self.ev.close()
        type(self).c, type(self).ev = vt.vm_connections(self.d)

    def guest_write(self, off, length, pattern):
        """A write through the running QEMU's block layer (as the guest's)."""
        r = self.lv.virsh("qemu-monitor-command", "bkvm", "--hmp",
                          'qemu-io -d /machine/peripheral/ua-%s/virtio-backend "write -P %d %d %d"' % (IMG, pattern, off, length))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("rror", r.stdout, r.stdout)

    def checkpoints(self):
        return result(self.c.call("VM.list_checkpoints", {"vmID": VM}))

    def test_backup_checkpoints(self):
        c = self.c
        self.assertIs(result(c.call("Host.getCapabilities"))["backupEnabled"], True)
        r = result(c.call("VM.create", {"vmID": VM, "vmParams": {"vmId": VM, "xml": vm_xml()}},
                          timeout=60))
        self.assertEqual(r["status"], "WaitForLaunch")
        self.assertEqual(self.checkpoints(), [])

        # refusals before anything starts
        cfg = {"backup_id": BK1, "disks": [disk()], "from_checkpoint_id": None,
               "to_checkpoint_id": CP1, "parent_checkpoint_id": None,
               "require_consistency": False}
        self.assertEqual(error_code(c.call("VM.start_backup", {"vmID": NOVM, "config": cfg})), 1)
        self.assertEqual(error_code(c.call("VM.start_backup", {
            "vmID": VM, "config": dict(cfg, disks=[])})), 1600)
        self.assertEqual(error_code(c.call("VM.start_backup", {
            "vmID": VM, "config": dict(cfg, disks=[disk(volumeID=NOVM)])})), 1600)
        self.assertEqual(error_code(c.call("VM.start_backup", {
            "vmID": VM, "config": dict(cfg, disks=[disk(backup_mode="incremental")])})), 1600)
        self.assertEqual(error_code(c.call("VM.start_backup", {
            "vmID": VM, "config": dict(cfg, require_consistency=True)})), 1600)  # no agent
        self.assertEqual(error_code(c.call("VM.backup_info", {
            "vmID": VM, "backup_id": BK1})), 1601)
        self.assertEqual(os.listdir(os.path.join(self.run_dir, "backup")), [])

        # full backup, the engine's scratch disk, a first checkpoint
        scratch = os.path.join(self.lv.images, "scratch1.qcow2")
        run("qemu-img", "create", "-q", "-f", "qcow2", scratch, str(SIZE))
        os.chmod(scratch, 0o666)
        t0 = time.monotonic()
        info = result(c.call("VM.start_backup", {"vmID": VM, "config": dict(
            cfg, disks=[disk(backup_mode="full",
                             scratch_disk={"path": scratch, "type": "file"})])},
            timeout=60))
        start_ms = (time.monotonic() - t0) * 1000
        sock = os.path.join(self.run_dir, "backup", BK1)
        self.assertEqual(info["disks"], {IMG: "nbd:unix:%s:exportname=vda" % sock})
        self.assertIn("<name>%s</name>" % CP1, info["checkpoint"])
        self.assertIn("bitmap='%s'" % CP1, info["checkpoint"])
        self.assertEqual(result(c.call("VM.backup_info", {
            "vmID": VM, "backup_id": BK1, "checkpoint_id": CP1})), info)
        # one backup at a time
        self.assertEqual(error_code(c.call("VM.start_backup", {"vmID": VM, "config": dict(
            cfg, backup_id=BK2, to_checkpoint_id=CP2)})), 1600)
        full = os.path.join(self.work, "full.raw")
        t0 = time.monotonic()
        run("nbdcopy", nbd_uri(info["disks"][IMG]), full)
        full_ms = (time.monotonic() - t0) * 1000
        with open(full, "rb") as f:
            data = f.read()
        self.assertEqual(len(data), SIZE)
        self.assertEqual(data[:MIB], b"\x5a" * MIB)
        self.assertEqual(data[MIB:], bytes(SIZE - MIB))
        # the guest writes during the backup: the export stays the snapshot
        self.guest_write(0, 64 * 1024, 0x11)
        out = os.path.join(self.work, "again.raw")
        run("nbdcopy", nbd_uri(info["disks"][IMG]), out)
        with open(out, "rb") as f:
            self.assertEqual(f.read(), data)
        self.assertEqual(result(c.call("VM.stop_backup", {"vmID": VM, "backup_id": BK1})), DONE)
        self.assertEqual(error_code(c.call("VM.backup_info", {
            "vmID": VM, "backup_id": BK1})), 1601)
        self.assertEqual(result(c.call("VM.stop_backup", {"vmID": VM, "backup_id": BK1})), DONE)
        self.assertFalse(os.path.exists(sock))
        self.assertEqual(self.checkpoints(), [CP1])

        # the guest writes; an incremental backup from CP1 sees only that
        for off, length in WRITES:
            self.guest_write(off, length, 0x33)
        t0 = time.monotonic()
        info = result(c.call("VM.start_backup", {"vmID": VM, "config": {
            "backup_id": BK2, "disks": [disk(backup_mode="incremental")],
            "from_checkpoint_id": CP1, "to_checkpoint_id": CP2,
            "parent_checkpoint_id": CP1, "require_consistency": False,
            "creation_time": 1700000000}}, timeout=60))
        inc_start_ms = (time.monotonic() - t0) * 1000
        scratch2 = os.path.join(self.d.tmp, "storage", "transient_disks", VM, BK2 + ".vda")
        self.assertTrue(os.path.exists(scratch2))          # made by vdsmd
        self.assertIn("<name>%s</name>" % CP2, info["checkpoint"])   # libvirt's time
        uri = nbd_uri(info["disks"][IMG])
        m = json.loads(run("nbdinfo", "--map=qemu:dirty-bitmap:backup-vda", "--json", uri))
        dirty = [(e["offset"], e["length"]) for e in m if e["type"] & 1]
        # the first guest write (0..64K, during the full backup) is after CP1 too
        self.assertEqual(dirty, [(0, 64 * 1024)] + WRITES, m)
        incr = os.path.join(self.work, "incr.raw")
        run("nbdcopy", uri, incr)
        restored = os.path.join(self.work, "restored.raw")
        shutil.copy(full, restored)
        copied = 0
        with open(incr, "rb") as src, open(restored, "r+b") as dst:
            for off, length in dirty:
                src.seek(off)
                dst.seek(off)
                dst.write(src.read(length))
                copied += length
        self.assertEqual(copied, 64 * 1024 + sum(n for _, n in WRITES))
        self.assertEqual(result(c.call("VM.stop_backup", {"vmID": VM, "backup_id": BK2})), DONE)
        self.assertFalse(os.path.exists(scratch2))
        self.assertEqual(self.checkpoints(), [CP1, CP2])

        # checkpoints outlive vdsmd (libvirt keeps them)
        vt.restart(self.d)
        self.reconnect()
        c = self.c
        self.assertEqual(self.checkpoints(), [CP1, CP2])
        x2 = result(c.call("VM.dump_checkpoint", {"vmID": VM, "checkpoint_id": CP2}))
        self.assertIn("<name>%s</name>" % CP2, x2["checkpoint"])
        self.assertIn("<parent>", x2["checkpoint"])
        self.assertEqual(error_code(c.call("VM.dump_checkpoint", {
            "vmID": VM, "checkpoint_id": CP3})), 1611)

        # redefine after libvirt forgot them (the bitmaps stay in the image)
        self.assertEqual(self.lv.virsh("checkpoint-delete", "bkvm", CP2, "--metadata").returncode, 0)
        self.assertEqual(self.checkpoints(), [CP1])
        self.assertEqual(result(c.call("VM.redefine_checkpoints", {"vmID": VM, "checkpoints": [
            {"id": CP2, "xml": x2["checkpoint"]}]})), {"checkpoint_ids": [CP2]})
        self.assertEqual(self.checkpoints(), [CP1, CP2])
        for cp in (CP2, CP1):
            self.assertEqual(self.lv.virsh("checkpoint-delete", "bkvm", cp,
                                           "--metadata").returncode, 0)
        self.assertEqual(self.checkpoints(), [])
        # the engine's form: the config that made it
        self.assertEqual(result(c.call("VM.redefine_checkpoints", {"vmID": VM, "checkpoints": [
            {"id": CP1, "config": {"backup_id": BK1, "disks": [disk()],
                                   "from_checkpoint_id": None, "to_checkpoint_id": CP1,
                                   "parent_checkpoint_id": None,
                                   "require_consistency": False,
                                   "creation_time": 1700000000}}]})),
            {"checkpoint_ids": [CP1]})
        x1 = result(c.call("VM.dump_checkpoint", {"vmID": VM, "checkpoint_id": CP1}))
        self.assertIn("<creationTime>1700000000</creationTime>", x1["checkpoint"])
        # a checkpoint whose bitmap is not in the image: refused by libvirt,
        # reported in the result after those done
        r = result(c.call("VM.redefine_checkpoints", {"vmID": VM, "checkpoints": [
            {"id": CP2, "xml": x2["checkpoint"]},
            {"id": CP3, "xml": x2["checkpoint"].replace(CP2, CP3)}]}))
        self.assertEqual(r["checkpoint_ids"], [CP2])
        self.assertIsInstance(r["error"]["code"], int)
        self.assertTrue(r["error"]["message"])
        self.assertEqual(self.checkpoints(), [CP1, CP2])
        self.assertEqual(error_code(c.call("VM.redefine_checkpoints", {
            "vmID": VM, "checkpoints": [{"id": CP3}]})), 1610)

        # delete (oldest first, an unknown one counts as deleted): the
        # bitmaps go too
        self.assertEqual(result(c.call("VM.delete_checkpoints", {
            "vmID": VM, "checkpoint_ids": [CP1, CP2, CP3]})),
            {"checkpoint_ids": [CP1, CP2, CP3]})
        self.assertEqual(self.checkpoints(), [])
        self.assertEqual(error_code(c.call("VM.list_checkpoints", {"vmID": NOVM})), 1)

        # a backup after the checkpoints are gone: incremental is refused
        self.assertEqual(error_code(c.call("VM.start_backup", {"vmID": VM, "config": {
            "backup_id": BK3, "disks": [disk(backup_mode="incremental")],
            "from_checkpoint_id": CP2, "to_checkpoint_id": None}})), 1600)

        result(c.call("VM.destroy", {"vmID": VM}, timeout=30))
        deadline = time.monotonic() + 20
        while self.lv.qemu_pids() and time.monotonic() < deadline:
            time.sleep(0.1)
        run("qemu-img", "compare", "-q", "-f", "raw", "-F", "qcow2", restored, self.path)
        with open(restored, "rb") as f:
            got = f.read()
        self.assertEqual(got[:64 * 1024], b"\x11" * 64 * 1024)
        for off, length in WRITES:
            self.assertEqual(got[off:off + length], b"\x33" * length)
        qi = json.loads(run("qemu-img", "info", "--output=json", self.path))
        self.assertNotIn("bitmaps", qi.get("format-specific", {}).get("data", {}), qi)
        print("\nbackup: start full %.0f ms, read %d bytes %.0f ms; incremental start %.0f ms,"
              " %d dirty bytes of %d" % (start_ms, SIZE, full_ms, inc_start_ms, copied, SIZE))

    def test_engine_forms(self):
        """The corpus's backup entries as the engine sends them, on real
        QEMU: a full backup making a first checkpoint and an incremental one
        from it (the engine's scratch disks), backup_info, stop_backup, the
        checkpoint list; after libvirt forgot the second checkpoint (as
        after a VM restart), its redefinition from the backup config with
        creation_time, then the deletion of the first."""
        c = self.c
        c.call("VM.destroy", {"vmID": VM}, timeout=30)      # a VM the other test left
        r = result(c.call("VM.create", {"vmID": VM, "vmParams": {"vmId": VM, "xml": vm_xml()}},
                          timeout=60))
        self.assertEqual(r["status"], "WaitForLaunch")
        self.addCleanup(c.call, "VM.destroy", {"vmID": VM}, timeout=30)
        self.assertEqual(self.checkpoints(), [])
        ph = {"vmId": VM, "sdUUID": SD, "imgUUID": IMG, "volUUID": VOL}
        tef.backup_placeholders(ph, self.lv.images)
        for name in ("scratch1", "scratch2"):
            run("qemu-img", "create", "-q", "-f", "qcow2", ph[name], str(SIZE))
            os.chmod(ph[name], 0o666)
            self.addCleanup(os.unlink, ph[name])
        self.vds, self.irs = tef.hf_conns(self.d)
        self.addCleanup(self.vds.close)
        self.addCleanup(self.irs.close)
        # here every entry must be accepted: no test driver limits
        entries = [{k: v for k, v in e.items() if k != "expect"} for e in tef.backup_entries()]
        self.assertEqual([e["step"] for e in entries], list(range(240, 250)))
        before = [e for e in entries if e["verb"] != "VM.redefine_checkpoints" and e["step"] < 248]
        self.assertEqual(self.replay(before, ph), [])
        self.assertEqual(self.checkpoints(), [ph["cpFirst"], ph["cpSecond"]])
        self.assertEqual(os.listdir(os.path.join(self.run_dir, "backup")), [])
        self.assertEqual(self.lv.virsh("checkpoint-delete", "bkvm", ph["cpSecond"],
                                       "--metadata").returncode, 0)
        self.assertEqual(self.checkpoints(), [ph["cpFirst"]])
        self.assertEqual(self.replay([e for e in entries if e["step"] >= 248], ph), [])
        self.assertEqual(self.checkpoints(), [ph["cpSecond"]])
        x = result(c.call("VM.dump_checkpoint", {"vmID": VM, "checkpoint_id": ph["cpSecond"]}))
        self.assertIn("<creationTime>%d</creationTime>" % ph["cpSecondTime"], x["checkpoint"])
        self.assertEqual(result(c.call("VM.delete_checkpoints", {
            "vmID": VM, "checkpoint_ids": [ph["cpSecond"]]})), {"checkpoint_ids": [ph["cpSecond"]]})


if __name__ == "__main__":
    unittest.main()
