"""VM verbs over STOMP against a running vdsmd on libvirt's test driver
(examples/fleet.xml): the fleet as libvirt describes it, VDSM's field names
and types, pause -> cont -> shutdown -> destroy with the VM_status events a
second (subscriber) connection sees, in order and with increasing
notify_time, VM.create and its duplicate (code 4), bad vmID strings."""

import json
import os
import time
import unittest
import xml.etree.ElementTree as ET

import vdsmtest as vt

FLEET = os.path.join(vt.REPO, "examples", "fleet.xml")
FLEET_URI = "test://" + FLEET
TEST_NS = "{http://libvirt.org/schemas/domain/test/1.0}"
STATE_STATUS = {"1": "Up", "3": "Paused", "5": "Down"}
NEW_VM = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
NO_VM = "00000000-0000-4000-8000-00000000dead"


def fleet_domains():
    """{uuid: (name, memory KiB, vcpus, status)} from the fleet file."""
    out = {}
    for dom in ET.parse(FLEET).getroot().findall("domain"):
        mem = dom.find("memory")
        kib = int(mem.text) * (1024 if mem.get("unit") == "MiB" else 1)
        rs = dom.find(TEST_NS + "runstate")
        out[dom.find("uuid").text] = (dom.find("name").text, kib,
                                      int(dom.find("vcpu").text),
                                      STATE_STATUS[rs.text if rs is not None else "1"])
    return out


def requester(d):
    c = d.stomp()
    c.connect()
    c.subscribe(vt.RESPONSES, "r", receipt="r1")
    # the agent answers 99 until its first samples exist
    deadline = time.monotonic() + vt.TIMEOUT
    while True:
        r = c.call("Host.getVMList")
        if "result" in r or time.monotonic() > deadline:
            return c
        time.sleep(0.05)


result, error_code = vt.result, vt.error_code


class Events:
    """A second connection subscribed to jms.queue.events."""

    def __init__(self, d):
        self.c = d.stomp()
        self.c.connect()
        self.c.subscribe(vt.EVENTS, "ev", receipt="e1")

    def collect(self, n, timeout=vt.TIMEOUT):
        got = []
        deadline = time.monotonic() + timeout
        while len(got) < n and time.monotonic() < deadline:
            try:
                f = self.c.read_frame(max(0.05, deadline - time.monotonic()))
            except Exception:
                break
            if f.cmd == "MESSAGE":
                got.append(f.json())
        return got


