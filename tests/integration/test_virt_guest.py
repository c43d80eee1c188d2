"""The engine's guest and block verbs of one VM, through the real vdsmd:
VM.freeze / VM.thaw and VM.screenshot on libvirt's test driver (success
path: its fake agent freezes, its screen is a PNG) and on real QEMU (TCG)
under a private libvirtd (privlibvirt.py), where a VM has no guest agent
running: VDSM's errors (19 with the agent channel but no agent, 76 without
a channel), and the screenshot is QEMU's picture of the VGA screen (PNG or
PPM, decoded).  VM.diskSizeExtend on a running VM's qcow2 and raw volumes
made through the storage verbs: the guest's disk grows (libvirt's
blockinfo) and the volume's capacity agrees.  VM.updateVmPolicy /
VM.getIoTunePolicy: the ioTune policy applied to the live disk and kept in
the metadata; vcpuLimit's CPU quota needs a privileged libvirtd (skipped
with the reason under the unprivileged private one; the formula is
tests/unit/test_virt_policy.c).  The QEMU
part is skipped, with the reason, where the private libvirtd or QEMU cannot
start."""

import base64
import re
import struct
import time
import unittest
import zlib

import privlibvirt
import vdsmtest as vt

TEST_VM = "6695eb01-f6a4-8304-79aa-97f2502e193f"   # test:///default's "test"
NO_VM = "00000000-0000-4000-8000-00000000dead"
VM_A = "5e1f0000-1111-4222-8333-4444555566a1"      # agent channel, a disk
VM_B = "5e1f0000-1111-4222-8333-4444555566b2"      # no channel
VM_C = "5e1f0000-1111-4222-8333-4444555566c3"      # a qcow2 and a raw disk
BLANK = "00000000-0000-0000-0000-000000000000"
SD = "4b0a2c3d-2c2e-4b8a-9b1f-2a1f6b9d7c21"
IMG_COW = "c1a2b3c4-d5e6-4f70-8a91-b2c3d4e5f621"
VOL_COW = "d2b3c4d5-e6f7-4081-9a2b-c3d4e5f60721"
IMG_RAW = "c1a2b3c4-d5e6-4f70-8a91-b2c3d4e5f622"
VOL_RAW = "d2b3c4d5-e6f7-4081-9a2b-c3d4e5f60722"
MIB = 1 << 20


result, error_code = vt.result, vt.error_code


def png_size(data):
    """(width, height) of a PNG whose every chunk's CRC holds and whose
    image data inflates to exactly its rows (8-bit samples)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", data[:16]
    pos, ihdr, idat = 8, None, b""
    while True:
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        crc, = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])
        assert zlib.crc32(kind + body) == crc, kind
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
        if kind == b"IEND":
            break
    w, h, depth, color = ihdr[:4]
    assert depth == 8, depth
    channels = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[color]
    assert len(zlib.decompress(idat)) == h * (1 + w * channels), (w, h, color)
    return w, h


def ppm_size(data):
    """(width, height) of a binary PPM (P6) whose pixels are all there."""
    fields, pos = [], 0
    while len(fields) < 4:
        while data[pos:pos + 1].isspace():
            pos += 1
        if data[pos:pos + 1] == b"#":
            pos = data.index(b"\n", pos) + 1
            continue
        end = pos
        while not data[end:end + 1].isspace():
            end += 1
        fields.append(data[pos:end])
        pos = end
    assert fields[0] == b"P6", fields
    w, h, maxval = int(fields[1]), int(fields[2]), int(fields[3])
    assert maxval == 255, maxval
    pixels = data[pos + 1:]
    assert len(pixels) == w * h * 3, (len(pixels), w, h)
    return w, h


def vm_xml(vm, name, agent):
    """A tiny diskless VM as the engine writes it, VNC on VGA; with agent,
    the engine's QEMU guest agent channel (nothing in the guest answers)."""
    channel = ('<channel type="unix"><target type="virtio" name="org.qemu.guest_agent.0"/>'
               '</channel>' if agent else '')
    return ('<?xml version="1.0" encoding="UTF-8"?><domain type="kvm" '
            'xmlns:ovirt-vm="http://ovirt.org/vm/1.0"><name>%s</name><uuid>%s</uuid>'
            '<memory unit="MiB">64</memory><vcpu>1</vcpu>'
            '<os><type arch="x86_64" machine="pc">hvm</type></os>'
            '<devices>%s<graphics type="vnc" port="%d" autoport="no" listen="127.0.0.1"/>'
            '<video><model type="vga"/></video><memballoon model="none"/></devices>'
            '<metadata><ovirt-vm:vm/></metadata></domain>' % (name, vm, channel, vt.free_port()))


