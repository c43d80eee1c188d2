"""The engine-forms corpus (tests/engine_forms/<Namespace>.json) replayed
against a real vdsmd: every verb that ovirt-engine names and vdsmd
implements, with its parameters exactly as the engine builds them (JSON
forms of the Java values, file and line of ovirt-engine for each), and the
engine's reading rule for every key of the result it reads.

Entries run in the order of their "step": the host verbs, then the storage
set-up the later ones need (connectStorageServer, two LOCALFS domains, the
pool, SPM, volumes), the VM verbs on a VM made with the engine's domain XML
(libvirt's test driver), the storage tear-down; steps from 500 on are the
network entries, run in a network namespace pair (test_hostnet's set-up)
while a second connection polls Host.confirmConnectivity as the engine does.

Each answer must be accepted (code 0, or the VDSM code the entry names
with its reason) and every read must parse under the engine's rule: the
result is what FutureMap stores under the entry's response key and the
*Return class casts ((Map), (Object[]), (String)); then each read path is
checked ("a.b", "*" for every map value, "[]" for every list item): a key
that is missing is fine when the engine defaults it, a failure when the
engine's code would throw.  Host.getCapabilities / getStats /
getHardwareInfo reuse the rule tables of test_engine_host_flow.  Each
accepted result is also validated against its api/ result type
(apischema.py: VDSM's real answers where they differ from vdsm-api.yml).
What VDSM answers differently from vdsmd is listed in KNOWN below."""

import glob
import json
import os
import re
import time
import unittest
import uuid

import apischema
import test_engine_host_flow as hf   # the engine's type rules for Host results
import test_hostnet as hn            # network namespaces
import vdsmtest as vt

FORMS = os.path.normpath(os.path.join(vt.HERE, "..", "engine_forms"))
IRS = "jms.topic.vdsm_irs_requests"
NET_STEP = 500
UUID_RE = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
INT32 = (-2**31, 2**31 - 1)

# --- what the corpus found -------------------------------------------------
# step -> (the code vdsmd answers today, why that is not VDSM's answer).
# Each of these must still answer so: when one is fixed the test fails and
# asks for its line to go (as NOT_YET_ON_MAIN of test_engine_host_flow).
# Code 0 with a reason means the call is accepted but a read fails.
KNOWN = {}


def load_corpus():
    entries = []
    for path in sorted(glob.glob(os.path.join(FORMS, "[A-Z]*.json"))):
        with open(path) as f:
            doc = json.load(f)
        assert doc["namespace"] == os.path.basename(path)[:-5], path
        for e in doc["entries"]:
            assert e["verb"].startswith(doc["namespace"] + "."), (path, e["verb"])
            entries.append(e)
    entries.sort(key=lambda e: e["step"])
    steps = [e["step"] for e in entries]
    assert len(set(steps)) == len(steps), "two corpus entries share a step"
    return entries


# --- the engine's casts and reading rules ----------------------------------

def jstr(v):
    """Java's toString() of a decoded JSON value."""
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _digits(v, lo=None, hi=None):
    if isinstance(v, bool) or v is None:
        return False
    if isinstance(v, int):
        n = v
    elif isinstance(v, str) and re.fullmatch(r"-?\d+", v):
        n = int(v)
    else:
        return False
    return lo is None or lo <= n <= hi


def _is_float(s):
    try:
        float(s)
        return True
    except ValueError:
        return False


