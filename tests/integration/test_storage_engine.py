"""The engine's storage flow (shared/engine/engine-flows.json, flow "storage")
against a real vdsmd over two STOMP connections (the VDS connection on
jms.topic.vdsm_requests and the IRS connection on jms.topic.vdsm_irs_requests),
on a LOCALFS domain and on a POSIXFS domain (a tmpfs the test mounts through
connectStorageServer as root; skipped where it cannot mount); and SPM
exclusion across two vdsmd processes on the same storage: only one is SPM,
and after kill -9 of the SPM the other takes over once the lease expires.
The failover time is printed (it is not asserted as a timing)."""

import os
import signal
import shutil
import subprocess
import time
import unittest

import vdsmtest as vt
from test_storage import BLANK, call_ready, connect, result, wait_task

SP = "5849b030-626e-47cb-ad90-3ce782d831b3"
SD = "4b0a2c3d-2c2e-4b8a-9b1f-2a1f6b9d7c11"
IMG = "c1a2b3c4-d5e6-4f70-8a91-b2c3d4e5f607"
VOL = "d2b3c4d5-e6f7-4081-9a2b-c3d4e5f60718"
CONN = "8c7b2f1e-0d3a-4b6e-9a55-1f2e3d4c5b6a"
IRS = "jms.topic.vdsm_irs_requests"
RENEW, LEASE = 1, 3   # short SPM lease timings for the tests


def conn_params(connection, **extra):
    p = {"id": CONN, "connection": connection, "port": "", "iqn": "", "user": "",
         "password": "", "ipv6_enabled": "false", "protocol_version": "auto"}
    p.update(extra)
    return [p]


def spm_start(c, timeout=30.0):
    tid = result(c.call("StoragePool.spmStart", [SP, -1, "-1", "false", 250, "5"]))
    return tid, wait_task(c, tid, timeout=timeout)


def make_pool(test, c, dtype, conns, type_args):
    """Steps 19-37 of the storage flow; returns nothing, asserts each."""
    # NFS timeo/retrans are numbers or strings of digits (rpc/ reads them)
    r = call_ready(c, "StoragePool.connectStorageServer",
                   [BLANK, dtype, [dict(conns[0], timeout="soon")]])
    test.assertEqual(r.get("error", {}).get("code"), -32602, r)
    test.assertIn("connectionParams[0].timeout", r["error"]["message"])
    st = result(call_ready(c, "StoragePool.connectStorageServer", [BLANK, dtype, conns]))
    test.assertEqual(st[0]["status"], 0, st)
    test.assertEqual(st[0]["id"], CONN)
    doms = result(c.call("Host.getStorageDomains", [BLANK, 1, "", type_args]))
    test.assertEqual(doms, [])
    r = c.call("StorageDomain.create", [SD, dtype, type_args, "data1", 1, "5", 0, 250])
    test.assertIs(result(r), True)
    stats = result(c.call("StorageDomain.getStats", [SD]))
    test.assertIsInstance(stats["diskfree"], str)
    test.assertIsInstance(stats["disktotal"], str)
    info = result(c.call("StorageDomain.getInfo", [SD]))
    # the keys of VDSM's sd.py / fileSD.py getInfo, no others
    test.assertEqual(set(info), {"uuid", "type", "class", "name", "role", "pool", "version",
                                 "block_size", "alignment", "remotePath"})
    test.assertEqual(info["class"], "Data")
    test.assertEqual(info["name"], "data1")
    test.assertEqual(str(info["version"]), "5")
    r = c.call("StoragePool.create", [SP, "Default", SD, 1, [SD], RENEW, LEASE, 10, 3])
    test.assertIs(result(r), True)
    r = c.call("StoragePool.connect", [SP, 1, SP, SD, 1, {SD: "active"}])
    test.assertIs(result(r), True)
    spm = result(c.call("StoragePool.getSpmStatus", [SP]))
    test.assertEqual(spm["spmStatus"], "Free")
    test.assertEqual(spm["spmId"], -1)
    tid, ts = spm_start(c)
    test.assertEqual((ts["taskState"], ts["taskResult"], ts["code"]), ("finished", "success", 0), ts)
    spm = result(c.call("StoragePool.getSpmStatus", [SP]))
    test.assertEqual(spm["spmStatus"], "SPM")
    test.assertEqual(spm["spmId"], 1)
    test.assertIs(result(c.call("Task.clear", [tid])), True)
    test.assertEqual(result(c.call("StorageDomain.getImages", [SD])), [])
    st = result(c.call("StoragePool.connectStorageServer", [BLANK, dtype, conns]))
    test.assertEqual(st[0]["status"], 0, st)
    test.assertIs(result(c.call("StorageDomain.activate", [SD, SP])), True)
    r = c.call("StoragePool.connect", [SP, 1, SP, SD, 1, {SD: "active"}])
    test.assertIs(result(r), True)
    info = result(c.call("StoragePool.getInfo", [SP]))["info"]
    test.assertEqual(info["master_uuid"], SD)
    test.assertEqual(info["spm_id"], 1)