def disks_xml(vm, name, disks):
    """A VM with the engine's disks on volumes: [(dev, format, img, vol)]; the
    host resolves each from the metadata (no pool: the domain is unattached)."""
    devs = "".join(
        '<disk type="file" device="disk"><target dev="%s" bus="virtio"/>'
        '<source file="/rhev/placeholder/%s"/><driver name="qemu" type="%s"/>'
        '<serial>%s</serial></disk>' % (dev, vol, fmt, img) for dev, fmt, img, vol in disks)
    md = "".join(
        '<ovirt-vm:device devtype="disk" name="%s"><ovirt-vm:domainID>%s</ovirt-vm:domainID>'
        '<ovirt-vm:imageID>%s</ovirt-vm:imageID><ovirt-vm:volumeID>%s</ovirt-vm:volumeID>'
        '</ovirt-vm:device>' % (dev, SD, img, vol) for dev, fmt, img, vol in disks)
    return ('<?xml version="1.0" encoding="UTF-8"?><domain type="kvm" '
            'xmlns:ovirt-vm="http://ovirt.org/vm/1.0"><name>%s</name><uuid>%s</uuid>'
            '<memory unit="MiB">64</memory><vcpu>1</vcpu>'
            '<os><type arch="x86_64" machine="pc">hvm</type></os>'
            '<devices>%s<memballoon model="none"/></devices>'
            '<metadata><ovirt-vm:vm>%s</ovirt-vm:vm></metadata></domain>' % (name, vm, devs, md))


class TestDriver(unittest.TestCase):
    """libvirt's test driver: its domain "test" has a fake agent and screen."""

    @classmethod
    def setUpClass(cls):
        cls.d = vt.Daemon()
        cls.c = cls.d.stomp()
        cls.c.connect()
        cls.c.subscribe(vt.RESPONSES, "r", receipt="r1")
        vt.call_ready(cls.c, "Host.getVMList")

    @classmethod
    def tearDownClass(cls):
        cls.c.close()
        cls.d.__exit__(None, None, None)

    def test_freeze_thaw(self):
        self.assertIs(result(self.c.call("VM.freeze", {"vmID": TEST_VM})), True)
        self.assertIs(result(self.c.call("VM.thaw", {"vmID": TEST_VM})), True)
        for verb in ("VM.freeze", "VM.thaw", "VM.screenshot"):
            self.assertEqual(error_code(self.c.call(verb, {"vmID": NO_VM})), 1, verb)
            self.assertEqual(error_code(self.c.call(verb, {"vmID": "nope"})), -32602, verb)

    def test_desktop_verbs_without_ovirt_agent(self):
        # vdsmd speaks no oVirt guest agent: VDSM's answer without one
        calls = (("VM.desktopLock", {}),
                 ("VM.desktopLogin", {"domain": "", "username": "u", "password": "pw0rd"}),
                 ("VM.desktopLogoff", {"force": True}))
        for verb, p in calls:
            r = self.c.call(verb, dict(p, vmID=TEST_VM))
            self.assertEqual(error_code(r), 19, verb)
            self.assertEqual(r["error"]["message"].split(":")[0], "Guest agent non-responsive")
            self.assertEqual(error_code(self.c.call(verb, dict(p, vmID=NO_VM))), 1, verb)
        self.assertTrue(any("no oVirt guest agent" in x for x in self.d.log_lines()))
        self.assertFalse([x for x in self.d.log_lines() if "pw0rd" in x])

    def test_seal(self):
        """VM.seal answers at once and runs a seal_vm job (VDSM's
        jobs/seal.py); a disk that cannot be prepared fails the job with
        100 (VDSM's GeneralException), not the call."""
        img = {"sd_id": NO_VM, "img_id": NO_VM, "vol_id": NO_VM}
        job = "5ea1c0de-0000-4000-8000-000000000230"
        r = self.c.call("VM.seal", {"vmID": TEST_VM, "job_id": job, "sp_id": BLANK,
                                    "images": [img]})
        self.assertIs(result(r), True, r)
        deadline = time.monotonic() + 10
        while True:
            jobs = result(self.c.call("Host.getJobs", {"job_type": "virt", "job_ids": [job]}))
            if jobs.get(job, {}).get("status") in ("done", "failed") or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        self.assertEqual((jobs[job]["status"], jobs[job]["description"], jobs[job]["job_type"]),
                         ("failed", "seal_vm", "virt"), jobs)
        self.assertEqual(jobs[job]["error"]["code"], 100)
        self.assertIn("Cannot prepare image %s/%s/%s" % (NO_VM, NO_VM, NO_VM),
                      jobs[job]["error"]["message"])
        # the same job id again: refused, the job exists
        r = self.c.call("VM.seal", {"vmID": TEST_VM, "job_id": job, "sp_id": BLANK,
                                    "images": [img]})
        self.assertEqual(error_code(r), 100, r)
        self.assertEqual(error_code(self.c.call("VM.seal", {
            "vmID": TEST_VM, "job_id": NO_VM, "sp_id": BLANK, "images": [{"sd_id": 1}]})),
            -32602)

    def test_screenshot(self):
        r = result(self.c.call("VM.screenshot", {"vmID": TEST_VM}))
        self.assertEqual(r["encoding"], "base64")
        self.assertEqual(r["mime_type"], "image/png")
        w, h = png_size(base64.b64decode(r["data"], validate=True))
        self.assertGreater(w, 0)
        self.assertGreater(h, 0)

    def test_screenshot_z_after_destroy(self):
        self.assertIs(result(self.c.call("VM.destroy", {"vmID": TEST_VM})), True)
        self.assertEqual(error_code(self.c.call("VM.screenshot", {"vmID": TEST_VM})), 1)