def rule(name, v):
    """None when v passes the engine's rule called name, else why not."""
    if name.startswith("enum:"):
        allowed = name[5:].split(",")
        if v is not None and jstr(v).lower() in (a.lower() for a in allowed):
            return None
        return "want one of %s, got %r" % (allowed, v)
    if name.startswith("enum_cs:"):   # Enum.valueOf: the exact name
        if isinstance(v, str) and v in name[8:].split(","):
            return None
        return "want one of %s (exact), got %r" % (name[8:], v)
    if name.startswith("list_of:"):
        if not isinstance(v, list):
            return "want an array, got %r" % (v,)
        for x in v:
            why = rule(name[8:], x)
            if why:
                return why
        return None
    if name.startswith("host:"):
        fn = name[5:]
        m = re.fullmatch(r"per\((\w+)\)", fn)
        check = hf.per(getattr(hf, m.group(1))) if m else getattr(hf, fn)
        return check(v)
    checks = {
        "map": lambda: isinstance(v, dict),
        "map_or_null": lambda: v is None or isinstance(v, dict),
        "list": lambda: isinstance(v, list),
        "list_or_null": lambda: v is None or isinstance(v, list),
        "string": lambda: isinstance(v, str),
        "string_or_null": lambda: v is None or isinstance(v, str),
        "tostring": lambda: v is not None,
        "long_tostring": lambda: _digits(v, -2**63, 2**63 - 1),
        "int_tostring": lambda: _digits(v, *INT32),
        "integer": lambda: not isinstance(v, bool) and isinstance(v, int) and INT32[0] <= v <= INT32[1],
        "integer_or_null": lambda: v is None or rule("integer", v) is None,
        "double": lambda: isinstance(v, float),
        "number": lambda: not isinstance(v, bool) and isinstance(v, (int, float)),  # (Number)
        "boolean": lambda: isinstance(v, bool),                                     # (Boolean)
        # VdsBrokerObjectsBuilder.assign*Value: assignIntValue takes an Integer or casts
        # (String) (anything else throws); assignDoubleValue a Double or parses a String
        # (an Integer is read as null); assignLongValue an Integer/Long or a String
        "assign_int": lambda: (not isinstance(v, bool) and isinstance(v, int) and INT32[0] <= v <= INT32[1])
        or (isinstance(v, str) and _digits(v.split(".")[0] or "x", *INT32)),
        "assign_double": lambda: isinstance(v, float) or (isinstance(v, str) and _is_float(v)),
        "assign_long": lambda: _digits(v, -2**63, 2**63 - 1)
        or (isinstance(v, str) and _digits(v.split(".")[0] or "x")),
        "string_long": lambda: isinstance(v, str) and _digits(v, -2**63, 2**63 - 1),
        "guid": lambda: isinstance(v, str) and UUID_RE.fullmatch(v) is not None,
        "bool": lambda: hf.boolish(v) is None,
        "bool_true": lambda: hf.boolish(v) is None and jstr(v).lower() == "true",
        "bool_false": lambda: hf.boolish(v) is None and jstr(v).lower() == "false",
    }
    if name not in checks:
        raise AssertionError("corpus names an unknown rule %r" % name)
    return None if checks[name]() else "rule %s: got %r" % (name, v)


def cast(name, v):
    """The *Return class's cast of the value FutureMap stored."""
    want = {"Map": dict, "Object[]": list, "String": str}
    if name in want and not isinstance(v, want[name]):
        return "(%s) cast of %r: ClassCastException" % (name, v)
    if name == "toString" and v is None:
        return "null result"
    return None


def walk(value, segs, where=""):
    """(where, value) for every value at path segs; a missing key yields
    (where, KeyError)."""
    if not segs:
        yield where, value
        return
    s, rest = segs[0], segs[1:]
    if s == "*" and isinstance(value, dict):
        for k, v in value.items():
            yield from walk(v, rest, "%s.%s" % (where, k))
    elif s == "[]" and isinstance(value, list):
        for i, v in enumerate(value):
            yield from walk(v, rest, "%s[%d]" % (where, i))
    elif s not in ("*", "[]") and isinstance(value, dict):
        if s in value:
            yield from walk(value[s], rest, "%s.%s" % (where, s))
        else:
            yield "%s.%s" % (where, s), KeyError
    else:
        yield where, TypeError


def check_reads(entry, res, ph):
    """The reasons the engine could not read res (empty when it can)."""
    out = []
    why = cast(entry["result_cast"][0], res)
    if why:
        return ["%s [%s]" % (why, entry["result_cast"][1])]
    for path, name, absent, src in entry["reads"]:
        if name.startswith("rules:"):
            for key, (fn, present) in getattr(hf, name[6:]).items():
                if key not in res:
                    if present is True:
                        out.append("%s missing [%s]" % (key, src))
                    continue
                why = fn(res[key])
                if why:
                    out.append("%s: %s [%s]" % (key, why, src))
            continue
        for where, v in walk(res, fill(path, ph).split(".") if path else []):
            if v is KeyError:
                if absent == "npe":
                    out.append("%s missing: the engine throws [%s]" % (where, src))
                continue
            if v is TypeError:
                out.append("%s: not a container for %s [%s]" % (where, path, src))
                continue
            why = rule(name, v)
            if why:
                out.append("%s: %s [%s]" % (where or "(result)", why, src))
    return out


