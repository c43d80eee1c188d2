"""A VM's saved state, driven through the real vdsmd as the engine does it:
VM.hibernate into memory volumes created through the storage verbs (the
VM is Saving State, then Down with exitReason 5 and its domain is gone,
the dump volume holds libvirt's saved state), VM.destroy, then VM.create
with memoryDumpVolume/memoryConfVolume (Restoring state -> Up, same id and
ovirt-vm metadata, its disk the same volume).  Once on libvirt's test
driver (fast) and once on real QEMU (TCG) under a private libvirtd
(privlibvirt.py; skipped with the reason where it cannot start), where the
hibernate and restore durations are printed."""

import os
import time
import unittest

import privlibvirt
import vdsmtest as vt

POOL = "6a1b0000-626e-47cb-ad90-3ce782d831b3"
SD = "6b2c0000-2c2e-4b8a-9b1f-2a1f6b9d7c11"
BLANK = "00000000-0000-0000-0000-000000000000"
DISK = ("6c3d0000-d5e6-4f70-8a91-b2c3d4e5f607", "6d4e0000-e6f7-4081-9a2b-c3d4e5f60718")
DUMP = ("6e5f0000-d5e6-4f70-8a91-b2c3d4e5f607", "6f600000-e6f7-4081-9a2b-c3d4e5f60718")
CONF = ("70710000-d5e6-4f70-8a91-b2c3d4e5f607", "71820000-e6f7-4081-9a2b-c3d4e5f60718")
# a second pair for a VM the first pair does not belong to
DUMP2 = ("72930000-d5e6-4f70-8a91-b2c3d4e5f607", "73a40000-e6f7-4081-9a2b-c3d4e5f60718")
CONF2 = ("74b50000-d5e6-4f70-8a91-b2c3d4e5f607", "75c60000-e6f7-4081-9a2b-c3d4e5f60718")
RAW, COW, SPARSE = 5, 4, 2


def result(r):
    assert "result" in r, r
    return r["result"]


def error_code(r):
    assert "error" in r, r
    return r["error"]["code"]


def vm_xml(vm, disk_path, dtype="kvm"):
    """The engine's XML of a tiny diskless-boot VM with one data disk on a
    volume (ovirt-vm metadata names it)."""
    img, vol = DISK
    return (
        '<?xml version="1.0" encoding="UTF-8"?><domain type="%s" '
        'xmlns:ovirt-vm="http://ovirt.org/vm/1.0"><name>svm-%s</name><uuid>%s</uuid>'
        '<memory unit="MiB">64</memory><currentMemory unit="MiB">64</currentMemory>'
        '<vcpu>1</vcpu><os><type arch="x86_64" machine="pc">hvm</type></os>'
        '<devices><disk type="file" device="disk" snapshot="no">'
        '<target dev="vda" bus="virtio"/><source file="%s"/>'
        '<driver name="qemu" type="raw" cache="none"/><alias name="ua-%s"/>'
        '<serial>%s</serial></disk><memballoon model="none"/></devices>'
        '<metadata><ovirt-vm:vm><ovirt-vm:clusterVersion>4.8</ovirt-vm:clusterVersion>'
        '<ovirt-vm:device devtype="disk" name="vda">'
        '<ovirt-vm:poolID>%s</ovirt-vm:poolID><ovirt-vm:domainID>%s</ovirt-vm:domainID>'
        '<ovirt-vm:imageID>%s</ovirt-vm:imageID><ovirt-vm:volumeID>%s</ovirt-vm:volumeID>'
        '</ovirt-vm:device></ovirt-vm:vm></metadata></domain>'
        % (dtype, vm[:8], vm, disk_path, img, img, POOL, SD, img, vol))


def handle(dump, conf):
    return ",".join((SD, POOL, dump[0], dump[1], conf[0], conf[1]))


def pdiv(v):
    return {"poolID": POOL, "domainID": SD, "imageID": v[0], "volumeID": v[1]}