class EngineStorageFlow(unittest.TestCase):
    def setUp(self):
        self.d = vt.Daemon()
        self.c = connect(self.d)          # the VDS connection
        self.irs = connect(self.d)        # the IRS connection
        self.mounted = None

    def tearDown(self):
        self.c.close()
        self.irs.close()
        self.d.__exit__(None, None, None)
        if self.mounted:
            subprocess.run(["umount", "-l", self.mounted], capture_output=True)

    def volume_steps(self, dtype=4):
        """Steps 38-41: Volume.create over the IRS connection, task polling
        on the VDS connection, Volume.getInfo, Task.clear."""
        r = self.irs.call("Volume.create", [VOL, SP, SD, IMG, str(1 << 30), 5, 2, "DATA",
                                            "disk1", BLANK, BLANK], dest=IRS)
        tid = result(r)
        deadline = time.monotonic() + 30
        while True:
            st = result(self.c.call("Host.getAllTasksStatuses"))[tid]
            if st["taskState"] == "finished" or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        self.assertEqual((st["taskResult"], st["code"]), ("success", 0), st)
        info = result(self.c.call("Host.getAllTasksInfo"))
        self.assertEqual(info[tid]["verb"], "createVolume")
        vi = result(self.c.call("Volume.getInfo", [VOL, SP, SD, IMG]))
        self.assertEqual(vi["uuid"], VOL)
        self.assertEqual(vi["parent"], BLANK)
        self.assertEqual(vi["status"], "OK")
        self.assertEqual(vi["capacity"], str(1 << 30))
        self.assertEqual(vi["description"], "disk1")
        # VDSM's volume.py getInfo: a lease only where the domain has volume
        # leases (sanlock: NFS / POSIXFS, version 3+), free: no owners, version
        # null; LOCALFS (LocalLock) has none, so no "lease" key at all and no
        # lease file
        prep = result(self.c.call("Image.prepare", [SP, SD, IMG, VOL]))
        lease_file = prep["path"] + ".lease"
        if dtype == 4:
            self.assertNotIn("lease", vi)
            self.assertFalse(os.path.exists(lease_file))
        else:
            # fileSD.py getVolumeLease: <volume path>.lease, offset 0; the file
            # made with the volume (fileVolume.newVolumeLease)
            self.assertEqual(vi["lease"], {"path": lease_file, "offset": 0, "owners": [],
                                           "version": None})
            self.assertTrue(os.path.isfile(lease_file))
        self.assertIs(result(self.c.call("Image.teardown", [SP, SD, IMG, VOL])), True)
        self.assertIs(result(self.c.call("Task.clear", [tid])), True)
        # the same create again: VDSM's 212 through the verb
        r = self.irs.call("Volume.create", [VOL, SP, SD, IMG, str(1 << 30), 5, 2], dest=IRS)
        self.assertEqual(r["error"]["code"], 212)
        self.assertEqual(result(self.c.call("StorageDomain.getImages", [SD])), [IMG])
        self.image_steps(leases=dtype != 4)
        # the volumes are gone and their lease files with them
        self.assertFalse(os.path.exists(lease_file))
        self.assertFalse(os.path.exists(os.path.dirname(lease_file)))

    def image_steps(self, leases):
        """Image.prepare / teardown, Volume.getQemuImageInfo / setLegality /
        refresh, Task.getInfo / revert on the volume just made."""
        prep = result(self.c.call("Image.prepare", [SP, SD, IMG, VOL]))
        self.assertTrue(prep["path"].endswith("/images/%s/%s" % (IMG, VOL)), prep)
        self.assertTrue(os.path.isfile(prep["path"]))
        # each entry as hsm.prepareImage builds it: the image's own UUID (not
        # "/" and 35 of its characters), the lease keys only with volume leases
        want = {"domainID": SD, "imageID": IMG, "volumeID": VOL, "path": prep["path"]}
        if leases:
            want.update(leasePath=prep["path"] + ".lease", leaseOffset=0)
        self.assertEqual(prep["imgVolumesInfo"], [want])
        self.assertIs(result(self.c.call("Image.teardown", [SP, SD, IMG, VOL])), True)
        # the engine's form: leafVolID, no volumeID (JsonRpcVdsServer.java:1957);
        # VDSM's volumeID defaults to None, the whole image (lib/vdsm/API.py:1092)
        td = {"storagepoolID": SP, "storagedomainID": SD, "imageID": IMG, "leafVolID": VOL}
        self.assertIs(result(self.c.call("Image.teardown", td)), True)
        other = dict(td, imageID="0e1f2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b")
        self.assertEqual(self.c.call("Image.teardown", other)["error"]["code"], 268)
        self.assertEqual(self.c.call("Image.teardown", dict(td, storagedomainID=other["imageID"]))
                         ["error"]["code"], 358)
        qi = result(self.c.call("Volume.getQemuImageInfo", [VOL, SP, SD, IMG]))
        # raw: qemu-img reports no cluster size, compat or bitmaps, and VDSM
        # sends only what it reports
        self.assertEqual(qi, {"format": "raw", "virtualsize": 1 << 30})
        r = self.c.call("Volume.setLegality", [VOL, SP, SD, IMG, "FAKE"])
        self.assertEqual(r["error"]["code"], -32602)
        self.assertIs(result(self.c.call("Volume.setLegality", [VOL, SP, SD, IMG, "ILLEGAL"])), True)
        vi = result(self.c.call("Volume.getInfo", [VOL, SP, SD, IMG]))
        self.assertEqual(vi["legality"], "ILLEGAL")
        self.assertEqual(self.c.call("Image.prepare", [SP, SD, IMG, VOL])["error"]["code"], 100)
        self.assertIn("path", result(self.c.call("Image.prepare", [SP, SD, IMG, VOL, True])))
        # VM.seal of the ILLEGAL disk (as the engine seals a template's): the
        # job prepares it with allowIllegal, then runs virt-sysprep
        job = "5ea1c0de-0000-4000-8000-0000000005ea"
        self.assertIs(result(self.c.call("VM.seal", {
            "vmID": "5ea1c0de-0000-4000-8000-00000000ffff", "job_id": job, "sp_id": SP,
            "images": [{"sd_id": SD, "img_id": IMG, "vol_id": VOL}]})), True)
        deadline = time.monotonic() + 60
        while True:
            jobs = result(self.c.call("Host.getJobs", {"job_type": "virt", "job_ids": [job]}))
            if jobs[job]["status"] in ("done", "failed") or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        if shutil.which("virt-sysprep") is None:
            self.assertEqual((jobs[job]["status"], jobs[job]["error"]["code"]), ("failed", 100))
            self.assertIn("virt-sysprep: not installed", jobs[job]["error"]["message"])
        else:   # a blank disk holds no OS to seal: virt-sysprep itself fails
            self.assertEqual(jobs[job]["status"], "failed", jobs)
            self.assertIn("virt-sysprep failed", jobs[job]["error"]["message"])
        self.assertIs(result(self.c.call("Volume.setLegality", [VOL, SP, SD, IMG, "LEGAL"])), True)
        with open(prep["path"], "r+b") as f:   # a guest writes
            f.write(b"x" * 65536)
        self.assertIs(result(self.c.call("Volume.refresh", [VOL, SP, SD, IMG])), True)
        vi = result(self.c.call("Volume.getInfo", [VOL, SP, SD, IMG]))
        self.assertGreaterEqual(int(vi["truesize"]), 65536)
        v2 = "d2b3c4d5-e6f7-4081-9a2b-c3d4e5f60799"
        tid = result(self.irs.call("Volume.create", [v2, SP, SD, IMG, str(1 << 20), 4, 2, "DATA",
                                                     "snap", IMG, VOL], dest=IRS))
        self.assertEqual(result(self.c.call("Task.getInfo", [tid]))["verb"], "createVolume")
        self.assertEqual(wait_task(self.c, tid)["taskResult"], "success")
        # a done task: VDSM rolls it back (lib/vdsm/storage/task.py:1204-1211);
        # vdsmd keeps no undo for a completed create, so true and unchanged
        self.assertIs(result(self.c.call("Task.revert", [tid])), True)
        self.assertEqual(result(self.c.call("Task.getStatus", [tid]))["taskResult"], "success")
        # and a stop of it is ignored (task.py:1343-1347)
        self.assertIs(result(self.c.call("Task.stop", [tid])), True)
        self.assertEqual(result(self.c.call("Task.getStatus", [tid]))["taskState"], "finished")
        prep = result(self.c.call("Image.prepare", [SP, SD, IMG, v2]))
        self.assertEqual([v["volumeID"] for v in prep["imgVolumesInfo"]], [VOL, v2])
        self.assertEqual([v["imageID"] for v in prep["imgVolumesInfo"]], [IMG, IMG])
        self.assertEqual(prep["imgVolumesInfo"][0]["path"],
                         os.path.join(os.path.dirname(prep["path"]), VOL))
        qi = result(self.c.call("Volume.getQemuImageInfo", [v2, SP, SD, IMG]))
        self.assertEqual((qi["format"], qi["backingfile"], qi["compat"]), ("qcow2", VOL, "1.1"))
        self.assertEqual(qi["clustersize"], 65536)
        self.assertNotIn("bitmaps", qi)   # qemu-img lists none: VDSM sends no key
        m = result(self.c.call("Volume.measure", [v2, SP, SD, IMG, 5]))
        self.assertEqual(m["required"], 1 << 30)   # raw copy of the chain: its size
        m = result(self.c.call("Volume.measure", [v2, SP, SD, IMG, 4]))
        self.assertLess(m["required"], 32 << 20)   # qcow2: mostly empty
        self.assertEqual(self.c.call("Volume.measure", [v2, SP, SD, IMG, 4, False])["error"]["code"],
                         -32602)
        tid = result(self.irs.call("Volume.extendSize", [SP, SD, IMG, v2, str(2 << 30)], dest=IRS))
        st = wait_task(self.c, tid)
        self.assertEqual(st["taskResult"], "success", st)
        self.assertEqual(result(self.c.call("Volume.getInfo", [v2, SP, SD, IMG]))["capacity"],
                         str(2 << 30))
        qi = result(self.c.call("Volume.getQemuImageInfo", [v2, SP, SD, IMG]))
        self.assertEqual(qi["virtualsize"], 2 << 30)
        # a bitmap added by real qemu-img: VDSM's Qcow2BitmapInfo namedtuple
        # goes out as the array [name, granularity, flags]
        bm = subprocess.run(["qemu-img", "bitmap", "--add", "-g", "131072", prep["path"],
                             "backup-1"], capture_output=True)
        self.assertEqual(bm.returncode, 0, bm.stderr)
        qi = result(self.c.call("Volume.getQemuImageInfo", [v2, SP, SD, IMG]))
        self.assertEqual(qi["bitmaps"], [["backup-1", 131072, ["auto"]]])
        # as the engine's GetQemuImageInfoVDSCommand reads it
        self.assertEqual(int(str(qi["virtualsize"])), 2 << 30)
        self.assertEqual(int(str(qi["clustersize"])), 65536)
        self.assertIn(str(qi["compat"]), ("0.10", "1.1"))
        r = self.irs.call("Volume.extendSize", [SP, SD, IMG, v2, str(1 << 20)], dest=IRS)
        self.assertEqual(r["error"]["code"], -32602)   # volumes only grow
        r = self.irs.call("Image.deleteVolumes", [IMG, SP, SD, [VOL]], dest=IRS)
        self.assertEqual(r["error"]["code"], 100)          # its child is not listed
        tid = result(self.irs.call("Image.deleteVolumes", [IMG, SP, SD, [VOL, v2], True],
                                   dest=IRS))
        st = wait_task(self.c, tid)
        self.assertEqual(st["taskResult"], "success", st)
        self.assertEqual(result(self.c.call("StorageDomain.getImages", [SD])), [])

    def test_localfs(self):
        local = os.path.join(self.d.tmp, "localfs")
        os.mkdir(local, 0o755)
        make_pool(self, self.c, 4, conn_params(local), local)
        self.volume_steps()
        self.assertFalse(os.path.exists(os.path.join(local, SD, "images", IMG)))
        self.pool_lifecycle(local)

    def pool_lifecycle(self, local):
        """attach / detach a second domain, refresh, destroy."""
        sd3 = "4b0a2c3d-2c2e-4b8a-9b1f-2a1f6b9d7c33"
        self.assertIs(result(self.c.call("StorageDomain.create", [sd3, 4, local, "d3", 1])), True)
        self.assertIs(result(self.c.call("StorageDomain.attach", [sd3, SP])), True)
        self.assertEqual(result(self.c.call("StorageDomain.getInfo", [sd3]))["pool"], [SP])
        self.assertEqual(sorted(result(self.c.call("Host.getStorageDomains", [SP]))),
                         sorted([SD, sd3]))
        r = self.c.call("StorageDomain.detach", [SD, SP, SD, 1])
        self.assertEqual(r["error"]["code"], 347)   # the master stays (Active: VDSM's 347)
        self.assertIs(result(self.c.call("StorageDomain.detach", [sd3, SP, SD, 1])), True)
        self.assertEqual(result(self.c.call("StorageDomain.getInfo", [sd3]))["pool"], [])
        self.assertIs(result(self.c.call("StoragePool.refresh", [SP, SD, 1])), True)
        self.assertEqual(self.c.call("StoragePool.refresh", [SP, sd3, 1])["error"]["code"], 324)
        self.assertIs(result(self.c.call("StoragePool.destroy", [SP, 1, SP])), True)
        self.assertEqual(self.c.call("StoragePool.getSpmStatus", [SP])["error"]["code"], 309)
        info = result(self.c.call("StorageDomain.getInfo", [SD]))
        self.assertEqual((info["pool"], info["role"]), ([], "Regular"))
        with open(os.path.join(local, SD, "dom_md", "metadata")) as f:
            self.assertIn("POOL_UUID=\n", f.read())

    def test_posixfs_tmpfs(self):
        if os.geteuid() != 0:
            self.skipTest("needs root to mount a tmpfs")
        spec = "vdsmtest:engine_flow"
        conns = conn_params(spec, vfs_type="tmpfs", mnt_options="size=64m,mode=0755")
        mp = os.path.join(self.d.tmp, "storage", "mnt", "vdsmtest:engine__flow")
        self.mounted = mp
        st = result(call_ready(self.c, "StoragePool.connectStorageServer", [BLANK, 6, conns]))
        if st[0]["status"] != 0:
            self.skipTest("cannot mount a tmpfs here (status %s)" % st[0]["status"])
        make_pool(self, self.c, 6, conns, spec)
        self.volume_steps(dtype=6)
        self.assertTrue(os.path.ismount(mp))
        self.assertTrue(os.path.isdir(os.path.join(mp, SD, "images")))
        # SPM stop, pool disconnect, the domain formatted, then unmounted
        self.assertIs(result(self.c.call("StoragePool.spmStop", [SP])), True)
        self.assertIs(result(self.c.call("StoragePool.disconnect", [SP, 1, SP])), True)
        self.assertIs(result(self.c.call("StorageDomain.format", [SD])), True)
        st = result(self.c.call("StoragePool.disconnectStorageServer", [BLANK, 6, conns]))
        self.assertEqual(st[0]["status"], 0, st)
        self.assertFalse(os.path.ismount(mp))