def fill(value, ph):
    """value with every ${name} replaced from ph."""
    if isinstance(value, str):
        m = re.fullmatch(r"\$\{(\w+)\}", value)
        if m:
            return ph[m.group(1)]
        return re.sub(r"\$\{(\w+)\}", lambda m: str(ph[m.group(1)]), value)
    if isinstance(value, list):
        return [fill(v, ph) for v in value]
    if isinstance(value, dict):
        return {fill(k, ph): fill(v, ph) for k, v in value.items()}
    return value


class Replay:
    """The replay of a list of corpus entries on one daemon (mixed into
    the TestCases below)."""

    def answer(self, c, rid, timeout=60, poll=None):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if poll:
                r = poll.call("Host.confirmConnectivity", {}, timeout=10)
                self.assertIs(r.get("result"), True, r)
            try:
                f = c.read_frame(0.3 if poll else max(0.01, deadline - time.monotonic()))
            except (TimeoutError, OSError, EOFError, AssertionError):
                continue
            if f.cmd == "MESSAGE":
                resp = f.json()
                if isinstance(resp, dict) and resp.get("id") == rid:
                    return resp
        self.fail("no answer to %s" % rid)

    def send(self, method, params, conn="vds", poll=None, timeout=60):
        c = self.irs if conn == "irs" else self.vds
        dest = IRS if conn == "irs" else vt.REQUESTS
        return self.answer(c, c.request(method, params, dest=dest), timeout, poll)

    def ok(self, method, params=None):
        r = self.send(method, params or {})
        self.assertIn("result", r, (method, r))
        return r["result"]

    def wait_for(self, entry, res, ph):
        w = entry.get("wait")
        if not w or w == "confirm":
            return
        deadline = time.monotonic() + 30
        if w.startswith("up:"):
            vm = ph[w[3:]]
            while True:
                st = self.ok("VM.getStats", {"vmID": vm})[0]["status"]
                if st == "Up" or time.monotonic() > deadline:
                    self.assertEqual(st, "Up", entry["verb"])
                    return
                time.sleep(0.05)
        if w.startswith("job:") or w.startswith("vjob:"):   # Host.getJobs until it ends
            kind, name = w.split(":")
            job = ph[name]
            while True:
                jobs = self.ok("Host.getJobs", {"job_type": "storage" if kind == "job" else "virt",
                                                "job_ids": [job]})
                st = jobs.get(job, {}).get("status")
                if st in ("done", "failed", "aborted") or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            if st != "done":    # a failure the entry names (the test driver's limits)
                code = jobs.get(job, {}).get("error", {}).get("code")
                self.assertIn(code, entry.get("expect", {}).get("job_codes", []), jobs)
            return
        keep = w.startswith("keep:")  # later entries poll and clear it
        tid = ph[w[5:] if keep else w]
        while True:
            st = self.ok("Task.getStatus", {"taskID": tid})
            if st["taskState"] == "finished" or time.monotonic() > deadline:
                self.assertEqual((st["taskState"], st["taskResult"]), ("finished", "success"),
                                 (entry["verb"], st))
                break
            time.sleep(0.05)
        if not keep:                  # the engine clears what it polled
            self.assertIs(self.ok("Task.clear", {"taskID": tid}), True)

    def replay(self, entries, ph, poll_client=None):
        findings, refused = [], []
        for e in entries:
            with self.subTest(step=e["step"], verb=e["verb"]):
                params = fill(e["params"], ph)
                poll = poll_client() if e.get("wait") == "confirm" else None
                r = self.send(e["verb"], params, e.get("connection", "vds"), poll)
                codes = e.get("expect", {}).get("codes", [0])
                code = r["error"]["code"] if "error" in r else 0
                if e["step"] in KNOWN and KNOWN[e["step"]][0]:
                    want, why = KNOWN[e["step"]]
                    findings.append("%d %s: %s" % (e["step"], e["verb"], why))
                    self.assertEqual(code, want, "%s: fixed? then drop it from KNOWN (%r)" % (why, r))
                    continue
                if code not in codes:
                    findings.append("%d %s: code %s %s (wants %s)" % (
                        e["step"], e["verb"], code, r.get("error", {}).get("message", ""), codes))
                    self.fail(findings[-1])
                if code:
                    refused.append("%d %s: %d" % (e["step"], e["verb"], code))
                    continue
                res = r["result"]
                # the engine's reading rules, then the result type of api/ with the
                # places where VDSM answers differently from vdsm-api.yml
                bad = check_reads(e, res, ph) + apischema.validate(e["verb"], res)
                for name, key in e.get("save", {}).items():
                    ph[name] = res if not key else res.get(key) if isinstance(res, dict) else None
                self.wait_for(e, res, ph)
                if e["step"] in KNOWN:
                    why = KNOWN[e["step"]][1]
                    findings.append("%d %s: %s" % (e["step"], e["verb"], why))
                    self.assertTrue(bad, "%s: fixed? then drop it from KNOWN" % why)
                    continue
                if bad:
                    findings.append("%d %s: %s" % (e["step"], e["verb"], "; ".join(bad)))
                    self.fail(findings[-1])
        if findings:
            print("\nengine-forms findings:\n  " + "\n  ".join(findings))
        if refused:     # VDSM's own refusals here (the entries' expect)
            print("\nanswered with the code VDSM gives here:\n  " + "\n  ".join(refused))
        return findings