class StateFlow:
    """The flow, for a daemon on some libvirt (subclasses set it up)."""
    VM = None
    dtype = "kvm"

    @classmethod
    def make_storage(cls, open_for=None):
        """A domain with the VM's disk and two pairs of memory volumes
        (dump 256 MiB sparse RAW, conf 1 MiB RAW, as the engine makes them),
        then the pool.  open_for: make the paths usable by QEMU's user."""
        c = cls.c
        assert "result" in c.call("StorageDomain.create", [SD, 4, "", "sdom", 1])
        cls.paths = {}
        for (img, vol), size in ((DISK, 1 << 20), (DUMP, 256 << 20), (CONF, 1 << 20),
                                 (DUMP2, 256 << 20), (CONF2, 1 << 20)):
            tid = result(c.call("Volume.create", [vol, BLANK, SD, img, str(size), RAW, SPARSE]))
            deadline = time.monotonic() + 20
            while result(c.call("Task.getStatus", [tid]))["taskState"] != "finished":
                assert time.monotonic() < deadline, "Volume.create did not finish"
                time.sleep(0.02)
            cls.paths[vol] = os.path.join(cls.d.tmp, "storage", SD, "images", img, vol)
        assert result(c.call("StoragePool.create",
                             [POOL, "Default", SD, 1, [SD], 5, 60, 10, 3])) is True
        if open_for:
            for path in cls.paths.values():
                d = path
                while d != os.path.dirname(cls.d.tmp):
                    d = os.path.dirname(d)
                    os.chmod(d, os.stat(d).st_mode | 0o005)
                os.chmod(path, 0o666)

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
    def close(cls):
        for x in ("c", "ev"):
            if hasattr(cls, x):
                getattr(cls, x).close()
        if hasattr(cls, "d"):
            cls.d.__exit__(None, None, None)

    def events(self, n, timeout=vt.TIMEOUT):
        vm = self.VM
        got = []
        deadline = time.monotonic() + timeout
        while len(got) < n and time.monotonic() < deadline:
            try:
                f = self.ev.read_frame(max(0.05, deadline - time.monotonic()))
            except Exception:
                break
            if f.cmd == "MESSAGE" and f.json().get("method") == "|virt|VM_status|" + vm:
                got.append(f.json()["params"][vm])
        return got

    def stats(self):
        for v in result(self.c.call("Host.getAllVmStats")):
            if v["vmId"] == self.VM:
                return v
        return None

    def wait_stats(self, pred, timeout=15):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            s = self.stats()
            if pred(s):
                return s
            time.sleep(0.05)
        return self.stats()

    def domain_gone(self):
        raise NotImplementedError

    def test_hibernate_restore(self):
        vm = self.VM
        disk = self.paths[DISK[1]]
        r = result(self.c.call("VM.create", {"vmID": vm, "vmParams": {
            "vmId": vm, "xml": vm_xml(vm, disk, self.dtype)}}, timeout=60))
        self.assertEqual(r["status"], "WaitForLaunch")
        self.assertEqual([e["status"] for e in self.events(3, timeout=30)],
                         ["WaitForLaunch", "Powering up", "Up"])
        self.assertEqual(self.wait_stats(lambda s: s and s["status"] == "Up")["status"], "Up")
        xml0 = result(self.c.call("Host.dumpxmls", {"vmList": [vm]}))[vm]

        # wrong handles: refused before anything happens
        self.assertEqual(error_code(self.c.call("VM.hibernate", {
            "vmID": vm, "hibernationVolHandle": "a,b,c"})), -32602)
        self.assertEqual(error_code(self.c.call("VM.hibernate", {
            "vmID": "0badc0de-0000-4000-8000-000000000000",
            "hibernationVolHandle": handle(DUMP, CONF)})), 1)
        missing = (DUMP[0], "0badc0de-0000-4000-8000-000000000001")
        self.assertEqual(error_code(self.c.call("VM.hibernate", {
            "vmID": vm, "hibernationVolHandle": handle(missing, CONF)})), 12)
        self.assertEqual(self.stats()["status"], "Up")

        self.failed_save()

        t0 = time.monotonic()
        self.assertIs(result(self.c.call("VM.hibernate", {
            "vmID": vm, "hibernationVolHandle": handle(DUMP, CONF)}, timeout=30)), True)
        evs = self.events(2, timeout=60)
        hib_ms = (time.monotonic() - t0) * 1000
        self.assertEqual([e["status"] for e in evs], ["Saving State", "Down"],
                         (evs, self.c.call("VM.getMigrationStatus", {"vmID": vm})))
        self.assertEqual(evs[1]["exitCode"], 0)
        self.assertEqual(evs[1]["exitReason"], 5)
        self.assertEqual(evs[1]["exitMessage"], "SaveState succeeded")
        s = self.wait_stats(lambda s: s and s["status"] == "Down")
        self.assertEqual((s["status"], s["exitReason"]), ("Down", 5))
        self.assertTrue(self.domain_gone())
        # the dump holds libvirt's saved state (its header names the VM)
        with open(self.paths[DUMP[1]], "rb") as f:
            head = f.read(1 << 16)
        self.assertTrue(head.startswith(self.save_magic), head[:16])
        self.assertIn(vm.encode(), head)
        with open(self.paths[CONF[1]], "rb") as f:
            self.assertIn(("vmId=" + vm).encode(), f.read(4096))
        self.assertIs(result(self.c.call("VM.destroy", {"vmID": vm})), True)

        # another VM cannot take this VM's state
        other = "0badc0de-0000-4000-8000-0000000000aa"
        self.assertEqual(error_code(self.c.call("VM.create", {"vmID": other, "vmParams": {
            "vmId": other, "memoryDumpVolume": pdiv(DUMP),
            "memoryConfVolume": pdiv(CONF)}}, timeout=30)), 9)
        # memory volumes that hold no state
        self.assertEqual(error_code(self.c.call("VM.create", {"vmID": vm, "vmParams": {
            "vmId": vm, "memoryDumpVolume": pdiv(DUMP2),
            "memoryConfVolume": pdiv(CONF2)}}, timeout=30)), 9)

        t0 = time.monotonic()
        r = result(self.c.call("VM.create", {"vmID": vm, "vmParams": {
            "vmId": vm, "xml": vm_xml(vm, "/rhev/placeholder", self.dtype),
            "memoryDumpVolume": pdiv(DUMP), "memoryConfVolume": pdiv(CONF)}}, timeout=60))
        self.assertEqual(r["vmId"], vm)
        self.assertEqual(r["status"], "Restoring state")
        evs = self.events(2, timeout=60)
        res_ms = (time.monotonic() - t0) * 1000
        self.assertEqual([e["status"] for e in evs], ["Restoring state", "Up"], evs)
        s = self.wait_stats(lambda s: s and s["status"] == "Up")
        self.assertEqual(s["status"], "Up")
        self.assertEqual(s["disks"]["vda"]["imageID"], DISK[0])
        xml1 = result(self.c.call("Host.dumpxmls", {"vmList": [vm]}))[vm]
        md = xml1[xml1.index("<metadata"):xml1.index("</metadata>")]
        self.assertIn(DISK[1] + "</ovirt-vm:volumeID>", md)
        self.assertIn("4.8</ovirt-vm:clusterVersion>", md)
        self.assertIn(disk, xml1)
        self.assertIn("<uuid>%s</uuid>" % vm, xml1)
        self.assertIn("<uuid>%s</uuid>" % vm, xml0)
        # the same id again: 4
        self.assertEqual(error_code(self.c.call("VM.create", {"vmID": vm, "vmParams": {
            "vmId": vm, "memoryDumpVolume": pdiv(DUMP),
            "memoryConfVolume": pdiv(CONF)}})), 4)
        print("\n%s: VM.hibernate -> Down %.0f ms, VM.create(restore) -> Up %.0f ms"
              % (self.label, hib_ms, res_ms))

        # the engine's older form: hiberVolHandle in vmParams
        self.assertIs(result(self.c.call("VM.hibernate", {
            "vmID": vm, "hibernationVolHandle": handle(DUMP, CONF)}, timeout=30)), True)
        self.assertEqual([e["status"] for e in self.events(2, timeout=60)],
                         ["Saving State", "Down"])
        self.assertIs(result(self.c.call("VM.destroy", {"vmID": vm})), True)
        r = result(self.c.call("VM.create", {"vmID": vm, "vmParams": {
            "vmId": vm, "hiberVolHandle": handle(DUMP, CONF)}}, timeout=60))
        self.assertEqual(r["status"], "Restoring state")
        self.assertEqual([e["status"] for e in self.events(2, timeout=60)],
                         ["Restoring state", "Up"])
        self.assertIs(result(self.c.call("VM.destroy", {"vmID": vm})), True)


