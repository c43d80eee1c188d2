"""The oVirt engine's VM flow (shared/engine/engine-flows.json, flow "vm",
steps 43-47, and the VM_status events it reads) against the real vdsmd on
libvirt's test driver: a volume created through the storage verbs, VM.create
with the engine's domain XML whose disk is that volume, Up through the
events in the engine's order, the stats the engine reads in its types,
Host.dumpxmls, VM.shutdown with delay -> Powering down -> Down (admin
shutdown) -> VM.destroy -> gone from Host.getVMList; duplicate id -> 4;
unknown network -> 9; unknown volume file -> 13."""

import json
import os
import time
import unittest

import vdsmtest as vt

VM = "a7b8c9d0-e1f2-4a3b-8c4d-5e6f7a8b9c0d"
POOL = "5849b030-626e-47cb-ad90-3ce782d831b3"
SD = "4b0a2c3d-2c2e-4b8a-9b1f-2a1f6b9d7c11"
IMG = "c1a2b3c4-d5e6-4f70-8a91-b2c3d4e5f607"
VOL = "d2b3c4d5-e6f7-4081-9a2b-c3d4e5f60718"
BLANK = "00000000-0000-0000-0000-000000000000"
INT_MAX = 2**31 - 1


def engine_xml(vm, src, nic_network=None, vol=None):
    """The engine's domain XML for a one-disk VM (LibvirtVmXmlBuilder form)."""
    nic = nicmd = ""
    if nic_network:
        nic = ('<interface type="bridge"><model type="virtio"/><link state="up"/>'
               '<source bridge="%s"/><mac address="00:1a:4a:16:01:51"/>'
               '<alias name="ua-1"/></interface>' % nic_network)
        nicmd = ('<ovirt-vm:device mac_address="00:1a:4a:16:01:51"><ovirt-vm:network>%s'
                 '</ovirt-vm:network></ovirt-vm:device>' % nic_network)
    return (
        '<?xml version="1.0" encoding="UTF-8"?><domain type="kvm" '
        'xmlns:ovirt-tune="http://ovirt.org/vm/tune/1.0" '
        'xmlns:ovirt-vm="http://ovirt.org/vm/1.0"><name>vm1</name><uuid>%s</uuid>'
        '<memory>1048576</memory><currentMemory>1048576</currentMemory>'
        '<vcpu current="1">16</vcpu><os><type arch="x86_64">hvm</type></os>'
        '<devices><disk type="file" device="disk" snapshot="no">'
        '<target dev="vda" bus="virtio"/><source file="%s"/>'
        '<driver name="qemu" io="threads" type="raw" error_policy="stop" cache="none"/>'
        '<alias name="ua-%s"/><serial>%s</serial></disk>%s</devices>'
        '<metadata><ovirt-tune:qos/><ovirt-vm:vm><ovirt-vm:clusterVersion>4.8'
        '</ovirt-vm:clusterVersion><ovirt-vm:device devtype="disk" name="vda">'
        '<ovirt-vm:poolID>%s</ovirt-vm:poolID><ovirt-vm:volumeID>%s</ovirt-vm:volumeID>'
        '<ovirt-vm:imageID>%s</ovirt-vm:imageID><ovirt-vm:domainID>%s</ovirt-vm:domainID>'
        '</ovirt-vm:device>%s</ovirt-vm:vm></metadata></domain>'
        % (vm, src, IMG, IMG, nic, POOL, vol or VOL, IMG, SD, nicmd))


result, error_code = vt.result, vt.error_code


def is_float_string(v):
    """The engine's Float reading: a string holding a number, or a JSON
    float; a JSON int reads as null."""
    if isinstance(v, float):
        return True
    if not isinstance(v, str):
        return False
    try:
        float(v)
        return True
    except ValueError:
        return False


