"""The API schema (api/*.yaml) and its generator (api/gen.py): the generator
refuses schemas that would lie or not build, emits tables the build compiles
and a JSON form; a verb declared but not implemented answers -32601 naming it
from the real daemon."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

import apischema
import vdsmtest as vt

API = os.path.join(vt.REPO, "api")
sys.path.insert(0, API)
import gen  # noqa: E402  (api/gen.py)

TYPES = """types:
  Thing:
    description: a thing
    kind: object
    fields:
      id: uuid
      size: {type: int-or-numstring, required: false}
  Mode:
    description: a mode
    kind: enum
    values: [a, b]
"""

VERB = """namespace: Ns
verbs:
  get:
    description: get a thing
    implemented: true
    backend: host
    flags: [blocking]
    params:
      - {name: id, type: uuid, required: true, description: which}
      - {name: mode, type: Mode, default: a, description: how}
      - {name: all, type: boolean, default: false, description: every one}
      - {name: ids, type: list<uuid>, required: false, description: some}
    result: list<Thing>
    errors: [100, 358]
  later:
    description: not yet
    implemented: false
    result: map<Thing>|boolean
    errors: []
"""


class GeneratorTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="vdsmd-api-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def write(self, types=TYPES, verbs=VERB, name="Ns.yaml"):
        with open(os.path.join(self.dir, "types.yaml"), "w") as f:
            f.write(types)
        with open(os.path.join(self.dir, name), "w") as f:
            f.write(verbs)

    def fails(self, msg, **kw):
        self.write(**kw)
        with self.assertRaises(gen.SchemaError) as cm:
            gen.load(self.dir)
        self.assertIn(msg, str(cm.exception))
        return str(cm.exception)

    def test_valid_schema_generates_tables(self):
        self.write()
        types, verbs = gen.load(self.dir)
        c = gen.emit_c(types, verbs)
        self.assertIn('{ "id", RPC_T_UUID, true, NULL, "which" }', c)
        self.assertIn('{ "mode", RPC_T_STRING, false, "\\"a\\"", "how" }', c)
        self.assertIn('{ "all", RPC_T_BOOL, false, "false", "every one" }', c)
        self.assertIn('{ "ids", RPC_T_ARRAY, false, NULL, "some" }', c)
        self.assertIn("static const int e_Ns_get[] = { 100, 358 };", c)
        self.assertIn(".flags = RPC_F_BLOCKING,", c)
        self.assertIn(".flags = RPC_F_UNIMPLEMENTED,", c)
        # implemented verbs in their backend's table, the rest in another
        host = c.split("rpc_schema_host[] = {")[1].split("};")[0]
        unimpl = c.split("rpc_schema_unimplemented[] = {")[1].split("};")[0]
        self.assertIn('"Ns.get"', host)
        self.assertNotIn('"Ns.later"', host)
        self.assertIn('"Ns.later"', unimpl)
        j = json.loads(gen.emit_json(types, verbs))
        self.assertEqual(j["verbs"]["Ns.get"]["result"],
                         {"t": "list", "of": {"t": "name", "name": "Thing"}})
        self.assertEqual([p["name"] for p in j["verbs"]["Ns.get"]["params"]],
                         ["id", "mode", "all", "ids"])
        self.assertFalse(j["types"]["Thing"]["fields"]["size"]["required"])
        self.assertEqual(j["verbs"]["Ns.later"]["result"]["t"], "union")

    def test_c_strings_escaped(self):
        self.assertEqual(gen.c_str('a"b\\c\n??=é'), '"a\\"b\\\\c\\012\\077\\077=\\303\\251"')

    def test_refusals(self):
        cases = [
            ("needs required: true/false or a default",
             VERB.replace("required: true, description: which", "description: which")),
            ("give either required or default",
             VERB.replace("default: false,", "default: false, required: false,")),
            ("unknown type 'Nope'", VERB.replace("list<Thing>", "list<Nope>")),
            ("needs backend", VERB.replace("    backend: host\n", "")),
            ("backend is only for implemented",
             VERB.replace("implemented: false\n", "implemented: false\n    backend: host\n")),
            ("default 'x' does not fit", VERB.replace("default: false", "default: x")),
            ("declared twice", VERB.replace("name: ids", "name: id")),
            ("unknown keys ['retval']", VERB.replace("    errors: []", "    errors: []\n    retval: 1")),
            ("missing 'errors'", VERB.replace("    errors: []\n", "")),
            ("flags must be", VERB.replace("[blocking]", "[fast]")),
            ("error codes", VERB.replace("[100, 358]", "[100, x]")),
            ("missing '>'", VERB.replace("list<Thing>", "list<Thing")),
            ("key 'get' given twice", VERB + "  get:\n    description: again\n"),
        ]
        for msg, verbs in cases:
            with self.subTest(msg=msg):
                err = self.fails(msg, verbs=verbs)
                self.assertIn("Ns.yaml", err)

    def test_vdsm_baseline(self):
        """api/vdsm/ holds VDSM's verbs not implemented yet and its types; a
        declaration in api/ itself replaces the baseline's of that name."""
        self.write()
        os.mkdir(os.path.join(self.dir, "vdsm"))
        base = os.path.join(self.dir, "vdsm")
        with open(os.path.join(base, "types.yaml"), "w") as f:
            f.write("types:\n  Thing:\n    description: base\n    kind: object\n"
                    "    open: true\n  Other:\n    description: base only\n"
                    "    kind: map\n    of: int\n")
        with open(os.path.join(base, "Ns.yaml"), "w") as f:
            f.write("namespace: Ns\nverbs:\n  get:\n    description: base get\n"
                    "    implemented: false\n    result: Other\n    errors: []\n"
                    "  more:\n    description: base only\n    implemented: false\n"
                    "    result: Other\n    errors: []\n")
        types, verbs = gen.load(self.dir)
        by = {v["name"]: v for v in verbs}
        self.assertEqual(sorted(by), ["Ns.get", "Ns.later", "Ns.more"])
        self.assertTrue(by["Ns.get"]["implemented"])         # api/Ns.yaml wins
        self.assertEqual(by["Ns.get"]["description"], "get a thing")
        self.assertFalse(by["Ns.more"]["implemented"])
        self.assertEqual(types["Thing"]["description"], "a thing")  # api/types.yaml wins
        self.assertEqual(types["Other"]["kind"], "map")
        with open(os.path.join(base, "Ns.yaml"), "a") as f:
            f.write("  done:\n    description: x\n    implemented: true\n    backend: host\n"
                    "    result: Other\n    errors: []\n")
        with self.assertRaises(gen.SchemaError) as cm:
            gen.load(self.dir)
        self.assertIn("Ns.done", str(cm.exception))
        self.assertIn("unimplemented verbs only", str(cm.exception))

    def test_namespace_matches_file(self):
        self.fails("belongs in Ns.yaml", name="Other.yaml")

    def test_type_refusals(self):
        self.fails("unknown type 'Gone'", types=TYPES.replace("id: uuid", "id: Gone"))
        self.fails("kind must be", types=TYPES.replace("kind: enum", "kind: set"))
        self.fails("required must be", types=TYPES.replace("required: false", "required: maybe"))

    def test_cli_exit_status_and_md_check(self):
        self.write()
        out = os.path.join(self.dir, "out")
        md = os.path.join(self.dir, "api.md")
        r = subprocess.run([sys.executable, os.path.join(API, "gen.py"), "--api", self.dir,
                            "--c", out + ".c", "--json", out + ".json", "--md", md])
        self.assertEqual(r.returncode, 0)
        self.assertTrue(os.path.getsize(out + ".c") > 0)
        r = subprocess.run([sys.executable, os.path.join(API, "gen.py"), "--api", self.dir,
                            "--check-md", md])
        self.assertEqual(r.returncode, 0)
        with open(md, "a") as f:
            f.write("stale\n")
        r = subprocess.run([sys.executable, os.path.join(API, "gen.py"), "--api", self.dir,
                            "--check-md", md], stderr=subprocess.PIPE)
        self.assertEqual(r.returncode, 1)
        self.assertIn(b"out of date", r.stderr)
        self.write(verbs=VERB.replace("list<Thing>", "list<Nope>"))
        r = subprocess.run([sys.executable, os.path.join(API, "gen.py"), "--api", self.dir,
                            "--c", out + ".c"], stderr=subprocess.PIPE)
        self.assertEqual(r.returncode, 1)
        self.assertIn(b"Ns.get", r.stderr)

    def test_man_section_between_markers(self):
        self.write()
        types, verbs = gen.load(self.dir)
        head = '.TH X 1\n.SH NAME\nx \\- y\n\n'
        tail = '.SH SEE ALSO\n.BR vdsmd (8)\n.\\" trailing comment, no newline at end'
        page = head + gen.MAN_BEGIN + "\nold text\n" + gen.MAN_END + "\n" + tail
        out = gen.fill_man(page, types, verbs)
        self.assertTrue(out.startswith(head + gen.MAN_BEGIN + "\n"), out[:200])
        self.assertTrue(out.endswith("\n" + gen.MAN_END + "\n" + tail))
        self.assertNotIn("old text", out)
        section = out[len(head):-len(tail)]
        self.assertIn(".SH VERBS", section)
        # implemented verb in full: params in order with type and need
        self.assertIn("\\fBNs get\\fR\nget a thing", section)
        pos = [section.index("\\fI%s\\fR" % n) for n in ("id", "mode", "all", "ids")]
        self.assertEqual(pos, sorted(pos))
        self.assertIn("\\fIid\\fR (\\fBuuid\\fR, required)", section)
        self.assertIn('\\fImode\\fR (\\fBMode\\fR, default \\fB"a"\\fR)', section)
        self.assertIn("\\fIids\\fR (\\fBlist<uuid>\\fR, optional)", section)
        self.assertIn("Result: \\fBlist<Thing>\\fR", section)
        # unimplemented verb in the compact list only
        self.assertIn("Not implemented by vdsmd yet (1): \\fBlater\\fR.", section)
        self.assertEqual(gen.fill_man(out, types, verbs), out)  # idempotent

    def test_man_markers_missing_is_a_clear_error(self):
        self.write()
        types, verbs = gen.load(self.dir)
        B, E = gen.MAN_BEGIN + "\n", gen.MAN_END + "\n"
        for page in (".TH X 1\n", B + ".SH X\n", ".SH X\n" + E, E + B, B + B + E):
            with self.assertRaises(gen.SchemaError) as cm:
                gen.fill_man(page, types, verbs, "x.1")
            self.assertIn("x.1: needs exactly one line", str(cm.exception))
            self.assertIn("BEGIN GENERATED VERBS", str(cm.exception))
        man = os.path.join(self.dir, "x.1")
        with open(man, "w") as f:
            f.write(".TH X 1\n")
        for opt in ("--man", "--check-man"):
            r = subprocess.run([sys.executable, os.path.join(API, "gen.py"), "--api", self.dir,
                                opt, man], stderr=subprocess.PIPE, universal_newlines=True)
            self.assertEqual(r.returncode, 1)
            self.assertIn("END GENERATED VERBS", r.stderr)
        with open(man) as f:
            self.assertEqual(f.read(), ".TH X 1\n")  # untouched

    def test_cli_man_check(self):
        self.write()
        man = os.path.join(self.dir, "x.1")
        with open(man, "w") as f:
            f.write(".TH X 1\n" + gen.MAN_BEGIN + "\n" + gen.MAN_END + "\n.SH END\n")
        run = [sys.executable, os.path.join(API, "gen.py"), "--api", self.dir]
        r = subprocess.run(run + ["--check-man", man], stderr=subprocess.PIPE)
        self.assertEqual(r.returncode, 1)
        self.assertIn(b"out of date", r.stderr)
        self.assertEqual(subprocess.run(run + ["--man", man]).returncode, 0)
        self.assertEqual(subprocess.run(run + ["--check-man", man]).returncode, 0)
        with open(man) as f:
            text = f.read()
        self.assertTrue(text.startswith(".TH X 1\n" + gen.MAN_BEGIN + "\n"))
        self.assertTrue(text.endswith(gen.MAN_END + "\n.SH END\n"))
        self.write(verbs=VERB.replace("get a thing", "get one thing"))
        r = subprocess.run(run + ["--check-man", man], stderr=subprocess.PIPE)
        self.assertEqual(r.returncode, 1)


