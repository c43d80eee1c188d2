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
import unittest

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
