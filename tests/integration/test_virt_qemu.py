"""VMs on real QEMU (TCG) under a private libvirt daemon (privlibvirt.py),
driven through the real vdsmd as the engine does: VM.create from the
engine's XML (latency printed), recovery of the running VM across a vdsmd
restart (same id, metadata, hash, QEMU process untouched), the device verbs
visible in Host.dumpxmls and the stats, VM.shutdown with force on a guest
that ignores ACPI (no OS: destroyed after the timeout).  Skipped, with the
reason, where the private libvirtd or QEMU cannot start."""

import re
import socket
import time
import unittest

import privlibvirt
import vdsmtest as vt

VM = "5e1f0000-1111-4222-8333-444455556666"
POOL = "5849b030-626e-47cb-ad90-3ce782d831b3"
SD = "4b0a2c3d-2c2e-4b8a-9b1f-2a1f6b9d7c11"
IMG = "c1a2b3c4-d5e6-4f70-8a91-b2c3d4e5f607"
VOL = "d2b3c4d5-e6f7-4081-9a2b-c3d4e5f60718"
BLANK = "00000000-0000-0000-0000-000000000000"
IMG2 = "c1a2b3c4-d5e6-4f70-8a91-b2c3d4e5f608"
VOL2 = "d2b3c4d5-e6f7-4081-9a2b-c3d4e5f60719"
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
        '<controller type="scsi" model="virtio-scsi"/>'
        '<interface type="user"><mac address="52:54:00:aa:00:01"/><model type="virtio"/>'
        '<alias name="ua-nic0"/></interface>'
        '<graphics type="vnc" port="-1" autoport="yes" listen="127.0.0.1" '
        'passwd="*****" passwdValidTo="1970-01-01T00:00:01"/>'
        '<memballoon model="virtio"/></devices>'
        '<metadata><ovirt-vm:vm><ovirt-vm:device devtype="disk" name="vda">'
        '<ovirt-vm:poolID>%s</ovirt-vm:poolID><ovirt-vm:domainID>%s</ovirt-vm:domainID>'
        '<ovirt-vm:imageID>%s</ovirt-vm:imageID><ovirt-vm:volumeID>%s</ovirt-vm:volumeID>'
        '</ovirt-vm:device></ovirt-vm:vm></metadata></domain>'
        % (vm, disk, IMG, IMG, POOL, SD, IMG, VOL))


result, error_code = vt.result, vt.error_code


