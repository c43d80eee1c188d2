"""Host.add_image_ticket, get_image_ticket, extend_image_ticket and
remove_image_ticket against a real vdsmd, with ovirt-imageio's ticket
semantics (ovirt_imageio/_internal/auth.py, handlers/tickets.py) as VDSM
forwards them (lib/vdsm/storage/imagetickets.py): the engine's ticket dict
(ImageTicket.toDict) is taken whole, get reports imageio's status keys,
extend moves "expires" and keeps "timeout", remove is idempotent, an
invalid ticket or an unknown one is VDSM's 482 (ImageDaemonError, the
status imageio answered in its message), and none of it publishes an
event.  Every result is validated against api/'s TicketInfo by vdsmtest."""

import time
import unittest
import uuid

import vdsmtest as vt
from vdsmtest import error_code, result

GiB = 1 << 30


def engine_ticket(ticket_id, ops, **kw):
    """The dict ovirt-engine sends (ImageTicket.toDict, TransferDiskImageCommand
    buildImageTicket): filename only when set."""
    t = {"uuid": ticket_id, "timeout": 300, "inactivity_timeout": 60, "size": GiB,
         "url": "file:///rhev/data-center/mnt/_srv/sd/images/img/vol", "ops": ops,
         "sparse": True, "transfer_id": str(uuid.uuid4()), "dirty": False}
    t.update(kw)
    return t


