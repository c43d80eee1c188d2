"""Integration tests of vdsm-client: the real binary against a real vdsmd
(tests/integration/vdsmtest.py starts it), plus the paths that must fail
before any connection.

Output is compared byte for byte with Python's json.dumps(indent=4,
sort_keys=True) (and json.dumps(sort_keys=True) for --compact), as VDSM's
vdsm-client prints.
"""

import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import threading
import time
import unittest
import urllib.request  # noqa: F401  (stdlib only; HTTP goes through vdsmtest)

import vdsmtest as vt

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
CLIENT = os.environ.get("VDSM_CLIENT_BIN", os.path.join(REPO, "build", "vdsm-client"))
UUID0 = "00000000-0000-0000-0000-000000000000"
UNKNOWN_UUID = "5ca1ab1e-0000-4000-8000-00000000beef"


def run(*args, stdin=None, timeout=30):
    """Run vdsm-client; returns (rc, stdout str, stderr str)."""
    p = subprocess.run([CLIENT] + [str(a) for a in args], input=stdin,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def free_port():
    """A loopback port where nothing listens."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def pretty(v):
    return json.dumps(v, indent=4, sort_keys=True) + "\n"


def compact(v):
    return json.dumps(v, sort_keys=True) + "\n"


def schema():
    """{"Ns.verb": [(name, type, required), ...]} of the implemented verbs,
    from --list and -h."""
    rc, out, _ = run("--list")
    assert rc == 0
    verbs = {}
    for line in out.splitlines():
        if line.endswith(" (not implemented)"):
            continue
        ns, verb = line.split()
        rc, h, _ = run(ns, verb, "-h")
        assert rc == 0, (ns, verb)
        params = []
        for m in re.finditer(r"^  (\S+)\s+([\w-]+), (required|optional)", h, re.M):
            params.append((m.group(1), m.group(2), m.group(3) == "required"))
        verbs[ns + "." + verb] = params
    return verbs


SCHEMA = None


def verbs():
    global SCHEMA
    if SCHEMA is None:
        SCHEMA = schema()
    return SCHEMA


def find_verb(ptype):
    """(verb, param) of a declared param of type ptype, or (None, None)."""
    for name, params in sorted(verbs().items()):
        for p in params:
            if p[1] == ptype:
                return name, p[0]
    return None, None


def wait_ready(d, timeout=15):
    """Wait until the daemon stops answering 99 (first samples taken)."""
    d.wait_log(r"ready: ", timeout=timeout)
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        rc, out, err = run("--insecure", "-p", d.port, "Host", "getCapabilities")
        if rc == 0 or "code=99" not in err:
            return
        time.sleep(0.1)


class WithoutDaemon(unittest.TestCase):
    """Usage errors (exit 2) and connection failures (exit 1)."""

    def test_no_arguments_is_usage(self):
        rc, out, err = run()
        self.assertEqual(rc, 2)
        self.assertIn("usage:", err)
        self.assertEqual(out, "")

    def test_help_exits_zero(self):
        rc, out, _ = run("-h")
        self.assertEqual(rc, 0)
        self.assertIn("--insecure", out)
        self.assertIn("--watch-events", out)

    def test_unknown_option_verb_and_missing_verb(self):
        for args in (["--bogus", "Host", "ping2"], ["Host"], ["Nope", "nothing"],
                     ["-p", "notaport", "Host", "ping2"], ["--timeout", "-1", "Host", "ping2"],
                     ["--codec", "xml", "Host", "ping2"]):
            rc, out, err = run(*args)
            self.assertEqual(rc, 2, args)
            self.assertIn("error:", err, args)

    def test_unknown_param_is_usage(self):
        rc, _, err = run("--insecure", "-p", free_port(), "Host", "ping2", "nosuch=1")
        self.assertEqual(rc, 2)
        self.assertIn("unknown parameter 'nosuch'", err)
        self.assertNotIn("onnect", err)

    def test_param_without_equals_is_usage(self):
        verb, param = find_verb("uuid")
        self.assertIsNotNone(verb, "no verb with a uuid param in the schema")
        ns, v = verb.split(".")
        rc, _, err = run("--insecure", "-p", free_port(), ns, v, param)
        self.assertEqual(rc, 2)
        self.assertIn("name=value", err)

    def test_type_errors_fail_before_connecting(self):
        """Nothing listens on the port: a usage error proves no connection
        was tried (a try would exit 1 with 'refused')."""
        port = free_port()
        cases = {"int": "twelve", "bool": "maybe", "uuid": "not-a-uuid",
                 "object": "[1]", "array": "{\"a\": 1}"}
        tried = 0
        for ptype, bad in cases.items():
            verb, param = find_verb(ptype)
            if not verb:
                continue
            tried += 1
            ns, v = verb.split(".")
            rc, out, err = run("--insecure", "-p", port, ns, v, "%s=%s" % (param, bad))
            self.assertEqual(rc, 2, (verb, param, err))
            self.assertIn("'%s'" % param, err)
            self.assertIn("must be %s" % ptype, err)
            self.assertNotIn("refused", err)
            self.assertEqual(out, "")
        self.assertGreaterEqual(tried, 1, "no typed params in the schema")

    def test_file_and_name_value_conflict(self):
        verb, param = find_verb("uuid")
        self.assertIsNotNone(verb)
        ns, v = verb.split(".")
        rc, _, err = run("--insecure", "-p", free_port(), "-f", "-", ns, v,
                         "%s=%s" % (param, UUID0), stdin=b"{}")
        self.assertEqual(rc, 2)
        self.assertIn("conflicting", err)

    def test_bad_file_is_usage(self):
        port = free_port()
        with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
            for content, why in (("", "empty"), ("{nope", ""), ("[1, 2]", "JSON object"),
                                 ('{"nosuch": 1}', "unknown parameter")):
                f.seek(0)
                f.truncate()
                f.write(content)
                f.flush()
                rc, _, err = run("--insecure", "-p", port, "-f", f.name, "Host", "ping2")
                self.assertEqual(rc, 2, content)
                self.assertIn(why, err)
        rc, _, err = run("--insecure", "-p", port, "-f", "/nonexistent/x.json", "Host", "ping2")
        self.assertEqual(rc, 2)
        self.assertIn("/nonexistent/x.json", err)

    def test_file_type_mismatch_is_usage(self):
        verb, param = find_verb("uuid")
        self.assertIsNotNone(verb)
        ns, v = verb.split(".")
        rc, _, err = run("--insecure", "-p", free_port(), "-f", "-", ns, v,
                         stdin=json.dumps({param: 5}).encode())
        self.assertEqual(rc, 2)
        self.assertIn("must be uuid", err)

    def test_connection_refused(self):
        port = free_port()
        rc, out, err = run("--insecure", "-p", port, "Host", "ping2")
        self.assertEqual(rc, 1)
        self.assertEqual(out, "")
        self.assertIn("localhost:%d" % port, err)
        self.assertIn("refused", err)
        self.assertEqual(len(err.strip().splitlines()), 1)
        rc, _, err = run("--insecure", "-a", "127.0.0.1", "-p", port, "Host", "ping2")
        self.assertEqual(rc, 1)
        self.assertIn("127.0.0.1:%d" % port, err)

    def test_timeout_names_host_and_port(self):
        """A peer that accepts but never answers."""
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(4)
        port = srv.getsockname()[1]
        try:
            t0 = time.monotonic()
            rc, out, err = run("--insecure", "-p", port, "--timeout", "0.3", "Host", "ping2")
            self.assertLess(time.monotonic() - t0, 10)
        finally:
            srv.close()
        self.assertEqual(rc, 1)
        self.assertIn("localhost:%d" % port, err)
        self.assertIn("0.3 seconds", err)
        self.assertEqual(len(err.strip().splitlines()), 1)

    def test_missing_tls_files_fail_plainly(self):
        # a listener, so that the TLS set-up is reached
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(4)
        try:
            port = srv.getsockname()[1]
            rc, _, err = run("-p", port, "--cert", "/nonexistent/c.pem", "Host", "ping2")
        finally:
            srv.close()
        self.assertEqual(rc, 1)
        self.assertIn("localhost:%d" % port, err)
        self.assertIn("/nonexistent/c.pem", err)

    def test_list_and_verb_help(self):
        rc, out, _ = run("--list")
        self.assertEqual(rc, 0)
        lines = out.splitlines()
        self.assertIn("Host ping2", lines)
        self.assertEqual(lines, sorted(lines))
        # verbs declared in api/ but not implemented are marked
        with open(os.path.join(vt.VDSMD_BUILD, "gen", "api.json")) as f:
            api = json.load(f)["verbs"]
        for name, v in api.items():
            ns, verb = name.split(".")
            mark = "" if v["implemented"] else " (not implemented)"
            self.assertIn("%s %s%s" % (ns, verb, mark), lines)
        self.assertEqual(len(lines), len(api))
        # -h shows the declared result type and error codes
        rc, out, _ = run("Image", "delete", "-h")
        self.assertEqual(rc, 0)
        self.assertIn("\nresult: %s\n" % api["Image.delete"]["result_text"], out)
        self.assertIn("errors: %s (VDSM error codes)" % ", ".join(
            str(c) for c in api["Image.delete"]["errors"]), out)
        verb, param = find_verb("uuid")
        self.assertIsNotNone(verb)
        ns, v = verb.split(".")
        rc, out, _ = run(ns, v, "-h")
        self.assertEqual(rc, 0)
        self.assertIn(param, out)
        self.assertIn("uuid", out)
        template = out.split("JSON template for -f:\n", 1)[1]
        t = json.loads(template)
        self.assertIn(param, t)
        self.assertEqual(template, pretty(t))

    def test_pretty_matches_python(self):
        docs = [
            {"b": 1, "a": [1, 2.5, None, True, False, {}, []],
             "c": {"z": "x", "\u00e9": "\u00fc\u2603\U0001F600",
                   "ctl": "\x00\x01\x1f\x7f\t\n\r\b\f\"\\/"}},
            [], {}, "s", 0, -1, 1.0, -0.0, 1e16, 1e15, 0.1, 1.5e-5, 1e-4, 1e-5, 1e300,
            2 ** 63, 2 ** 64 - 1, -2 ** 63, 3.141592653589793, 123456.789e3,
            [[[]], [{}], {"a": {"b": {"c": [1, {"d": []}]}}}],
            {"": 1, "A": 2, "a": 3, "B": [1, "two"], "\u00e9": 0, "z\u00e9": 1},
        ]
        for d in docs:
            src = json.dumps(d).encode()
            rc, out, _ = run("--pretty", stdin=src)
            self.assertEqual(rc, 0)
            self.assertEqual(out, pretty(d), src)
            rc, out, _ = run("--pretty", "--compact", stdin=src)
            self.assertEqual(out, compact(d), src)

    def test_bash_completion(self):
        rc, out, _ = run("--bash-completion")
        self.assertEqual(rc, 0)
        self.assertIn("complete -F _vdsm_client vdsm-client", out)
        self.assertIn("ping2", out)
        subprocess.run(["bash", "-n"], input=out.encode(), check=True)
        # complete "vdsm-client Host pi" in a real bash
        script = out + '\nCOMP_WORDS=(vdsm-client Host pi); COMP_CWORD=2; _vdsm_client; ' \
                       'printf "%s\\n" "${COMPREPLY[@]}"\n'
        p = subprocess.run(["bash", "-c", script], stdout=subprocess.PIPE, check=True)
        self.assertIn("ping2", p.stdout.decode().split())


class WithDaemon(unittest.TestCase):
    """Calls against a plaintext vdsmd."""

    @classmethod
    def setUpClass(cls):
        cls.d = vt.Daemon(log_level="debug")
        wait_ready(cls.d)
        cls.base = ["--insecure", "-p", str(cls.d.port)]

    @classmethod
    def tearDownClass(cls):
        cls.d.__exit__(None, None, None)

    def call(self, *args, **kw):
        return run(*(self.base + list(args)), **kw)

    def direct(self, method, params=None):
        """The same call through vdsmtest's own STOMP client."""
        c = self.d.stomp()
        try:
            c.connect()
            c.subscribe(vt.RESPONSES, "s1")
            return c.call(method, params)
        finally:
            c.close()

    def test_ping2(self):
        rc, out, err = self.call("Host", "ping2")
        self.assertEqual((rc, out, err), (0, "true\n", ""))

    def test_output_is_python_json_sorted_indented(self):
        rc, out, err = self.call("Host", "getCapabilities")
        self.assertEqual(rc, 0, err)
        v = json.loads(out)
        self.assertIsInstance(v, dict)
        self.assertEqual(out, pretty(v))
        self.assertEqual(v, self.direct("Host.getCapabilities")["result"])
        rc, out2, _ = self.call("--compact", "Host", "getCapabilities")
        self.assertEqual(rc, 0)
        self.assertEqual(out2, compact(v))
        self.assertEqual(len(out2.splitlines()), 1)

    def test_msgpack_codec(self):
        rc, out, err = self.call("--codec", "msgpack", "Host", "ping2")
        if rc == 2 and "not built in" in err:
            self.fail("msgpack not built in")
        self.assertEqual((rc, out), (0, "true\n"), err)
        rc, out, err = self.call("--codec", "msgpack", "Host", "getCapabilities")
        self.assertEqual(rc, 0, err)
        self.assertEqual(out, pretty(json.loads(out)))

    def test_flow_id_reaches_server_log(self):
        start = len(self.d.log_lines())
        rc, _, err = self.call("--flow-id", "flow-test-4711", "Host", "ping2")
        self.assertEqual(rc, 0, err)
        self.assertTrue(self.d.wait_log(r"flow-test-4711", timeout=5, start=start),
                        "flow id not in the daemon log")

    def test_server_error_exit_1(self):
        """An unknown object: the command, its args and (code=N, message=...)."""
        verb, param = find_verb("uuid")
        self.assertIsNotNone(verb)
        ns, v = verb.split(".")
        params = self.required_params(verb, {param: UNKNOWN_UUID})
        rc, out, err = self.call(ns, v, *["%s=%s" % kv for kv in params.items()])
        self.assertEqual(rc, 1, err)
        self.assertEqual(out, "")
        self.assertIn("Command %s with args" % verb, err)
        self.assertIn(UNKNOWN_UUID, err)
        self.assertRegex(err, r"\(code=-?\d+, message=.+\)")
        # the same code as the server gives a direct client
        direct = self.direct(verb, params)
        self.assertIn("error", direct)
        self.assertIn("(code=%d, message=%s)" % (direct["error"]["code"],
                                                 direct["error"]["message"]), err)

    def required_params(self, verb, given):
        """given plus a value of the right type for every other required param."""
        sample = {"int": 1, "int-or-string": 1, "number": 1, "bool": False,
                  "string": "x", "uuid": UNKNOWN_UUID, "object": {}, "array": [], "any": 0}
        out = dict(given)
        for name, ptype, req in verbs()[verb]:
            if req and name not in out:
                out[name] = sample[ptype]
        return out

    def test_params_from_stdin(self):
        verb, param = find_verb("uuid")
        self.assertIsNotNone(verb)
        ns, v = verb.split(".")
        params = self.required_params(verb, {param: UNKNOWN_UUID})
        rc, _, err_stdin = self.call("-f", "-", ns, v, stdin=json.dumps(params).encode())
        args = ["%s=%s" % (k, json.dumps(x) if not isinstance(x, str) else x)
                for k, x in params.items()]
        rc2, _, err_args = self.call(ns, v, *args)
        self.assertEqual(rc, rc2)
        self.assertEqual(err_stdin, err_args)
        self.assertIn(UNKNOWN_UUID, err_stdin)
        with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
            json.dump(params, f)
            f.flush()
            rc3, _, err_file = self.call("-f", f.name, ns, v)
        self.assertEqual((rc3, err_file), (rc, err_stdin))
        rc, out, err = self.call("-f", "-", "Host", "ping2", stdin=b"{}")
        self.assertEqual((rc, out), (0, "true\n"), err)

    def test_typed_params_reach_server_typed(self):
        """The server checks every param's JSON type centrally ("param 'X' of
        V must be T"); typed name=value params pass that check.  Sent as a
        JSON string, an object or array is refused; an int or bool string is
        coerced as VDSM does ("7", "true"), but not one that says something
        else ("seven", "maybe")."""
        checked = []
        for ptype, text, bad_text in (("int", "7", "seven"), ("bool", "true", "maybe"),
                                      ("object", "{}", "{}"), ("array", "[]", "[]")):
            verb, param = find_verb(ptype)
            if not verb:
                continue
            checked.append(ptype)
            ns, v = verb.split(".")
            params = self.required_params(verb, {})
            args = ["%s=%s" % (k, json.dumps(x) if not isinstance(x, str) else x)
                    for k, x in params.items() if k != param]
            args.append("%s=%s" % (param, text))
            rc, out, err = self.call(ns, v, *args)
            type_error = "param '%s' of %s must be" % (param, verb)
            self.assertNotIn(type_error, err, (verb, param))
            if bad_text != text:  # VDSM's coercion: the string form passes too
                ok = dict(params)
                ok[param] = text
                direct = self.direct(verb, ok)
                self.assertNotIn(type_error, json.dumps(direct), (verb, param, direct))
            bad = dict(params)
            bad[param] = bad_text  # as a JSON string
            direct = self.direct(verb, bad)
            self.assertEqual(direct.get("error", {}).get("code"), -32602, (verb, param, direct))
            self.assertIn(type_error, direct["error"]["message"])
        self.assertTrue(checked, "no int/bool/object/array params in the schema")

    def test_bool_and_list_params_change_results(self):
        """A bool and a JSON list typed from name=value do what the server
        documents: fullStatus=true adds fields, vmList filters."""
        rc, out, err = self.call("Host", "getVMList", "fullStatus=false")
        self.assertEqual(rc, 0, err)
        short = json.loads(out)
        self.assertTrue(short, "no VM in the libvirt test driver")
        rc, out, err = self.call("Host", "getVMList", "fullStatus=true")
        self.assertEqual(rc, 0, err)
        full = json.loads(out)
        self.assertEqual(len(full), len(short))
        self.assertGreater(set(full[0]), set(short[0]))
        vm = short[0]["vmId"]
        rc, out, err = self.call("Host", "getVMList", "vmList=%s" % json.dumps([vm]))
        self.assertEqual((rc, [v["vmId"] for v in json.loads(out)]), (0, [vm]), err)
        rc, out, err = self.call("Host", "getVMList", "vmList=%s" % json.dumps([UNKNOWN_UUID]))
        self.assertEqual((rc, out), (0, "[]\n"), err)

    def watcher(self, *pattern):
        """A --watch-events process, subscribed when this returns; its
        stdout lines go to a queue."""
        import queue
        p = subprocess.Popen([CLIENT] + self.base + ["--watch-events"] + list(pattern),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.addCleanup(lambda: p.poll() is None and (p.kill(), p.wait()))
        line = p.stderr.readline().decode()
        self.assertIn("watching events on localhost:%d" % self.d.port, line)
        q = queue.Queue()

        def reader():
            for raw in p.stdout:
                q.put(raw.decode())
            q.put(None)
        threading.Thread(target=reader, daemon=True).start()
        return p, q

    def test_watch_events_sees_vm_status_from_another_client(self):
        rc, out, err = self.call("Host", "getVMList")
        self.assertEqual(rc, 0, err)
        vms = json.loads(out)
        self.assertTrue(vms, "no VM in the libvirt test driver")
        vm = vms[0]["vmId"]
        w, q = self.watcher("VM_status")
        other, oq = self.watcher("|jobs|*")
        rc, out, err = self.call("VM", "pause", "vmID=" + vm)
        self.assertEqual((rc, json.loads(out)), (0, {"vmList": {}}), err)
        try:
            line = q.get(timeout=10)
        finally:
            rc, out, err = self.call("VM", "cont", "vmID=" + vm)
            self.assertEqual(rc, 0, err)
        self.assertIsNotNone(line)
        ev = json.loads(line)
        self.assertEqual(line, compact(ev))  # one JSON line, sorted keys
        self.assertEqual(ev["method"], "|virt|VM_status|" + vm)
        self.assertEqual(ev["params"][vm]["status"], "Paused")
        self.assertIsInstance(ev["params"]["notify_time"], int)
        line = q.get(timeout=10)  # the cont
        self.assertEqual(json.loads(line)["params"][vm]["status"], "Up")
        for p in (w, other):
            p.send_signal(signal.SIGINT)
            self.assertEqual(p.wait(10), 0)
        self.assertIsNone(oq.get(timeout=5))  # EOF: the pattern matched nothing
        self.assertIsNone(q.get(timeout=5))

    def test_watch_events_refused_port(self):
        rc, out, err = run("--insecure", "-p", free_port(), "--watch-events")
        self.assertEqual(rc, 1)
        self.assertIn("refused", err)

    def test_timeout_option_accepted(self):
        rc, out, _ = self.call("--timeout", "5", "Host", "ping2")
        self.assertEqual((rc, out), (0, "true\n"))


class Storage(unittest.TestCase):
    """--wait on a storage task (Volume.create returns a task id)."""

    @classmethod
    def setUpClass(cls):
        cls.d = vt.Daemon()
        wait_ready(cls.d)
        cls.base = ["--insecure", "-p", str(cls.d.port)]
        cls.sd = "5d000000-0000-4000-8000-000000000001"
        rc, out, err = run(*(cls.base + ["StorageDomain", "create", "storagedomainID=" + cls.sd,
                                         "domainType=4", "typeArgs=", "name=clientdom",
                                         "domainClass=1"]))
        assert (rc, out) == (0, "true\n"), err

    @classmethod
    def tearDownClass(cls):
        cls.d.__exit__(None, None, None)

    def create_args(self, vol, img, size):
        return ["Volume", "create", "volumeID=" + vol, "storagedomainID=" + self.sd,
                "imageID=" + img, "size=%d" % size, "volFormat=5", "preallocate=1",
                "desc=made by vdsm-client", "legal=true"]

    def test_wait_without_terminal_prints_only_final_status(self):
        vol, img = "70000000-0000-4000-8000-000000000001", "1a000000-0000-4000-8000-000000000001"
        rc, out, err = run(*(self.base + ["--wait"] + self.create_args(vol, img, 32 << 20)))
        self.assertEqual(rc, 0, err)
        self.assertEqual(err, "")
        st = json.loads(out)
        self.assertEqual(out, pretty(st))
        self.assertEqual(st["taskState"], "finished")
        self.assertEqual(st["taskResult"], "success")
        self.assertEqual(st["progress"], 100)
        rc, out, err = run(*(self.base + ["Image", "getVolumes", "imageID=" + img,
                                          "storagedomainID=" + self.sd]))
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out), [vol])

    def test_without_wait_prints_task_id(self):
        vol, img = "70000000-0000-4000-8000-000000000002", "1a000000-0000-4000-8000-000000000002"
        rc, out, err = run(*(self.base + self.create_args(vol, img, 1 << 20)))
        self.assertEqual(rc, 0, err)
        task = json.loads(out)
        self.assertRegex(task, r"^[0-9a-f-]{36}$")
        # the task exists on the server
        rc, out, err = run(*(self.base + ["Task", "getStatus", "taskID=" + task]))
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out)["taskID"], task)

    def test_wait_on_terminal_draws_progress(self):
        import pty
        vol, img = "70000000-0000-4000-8000-000000000003", "1a000000-0000-4000-8000-000000000003"
        master, slave = pty.openpty()
        try:
            p = subprocess.Popen([CLIENT] + self.base + ["--wait"] +
                                 self.create_args(vol, img, 64 << 20),
                                 stdout=subprocess.PIPE, stderr=slave)
            os.close(slave)
            slave = None
            tty = b""
            while True:
                try:
                    chunk = os.read(master, 4096)
                except OSError:
                    break
                if not chunk:
                    break
                tty += chunk
            out = p.stdout.read().decode()
            p.stdout.close()
            self.assertEqual(p.wait(30), 0, tty)
        finally:
            os.close(master)
            if slave is not None:
                os.close(slave)
        tty = tty.decode()
        self.assertIn("\r[", tty)
        self.assertIn("100%", tty)
        self.assertIn("finished", tty)
        self.assertEqual(json.loads(out)["taskResult"], "success")

    def test_wait_on_failing_task_exits_1(self):
        """Preallocating 1 PiB fails inside the task (no space): --wait
        prints the final status and exits 1."""
        vol, img = "70000000-0000-4000-8000-000000000005", "1a000000-0000-4000-8000-000000000005"
        rc, out, err = run(*(self.base + ["--wait"] + self.create_args(vol, img, 1 << 50)))
        self.assertEqual(rc, 1, err)
        st = json.loads(out)
        self.assertEqual(out, pretty(st))
        self.assertEqual(st["taskState"], "finished")
        self.assertNotEqual(st["code"], 0)
        self.assertIn("task %s failed" % st["taskID"], err)

    def test_wait_on_refused_create_exits_1(self):
        """A second create of the same volume id is refused: --wait exits 1
        with the server's error."""
        vol, img = "70000000-0000-4000-8000-000000000004", "1a000000-0000-4000-8000-000000000004"
        rc, _, err = run(*(self.base + ["--wait"] + self.create_args(vol, img, 1 << 20)))
        self.assertEqual(rc, 0, err)
        rc, out, err = run(*(self.base + ["--wait"] + self.create_args(vol, img, 1 << 20)))
        self.assertEqual((rc, out), (1, ""))
        self.assertIn("Command Volume.create with args", err)
        self.assertRegex(err, r"\(code=\d+, message=.+\)")