class QemuVms(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.lv = privlibvirt.start_or_skip()
        cls.d = vt.Daemon(libvirt_uri=cls.lv.uri)
        cls.connect()
        cls.disks = cls.make_volumes()

    @classmethod
    def make_volumes(cls):
        """The VM's disks as the engine has them: volumes of a storage domain
        in the data center its XML names, created through vdsmd's storage verbs
        (VM.create and VM.hotplugDisk resolve a disk from its metadata).  The
        private QEMU runs as nobody: the path down to each volume is opened up
        for it.  {volume: path}"""
        c = cls.c
        assert "result" in c.call("StorageDomain.create", [SD, 4, "", "dom", 1])
        paths = {}
        for img, vol in ((IMG, VOL), (IMG2, VOL2)):
            vt.wait_task(c, result(c.call("Volume.create",
                                          [vol, BLANK, SD, img, str(1 << 20), 5, 2])))
            paths[vol] = vt.volume_path(cls.d, SD, img, vol)
        # in a pool, volume changes need the SPM: the pool comes last
        assert result(c.call("StoragePool.create",
                             [POOL, "Default", SD, 1, [SD], 5, 60, 10, 3])) is True
        vt.open_for_qemu(cls.d, paths.values())
        return paths

    @classmethod
    def connect(cls):
        cls.c, cls.ev = vt.vm_connections(cls.d)

    @classmethod
    def tearDownClass(cls):
        for x in ("c", "ev"):
            if hasattr(cls, x):
                getattr(cls, x).close()
        if hasattr(cls, "d"):
            cls.d.__exit__(None, None, None)
        cls.lv.stop()

    def events(self, n, vm=VM, timeout=vt.TIMEOUT):
        return vt.vm_status_events(self.ev, vm, n, timeout)

    def stats(self, vm=VM):
        return vt.vm_stats(self.c, vm)

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
        disk = self.disks[VOL]
        # the engine's own source path; the host puts the volume's path there
        placeholder = "/rhev/data-center/%s/%s/images/%s/%s" % (POOL, SD, IMG, VOL)
        p = {"vmID": VM, "vmParams": {"vmId": VM, "xml": tiny_xml(VM, placeholder)}}
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

    def rfb_security_types(self, port):
        """The security types QEMU's VNC server offers (RFB 3.8)."""
        with socket.create_connection(("127.0.0.1", port), timeout=5) as so:
            so.recv(12)
            so.sendall(b"RFB 003.008\n")
            n = so.recv(1)[0]
            return list(so.recv(n))

    def call(self, method, params):
        return result(self.c.call(method, dict(params, vmID=VM), timeout=30))

    def test_2_devices(self):
        s0 = self.stats()
        if not s0:
            self.skipTest("needs the VM of test_1")
        h0 = s0["hash"]
        # hotplugDisk: the engine's XML, a volume named in the metadata
        img2, vol2 = IMG2, VOL2
        path2 = self.disks[VOL2]
        plug = ('<?xml version="1.0" encoding="UTF-8"?><hotplug><devices>'
                '<disk type="file" device="disk"><source file="%s"/>'
                '<target dev="sdb" bus="scsi"/><driver name="qemu" type="raw"/>'
                '<alias name="ua-%s"/><serial>%s</serial></disk></devices>'
                '<metadata xmlns:ovirt-vm="http://ovirt.org/vm/1.0"><ovirt-vm:vm>'
                '<ovirt-vm:device devtype="disk" name="sdb"><ovirt-vm:domainID>%s'
                '</ovirt-vm:domainID><ovirt-vm:imageID>%s</ovirt-vm:imageID>'
                '<ovirt-vm:volumeID>%s</ovirt-vm:volumeID></ovirt-vm:device>'
                '</ovirt-vm:vm></metadata></hotplug>' % (path2, img2, img2, SD, img2, vol2))
        r = self.call("VM.hotplugDisk", {"params": {"vmId": VM, "xml": plug}})
        self.assertEqual(r["vmId"], VM)
        self.assertIn(path2, self.xml())
        s = self.wait_stats(lambda s: "sdb" in s.get("disks", {}))
        self.assertEqual(s["disks"]["sdb"]["imageID"], img2)
        # its metadata joins the domain's (it survives a restart as VM.create's)
        x = self.xml()
        self.assertIn("</metadata>", x, x)
        md = x[x.index("<metadata"):x.index("</metadata>")]
        self.assertIn(vol2 + "</ovirt-vm:volumeID>", md)
        self.assertIn(VOL + "</ovirt-vm:volumeID>", md)
        self.assertNotEqual(s["hash"], h0)
        h1 = s["hash"]
        unplug = ('<?xml version="1.0" encoding="UTF-8"?><hotunplug><devices><disk>'
                  '<alias name="ua-%s"/></disk></devices></hotunplug>' % img2)
        self.call("VM.hotunplugDisk", {"params": {"vmId": VM, "xml": unplug}})
        deadline = time.monotonic() + 10
        while path2 in self.xml() and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertNotIn(path2, self.xml())
        self.assertNotIn(vol2, self.xml())           # and its metadata went with it
        self.assertIn(VOL + "</ovirt-vm:volumeID>", self.xml())
        s = self.wait_stats(lambda s: "sdb" not in s.get("disks", {}) and s["hash"] != h1)
        self.assertNotIn("sdb", s["disks"])
        self.assertNotEqual(s["hash"], h1)

        # hotplugNic (user networking: no bridge to map here); unplug of a
        # PCI NIC completes only when a guest OS releases it: requested only
        nic = ('<hotplug><devices><interface type="user"><mac address="52:54:00:aa:00:02"/>'
               '<model type="virtio"/><alias name="ua-nic1"/></interface></devices></hotplug>')
        # VDSM's answer (vm.py hotplugNic): the NIC's MAC and alias, and the
        # live XML; the engine casts devices to an array and takes the alias
        plugged = self.call("VM.hotplugNic", {"params": {"vmId": VM, "xml": nic}})
        self.assertEqual(plugged["devices"], [{"macAddr": "52:54:00:aa:00:02", "alias": "ua-nic1"}])
        self.assertIn("52:54:00:aa:00:02", plugged["xml"])
        self.assertIn("52:54:00:aa:00:02", self.xml())
        self.call("VM.hotunplugNic", {"params": {"vmId": VM, "xml":
              '<hotunplug><devices><interface><alias name="ua-nic1"/></interface></devices></hotunplug>'}})

        # updateDevice: the link of a NIC goes down
        self.call("VM.updateDevice", {"params": {"deviceType": "interface", "alias": "ua-nic0",
                                                 "linkActive": False}})
        x = self.xml()
        n0 = x[x.index("52:54:00:aa:00:01"):]
        self.assertIn("<link state='down'/>", n0[:n0.index("</interface>")])
        # and up again in the engine's form (UpdateVmInterfaceVDSCommand): the
        # NIC's hotplug XML, found by its alias (VDSM vm.py updateDevice)
        self.call("VM.updateDevice", {"params": {"deviceType": "interface", "xml": (
            '<?xml version="1.0" encoding="UTF-8"?><hotplug><devices><interface type="user">'
            '<model type="virtio"/><link state="up"/><mac address="52:54:00:aa:00:01"/>'
            '<alias name="ua-nic0"/></interface></devices></hotplug>')}})
        x = self.xml()
        n0 = x[x.index("52:54:00:aa:00:01"):]
        self.assertNotIn("<link state='down'/>", n0[:n0.index("</interface>")])
        # a NIC the VM has not: VDSM's UpdateDeviceFailed 56
        self.assertEqual(error_code(self.c.call("VM.updateDevice", {"vmID": VM, "params": {
            "deviceType": "interface", "xml": '<hotplug><devices><interface type="user">'
            '<mac address="52:54:00:aa:00:09"/><alias name="ua-nic9"/></interface>'
            '</devices></hotplug>'}})), 56)

        # setTicket: the engine's console (a password that expired in 1970)
        # gets a password valid for ttl; QEMU's VNC asks for it
        port = int(self.stats()["displayInfo"][0]["port"])
        self.assertIs(self.call("VM.setTicket", {"password": "s3cret", "ttl": 120,
                                                 "existingConnAction": "disconnect"}), True)
        self.assertEqual(self.rfb_security_types(port), [2])       # VNC authentication
        secure = self.lv.virsh("dumpxml", "--security-info", "qvm1").stdout
        self.assertIn("passwd='s3cret'", secure)
        x = self.xml()
        m = re.search(r"passwdValidTo='([0-9T:-]+)'", x)
        self.assertIsNotNone(m, x)
        until = time.mktime(time.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S")) - time.timezone
        self.assertAlmostEqual(until, time.time() + 120, delta=10)
        self.assertNotIn("s3cret", x)
        # a console type this VM has not (VDSM's UpdateDeviceFailed)
        self.assertEqual(error_code(self.c.call("VM.updateDevice", {"vmID": VM, "params": {
            "deviceType": "graphics", "graphicsType": "spice", "password": "x", "ttl": 5}})), 56)

        # balloon target, vCPUs, I/O limits, CD
        # VDSM answers both with the call's status (Bridge.py 'ret': 'status')
        done = {"code": 0, "message": "Done"}
        self.assertEqual(self.call("VM.setBalloonTarget", {"target": 49152}), done)
        s = self.wait_stats(lambda s: s["balloonInfo"]["balloon_target"] == "49152")
        self.assertEqual(s["balloonInfo"]["balloon_target"], "49152")
        self.call("VM.setNumberOfCpus", {"numberOfCpus": 2})
        s = self.wait_stats(lambda s: s["vcpuCount"] == "2")
        self.assertEqual(s["vcpuCount"], "2")
        self.assertEqual(self.call("VM.setIoTune", {"tunables": [
            {"name": "vda", "ioTune": {"total_bytes_sec": 1048576, "write_iops_sec": 100}}]}), done)
        tune = self.call("VM.getIoTune", {})
        vda = [t for t in tune if t["name"] == "vda"][0]
        self.assertEqual(vda["ioTune"]["total_bytes_sec"], 1048576)
        self.assertEqual(vda["ioTune"]["write_iops_sec"], 100)
        self.assertIn("<total_bytes_sec>1048576</total_bytes_sec>", self.xml())
        iso = self.lv.image("cd.iso", 64 * 1024)
        self.call("VM.changeCD", {"driveSpec": {"path": iso}})
        self.assertIn(iso, self.xml())
        self.call("VM.changeCD", {"driveSpec": {"path": ""}})
        self.assertNotIn(iso, self.xml())
        self.assertEqual(error_code(self.c.call("VM.changeCD", {"vmID": VM,
                                                                "driveSpec": {"path": "rel"}})),
                         -32602)
        # a floppy drive this VM has not: ChangeDiskFailed
        self.assertEqual(error_code(self.c.call("VM.changeFloppy", {"vmID": VM,
                                                                    "driveSpec": iso})), 41)
        # the status events of the device changes: none (the VM stays Up)
        self.assertEqual(self.stats()["status"], "Up")

    def test_3_force_shutdown(self):
        if not self.stats():
            self.skipTest("needs the VM of test_1")
        self.assertEqual(self.events(1, timeout=0.3), [])
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