class EngineVmFlow(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = vt.Daemon()
        cls.c, cls.ev = vt.vm_connections(cls.d)
        # the engine's storage flow, short: a domain and a 1 MiB raw volume
        assert result(vt.call_ready(cls.c, "StorageDomain.create",
                                    [SD, 4, "", "dom", 1])) is True
        vt.wait_task(cls.c, result(cls.c.call("Volume.create",
                                              [VOL, BLANK, SD, IMG, str(1 << 20), 5, 2])))
        cls.volpath = vt.volume_path(cls.d, SD, IMG, VOL)
        assert os.path.exists(cls.volpath), cls.volpath
        # the domain joins the data center the engine's XML names (poolID):
        # VM.create resolves the disk through storage, which checks that
        assert result(cls.c.call("StoragePool.create",
                                 [POOL, "Default", SD, 1, [SD], 5, 60, 10, 3])) is True

    @classmethod
    def tearDownClass(cls):
        cls.c.close()
        cls.ev.close()
        cls.d.__exit__(None, None, None)

    def events(self, n, timeout=vt.TIMEOUT):
        """The next n VM_status events of VM (others skipped)."""
        got = []
        deadline = time.monotonic() + timeout
        while len(got) < n and time.monotonic() < deadline:
            try:
                f = self.ev.read_frame(max(0.05, deadline - time.monotonic()))
            except Exception:
                break
            if f.cmd != "MESSAGE":
                continue
            m = f.json()
            if m.get("method") == "|virt|VM_status|" + VM:
                got.append(m)
        return got

    def vm_stats(self):
        return vt.vm_stats(self.c, VM)

    def test_engine_vm_flow(self):
        c = self.c
        # the engine's source path is its own (/rhev/data-center/...); the host
        # replaces it with the path of the volume the metadata names
        placeholder = "/rhev/data-center/%s/%s/images/%s/%s" % (POOL, SD, IMG, VOL)
        create = {"vmID": VM, "vmParams": {"vmId": VM, "xml": engine_xml(VM, placeholder)}}
        t0 = time.monotonic()
        r = result(c.call("VM.create", create))
        latency_ms = (time.monotonic() - t0) * 1000
        self.assertIsInstance(r, dict)
        self.assertEqual(r["vmId"], VM)
        self.assertEqual(r["status"], "WaitForLaunch")
        self.assertGreater(int(r["statusTime"]), INT_MAX)
        print("VM.create (test driver, engine XML) round trip: %.1f ms" % latency_ms)

        # Up through the events the engine reads, in its order
        evs = self.events(3)
        self.assertEqual([e["params"][VM]["status"] for e in evs],
                         ["WaitForLaunch", "Powering up", "Up"])
        times = [e["params"]["notify_time"] for e in evs]
        self.assertTrue(all(isinstance(t, int) and t > INT_MAX for t in times), times)
        self.assertEqual(times, sorted(set(times)))
        for e in evs:
            self.assertEqual(set(e["params"]), {VM, "notify_time"})
            st = e["params"][VM]["statusTime"]
            self.assertTrue(isinstance(st, str) and int(st) > INT_MAX, st)

        # duplicate id
        self.assertEqual(error_code(c.call("VM.create", create)), 4)

        # the stats the engine reads, in its types
        s = self.vm_stats()
        self.assertEqual(s["status"], "Up")
        self.assertIsInstance(s["hash"], str)
        self.assertTrue(isinstance(s["statusTime"], str) and int(s["statusTime"]) > INT_MAX)
        for k in ("elapsedTime", "cpuUser", "cpuSys"):
            self.assertTrue(is_float_string(s[k]), (k, s[k]))
        for k in ("username", "guestFQDN", "session", "acpiEnable", "clientIp", "timeOffset"):
            self.assertIsInstance(s[k], str, k)
        self.assertIsInstance(s["cpuActual"], bool)
        self.assertIsInstance(s["guestCPUCount"], int)
        self.assertEqual(s["disks"]["vda"]["imageID"], IMG)
        self.assertEqual(s["vmName"], "vm1")

        # Host.dumpxmls: the live XML, disk on the volume, metadata kept
        x = result(c.call("Host.dumpxmls", {"vmList": [VM]}))
        self.assertEqual(list(x), [VM])
        self.assertIn(self.volpath, x[VM])
        self.assertIn(VOL + "</ovirt-vm:volumeID>", x[VM])
        self.assertIn("ua-" + IMG, x[VM])
        info = result(c.call("VM.getInfo", {"vmID": VM}))
        self.assertEqual(info["vmId"], VM)

        # graceful shutdown with the engine's params -> Powering down -> Down
        self.assertIs(result(c.call("VM.shutdown", {
            "vmID": VM, "delay": "30",
            "message": "System Administrator has initiated shutdown of this Virtual Machine."})),
            True)
        evs = self.events(2)
        self.assertEqual([e["params"][VM]["status"] for e in evs], ["Powering down", "Down"])
        down = evs[1]["params"][VM]
        self.assertEqual(down["exitCode"], 0)
        self.assertEqual(down["exitReason"], 6)
        self.assertIsInstance(down["exitMessage"], str)
        s = self.vm_stats()
        self.assertEqual(s["status"], "Down")
        self.assertEqual((s["exitCode"], s["exitReason"]), (0, 6))
        self.assertEqual(error_code(c.call("VM.create", create)), 4)   # Down, not destroyed

        # the engine destroys a Down VM; it is gone then
        self.assertIs(result(c.call("VM.destroy", {"vmID": VM})), True)
        self.assertNotIn(VM, [v["vmId"] for v in result(c.call("Host.getVMList"))])
        self.assertIsNone(self.vm_stats())
        self.assertEqual(error_code(c.call("VM.destroy", {"vmID": VM})), 1)

    def test_errors(self):
        c = self.c
        other = "b7b8c9d0-e1f2-4a3b-8c4d-5e6f7a8b9c0d"
        cases = [
            (engine_xml(other, self.volpath, "nosuchnet0"), 9),       # unknown network
            # the metadata names a volume storage does not have (the source
            # path in the XML is only the engine's placeholder)
            (engine_xml(other, "/nonexistent/" + VOL,
                        vol="0e0e0e0e-0000-4000-8000-000000000013"), 13),
            (engine_xml(VM, self.volpath), -32602),                    # uuid is not vmID
            ("<domain><name>x</name></domain>", -32602),
        ]
        for xml, code in cases:
            r = c.call("VM.create", {"vmID": other, "vmParams": {"vmId": other, "xml": xml}})
            self.assertEqual(error_code(r), code, xml[-80:])
        self.assertEqual(error_code(c.call("Host.dumpxmls", {"vmList": [other]})), 1)
        self.assertEqual(error_code(c.call("VM.getExternalData",
                                           {"vmID": other, "kind": "tpm"})), 1)
        self.assertNotIn(other, json.dumps(result(c.call("Host.getVMList"))))


if __name__ == "__main__":
    unittest.main()