class Tls(unittest.TestCase):
    """TLS with the example PKI; refusal with a wrong CA."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="client-pki-")
        cls.pki = vt.make_pki(os.path.join(cls.tmp, "pki"))
        cls.d = vt.Daemon(tls=True, pki=cls.pki)

    @classmethod
    def tearDownClass(cls):
        cls.d.__exit__(None, None, None)
        subprocess.run(["rm", "-rf", cls.tmp])

    def tls_args(self, ca="ca.crt", client="client"):
        p = self.pki
        return ["-p", str(self.d.port), "--cert", os.path.join(p, client + ".crt"),
                "--key", os.path.join(p, client + ".key"), "--cacert", os.path.join(p, ca)]

    def test_tls_ping(self):
        rc, out, err = run(*(self.tls_args() + ["Host", "ping2"]))
        self.assertEqual((rc, out, err), (0, "true\n", ""))

    def test_wrong_ca_refused(self):
        rc, out, err = run(*(self.tls_args(ca="wrong-ca.crt") + ["Host", "ping2"]))
        self.assertEqual(rc, 1)
        self.assertEqual(out, "")
        self.assertIn("localhost:%d" % self.d.port, err)
        self.assertIn("TLS", err)
        self.assertEqual(len(err.strip().splitlines()), 1)

    def test_untrusted_client_refused(self):
        rc, out, err = run(*(self.tls_args(client="wrong-client") + ["Host", "ping2"]))
        self.assertEqual(rc, 1)
        self.assertEqual(out, "")
        self.assertIn("localhost:%d" % self.d.port, err)

    def test_plaintext_to_tls_port_fails(self):
        rc, out, err = run("--insecure", "--timeout", "5", "-p", self.d.port, "Host", "ping2")
        self.assertEqual(rc, 1)
        self.assertIn("localhost:%d" % self.d.port, err)


if __name__ == "__main__":
    unittest.main()