def placeholders(d):
    ph = {"BLANK": "00000000-0000-0000-0000-000000000000", "deadPort": vt.free_port()}
    for name in ("spUUID", "sdUUID", "sd2UUID", "imgUUID", "volUUID", "vol2UUID", "img3UUID",
                 "vol3UUID", "img4UUID", "vol4UUID", "img5UUID", "vol5UUID", "connId", "conn2Id",
                 "newVmId", "memDevId", "snapJob", "mergeJob", "sealJob", "jobId", "bmJob1",
                 "bmJob2", "bmJob3", "ticketId", "transferId", "nbdServer", "dlTicketId",
                 "img6UUID", "vol6UUID", "vol7UUID", "cmJob", "amJob", "upJob"):
        ph[name] = str(uuid.uuid4())
    backup_placeholders(ph, d.tmp)
    for i, name in ((1, "localPath"), (2, "localPath2")):
        ph[name] = os.path.join(d.tmp, "localfs%d" % i)
        os.makedirs(ph[name])
    return ph


def backup_placeholders(ph, scratch_dir):
    """The live backup entries' ids (steps 240-249): two backups, their
    checkpoints, the engine's scratch disks (files under scratch_dir)."""
    for name in ("bkFull", "bkIncr", "cpFirst", "cpSecond", "scratch1Img", "scratch1Vol",
                 "scratch2Img", "scratch2Vol"):
        ph[name] = str(uuid.uuid4())
    for name in ("scratch1", "scratch2"):
        ph[name] = os.path.join(scratch_dir, name + ".qcow2")
    ph["cpSecondTime"] = int(time.time())


BACKUP_VERBS = ("VM.start_backup", "VM.backup_info", "VM.stop_backup", "VM.list_checkpoints",
                "VM.redefine_checkpoints", "VM.delete_checkpoints")


def backup_entries():
    """The live backup entries: on libvirt's test driver they answer the
    codes their expect names; test_virt_backup replays them on real QEMU,
    where each must answer 0."""
    return [e for e in load_corpus() if e["verb"] in BACKUP_VERBS]