class ImageTickets(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = vt.Daemon()
        cls.d.__enter__()
        cls.c, cls.ev = vt.vm_connections(cls.d)

    @classmethod
    def tearDownClass(cls):
        cls.ev.close()
        cls.c.close()
        cls.d.__exit__(None, None, None)

    def call(self, verb, params):
        return self.c.call(verb, params)

    def add(self, ticket):
        self.assertIs(result(self.call("Host.add_image_ticket", {"ticket": ticket})), True)

    def get(self, tid):
        return result(self.call("Host.get_image_ticket", {"uuid": tid}))

    def daemon_error(self, r, status):
        """VDSM's ImageDaemonError carrying imageio's HTTP status."""
        self.assertEqual(error_code(r), 482, r)
        self.assertIn("status=%d" % status, r["error"]["message"], r)
        return r["error"]["message"]

    def test_engine_upload_flow(self):
        tid = str(uuid.uuid4())
        t = engine_ticket(tid, ["write"])
        before = time.monotonic()
        self.add(t)
        info = self.get(tid)
        after = time.monotonic()
        for k in ("uuid", "size", "url", "ops", "timeout", "inactivity_timeout", "sparse",
                  "dirty", "transfer_id"):
            self.assertEqual(info[k], t[k], k)
        self.assertEqual((info["active"], info["canceled"], info["connections"]),
                         (False, False, 0))
        self.assertEqual(info["transferred"], 0)      # single-op ticket
        self.assertNotIn("filename", info)
        self.assertGreaterEqual(info["idle_time"], 0)
        self.assertLessEqual(info["idle_time"], after - before + 1)
        # expires is on the host's monotonic clock, as imageio's
        self.assertGreaterEqual(info["expires"], int(before) + 300)
        self.assertLessEqual(info["expires"], int(after) + 301)

        # the engine extends by getHostTicketLifetime(): expires moves, timeout stays
        self.assertIs(result(self.call("Host.extend_image_ticket",
                                       {"uuid": tid, "timeout": 1000})), True)
        info = self.get(tid)
        self.assertGreaterEqual(info["expires"], int(time.monotonic()) + 998)
        self.assertEqual(info["timeout"], 300)

        # remove, and remove again (imageio's DELETE is idempotent)
        for _ in range(2):
            self.assertIs(result(self.call("Host.remove_image_ticket", {"uuid": tid})), True)
        msg = self.daemon_error(self.call("Host.get_image_ticket", {"uuid": tid}), 404)
        self.assertIn(tid, msg)

    def test_download_ticket_positional_and_defaults(self):
        tid = str(uuid.uuid4())
        t = engine_ticket(tid, ["read"], filename="disk.qcow2")
        self.assertIs(result(self.call("Host.add_image_ticket", [t])), True)
        info = result(self.call("Host.get_image_ticket", [tid]))
        self.assertEqual((info["ops"], info["filename"]), (["read"], "disk.qcow2"))
        # imageio's minimal ticket: defaults, unknown keys ignored, a null
        # transfer_id (the engine's toDict when it has none) as absent
        t2 = str(uuid.uuid4())
        self.add({"uuid": t2, "size": 0, "ops": ["read", "write"], "timeout": 60,
                  "url": "nbd:unix:/run/vdsm/nbd/x.sock:exportname=sda",
                  "transfer_id": None, "a_future_key": {"x": 1}})
        info = self.get(t2)
        self.assertEqual(info["inactivity_timeout"], 60)
        self.assertEqual((info["sparse"], info["dirty"]), (False, False))
        self.assertEqual(info["transfer_id"], "(ticket/%s)" % t2[:18])
        self.assertNotIn("transferred", info)   # read+write: imageio reports none
        # adding the same uuid replaces the ticket
        self.add(engine_ticket(t2, ["read"], size=4096))
        self.assertEqual(self.get(t2)["size"], 4096)
        for x in (tid, t2):
            self.assertIs(result(self.call("Host.remove_image_ticket", [x])), True)

    def test_expired_ticket_stays(self):
        tid = str(uuid.uuid4())
        self.add(engine_ticket(tid, ["write"], timeout=0))
        info = self.get(tid)      # expired at once, still there
        self.assertLessEqual(info["expires"], int(time.monotonic()))
        self.assertIs(result(self.call("Host.extend_image_ticket", [tid, 0])), True)
        self.assertIs(result(self.call("Host.extend_image_ticket", [tid, 60])), True)
        self.assertGreaterEqual(self.get(tid)["expires"], int(time.monotonic()) + 59)
        self.assertIs(result(self.call("Host.remove_image_ticket", [tid])), True)

    def test_invalid_tickets_refused(self):
        good = engine_ticket(str(uuid.uuid4()), ["write"])
        cases = [
            ({k: v for k, v in good.items() if k != "size"}, "missing: size"),
            ({k: v for k, v in good.items() if k != "url"}, "missing: url"),
            ({k: v for k, v in good.items() if k != "uuid"}, "missing: uuid"),
            (dict(good, size=-1), "'size'"),
            (dict(good, size="1024"), "'size'"),
            (dict(good, ops=["read", "delete"]), "'ops'"),
            (dict(good, ops="write"), "'ops'"),
            (dict(good, timeout=-1), "'timeout'"),
            (dict(good, timeout=2 ** 31), "'timeout'"),
            (dict(good, inactivity_timeout="60"), "'inactivity_timeout'"),
            (dict(good, url="ftp://host/x"), "'url'"),
            (dict(good, url="file:///" + "a" * 5000), "'url'"),
            (dict(good, uuid="not-a-uuid"), "'uuid'"),
            (dict(good, sparse="true"), "'sparse'"),
            (dict(good, filename="f" * 300), "'filename'"),
        ]
        for t, want in cases:
            with self.subTest(want=want):
                msg = self.daemon_error(self.call("Host.add_image_ticket", {"ticket": t}), 400)
                self.assertIn("Invalid ticket", msg)
                self.assertIn(want, msg)
        # none of them was added
        self.daemon_error(self.call("Host.get_image_ticket", [good["uuid"]]), 404)
        # the param checks of the RPC layer: not an object, not a uuid
        self.assertEqual(error_code(self.call("Host.add_image_ticket", ["x"])), -32602)
        self.assertEqual(error_code(self.call("Host.get_image_ticket", ["nope"])), -32602)
        self.assertEqual(error_code(self.call("Host.remove_image_ticket", [])), -32602)

    def test_unknown_ticket(self):
        tid = str(uuid.uuid4())
        self.daemon_error(self.call("Host.get_image_ticket", [tid]), 404)
        self.daemon_error(self.call("Host.extend_image_ticket", [tid, 30]), 404)
        self.assertIs(result(self.call("Host.remove_image_ticket", [tid])), True)
        self.add(engine_ticket(tid, ["read"]))
        msg = self.daemon_error(self.call("Host.extend_image_ticket", [tid, -5]), 400)
        self.assertIn("'timeout'", msg)
        self.assertIs(result(self.call("Host.remove_image_ticket", [tid])), True)

    def test_no_events(self):
        """The ticket verbs publish nothing (VDSM's forward to imageio emits
        no event either)."""
        tid = str(uuid.uuid4())
        t = engine_ticket(tid, ["write"])
        self.add(t)
        self.get(tid)
        result(self.call("Host.extend_image_ticket", [tid, 30]))
        result(self.call("Host.remove_image_ticket", [tid]))
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            try:
                f = self.ev.read_frame(max(0.05, deadline - time.monotonic()))
            except (TimeoutError, OSError):
                break
            body = f.body.decode(errors="replace") if isinstance(f.body, bytes) else str(f.body)
            self.assertNotIn(tid, body)
            self.assertNotIn("ticket", body.lower())
        # the daemon logged the operations by transfer id, never the ticket
        # id (the credential), as imageio
        self.assertIsNotNone(self.d.wait_log(r"image: REMOVE transfer=%s" % t["transfer_id"]))
        self.assertFalse([ln for ln in self.d.log_lines() if tid in ln])


if __name__ == "__main__":
    unittest.main()