class TestDriverState(StateFlow, unittest.TestCase):
    VM = "6a000000-1111-4222-8333-444455556666"
    dtype = "test"
    label = "libvirt test driver"
    save_magic = b"TestGuestMagic"

    @classmethod
    def setUpClass(cls):
        cls.d = vt.Daemon(libvirt_uri="test:///default")
        cls.connect()
        cls.make_storage()

    @classmethod
    def tearDownClass(cls):
        cls.close()

    def failed_save(self):
        pass   # the test driver writes as root: nothing to refuse it

    def domain_gone(self):
        return not any(v["vmId"] == self.VM and v["status"] != "Down"
                       for v in result(self.c.call("Host.getAllVmStats")))


class QemuState(StateFlow, unittest.TestCase):
    VM = "6b000000-1111-4222-8333-444455556666"
    label = "QEMU/TCG, private libvirtd"
    save_magic = b"LibvirtQemudSave"

    @classmethod
    def setUpClass(cls):
        cls.lv = privlibvirt.PrivateLibvirt()
        if cls.lv.skip_reason:
            reason = cls.lv.skip_reason
            cls.lv.stop()
            raise unittest.SkipTest("private libvirtd: " + reason)
        cls.d = vt.Daemon(libvirt_uri=cls.lv.uri)
        cls.connect()
        cls.make_storage(open_for=True)

    @classmethod
    def tearDownClass(cls):
        cls.close()
        cls.lv.stop()

    def failed_save(self):
        """libvirt (nobody) cannot write the dump: the VM goes on, Up."""
        dump = self.paths[DUMP[1]]
        os.chmod(dump, 0o644)
        try:
            self.assertIs(result(self.c.call("VM.hibernate", {
                "vmID": self.VM, "hibernationVolHandle": handle(DUMP, CONF)}, timeout=30)), True)
            self.assertEqual([e["status"] for e in self.events(2, timeout=60)],
                             ["Saving State", "Up"])
        finally:
            os.chmod(dump, 0o666)
        st = result(self.c.call("VM.getMigrationStatus", {"vmID": self.VM}))
        self.assertEqual(st["status"]["code"], 12, st)
        self.assertEqual(self.wait_stats(lambda s: s and s["status"] == "Up")["status"], "Up")
        self.assertEqual(self.lv.virsh("domstate", self.VM).stdout.strip(), "running")

    def domain_gone(self):
        gone = self.lv.virsh("domstate", self.VM).returncode != 0
        return gone and self.lv.qemu_pids() == []


if __name__ == "__main__":
    unittest.main()
