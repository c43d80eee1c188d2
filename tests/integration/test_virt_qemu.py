"""VMs on real QEMU (TCG) under a private libvirt daemon (privlibvirt.py),
driven through the real vdsmd as the engine does: VM.create from the
engine's XML (latency printed), recovery of the running VM across a vdsmd
restart (same id, metadata, hash, QEMU process untouched), the device verbs
visible in Host.dumpxmls and the stats, VM.shutdown with force on a guest
that ignores ACPI (no OS: destroyed after the timeout).  Skipped, with the
reason, where the private libvirtd or QEMU cannot start."""

import os
import re
import time
import unittest

import privlibvirt
import vdsmtest as vt

VM = "5e1f0000-1111-4222-8333-444455556666"
POOL = "5849b030-626e-47cb-ad90-3ce782d831b3"
SD = "4b0a2c3d-2c2e-4b8a-9b1f-2a1f6b9d7c11"
IMG = "c1a2b3c4-d5e6-4f70-8a91-b2c3d4e5f607"
VOL = "d2b3c4d5-e6f7-4081-9a2b-c3d4e5f60718"
INT_MAX = 2**31 - 1


def tiny_xml(vm, disk):
    """The engine's form of a tiny diskless-boot VM: one data disk on a
    volume (metadata), VNC, 2 vCPU slots with 1 online, ACPI for hotplug."""
    return (
        '<?xml version="1.0" encoding="UTF-8"?><domain type="kvm" '
        'xmlns:ovirt-vm="http://ovirt.org/vm/1.0"><name>qvm1</name><uuid>%s</uuid>'
        '<memory unit="MiB">64</memory><currentMemory unit="MiB">64</currentMemory>'
        '<vcpu current="1">2</vcpu><os><type arch="x86_64" machine="pc">hvm</type></os>'
        '<features><acpi/></features>'
        '<devices><disk type="file" device="disk" snapshot="no">'
        '<target dev="vda" bus="virtio"/><source file="%s"/>'
        '<driver name="qemu" type="raw" cache="none"/><alias name="ua-%s"/>'
        '<serial>%s</serial></disk>'
        '<disk type="file" device="cdrom"><target dev="hdc" bus="ide"/><readonly/>'
        '<alias name="ua-cd0"/></disk>'
        '<graphics type="vnc" port="-1" autoport="yes" listen="127.0.0.1"/>'
        '<memballoon model="virtio"/></devices>'
        '<metadata><ovirt-vm:vm><ovirt-vm:device devtype="disk" name="vda">'
        '<ovirt-vm:poolID>%s</ovirt-vm:poolID><ovirt-vm:domainID>%s</ovirt-vm:domainID>'
        '<ovirt-vm:imageID>%s</ovirt-vm:imageID><ovirt-vm:volumeID>%s</ovirt-vm:volumeID>'
        '</ovirt-vm:device></ovirt-vm:vm></metadata></domain>'
        % (vm, disk, IMG, IMG, POOL, SD, IMG, VOL))


def result(r):
    assert "result" in r, r
    return r["result"]


def error_code(r):
    assert "error" in r, r
    return r["error"]["code"]