class Qemu(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.lv = privlibvirt.start_or_skip()
        cls.d = vt.Daemon(libvirt_uri=cls.lv.uri)
        cls.c = cls.d.stomp()
        cls.c.connect()
        cls.c.subscribe(vt.RESPONSES, "r", receipt="r1")
        vt.call_ready(cls.c, "Host.getVMList")
        cls.make_volumes()
        xmls = ((VM_A, vm_xml(VM_A, "gvm_a", True)), (VM_B, vm_xml(VM_B, "gvm_b", False)),
                (VM_C, disks_xml(VM_C, "gvm_c", [("vda", "qcow2", IMG_COW, VOL_COW),
                                                 ("vdb", "raw", IMG_RAW, VOL_RAW)])))
        for vm, xml in xmls:
            p = {"vmID": vm, "vmParams": {"vmId": vm, "xml": xml}}
            result(cls.c.call("VM.create", p, timeout=60))

    @classmethod
    def make_volumes(cls):
        """A qcow2 and a raw volume of 1 MiB through the storage verbs, opened
        up for the private QEMU (it runs as nobody)."""
        assert "result" in cls.c.call("StorageDomain.create", [SD, 4, "", "guestdom", 1])
        for img, vol, fmt in ((IMG_COW, VOL_COW, 4), (IMG_RAW, VOL_RAW, 5)):
            vt.wait_task(cls.c, result(cls.c.call("Volume.create",
                                                  [vol, BLANK, SD, img, str(MIB), fmt, 2])),
                         timeout=30)
            vt.open_for_qemu(cls.d, [vt.volume_path(cls.d, SD, img, vol)])

    @classmethod
    def tearDownClass(cls):
        if hasattr(cls, "c"):
            for vm in (VM_A, VM_B, VM_C):
                cls.c.call("VM.destroy", {"vmID": vm})
            cls.c.close()
        if hasattr(cls, "d"):
            cls.d.__exit__(None, None, None)
        cls.lv.stop()

    def call(self, verb, vm, **kw):
        return self.c.call(verb, dict(kw, vmID=vm), timeout=30)

    def test_freeze_without_agent(self):
        # the engine's channel is there, no agent answers in the guest
        r = self.call("VM.freeze", VM_A)
        self.assertEqual(error_code(r), 19, r)
        self.assertIn("agent", r["error"]["message"])
        self.assertEqual(error_code(self.call("VM.thaw", VM_A)), 19)
        # no agent channel at all: libvirt cannot ask: freezeErr / thawErr
        r = self.call("VM.freeze", VM_B)
        self.assertEqual(error_code(r), 76, r)
        self.assertIn("agent", r["error"]["message"])
        self.assertEqual(error_code(self.call("VM.thaw", VM_B)), 77)

    def test_screenshot(self):
        # QEMU's screendump of the VGA screen (SeaBIOS's text mode)
        deadline = time.monotonic() + 20
        while True:
            r = self.call("VM.screenshot", VM_B)
            if "result" in r or time.monotonic() > deadline:
                break
            time.sleep(0.2)       # the display may not exist yet at launch
        r = result(r)
        self.assertEqual(r["encoding"], "base64")
        # libvirt asks QEMU for PNG where it can (QEMU >= 7.1), else PPM
        decode = {"image/png": png_size, "image/x-portable-pixmap": ppm_size}
        self.assertIn(r["mime_type"], decode)
        w, h = decode[r["mime_type"]](base64.b64decode(r["data"], validate=True))
        self.assertGreaterEqual(w, 320)
        self.assertGreaterEqual(h, 200)

    def capacity(self, dev):
        """The disk's size as the guest sees it (libvirt's blockinfo)."""
        out = self.lv.virsh("domblkinfo", "gvm_c", dev).stdout
        return int(re.search(r"Capacity:\s+(\d+)", out).group(1))

    def vol_capacity(self, img, vol):
        info = result(self.c.call("Volume.getInfo", {
            "volumeID": vol, "storagepoolID": BLANK, "storagedomainID": SD, "imageID": img}))
        return int(info["capacity"])

    def extend(self, img, vol, size):
        spec = {"poolID": BLANK, "domainID": SD, "imageID": img, "volumeID": vol,
                "device": "disk"}
        return self.call("VM.diskSizeExtend", VM_C, driveSpecs=spec, newSize=size)

    def test_disk_size_extend_cow(self):
        self.assertEqual(self.capacity("vda"), MIB)
        # QEMU grows the qcow2 image; the volume's capacity follows
        self.assertEqual(result(self.extend(IMG_COW, VOL_COW, str(3 * MIB))), str(3 * MIB))
        self.assertEqual(self.capacity("vda"), 3 * MIB)
        self.assertEqual(self.vol_capacity(IMG_COW, VOL_COW), 3 * MIB)
        qinfo = result(self.c.call("Volume.getQemuImageInfo", {
            "volumeID": VOL_COW, "storagedomainID": SD, "imageID": IMG_COW}))
        self.assertEqual((qinfo["format"], qinfo["virtualsize"]), ("qcow2", 3 * MIB))
        # never smaller, and newSize must be a number: VDSM's resizeErr
        self.assertEqual(error_code(self.extend(IMG_COW, VOL_COW, str(2 * MIB))), 58)
        self.assertEqual(error_code(self.extend(IMG_COW, VOL_COW, "big")), 58)
        self.assertEqual(error_code(self.extend(IMG_COW, VOL_COW, "9" * 19)), 58)  # past int64
        self.assertEqual(self.capacity("vda"), 3 * MIB)
        self.assertEqual(self.vol_capacity(IMG_COW, VOL_COW), 3 * MIB)
        # a drive the VM does not have: imageErr
        self.assertEqual(error_code(self.extend(IMG_COW, VOL_RAW, str(4 * MIB))), 13)
        self.assertEqual(error_code(self.call("VM.diskSizeExtend", NO_VM, newSize="1",
                                              driveSpecs={})), 1)

    def test_disk_size_extend_raw(self):
        self.assertEqual(self.capacity("vdb"), MIB)
        # the engine grows the volume through storage, then tells the VM
        vt.wait_task(self.c, result(self.c.call("Volume.extendSize", {
            "storagepoolID": BLANK, "storagedomainID": SD, "imageID": IMG_RAW,
            "volumeID": VOL_RAW, "newSize": str(4 * MIB)})), "Volume.extendSize", timeout=30)
        self.assertEqual(self.capacity("vdb"), MIB)      # the guest does not know yet
        self.assertEqual(result(self.extend(IMG_RAW, VOL_RAW, str(4 * MIB))), str(4 * MIB))
        self.assertEqual(self.capacity("vdb"), 4 * MIB)
        self.assertEqual(self.vol_capacity(IMG_RAW, VOL_RAW), 4 * MIB)

    def vdb_iotune(self):
        x = result(self.c.call("Host.dumpxmls", {"vmList": [VM_C]}))[VM_C]
        d = x[x.rindex("<disk", 0, x.index("<target dev='vdb'")):]
        d = d[:d.index("</disk>")]
        return dict(re.findall(r"<(\w+_sec)>(\d+)</", d)), x

    def test_policy_iotune(self):
        self.assertEqual(error_code(self.call("VM.updateVmPolicy", VM_C, params={})), 11)
        ids = {"domainID": SD, "poolID": BLANK, "imageID": IMG_RAW, "volumeID": VOL_RAW}
        r = result(self.call("VM.updateVmPolicy", VM_C, params={"ioTune": [dict(
            ids, maximum={"total_bytes_sec": 2 * MIB, "write_iops_sec": 50},
            guaranteed={"total_bytes_sec": MIB})]}))
        self.assertEqual(r, {"code": 0, "message": "Done"})
        # MOM's policy: the maximum becomes the disk's live limits
        tune, x = self.vdb_iotune()
        self.assertEqual(tune, {"total_bytes_sec": str(2 * MIB), "write_iops_sec": "50"})
        self.assertIn("ovirt-tune:qos", x)
        path = vt.volume_path(self.d, SD, IMG_RAW, VOL_RAW)
        self.assertEqual(result(self.call("VM.getIoTunePolicy", VM_C)), [{
            "name": "vdb", "path": path,
            "maximum": {"total_bytes_sec": 2 * MIB, "write_iops_sec": 50},
            "guaranteed": {"total_bytes_sec": MIB}}])
        # a change by name merges into the stored policy
        result(self.call("VM.updateVmPolicy", VM_C, params={"ioTune": [
            {"name": "vdb", "maximum": {"read_iops_sec": 10}}]}))
        tune, _ = self.vdb_iotune()
        self.assertEqual(tune, {"total_bytes_sec": str(2 * MIB), "write_iops_sec": "50",
                                "read_iops_sec": "10"})
        pol = result(self.call("VM.getIoTunePolicy", VM_C))
        self.assertEqual(len(pol), 1)
        self.assertEqual(pol[0]["maximum"], {"total_bytes_sec": 2 * MIB, "read_iops_sec": 10,
                                             "write_iops_sec": 50})
        # a disk the VM does not have: updateVmPolicyErr, nothing changes
        bad = dict(ids, volumeID=VOL_COW, maximum={"total_bytes_sec": 1})
        self.assertEqual(error_code(self.call("VM.updateVmPolicy", VM_C,
                                              params={"ioTune": [bad]})), 63)
        self.assertEqual(result(self.call("VM.getIoTunePolicy", VM_C)), pol)
        self.assertEqual(result(self.call("VM.getIoTunePolicy", VM_A)), [])
        self.assertEqual(error_code(self.call("VM.getIoTunePolicy", NO_VM)), 1)

    def test_policy_vcpu_limit(self):
        r = self.call("VM.updateVmPolicy", VM_C, params={"vcpuLimit": 50})
        if "error" in r and "session mode" in r["error"]["message"]:
            # the private libvirtd runs unprivileged: no cgroups to tune
            self.assertEqual(error_code(r), 63)
            self.assertNotIn("vcpuLimit", result(self.c.call(
                "Host.dumpxmls", {"vmList": [VM_C]}))[VM_C])
            self.skipTest("CPU tuning needs a privileged libvirtd: " + r["error"]["message"])
        self.assertEqual(result(r), {"code": 0, "message": "Done"})
        cpus = int(re.search(r"CPU\(s\):\s+(\d+)", self.lv.virsh("nodeinfo").stdout).group(1))
        out = self.lv.virsh("schedinfo", "gvm_c", "--live").stdout
        self.assertIn("vcpu_period    : 100000", out)
        self.assertIn("vcpu_quota     : %d" % (50000 * cpus), out)
        self.assertIn("<vcpuLimit>50</vcpuLimit>", result(self.c.call(
            "Host.dumpxmls", {"vmList": [VM_C]}))[VM_C])


if __name__ == "__main__":
    unittest.main()

