"""The engine's guest and block verbs of one VM, through the real vdsmd:
VM.freeze / VM.thaw and VM.screenshot on libvirt's test driver (success
path: its fake agent freezes, its screen is a PNG) and on real QEMU (TCG)
under a private libvirtd (privlibvirt.py), where a VM has no guest agent
running: VDSM's errors (19 with the agent channel but no agent, 76 without
a channel), and the screenshot is QEMU's picture of the VGA screen (PNG or
PPM, decoded).  The QEMU
part is skipped, with the reason, where the private libvirtd or QEMU cannot
start."""

import base64
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


def result(r):
    assert "result" in r, r
    return r["result"]


def error_code(r):
    assert "error" in r, r
    return r["error"]["code"]


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
            '<devices>%s<graphics type="vnc" port="-1" autoport="yes" listen="127.0.0.1"/>'
            '<video><model type="vga"/></video><memballoon model="none"/></devices>'
            '<metadata><ovirt-vm:vm/></metadata></domain>' % (name, vm, channel))


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
        cls.lv = privlibvirt.PrivateLibvirt()
        if cls.lv.skip_reason:
            reason = cls.lv.skip_reason
            cls.lv.stop()
            raise unittest.SkipTest("private libvirtd: " + reason)
        cls.d = vt.Daemon(libvirt_uri=cls.lv.uri)
        cls.c = cls.d.stomp()
        cls.c.connect()
        cls.c.subscribe(vt.RESPONSES, "r", receipt="r1")
        vt.call_ready(cls.c, "Host.getVMList")
        for vm, name, agent in ((VM_A, "gvm_a", True), (VM_B, "gvm_b", False)):
            p = {"vmID": vm, "vmParams": {"vmId": vm, "xml": vm_xml(vm, name, agent)}}
            result(cls.c.call("VM.create", p, timeout=60))

    @classmethod
    def tearDownClass(cls):
        if hasattr(cls, "c"):
            for vm in (VM_A, VM_B):
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


if __name__ == "__main__":
    unittest.main()
