"""The data center on shared storage, over real vdsmd processes: each
domain's status in the pool (POOL_DOMAINS on the master domain, as VDSM
keeps it) through attach / activate / deactivate / detach, seen by a second
vdsmd on the same storage and kept across a kill -9; and
StoragePool.reconstructMaster holding the SPM lease of the new master:
refused (651) while a live host holds it or the old master's, done once the
killed SPM's lease expired.  Durations are printed, not asserted."""

import os
import signal
import time
import unittest

import vdsmtest as vt
from test_storage import BLANK, call_ready, connect, result, wait_task
from test_storage_engine import (IMG, LEASE, RENEW, SD, SP, conn_params, make_pool,
                                 spm_start)

SD2 = "4b0a2c3d-2c2e-4b8a-9b1f-2a1f6b9d7c44"
VOL2 = "d2b3c4d5-e6f7-4081-9a2b-c3d4e5f60744"


def err(r):
    return r.get("error", {}).get("code"), r


def pool_info(c):
    return result(c.call("StoragePool.getInfo", [SP]))


def statuses(c):
    """{sdUUID: status} from getInfo, checked against its 'domains' string."""
    res = pool_info(c)
    enc = res["info"]["domains"]
    dom = dict(x.split(":") for x in enc.split(",")) if enc else {}
    dominfo = {sd: d["status"] for sd, d in res["dominfo"].items()}
    assert dom == dominfo, (enc, res["dominfo"])
    return dominfo