class FleetReads(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = vt.Daemon(libvirt_uri=FLEET_URI)
        cls.c = requester(cls.d)
        cls.fleet = fleet_domains()

    @classmethod
    def tearDownClass(cls):
        cls.c.close()
        cls.d.stop()

    def test_vm_list_is_the_fleet(self):
        vms = result(self.c.call("Host.getVMList"))
        self.assertEqual(len(vms), len(self.fleet))
        for vm in vms:
            self.assertEqual(set(vm), {"vmId", "status", "statusTime"})
            self.assertEqual(vm["status"], self.fleet[vm["vmId"]][3])
            self.assertTrue(vm["statusTime"].isdigit())
        stats = result(self.c.call("Host.getStats"))
        self.assertEqual(int(stats["vmCount"]), 20)
        # VDSM's count: the Up VMs only (16 running; 2 paused, 2 shut off)
        ups = sum(1 for vm in vms if vm["status"] == "Up")
        self.assertEqual(ups, 16)
        self.assertEqual(int(stats["vmActive"]), ups)
        for k in ("vmMigrating", "incomingVmMigrations", "outgoingVmMigrations"):
            self.assertEqual(int(stats[k]), 0)

    def test_all_vm_stats_fields(self):
        vms = result(self.c.call("Host.getAllVmStats"))
        self.assertEqual(len(vms), 20)
        for vm in vms:
            name, kib, vcpus, status = self.fleet[vm["vmId"]]
            self.assertEqual(vm["vmName"], name)
            self.assertEqual(vm["status"], status)
            if status == "Down":
                self.assertIsInstance(vm["exitCode"], int)
                self.assertIsInstance(vm["exitReason"], int)
                self.assertIsInstance(vm["exitMessage"], str)
                continue
            for k in ("statusTime", "elapsedTime", "pid", "vcpuCount", "cpuUser", "cpuSys",
                      "cpuUsage", "memUsage", "hash", "guestIPs"):
                self.assertIsInstance(vm[k], str, k)
            self.assertEqual(vm["vcpuCount"], str(vcpus))
            self.assertEqual(vm["balloonInfo"]["balloon_max"], str(kib))
            self.assertGreaterEqual(float(vm["cpuUser"]), 0.0)
            self.assertTrue(vm["disks"])
            for dev, disk in vm["disks"].items():
                for k in ("readRate", "writeRate", "readBytes", "writtenBytes", "readOps",
                          "writeOps", "readLatency", "writeLatency", "flushLatency",
                          "apparentsize", "truesize", "imageID"):
                    self.assertIsInstance(disk[k], str, (dev, k))
            self.assertTrue(vm["network"])
            for nic in vm["network"].values():
                for k in ("name", "rxRate", "txRate", "rxErrors", "txErrors", "rxDropped",
                          "txDropped", "macAddr", "state", "speed"):
                    self.assertIsInstance(nic[k], str, k)
            self.assertIsInstance(vm["displayInfo"], list)
        # the cached answer is the same bytes until the next sample
        again = result(self.c.call("Host.getAllVmStats"))
        self.assertEqual(json.dumps(again, sort_keys=True), json.dumps(vms, sort_keys=True))

    def test_get_stats_and_bad_ids(self):
        some = next(iter(self.fleet))
        r = result(self.c.call("VM.getStats", {"vmID": some}))
        self.assertEqual(len(r), 1)
        self.assertEqual(r[0]["vmId"], some)
        r = result(self.c.call("VM.getStats", [some]))      # positional
        self.assertEqual(r[0]["vmId"], some)
        self.assertEqual(error_code(self.c.call("VM.getStats", {"vmID": NO_VM})), 1)
        self.assertEqual(error_code(self.c.call("VM.getStats", {"vmID": "not-a-uuid"})), -32602)
        self.assertEqual(error_code(self.c.call("VM.getStats", {"vmID": "a" * 10240})), -32602)
        self.assertEqual(error_code(self.c.call("VM.destroy", {"vmID": "x" * 10240})), -32602)
        self.assertEqual(error_code(self.c.call("VM.getStats", {})), -32602)
        self.assertIs(result(self.c.call("Host.ping2")), True)

    def test_full_list(self):
        vms = result(self.c.call("Host.getVMFullList"))
        self.assertEqual(len(vms), 20)
        for vm in vms:
            name, kib, vcpus, status = self.fleet[vm["vmId"]]
            self.assertEqual(vm["vmName"], name)
            self.assertEqual(vm["memSize"], kib // 1024)
            self.assertEqual(vm["smp"], str(vcpus))
            # the keys VDSM's getVMList(fullStatus) sends, vm.status(): vmId,
            # status, statusTime (a string of digits, as vm.py's
            # _get_status_time); the schema's other VmDefinition keys are
            # not VDSM's (apischema.VDSM_SENDS)
            self.assertEqual(vm["status"], status)
            self.assertRegex(vm["statusTime"], r"^[0-9]+$")


class Lifecycle(unittest.TestCase):
    def setUp(self):
        self.d = vt.Daemon(libvirt_uri=FLEET_URI)
        self.c = requester(self.d)
        self.ev = Events(self.d)

    def tearDown(self):
        self.ev.c.close()
        self.c.close()
        self.d.stop()

    def status(self, vm):
        return result(self.c.call("VM.getStats", {"vmID": vm}))[0]["status"]

    def test_pause_cont_shutdown_destroy_events(self):
        vm = "6d5f0001-0001-4001-8007-000000000001"
        self.assertEqual(self.status(vm), "Up")
        # a map as VDSM answers ({"vmList": {}}): the engine casts it to one
        self.assertEqual(result(self.c.call("VM.pause", {"vmID": vm})), {"vmList": {}})
        self.assertEqual(self.status(vm), "Paused")
        self.assertEqual(result(self.c.call("VM.cont", {"vmID": vm})), {"vmList": {}})
        self.assertEqual(self.status(vm), "Up")
        self.assertIs(result(self.c.call("VM.shutdown", {"vmID": vm, "delay": "0",
                                                         "message": "bye"})), True)
        down = result(self.c.call("VM.getStats", {"vmID": vm}))[0]
        self.assertEqual(down["status"], "Down")
        self.assertEqual(down["exitCode"], 0)
        self.assertEqual(down["exitReason"], 6)
        self.assertIs(result(self.c.call("VM.destroy", {"vmID": vm})), True)
        self.assertEqual(error_code(self.c.call("VM.getStats", {"vmID": vm})), 1)
        ids = [v["vmId"] for v in result(self.c.call("Host.getVMList"))]
        self.assertNotIn(vm, ids)

        events = self.ev.collect(4)
        self.assertEqual(len(events), 4, events)
        self.assertEqual([e["method"] for e in events], ["|virt|VM_status|" + vm] * 4)
        self.assertEqual([e["params"][vm]["status"] for e in events],
                         ["Paused", "Up", "Powering down", "Down"])
        times = [e["params"]["notify_time"] for e in events]
        self.assertTrue(all(isinstance(t, int) and t > 2**31 - 1 for t in times))
        self.assertEqual(times, sorted(times))
        self.assertEqual(len(set(times)), 4, times)
        self.assertEqual(events[3]["params"][vm]["exitReason"], 6)
        for e in events:
            self.assertNotIn("id", e)
        self.assertEqual(self.ev.collect(1, timeout=0.3), [])

    def test_create_and_duplicate(self):
        params = {"vmID": NEW_VM, "vmParams": {
            "vmId": NEW_VM, "vmName": "itest-vm", "memSize": 256, "smp": "2",
            "devices": [{"type": "disk", "path": "/var/tmp/itest.img", "imageID": "1a2b3c4d-0000-4000-8000-00000000abcd"},
                        {"type": "interface", "macAddr": "52:54:00:01:02:03"}]}}
        r = result(self.c.call("VM.create", params))
        self.assertEqual(r["vmId"], NEW_VM)
        self.assertEqual((r["memSize"], r["smp"]), (256, "2"))
        stats = result(self.c.call("VM.getStats", {"vmID": NEW_VM}))[0]
        self.assertEqual(stats["status"], "Up")
        self.assertEqual(stats["vmName"], "itest-vm")
        self.assertEqual(stats["disks"]["vda"]["imageID"], "1a2b3c4d-0000-4000-8000-00000000abcd")
        self.assertEqual(error_code(self.c.call("VM.create", params)), 4)
        fleet_vm = next(iter(fleet_domains()))
        dup = {"vmID": fleet_vm, "vmParams": {"vmName": "again"}}
        self.assertEqual(error_code(self.c.call("VM.create", dup)), 4)
        self.assertEqual(error_code(self.c.call("VM.create", {"vmID": NO_VM,
                                                              "vmParams": {}})), -32602)
        # vmParams' numbers are read as an int-or-numstring param is, and
        # refused the same way (the layer's message, naming the member)
        for member, value, why in [
                ("memSize", "lots", "string 'lots': not a string of decimal digits within int64"),
                ("memSize", 0, "int 0: not within 1..16777216"),
                ("smp", "4097", "string '4097': not within 1..4096"),
                ("smp", 1.5, "double 1.5"),
                ("smp", False, "bool false")]:
            err = self.c.call("VM.create", {"vmID": NO_VM, "vmParams": {
                "vmName": "bad", member: value}})["error"]
            self.assertEqual(err, {"code": -32602, "message":
                                   "Invalid params: param 'vmParams.%s' of VM.create must be "
                                   "int-or-string, got %s" % (member, why)})
        # VDSM's launch sequence, in the engine's order
        events = self.ev.collect(3)
        self.assertEqual([e["params"][NEW_VM]["status"] for e in events],
                         ["WaitForLaunch", "Powering up", "Up"])
        self.assertIs(result(self.c.call("VM.destroy", {"vmID": NEW_VM})), True)
        events = self.ev.collect(1)
        self.assertEqual(events[0]["params"][NEW_VM]["status"], "Down")
        self.assertEqual(error_code(self.c.call("VM.getStats", {"vmID": NEW_VM})), 1)

    def test_errors_keep_state(self):
        up = "6d5f0003-0003-4003-8015-000000000003"
        off = "6d5f0006-0006-4006-802a-000000000006"
        for verb in ("VM.pause", "VM.cont", "VM.shutdown", "VM.destroy"):
            self.assertEqual(error_code(self.c.call(verb, {"vmID": NO_VM})), 1, verb)
            self.assertEqual(error_code(self.c.call(verb, {"vmID": "nope"})), -32602, verb)
        self.assertEqual(error_code(self.c.call("VM.cont", {"vmID": up})), 100)
        self.assertEqual(error_code(self.c.call("VM.pause", {"vmID": off})), 100)
        self.assertEqual(self.status(up), "Up")
        self.assertEqual(self.status(off), "Down")
        self.assertEqual(self.ev.collect(1, timeout=0.3), [])


class Unreachable(unittest.TestCase):
    def test_agent_serves_without_libvirt(self):
        """libvirt unreachable: the agent is ready for everything else, VM
        verbs answer 99, and it keeps retrying (logged)."""
        with vt.Daemon(libvirt_uri="test:///nonexistent/vdsmd-no-fleet.xml") as d:
            self.assertTrue(d.wait_log(r"ready:"))
            c = d.stomp()
            c.connect()
            c.subscribe(vt.RESPONSES, "r", receipt="r1")
            self.assertIs(result(c.call("Host.ping2")), True)
            self.assertEqual(error_code(c.call("Host.getAllVmStats")), 99)
            self.assertEqual(error_code(c.call("VM.getStats", {"vmID": NO_VM})), 99)
            self.assertEqual(error_code(c.call("VM.destroy", {"vmID": NO_VM})), 99)
            self.assertEqual(int(result(c.call("Host.getStats"))["vmCount"]), 0)
            self.assertTrue(d.wait_log(r"virt: cannot connect to libvirt.*retry in 2 s"))
            c.close()


if __name__ == "__main__":
    unittest.main()