class QemuVms(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.lv = privlibvirt.PrivateLibvirt()
        if cls.lv.skip_reason:
            reason = cls.lv.skip_reason
            cls.lv.stop()
            raise unittest.SkipTest("private libvirtd: " + reason)
        cls.d = vt.Daemon(libvirt_uri=cls.lv.uri)
        cls.connect()

    @classmethod
    def connect(cls):
        cls.c = cls.d.stomp()
        cls.c.connect()
        cls.c.subscribe(vt.RESPONSES, "r", receipt="r1")
        cls.ev = cls.d.stomp()
        cls.ev.connect()
        cls.ev.subscribe(vt.EVENTS, "ev", receipt="e1")
        deadline = time.monotonic() + vt.TIMEOUT
        while "result" not in cls.c.call("Host.getVMList"):
            assert time.monotonic() < deadline, "vdsmd never answered Host.getVMList"
            time.sleep(0.05)

    @classmethod
    def tearDownClass(cls):
        for x in ("c", "ev"):
            if hasattr(cls, x):
                getattr(cls, x).close()
        if hasattr(cls, "d"):
            cls.d.__exit__(None, None, None)
        cls.lv.stop()

    def events(self, n, vm=VM, timeout=vt.TIMEOUT):
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

    def stats(self, vm=VM):
        for v in result(self.c.call("Host.getAllVmStats")):
            if v["vmId"] == vm:
                return v
        return None

    def xml(self, vm=VM):
        return result(self.c.call("Host.dumpxmls", {"vmList": [vm]}))[vm]

    def wait_stats(self, pred, timeout=10):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            s = self.stats()
            if s and pred(s):
                return s
            time.sleep(0.1)
        return self.stats()

    def test_1_create_and_recover(self):
        disk = self.lv.image(VOL)
        p = {"vmID": VM, "vmParams": {"vmId": VM, "xml": tiny_xml(VM, disk)}}
        t0 = time.monotonic()
        r = result(self.c.call("VM.create", p, timeout=60))
        ms = (time.monotonic() - t0) * 1000
        print("\nVM.create (QEMU/TCG, private libvirtd, engine XML): %.0f ms" % ms)
        self.assertEqual(r["status"], "WaitForLaunch")
        self.assertEqual([e["status"] for e in self.events(3)],
                         ["WaitForLaunch", "Powering up", "Up"])
        s = self.wait_stats(lambda s: s["status"] == "Up")
        self.assertEqual(s["status"], "Up")
        self.assertEqual(s["disks"]["vda"]["imageID"], IMG)
        port = int(s["displayInfo"][0]["port"])
        self.assertGreaterEqual(port, 5900)
        self.assertEqual(s["displayPort"], str(port))
        x = self.xml()
        self.assertIn(disk, x)
        self.assertIn(VOL + "</ovirt-vm:volumeID>", x)
        self.assertEqual(error_code(self.c.call("VM.create", p)), 4)

        # vdsmd restarts while the VM runs: found again, untouched
        pids = self.lv.qemu_pids()
        self.assertEqual(len(pids), 1)
        h = s["hash"]
        self.c.close()
        self.ev.close()
        vt.restart(self.d, sig=15)
        self.connect()
        s = self.wait_stats(lambda s: s["status"] == "Up")
        self.assertEqual(s["status"], "Up")
        self.assertEqual(s["hash"], h)
        self.assertEqual(s["disks"]["vda"]["imageID"], IMG)
        self.assertEqual(self.lv.qemu_pids(), pids)
        self.assertIn(VOL + "</ovirt-vm:volumeID>", self.xml())
        self.assertEqual(self.events(1, timeout=0.5), [])   # nothing re-launched

    def test_2_force_shutdown(self):
        if not self.stats():
            self.skipTest("needs the VM of test_1")
        # no guest OS: ACPI is ignored, force destroys after the timeout
        t0 = time.monotonic()
        self.assertIs(result(self.c.call("VM.shutdown", {"vmID": VM, "timeout": 2,
                                                        "force": True})), True)
        self.assertLess(time.monotonic() - t0, 2)   # answers at once
        self.assertEqual(self.stats()["status"], "Powering down")
        evs = self.events(2, timeout=15)
        self.assertEqual([e["status"] for e in evs], ["Powering down", "Down"])
        self.assertGreaterEqual(time.monotonic() - t0, 2)
        self.assertEqual(evs[1]["exitReason"], 6)
        self.assertIs(result(self.c.call("VM.destroy", {"vmID": VM})), True)
        self.assertEqual(self.lv.qemu_pids(), [])


if __name__ == "__main__":
    unittest.main()