class CopyData(unittest.TestCase):
    """SDM.copy_data between two LOCALFS domains: a job with progress and
    |jobs|status| events, Host.getJobs, and qemu-img compare of the two.
    Prints the copy throughput (informative, not asserted)."""
    SD2 = "4b0a2c3d-2c2e-4b8a-9b1f-2a1f6b9d7c22"
    IMG2 = "c1a2b3c4-d5e6-4f70-8a91-b2c3d4e5f622"
    VOL2 = "d2b3c4d5-e6f7-4081-9a2b-c3d4e5f60722"
    JOB = "e0e1e2e3-e4e5-4e6e-8e7e-8e9eaebecede"
    SIZE = 256 << 20

    def test_copy_between_domains(self):
        with vt.Daemon() as d:
            c = connect(d)
            ev = d.stomp()
            ev.connect()
            ev.subscribe(vt.EVENTS, "events")
            dirs = []
            for sd in (SD, self.SD2):
                path = os.path.join(d.tmp, sd[-2:])
                os.mkdir(path, 0o755)
                dirs.append(path)
                self.assertIs(result(call_ready(c, "StorageDomain.create",
                                                [sd, 4, path, "d", 1, "5", 0, 250])), True)
            tid = result(c.call("Volume.create", [VOL, BLANK, SD, IMG, str(self.SIZE), 5, 2]))
            self.assertEqual(wait_task(c, tid)["taskResult"], "success")
            src = os.path.join(dirs[0], SD, "images", IMG, VOL)
            with open(src, "r+b") as f:   # data in a few places, holes between
                for off in range(0, self.SIZE, 16 << 20):
                    f.seek(off)
                    f.write(os.urandom(4 << 20))
            tid = result(c.call("Volume.create", [self.VOL2, BLANK, self.SD2, self.IMG2,
                                                  str(self.SIZE), 4, 2]))
            self.assertEqual(wait_task(c, tid)["taskResult"], "success")
            small = "d2b3c4d5-e6f7-4081-9a2b-c3d4e5f60733"
            tid = result(c.call("Volume.create", [small, BLANK, self.SD2, self.IMG2, str(1 << 20), 5, 2]))
            self.assertEqual(wait_task(c, tid)["taskResult"], "success")
            endpoint = lambda sd, img, vol: {"endpoint_type": "div", "sd_id": sd,
                                             "img_id": img, "vol_id": vol}
            srcep = endpoint(SD, IMG, VOL)
            r = c.call("SDM.copy_data", [self.JOB, srcep, endpoint(self.SD2, self.IMG2, small)])
            self.assertEqual(r["error"]["code"], 100)   # too small
            r = c.call("SDM.copy_data", [self.JOB, srcep, {"endpoint_type": "external", "url": "x"}])
            self.assertEqual(r["error"]["code"], -32602)
            t0 = time.monotonic()
            r = c.call("SDM.copy_data", [self.JOB, srcep, endpoint(self.SD2, self.IMG2, self.VOL2)])
            self.assertIs(result(r), True)
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                job = result(c.call("Host.getJobs", ["storage", [self.JOB]]))[self.JOB]
                if job["status"] not in ("pending", "running"):
                    break
                time.sleep(0.02)
            secs = time.monotonic() - t0
            self.assertEqual(job["status"], "done", job)
            self.assertEqual(job["progress"], 100)
            statuses = []
            deadline = time.monotonic() + 5
            while "done" not in statuses and time.monotonic() < deadline:
                f = ev.read_frame(max(0.01, deadline - time.monotonic()))
                if f.cmd == "MESSAGE":
                    m = f.json()
                    if m.get("method") == "|jobs|status|" + self.JOB:
                        statuses.append(m["params"]["status"])
            self.assertIn("done", statuses)
            dst = os.path.join(dirs[1], self.SD2, "images", self.IMG2, self.VOL2)
            cmp = subprocess.run(["qemu-img", "compare", "-f", "raw", "-F", "qcow2", src, dst],
                                 capture_output=True)
            self.assertEqual(cmp.returncode, 0, cmp.stdout + cmp.stderr)
            vi = result(c.call("Volume.getInfo", [self.VOL2, BLANK, self.SD2, self.IMG2]))
            self.assertEqual((vi["legality"], vi["generation"]), ("LEGAL", 1))
            print("\ncopy_data raw -> qcow2, %d MiB virtual (%d MiB data): %.2f s, %.0f MiB/s virtual"
                  % (self.SIZE >> 20, (self.SIZE // (16 << 20)) * 4, secs,
                     (self.SIZE >> 20) / secs))
            ev.close()
            c.close()


class NfsMount(unittest.TestCase):
    """connectStorageServer for NFS tries a real mount(8) of a 127.0.0.1
    export.  There is no NFS server in the test environment, and where the
    kernel has no nfs filesystem no client either: the test checks that the
    failure is reported as VDSM reports it (status 477, mount point
    removed) and then reports itself SKIPPED with the reason - it never
    passes without a real NFS mount.  The argv and mount point naming are
    unit-tested (tests/unit/test_storage_conn.c)."""

    def test_nfs_mount(self):
        if os.geteuid() != 0:
            self.skipTest("needs root to mount")
        with open("/proc/filesystems") as f:
            kernel_nfs = any(l.split()[-1] in ("nfs", "nfs4") for l in f if l.strip())
        with vt.Daemon() as d:
            c = connect(d)
            conns = conn_params("127.0.0.1:/vdsmtest_export/", protocol_version="3",
                                mnt_options="retry=0")
            st = result(call_ready(c, "StoragePool.connectStorageServer", [BLANK, 1, conns]))
            mp = os.path.join(d.tmp, "storage", "mnt", "127.0.0.1:_vdsmtest__export")
            try:
                if st[0]["status"] == 0:   # a real server answered: exercise it
                    self.assertTrue(os.path.ismount(mp))
                    st = result(c.call("StoragePool.disconnectStorageServer", [BLANK, 1, conns]))
                    self.assertEqual(st[0]["status"], 0, st)
                    self.assertFalse(os.path.exists(mp))
                    return
                self.assertEqual(st[0]["status"], 477, st)
                self.assertEqual(st[0]["id"], CONN)
                self.assertFalse(os.path.exists(mp), "mount point left behind")
            finally:
                if os.path.ismount(mp):
                    subprocess.run(["umount", "-l", mp], capture_output=True)
                c.close()
        if not kernel_nfs:
            self.skipTest("kernel has no nfs filesystem (/proc/filesystems): mount failed "
                          "with 477 as expected, no NFS mount could be tested")
        self.skipTest("no NFS server on 127.0.0.1: mount failed with 477, nothing mounted")


class SpmTwoHosts(unittest.TestCase):
    def test_not_spm_reads_the_lease(self):
        """A host that is not SPM answers getSpmStatus from the lease on the
        master domain at the time of the call, as VDSM inspects its cluster
        lock (hsm.py getSpmStatus, spbackends.py getSpmStatus): the holder's
        hostID and version; spmId -1 and the last version once it is free
        or its holder has not renewed it for the lease time; 355 when the
        lease cannot be read.  (The monitor's 10 s refresh
        alone answered stale figures.)"""
        a, b = vt.Daemon(), vt.Daemon()
        shared = os.path.join(a.tmp, "shared")
        os.mkdir(shared, 0o755)
        try:
            ca, cb = connect(a), connect(b)
            make_pool(self, ca, 4, conn_params(shared), shared)   # host 1 SPM, version 1
            st = result(call_ready(cb, "StoragePool.connectStorageServer",
                                   [BLANK, 4, conn_params(shared)]))
            self.assertEqual(st[0]["status"], 0)
            r = cb.call("StoragePool.connect", [SP, 2, SP, SD, 1, {SD: "active"}])
            self.assertIs(result(r), True)

            def status(c):
                spm = result(c.call("StoragePool.getSpmStatus", [SP]))
                # as SpmStatusVDSCommand parses them
                self.assertIsInstance(int(str(spm["spmId"])), int)
                self.assertIsInstance(str(spm["spmLver"]), str)
                return spm["spmStatus"], spm["spmId"], spm["spmLver"]

            self.assertEqual(status(cb), ("Free", 1, 1))
            self.assertIs(result(ca.call("StoragePool.spmStop", [SP])), True)
            self.assertEqual(status(cb), ("Free", -1, 1))   # free: the version stays
            self.assertEqual(status(ca), ("Free", -1, 1))
            tid, ts = spm_start(ca)
            self.assertEqual(ts["taskResult"], "success", ts)
            self.assertEqual(status(ca), ("SPM", 1, 2))
            self.assertEqual(status(cb), ("Free", 1, 2))    # right away, no monitor round
            # the SPM dies: its record may still be held until it has stood
            # still for the lease time, then it cannot be (sanlock reports
            # a dead host's lease free; the version stays)
            ca.close()
            a.stop(sig=signal.SIGKILL)
            self.assertEqual(status(cb), ("Free", 1, 2))
            time.sleep(LEASE + RENEW)
            self.assertEqual(status(cb), ("Free", -1, 2))
            lease = os.path.join(shared, SD, "dom_md", "spm_lease")
            with open(lease, "w") as f:
                f.write("HOST_ID=7\nLVER=9\n_SHA_CKSUM=0\n")   # a bad checksum
            r = cb.call("StoragePool.getSpmStatus", [SP])
            self.assertEqual(r["error"]["code"], 355, r)
            self.assertIn("spm", r["error"]["message"].lower())
            cb.close()
        finally:
            a.__exit__(None, None, None)
            b.__exit__(None, None, None)

    def test_one_spm_and_failover_after_kill(self):
        a, b = vt.Daemon(), vt.Daemon()
        shared = os.path.join(a.tmp, "shared")
        os.mkdir(shared, 0o755)
        try:
            ca, cb = connect(a), connect(b)
            make_pool(self, ca, 4, conn_params(shared), shared)
            # host 2 joins the pool it finds on the same storage
            st = result(call_ready(cb, "StoragePool.connectStorageServer",
                                   [BLANK, 4, conn_params(shared)]))
            self.assertEqual(st[0]["status"], 0)
            r = cb.call("StoragePool.connect", [SP, 2, SP, SD, 1, {SD: "active"}])
            self.assertIs(result(r), True)
            spm = result(cb.call("StoragePool.getSpmStatus", [SP]))
            self.assertEqual((spm["spmStatus"], spm["spmId"], spm["spmLver"]), ("Free", 1, 1))
            self.assertEqual(result(cb.call("StoragePool.getInfo", [SP]))["info"]["name"],
                             "Default")
            # host 1 renews: host 2 cannot become SPM, nor change the pool
            tid, ts = spm_start(cb)
            self.assertEqual(ts["taskResult"], "cleanSuccess", ts)
            self.assertEqual(ts["code"], 651, ts)
            r = cb.call("Volume.create", [VOL, SP, SD, IMG, "1048576", 5, 2])
            self.assertEqual(r["error"]["code"], 654)
            self.assertEqual(result(ca.call("StoragePool.getSpmStatus", [SP]))["spmStatus"], "SPM")
            # kill -9 the SPM: host 2 takes over once the lease expired
            ca.close()
            a.stop(sig=signal.SIGKILL)
            t0 = time.monotonic()
            tid, ts = spm_start(cb, timeout=LEASE * 5 + 10)
            failover = time.monotonic() - t0
            self.assertEqual(ts["taskResult"], "success", ts)
            spm = result(cb.call("StoragePool.getSpmStatus", [SP]))
            self.assertEqual((spm["spmStatus"], spm["spmId"], spm["spmLver"]), ("SPM", 2, 2))
            self.assertGreaterEqual(failover, LEASE - 0.5)   # it did wait for expiry
            print("\nSPM failover after kill -9: %.2f s (renewal %d s, lease %d s)"
                  % (failover, RENEW, LEASE))
            tid = result(cb.call("Volume.create", [VOL, SP, SD, IMG, "1048576", 5, 2]))
            self.assertEqual(wait_task(cb, tid)["taskResult"], "success")
            cb.close()
        finally:
            a.__exit__(None, None, None)
            b.__exit__(None, None, None)


if __name__ == "__main__":
    unittest.main()