class RepoSchemaTest(unittest.TestCase):
    def test_repo_schema_loads_and_build_copy_is_current(self):
        types, verbs = gen.load(API)
        names = {v["name"] for v in verbs}
        self.assertGreaterEqual(sum(v["implemented"] for v in verbs), 37)
        for n in ("Host.ping2", "VM.create", "Volume.create", "StoragePool.connect"):
            self.assertIn(n, names)
        with open(os.path.join(vt.VDSMD_BUILD, "gen", "api.json")) as f:
            built = f.read()
        self.assertEqual(built, gen.emit_json(types, verbs),
                         "build/gen/api.json is older than api/*.yaml: rebuild")

    def test_docs_api_md_is_current(self):
        r = subprocess.run([sys.executable, os.path.join(API, "gen.py"), "--check-md",
                            os.path.join(vt.REPO, "docs", "api.md")],
                           stderr=subprocess.PIPE, universal_newlines=True)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_man_page_verbs_are_current_and_render(self):
        page = os.path.join(vt.REPO, "man", "vdsm-client.1")
        r = subprocess.run([sys.executable, os.path.join(API, "gen.py"), "--check-man", page],
                           stderr=subprocess.PIPE, universal_newlines=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        groff = shutil.which("groff")
        if groff is None:
            self.skipTest("groff not installed: rendering not checked")
        r = subprocess.run([groff, "-ww", "-z", "-man", page],
                           stderr=subprocess.PIPE, universal_newlines=True)
        self.assertEqual((r.returncode, r.stderr), (0, ""))


class ValidatorTest(unittest.TestCase):
    """apischema's rules, each with an accepted and a refused value."""

    def setUp(self):
        d = tempfile.mkdtemp(prefix="vdsmd-api-")
        self.addCleanup(shutil.rmtree, d, True)
        with open(os.path.join(d, "types.yaml"), "w") as f:
            f.write(TYPES)
        with open(os.path.join(d, "Ns.yaml"), "w") as f:
            f.write(VERB)
        self.schema = json.loads(gen.emit_json(*gen.load(d)))

    def errs(self, expr, value):
        tree = gen.parse_type(expr, "test")
        e = []
        apischema.Validator(self.schema, set()).check(tree, value, "r", e)
        return e

    def test_builtins(self):
        u = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
        cases = [  # type, accepted, refused
            ("boolean", True, "true"), ("string", "x", 1), ("uuid", u, "nope"),
            ("int", -3, 1.5), ("int", 7, True), ("uint", 3, -1), ("float", 1.5, "1.5"),
            ("object", {}, []), ("array", [], {}), ("null", None, 0),
            ("int-or-numstring", "123", "12a"), ("int-or-numstring", 5, 5.0),
            ("numstring", "0.25", 0.25), ("float-string", "2400.000", 2400),
            ("float-string", 0.5, "x"), ("bool-or-string", "False", "yes"),
            ("bool-or-string", True, 1),
        ]
        for t, ok, bad in cases:
            with self.subTest(t=t, ok=ok, bad=bad):
                self.assertEqual(self.errs(t, ok), [])
                self.assertNotEqual(self.errs(t, bad), [])

    def test_objects_enums_lists_maps_unions(self):
        u = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
        self.assertEqual(self.errs("Thing", {"id": u, "size": "10"}), [])
        self.assertEqual(self.errs("Thing", {"id": u}), [])  # optional absent
        e = self.errs("Thing", {"size": 1})
        self.assertEqual(e, ["r: required key 'id' of Thing missing"])
        e = self.errs("Thing", {"id": u, "extra": 1})
        self.assertEqual(e, ["r: key 'extra' not declared in Thing"])
        e = self.errs("Thing", {"id": u, "size": 1.5})
        self.assertEqual(e, ["r.size: expected int or a string of digits, got 1.5"])
        self.assertEqual(self.errs("Mode", "a"), [])
        self.assertIn("not one of Mode", self.errs("Mode", "c")[0])
        self.assertEqual(self.errs("list<Thing>", [{"id": u}]), [])
        self.assertEqual(self.errs("list<Thing>", [{"id": u}, {}]),
                         ["r[1]: required key 'id' of Thing missing"])
        self.assertEqual(self.errs("map<int>", {"a": 1}), [])
        self.assertEqual(self.errs("map<int>", {"a": "1"}), ['r.a: expected int, got "1"'])
        self.assertEqual(self.errs("Thing|boolean", True), [])
        self.assertIn("fits none of Thing | boolean", self.errs("Thing|boolean", 3)[0])

    def test_gaps_only_excuse_the_listed_key(self):
        v = apischema.Validator(self.schema, {("Thing", "id")})
        e = []
        v.check({"t": "name", "name": "Thing"}, {"size": "x"}, "r", e)
        self.assertEqual(e, ["r.size: expected int or a string of digits, got \"x\""])

    def test_known_gaps_name_real_types_and_keys(self):
        types, _ = gen.load(API)
        for t, k in sorted(apischema.KNOWN_GAPS):
            with self.subTest(t=t, k=k):
                self.assertIn(t, types)
                self.assertEqual(types[t]["kind"], "object")
                if k in types[t]["fields"]:
                    self.assertTrue(types[t]["fields"][k]["required"],
                                    "%s.%s is optional: drop it from KNOWN_GAPS" % (t, k))


    def test_vdsm_sends_names_required_keys_with_a_source(self):
        """Each VDSM_SENDS entry excuses a key the schema requires (else it
        is noise) and cites VDSM's code (a file:line)."""
        types, _ = gen.load(API)
        self.assertGreater(len(apischema.VDSM_SENDS), 0)
        for (t, k), why in sorted(apischema.VDSM_SENDS.items()):
            with self.subTest(t=t, k=k):
                self.assertIn(k, types[t]["fields"])
                self.assertTrue(types[t]["fields"][k]["required"], "%s.%s is optional" % (t, k))
                self.assertNotIn((t, k), apischema.KNOWN_GAPS)
                self.assertRegex(why, r"[a-z_/]+\.py:[0-9]+")

    def test_vdsm_sends_makes_the_key_optional(self):
        v = apischema.Validator(json.loads(gen.emit_json(*gen.load(API))), set())
        e = []
        v.check({"t": "name", "name": "VmDefinition"},
                {"vmId": "9a7c2d1e-0b3f-4c5d-8e6f-7a8b9c0d1e2f", "status": "Up"}, "r", e)
        self.assertEqual(e, [])
        v.check({"t": "name", "name": "VmDefinition"}, {"status": "Up"}, "r", e)
        self.assertEqual(e, ["r: required key 'vmId' of VmDefinition missing"])


class KnownGapsStillRealTest(unittest.TestCase):
    """Each KNOWN_GAPS entry of the host and virt types still describes the
    daemon: a key listed as missing is missing, a key listed as extra is
    sent.  When a helper adds the key, this fails until the entry goes."""

    def test_gaps_match_the_daemon(self):
        types, _ = gen.load(API)
        with vt.Daemon() as d:
            d.wait_ready()
            c = d.stomp()
            c.connect()
            c.subscribe(vt.RESPONSES, "s1")
            deadline = time.monotonic() + vt.TIMEOUT
            r = c.call("Host.getAllVmStats")
            while "result" not in r and time.monotonic() < deadline:  # 99 first
                time.sleep(0.05)
                r = c.call("Host.getAllVmStats")
            samples = {
                "VdsmCapabilities": [c.call("Host.getCapabilities")["result"]],
                "HostStats": [c.call("Host.getStats")["result"]],
                "RunningVmStats": [v for v in r["result"] if v["status"] == "Up"],
                "VMFullInfo": c.call("Host.getVMFullList")["result"],
            }
            c.close()
        samples["NumaNode"] = list(samples["VdsmCapabilities"][0].get("numaNodes", {}).values())
        samples["NumaNodeMemoryStats"] = list(
            samples["HostStats"][0].get("numaNodeMemFree", {}).values())
        checked = 0
        for t, k in sorted(apischema.KNOWN_GAPS):
            objs = samples.get(t)
            if not objs:
                continue  # storage types, VmDefinition: not sampled here
            checked += 1
            sent = any(k in o for o in objs)
            if k in types[t]["fields"]:
                self.assertFalse(sent, "vdsmd now sends %s.%s: remove it from "
                                 "apischema.KNOWN_GAPS" % (t, k))
            else:
                self.assertTrue(sent, "vdsmd no longer sends the extra key %s.%s: remove "
                                "it from apischema.KNOWN_GAPS" % (t, k))
        # every entry is of a type sampled here
        self.assertEqual(checked, sum(1 for t, _ in apischema.KNOWN_GAPS if samples.get(t)))
        self.assertEqual({t for t, _ in apischema.KNOWN_GAPS if not samples.get(t)}, set())


class ValidatorCatchesDriftTest(unittest.TestCase):
    """The harness validates every Conn.call result: a handler drifting from
    its declared type fails the test that calls it."""

    def test_wrong_results_fail(self):
        with vt.Daemon() as d:
            d.wait_ready()
            c = d.stomp()
            c.connect()
            c.subscribe(vt.RESPONSES, "s1")
            deadline = time.monotonic() + vt.TIMEOUT
            r = c.call("Host.getAllVmStats")
            while "result" not in r and time.monotonic() < deadline:  # 99 first
                time.sleep(0.05)
                r = c.call("Host.getAllVmStats")
            vm = [s for s in r["result"] if s["status"] == "Up"][0]["vmId"]
            stats = c.call("VM.getStats", {"vmID": vm})["result"]
            apischema.check_response("VM.getStats", stats)
            # what main answered before: VM.pause -> true (the engine casts
            # the result to a map), memoryStats counters as strings
            with self.assertRaises(apischema.SchemaViolation) as cm:
                apischema.check_response("VM.pause", True)
            self.assertIn("VmRunningStateChange", str(cm.exception))
            bad = json.loads(json.dumps(stats))
            bad[0]["memoryStats"]["majflt"] = "0"
            with self.assertRaises(apischema.SchemaViolation) as cm:
                apischema.check_response("VM.getStats", bad)
            self.assertIn("majflt", str(cm.exception))
            # a missing required key, an undeclared key
            bad = json.loads(json.dumps(stats))
            del bad[0]["vmId"]
            self.assertRaises(apischema.SchemaViolation, apischema.check_response,
                              "VM.getStats", bad)
            bad = json.loads(json.dumps(stats))
            bad[0]["noSuchKey"] = 1
            self.assertRaises(apischema.SchemaViolation, apischema.check_response,
                              "VM.getStats", bad)
            # Conn.call itself validates: declare Host.ping2 (which answers
            # true) as returning a list and the call fails
            verb = apischema.api()["verbs"]["Host.ping2"]
            saved = verb["result"]
            verb["result"] = {"t": "list", "of": {"t": "name", "name": "uuid"}}
            try:
                with self.assertRaises(apischema.SchemaViolation):
                    c.call("Host.ping2")
            finally:
                verb["result"] = saved
            self.assertIs(c.call("Host.ping2")["result"], True)
            c.close()


class CoercionTest(unittest.TestCase):
    """Params as the engine sends them, coerced as VDSM does (rpc/params.c)."""

    def test_engine_style_params(self):
        blank = "00000000-0000-0000-0000-000000000000"
        img = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
        with vt.Daemon() as d:
            d.wait_ready()
            c = d.stomp()
            c.connect()
            c.subscribe(vt.RESPONSES, "s1")
            # Image.delete postZero/force as "true"/"false" strings (the
            # engine's form): past the param check, to the storage answer
            r = c.call("Image.delete", {"imageID": img, "storagepoolID": blank,
                                        "storagedomainID": img, "postZero": "false",
                                        "force": "True"})
            self.assertIn(r["error"]["code"], (268, 358), r)
            r = c.call("Image.delete", {"imageID": img, "storagepoolID": blank,
                                        "storagedomainID": img, "postZero": "maybe"})
            self.assertEqual(r["error"]["code"], -32602, r)
            self.assertIn("'postZero'", r["error"]["message"])
            self.assertIn("'maybe'", r["error"]["message"])
            # "" and null as "no filter"
            r = c.call("Host.getStorageDomains", {"storagepoolID": "", "domainClass": "",
                                                  "storageType": "", "remotePath": None})
            self.assertIsInstance(r.get("result"), list, r)
            c.close()


class UnimplementedVerbTest(unittest.TestCase):
    def test_declared_unimplemented_answers_32601(self):
        _, verbs = gen.load(API)
        todo = [v["name"] for v in verbs if not v["implemented"]]
        if not todo:
            self.skipTest("every declared verb is implemented")
        with vt.Daemon() as d:
            d.wait_ready()
            c = d.stomp()
            c.connect()
            c.subscribe(vt.RESPONSES, "s1")
            for name in todo:
                r = c.call(name, {})
                self.assertEqual(r["error"]["code"], -32601, r)
                self.assertIn(name, r["error"]["message"])
                self.assertIn("not implemented", r["error"]["message"])
            # an implemented verb still works, an undeclared one is -32601 too
            self.assertIs(c.call("Host.ping2")["result"], True)
            r = c.call("Host.noSuchVerb")
            self.assertEqual(r["error"]["code"], -32601)
            self.assertNotIn("not implemented", r["error"]["message"])
            c.close()


if __name__ == "__main__":
    unittest.main()