class DomainStatus(unittest.TestCase):
    def test_status_through_the_lifecycle_on_two_hosts(self):
        a, b = vt.Daemon(), vt.Daemon()
        shared = os.path.join(a.tmp, "shared")
        os.mkdir(shared, 0o755)
        try:
            ca, cb = connect(a), connect(b)
            make_pool(self, ca, 4, conn_params(shared), shared)   # host 1 is SPM
            self.assertEqual(statuses(ca), {SD: "Active"})
            r = ca.call("StorageDomain.create", [SD2, 4, shared, "d2", 1, "5", 0, 250])
            self.assertIs(result(r), True)
            self.assertEqual(err(ca.call("StorageDomain.activate", [SD2, SP]))[0], 375)
            self.assertIs(result(ca.call("StorageDomain.attach", [SD2, SP])), True)
            self.assertIs(result(ca.call("StorageDomain.attach", [SD2, SP])), True)  # again: no-op
            self.assertEqual(statuses(ca), {SD: "Active", SD2: "Attached"})
            di = pool_info(ca)["dominfo"]
            self.assertNotIn("disktotal", di[SD2])     # VDSM: sizes for Active domains only
            self.assertIsInstance(di[SD]["disktotal"], str)
            with open(os.path.join(shared, SD, "dom_md", "metadata")) as f:
                md = f.read()
            self.assertRegex(md, r"\nPOOL_DOMAINS=(%s:Active,%s:Attached|%s:Attached,%s:Active)\n"
                             % (SD, SD2, SD2, SD))
            self.assertEqual(sorted(result(ca.call("Host.getStorageDomains", [SP]))),
                             sorted([SD, SD2]))
            # an Attached member takes new volumes, as in VDSM (which checks
            # membership only); detach wants Attached
            vc = [VOL2, SP, SD2, IMG, "1048576", 5, 2]
            self.assertEqual(wait_task(ca, result(ca.call("Volume.create", vc)))["taskResult"],
                             "success")
            self.assertTrue(os.path.exists(os.path.join(shared, SD2, "images", IMG, VOL2)))

            # host 2 joins: it sees the statuses host 1 wrote, and loads SD2
            st = result(call_ready(cb, "StoragePool.connectStorageServer",
                                   [BLANK, 4, conn_params(shared)]))
            self.assertEqual(st[0]["status"], 0)
            self.assertIs(result(cb.call("StoragePool.connect", [SP, 2, SP, SD, 1, {}])), True)
            self.assertEqual(statuses(cb), {SD: "Active", SD2: "Attached"})
            self.assertEqual(result(cb.call("StorageDomain.getInfo", [SD2]))["pool"], [SP])
            # host 2 is not SPM: it changes nothing
            self.assertEqual(err(cb.call("StorageDomain.activate", [SD2, SP]))[0], 654)

            self.assertIs(result(ca.call("StorageDomain.activate", [SD2, SP])), True)
            self.assertEqual(statuses(ca), {SD: "Active", SD2: "Active"})
            self.assertIs(result(cb.call("StoragePool.refresh", [SP, SD, 1])), True)
            self.assertEqual(statuses(cb), {SD: "Active", SD2: "Active"})
            self.assertEqual(err(ca.call("StorageDomain.detach", [SD2, SP, SD, 1]))[0], 347)
            vc1 = [VOL2.replace("44", "46"), SP, SD2, IMG, "1048576", 5, 2]
            tid = result(ca.call("Volume.create", vc1))
            self.assertEqual(wait_task(ca, tid)["taskResult"], "success")

            # deactivate: Attached again everywhere; the master's is ignored
            self.assertIs(result(ca.call("StorageDomain.deactivate", [SD2, SP, BLANK, 1])), True)
            self.assertIs(result(ca.call("StorageDomain.deactivate", [SD, SP, BLANK, 1])), True)
            self.assertEqual(statuses(ca), {SD: "Active", SD2: "Attached"})
            self.assertEqual(err(ca.call("StorageDomain.detach", [SD, SP, SD, 1]))[0], 347)
            self.assertIs(result(cb.call("StoragePool.refresh", [SP, SD, 1])), True)
            self.assertEqual(statuses(cb), {SD: "Active", SD2: "Attached"})
            vc2 = [VOL2.replace("44", "45"), SP, SD2, IMG, "1048576", 5, 2]
            self.assertEqual(wait_task(ca, result(ca.call("Volume.create", vc2)))["taskResult"],
                             "success")

            # durable: host 1 killed and restarted keeps the statuses
            ca.close()
            vt.restart(a, sig=signal.SIGKILL)
            ca = connect(a)
            self.assertIs(result(call_ready(ca, "StoragePool.connect",
                                            [SP, 1, SP, SD, 1, {}])), True)
            self.assertEqual(statuses(ca), {SD: "Active", SD2: "Attached"})
            tid, ts = spm_start(ca)
            self.assertEqual(ts["taskResult"], "success", ts)

            # detach: gone from the map, then from the domain's own metadata
            self.assertIs(result(ca.call("StorageDomain.detach", [SD2, SP, SD, 1])), True)
            self.assertEqual(statuses(ca), {SD: "Active"})
            self.assertEqual(result(ca.call("StorageDomain.getInfo", [SD2]))["pool"], [])
            self.assertEqual(err(ca.call("StorageDomain.detach", [SD2, SP, SD, 1]))[0], 353)
            self.assertIs(result(cb.call("StoragePool.refresh", [SP, SD, 1])), True)
            self.assertEqual(statuses(cb), {SD: "Active"})
            self.assertEqual(result(cb.call("Host.getStorageDomains", [SP])), [SD])
            ca.close()
            cb.close()
        finally:
            a.__exit__(None, None, None)
            b.__exit__(None, None, None)