class CorpusShape(unittest.TestCase):
    def test_covers_every_engine_verb_vdsmd_implements(self):
        """Every verb of the corpus is implemented (api/), every entry
        names its ovirt-engine source and its result cast."""
        with open(os.path.join(vt.VDSMD_BUILD, "gen", "api.json")) as f:
            api = json.load(f)
        entries = load_corpus()
        for e in entries:
            self.assertTrue(api["verbs"][e["verb"]]["implemented"], e["verb"])
            self.assertRegex(e["built"], r"Json(RpcVdsServer|RpcIIrsServer)\.java:\d+", e["verb"])
            self.assertIn(e["result_cast"][0], ("none", "Map", "Object[]", "String", "toString"), e)
            if e.get("response_key") == "status":
                # the result becomes the call's status: FutureVDSCommand's
                # StatusOnlyReturn casts it to a Map and reads its code
                self.assertEqual(e["result_cast"][0], "Map", e)
                self.assertIn("code", [r[0] for r in e["reads"]], e)
            for read in e["reads"]:
                self.assertEqual(len(read), 4, (e["verb"], read))
                self.assertRegex(read[2], r"^(npe|skip|default:.*)$", (e["verb"], read))
        # every verb the engine names (engine-verbs.json) that vdsmd implements
        with open(os.path.join(FORMS, "engine-verbs.json")) as f:
            named = json.load(f)["verbs"]
        want = {v for v in named if api["verbs"].get(v, {}).get("implemented")}
        self.assertGreaterEqual(len(want), 90)
        self.assertEqual(want - {e["verb"] for e in entries}, set(), "engine verbs without an entry")
        self.assertEqual({e["verb"] for e in entries} - set(named), set(), "entries the engine never sends")


class EngineForms(Replay, unittest.TestCase):
    """Steps below NET_STEP on a plain vdsmd (test driver, file storage)."""

    def setUp(self):
        self.d = vt.Daemon()
        self.addCleanup(self.d.__exit__, None, None, None)
        self.assertTrue(self.d.wait_ready(), "vdsmd never became ready")
        self.vds, self.irs = hf_conns(self.d)
        self.addCleanup(self.vds.close)
        self.addCleanup(self.irs.close)

    def test_replay(self):
        ph = placeholders(self.d)
        vms = [v["vmId"] for v in self.ok("Host.getVMList", {"onlyUUID": False}) if v.get("status") == "Up"]
        self.assertTrue(vms)
        ph["vmId"] = vms[0]
        # entries of a flow (steps 320-339, "flow": "image") are replayed, with
        # the transfers between them, by test_image_engine_flow
        self.replay([e for e in load_corpus() if e["step"] < NET_STEP and not e.get("flow")], ph)


def hf_conns(d):
    """The engine's two connections: VDS and IRS, both subscribed."""
    out = []
    for sub in ("vds", "irs"):
        c = d.stomp()
        assert c.connect(heart_beat="0,15000").cmd == "CONNECTED"
        c.subscribe(vt.RESPONSES, sub + "-responses", receipt=sub)
        out.append(c)
    return out


@unittest.skipUnless(hn.CAN_NETNS, hn.NETNS_PROBLEM or "")
class EngineFormsNet(Replay, unittest.TestCase):
    """Steps from NET_STEP on, vdsmd in the "host" namespace of
    test_hostnet's set-up (eth0 192.0.2.1/26 to the engine, eth1 and eth2
    free), the test on the engine's side."""

    setUp = hn.HostNet.setUp
    _leave = hn.HostNet._leave
    _stop = hn.HostNet._stop
    client = hn.HostNet.client

    def net_entries(self, with_needs):
        self.vds = self.c
        self.irs = self.client()
        # the live storage migration flow (steps 530-539, "flow": "lsm") needs
        # real QEMU: test_virt_lsm replays it
        return [e for e in load_corpus() if e["step"] >= NET_STEP and not e.get("flow") and
                bool(e.get("needs")) == with_needs]

    def test_replay_net(self):
        """The network flow (setupNetworks with the engine's forms while
        confirmConnectivity is polled, getCapabilities, setSafeNetworkConfig,
        getStats), VM NICs on the new network, removal."""
        ph = {name: str(uuid.uuid4()) for name in ("netVmId", "spJob", "spSdUUID",
                                                   "spImgUUID", "spVolUUID")}
        self.replay(self.net_entries(False), ph, self.client)

    @unittest.skipUnless(hn.HAS_BOND and hn.HAS_VLAN, "this kernel makes no bond or VLAN links")
    def test_replay_bonds(self):
        """The entries that need bonds and VLANs (the engine's bond forms)."""
        self.replay(self.net_entries(True), {}, self.client)


if __name__ == "__main__":
    unittest.main()