class ForcedDetach(unittest.TestCase):
    """StorageDomain.detach force=true as VDSM does it: with the pool the
    SPM drops a domain from the map whatever its status; with the blank
    pool (the engine cleaning a domain found on storage that still names a
    pool, storage flow step 27) the domain's own metadata is cleared under
    its lease - refused (651) while a live SPM holds it."""

    def test_forced_detach(self):
        a, b = vt.Daemon(), vt.Daemon()
        shared = os.path.join(a.tmp, "shared")
        os.mkdir(shared, 0o755)
        try:
            ca, cb = connect(a), connect(b)
            make_pool(self, ca, 4, conn_params(shared), shared)
            r = ca.call("StorageDomain.create", [SD2, 4, shared, "d2", 1, "5", 0, 250])
            self.assertIs(result(r), True)
            self.assertIs(result(ca.call("StorageDomain.attach", [SD2, SP])), True)
            self.assertIs(result(ca.call("StorageDomain.activate", [SD2, SP])), True)
            force = lambda c, sd, sp: c.call("StorageDomain.detach", [sd, sp, BLANK, 0, True],
                                             timeout=LEASE * 4 + 10)
            self.assertEqual(err(force(ca, SD, SP))[0], 383)
            self.assertIs(result(force(ca, SD2, SP)), True)      # Active, dropped anyway
            self.assertEqual(statuses(ca), {SD: "Active"})
            # host 2 finds the domains on the storage it connects, as the
            # engine's import does, and sees SD still names the pool
            st = result(call_ready(cb, "StoragePool.connectStorageServer",
                                   [BLANK, 4, conn_params(shared)]))
            self.assertEqual(st[0]["status"], 0)
            self.assertEqual(sorted(result(cb.call("Host.getStorageDomains",
                                                    [BLANK, 1, "", shared + "/"]))),
                             sorted([SD, SD2]))
            self.assertEqual(result(cb.call("StorageDomain.getInfo", [SD]))["pool"], [SP])
            r = force(cb, SD, BLANK)
            self.assertEqual(err(r)[0], 651, r)    # host 1 is alive and renews SD's lease
            self.assertEqual(result(ca.call("StorageDomain.getInfo", [SD]))["pool"], [SP])
            # host 1 leaves the pool cleanly: the lease is free, host 2 cleans
            self.assertIs(result(ca.call("StoragePool.spmStop", [SP])), True)
            self.assertIs(result(ca.call("StoragePool.disconnect", [SP, 1, SP])), True)
            self.assertIs(result(force(cb, SD, BLANK)), True)
            info = result(cb.call("StorageDomain.getInfo", [SD]))
            self.assertEqual((info["pool"], info["role"]), ([], "Regular"))
            with open(os.path.join(shared, SD, "dom_md", "metadata")) as f:
                self.assertIn("POOL_UUID=\n", f.read())
            ca.close()
            cb.close()
        finally:
            a.__exit__(None, None, None)
            b.__exit__(None, None, None)


class ReconstructMasterLease(unittest.TestCase):
    def test_reconstruct_takes_the_lease(self):
        a, b = vt.Daemon(), vt.Daemon()
        shared = os.path.join(a.tmp, "shared")
        os.mkdir(shared, 0o755)
        try:
            ca, cb = connect(a), connect(b)
            make_pool(self, ca, 4, conn_params(shared), shared)   # host 1 SPM on SD
            r = ca.call("StorageDomain.create", [SD2, 4, shared, "d2", 1, "5", 0, 250])
            self.assertIs(result(r), True)
            self.assertIs(result(ca.call("StorageDomain.attach", [SD2, SP])), True)
            st = result(call_ready(cb, "StoragePool.connectStorageServer",
                                   [BLANK, 4, conn_params(shared)]))
            self.assertEqual(st[0]["status"], 0)
            args = lambda master, ver, doms: [SP, 2, "Default", master, ver, doms,
                                              RENEW, LEASE, 10, 3]
            doms = {SD: "attached", SD2: "active"}
            bad = dict(doms)
            bad[SD] = "Maintenance"
            self.assertEqual(err(cb.call("StoragePool.reconstructMaster",
                                         args(SD2, 2, bad)))[0], 376)
            # host 1 renews its lease on SD: host 2 can take neither SD's
            # lease nor SD2's while SD's holder is alive
            for master in (SD, SD2):
                t0 = time.monotonic()
                r = cb.call("StoragePool.reconstructMaster", args(master, 2, doms),
                            timeout=LEASE * 4 + 10)
                self.assertEqual(err(r)[0], 651, r)
                self.assertGreaterEqual(time.monotonic() - t0, RENEW / 2)
            self.assertEqual(pool_info(ca)["info"]["master_uuid"], SD)
            with open(os.path.join(shared, SD2, "dom_md", "metadata")) as f:
                self.assertIn("ROLE=Regular\n", f.read())
            self.assertEqual(result(ca.call("StoragePool.getSpmStatus", [SP]))["spmStatus"], "SPM")
            # the SPM dies: once its lease expired, host 2 rebuilds the pool
            # on SD2 and becomes SPM there
            ca.close()
            a.stop(sig=signal.SIGKILL)
            t0 = time.monotonic()
            r = cb.call("StoragePool.reconstructMaster", args(SD2, 2, doms),
                        timeout=LEASE * 4 + 10)
            took = time.monotonic() - t0
            self.assertIs(result(r), True)
            self.assertGreaterEqual(took, LEASE - 0.5)   # it waited for the expiry
            with open(os.path.join(shared, SD2, "dom_md", "spm_lease")) as f:
                self.assertIn("HOST_ID=0\n", f.read())   # held for the rebuild, freed
            r = cb.call("StoragePool.connect", [SP, 2, SP, SD2, 2, {}])
            self.assertIs(result(r), True)
            self.assertEqual(statuses(cb), {SD: "Attached", SD2: "Active"})
            info = pool_info(cb)["info"]
            self.assertEqual((info["master_uuid"], info["master_ver"]), (SD2, 2))
            t1 = time.monotonic()
            tid, ts = spm_start(cb)
            self.assertEqual(ts["taskResult"], "success", ts)
            spm = result(cb.call("StoragePool.getSpmStatus", [SP]))
            self.assertEqual((spm["spmStatus"], spm["spmId"], spm["spmLver"]), ("SPM", 2, 2))
            print("\nreconstructMaster after kill -9 of the SPM: %.2f s (lease %d s), "
                  "then spmStart %.2f s" % (took, LEASE, time.monotonic() - t1))
            cb.close()
        finally:
            a.__exit__(None, None, None)
            b.__exit__(None, None, None)

    def test_reconstruct_without_the_old_master(self):
        """The old master's storage is gone (its directory moved away):
        the rebuild on the new master still works, the lost domain stays
        listed in the map with the status the engine gave."""
        with vt.Daemon() as d:
            c = connect(d)
            shared = os.path.join(d.tmp, "shared")
            os.mkdir(shared, 0o755)
            make_pool(self, c, 4, conn_params(shared), shared)
            r = c.call("StorageDomain.create", [SD2, 4, shared, "d2", 1, "5", 0, 250])
            self.assertIs(result(r), True)
            self.assertIs(result(c.call("StorageDomain.attach", [SD2, SP])), True)
            self.assertIs(result(c.call("StoragePool.spmStop", [SP])), True)
            self.assertIs(result(c.call("StoragePool.disconnect", [SP, 1, SP])), True)
            os.rename(os.path.join(shared, SD), os.path.join(d.tmp, "lost"))
            t0 = time.monotonic()
            r = c.call("StoragePool.reconstructMaster",
                       [SP, 1, "Default", SD2, 2, {SD: "Attached", SD2: "Active"},
                        RENEW, LEASE, 10, 3], timeout=LEASE * 4 + 10)
            self.assertIs(result(r), True)
            print("\nreconstructMaster, new master's lease free, old master gone: %.2f s "
                  "(renewal %d s)" % (time.monotonic() - t0, RENEW))
            self.assertIs(result(c.call("StoragePool.connect", [SP, 1, SP, SD2, 2, {}])), True)
            self.assertEqual(statuses(c), {SD: "Attached", SD2: "Active"})
            # spmStart's domVersion as VDSM checks it: a master newer than
            # the engine's version refuses (395), an unknown version 394, not a
            # number -32602
            for ver, code in (("4", 395), ("9", 394), (9, 394), ("x", -32602)):
                r = c.call("StoragePool.spmStart", [SP, -1, "-1", "false", 250, ver])
                self.assertEqual(err(r)[0], code, (ver, r))
            tid, ts = spm_start(c)
            self.assertEqual(ts["taskResult"], "success", ts)
            c.close()


if __name__ == "__main__":
    unittest.main()
