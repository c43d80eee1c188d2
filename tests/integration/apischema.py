"""apischema - the response validator of the integration suite, built from the
same API schema as the daemon ($VDSMD_BUILD/gen/api.json, written by api/gen.py
from api/*.yaml).

vdsmtest's Conn.call() runs check_response() on every successful response, so
every verb a test calls through the harness is checked against the verb's
declared result type: a missing required key, a wrong JSON type, a value
outside an enum or a key the type does not declare fails the test with
SchemaViolation naming the verb and the path (e.g. "VM.getStats:
result[0].memoryStats.mem_free: expected int, got str '12'").

    import apischema
    errors = apischema.validate("Volume.getSize", result)   # [] when it fits
    apischema.check_response("Volume.getSize", result)      # raises

Type expressions and builtins: api/README.md.
"""

import json
import os
import re

# KNOWN_GAPS: the one allow-list of the contract.  Each entry (type, key) is
# a required key vdsmd does not produce yet (or, for the few marked, a key it
# sends that VDSM's type does not declare).  Such a key missing (or extra) is
# not reported; everything else about the value still is (a present key of
# the wrong type fails).  The helpers working on these readings (host: caps
# and stats; virt: VM stats and definitions; storage: domain and lease
# facts) delete entries as they produce the keys; nobody adds one to hide a
# regression.  tests/integration/test_api_schema.py fails on an entry that
# names a type or key the schema does not have, or (host and virt types) one
# that no longer describes the daemon: the key now sent, the extra key gone.
KNOWN_GAPS = set()   # empty: the last (Volume.getInfo's lease path / offset) is sent

# VDSM_SENDS: where VDSM's code answers otherwise than its own vdsm-api.yml
# (the baseline api/vdsm/ is taken from it), keyed like KNOWN_GAPS: a key
# the schema calls required that VDSM's code never sends is optional here,
# each with the VDSM source (oVirt/vdsm lib/vdsm/..., file:line at
# fd4b0df20b9b, 2026-06-25) that shows it.  vdsmd may still send the key;
# "0 mismatches" then means "answers as VDSM answers".  Result shapes that
# differ as a whole (Image.prepare's path alone, getQemuImageInfo's bitmaps
# as arrays, the {code, message} of setIoTune) are declared in api/types.yaml
# with their VDSM source instead.
_VMSTATUS = ("VM.getInfo and Host.getVMFullList answer vm.status(): vmId, status, "
             "statusTime only (virt/vm.py:1918, API.py:1771, rpc/Bridge.py:281; since "
             "5b024c4b3, 2019)")
VDSM_SENDS = {
    ("VmDefinition", k): _VMSTATUS for k in (
        "acpiEnable", "clientIp", "kvmEnable", "memGuaranteedSize", "memSize", "nice",
        "pid", "smp", "timeOffset", "transparentHugePages", "vmName", "vmType")
}
VDSM_SENDS.update({
    ("VMFullInfo", k): _VMSTATUS for k in (
        "acpiEnable", "arch", "clientIp", "cpuType", "custom", "devices", "emulatedMachine",
        "guestDiskMapping", "guestFQDN", "guestIPs", "keyboardLayout", "kvmEnable",
        "memGuaranteedSize", "memSize", "nice", "nicModel", "pauseCode", "pid",
        "pitReinjection", "smartcardEnable", "smp", "smpCoresPerSocket",
        "spiceSslCipherSuite", "timeOffset", "transparentHugePages", "username", "vmName",
        "vmType")
})
VDSM_SENDS.update({
    ("RunningVmStats", "displayPort"):
        "no code in lib/vdsm sends displayPort; a console's ports are in displayInfo "
        "(virt/vm.py:2237)",
    ("RunningVmStats", "pauseCode"):
        "virt/vm.py:2089 _getVmPauseCodeStats: only once the VM was paused (pause() sets it, "
        "cont clears it)",
})
VDSM_SENDS.update({
    ("StorageDomainInfo", k): "storage/sd.py:1558 getInfo (and fileSD.py:691, which adds "
                              "remotePath) has no %s: it is StoragePool.getInfo's" % k
    for k in ("lver", "master_ver", "spm_id")
})
VDSM_SENDS.update({
    ("VolumeInfoResponse", "allocType"):
        "volume.py:203 metadata2info has no allocType (type carries the allocation)",
})

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
UUID_RE = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
INT_RE = re.compile(r"^-?[0-9]+$")
NUM_RE = re.compile(r"^[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$")
MAX_ERRORS = 20


class SchemaViolation(AssertionError):
    pass


_API = None


def api_path():
    build = os.environ.get("VDSMD_BUILD", os.path.join(REPO, "build"))
    return os.path.join(build, "gen", "api.json")


def api():
    global _API
    if _API is None:
        with open(api_path()) as f:
            _API = json.load(f)
    return _API


def _short(v):
    s = json.dumps(v)
    return s if len(s) <= 40 else s[:37] + "..."


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _builtin(name, v):
    """None when v fits the builtin type, else what was expected."""
    if name == "any":
        return None
    if name == "null":
        return None if v is None else "null"
    if name == "boolean":
        return None if isinstance(v, bool) else "boolean"
    if name == "string":
        return None if isinstance(v, str) else "string"
    if name == "uuid":
        return None if isinstance(v, str) and UUID_RE.match(v) else "uuid string"
    if name == "int":
        return None if _is_int(v) else "int"
    if name == "uint":
        return None if _is_int(v) and v >= 0 else "uint"
    if name in ("float", "number"):
        return None if (_is_int(v) or isinstance(v, float)) else "number"
    if name == "object":
        return None if isinstance(v, dict) else "object"
    if name == "array":
        return None if isinstance(v, list) else "array"
    if name == "int-or-numstring":
        ok = _is_int(v) or (isinstance(v, str) and INT_RE.match(v))
        return None if ok else "int or a string of digits"
    if name == "numstring":
        return None if isinstance(v, str) and NUM_RE.match(v) else "a number as a string"
    if name == "float-string":
        ok = isinstance(v, float) or (isinstance(v, str) and NUM_RE.match(v))
        return None if ok else "a number as a string or a JSON float (not a JSON int)"
    if name == "bool-or-string":
        ok = isinstance(v, bool) or (isinstance(v, str) and v.lower() in ("true", "false"))
        return None if ok else 'a boolean or "true"/"false"'
    raise KeyError(name)


class Validator:
    def __init__(self, schema, gaps=None):
        self.types = schema["types"]
        self.builtins = set(schema["builtins"])
        self.gaps = KNOWN_GAPS if gaps is None else gaps

    def check(self, tree, v, path, errs):
        if len(errs) >= MAX_ERRORS:
            return
        t = tree["t"]
        if t == "list":
            if not isinstance(v, list):
                errs.append("%s: expected a list, got %s" % (path, _short(v)))
                return
            for i, x in enumerate(v):
                self.check(tree["of"], x, "%s[%d]" % (path, i), errs)
        elif t == "map":
            if not isinstance(v, dict):
                errs.append("%s: expected an object (map), got %s" % (path, _short(v)))
                return
            for k, x in v.items():
                self.check(tree["of"], x, "%s.%s" % (path, k), errs)
        elif t == "union":
            alts = []
            for a in tree["of"]:
                e = []
                self.check(a, v, path, e)
                if not e:
                    return
                alts.append(e)
            best = min(alts, key=len)
            errs.append("%s: fits none of %s; closest: %s" % (
                path, " | ".join(self.name(a) for a in tree["of"]), "; ".join(best[:3])))
        else:
            self.check_named(tree["name"], v, path, errs)

    def name(self, tree):
        if tree["t"] == "name":
            return tree["name"]
        if tree["t"] == "union":
            return "|".join(self.name(a) for a in tree["of"])
        return "%s<%s>" % (tree["t"], self.name(tree["of"]))

    def check_named(self, name, v, path, errs):
        if name in self.builtins:
            want = _builtin(name, v)
            if want:
                errs.append("%s: expected %s, got %s" % (path, want, _short(v)))
            return
        t = self.types[name]
        kind = t["kind"]
        if kind == "alias":
            self.check(t["type"], v, path, errs)
        elif kind == "map":
            self.check({"t": "map", "of": t["of"]}, v, path, errs)
        elif kind == "enum":
            if v not in t["values"] or isinstance(v, bool):
                errs.append("%s: %s is not one of %s %s" % (path, _short(v), name, t["values"]))
        else:
            if not isinstance(v, dict):
                errs.append("%s: expected object %s, got %s" % (path, name, _short(v)))
                return
            fields = t["fields"]
            for k, f in fields.items():
                if k in v:
                    self.check(f["type"], v[k], "%s.%s" % (path, k), errs)
                elif f["required"] and (name, k) not in self.gaps and \
                        (name, k) not in VDSM_SENDS:
                    errs.append("%s: required key '%s' of %s missing" % (path, k, name))
            if not t.get("open"):
                for k in v:
                    if k not in fields and (name, k) not in self.gaps:
                        errs.append("%s: key '%s' not declared in %s" % (path, k, name))


def validate(method, result, schema=None, gaps=None):
    """Errors (strings) of result against method's declared result type;
    [] when it fits or the method is not declared (-32601 territory)."""
    s = schema or api()
    verb = s["verbs"].get(method)
    if verb is None:
        return []
    errs = []
    Validator(s, gaps).check(verb["result"], result, "result", errs)
    return errs


def check_response(method, result, schema=None, gaps=None):
    errs = validate(method, result, schema, gaps)
    report = os.environ.get("APISCHEMA_SURVEY")
    if errs and report:
        # survey mode (a developer's tool, never set in make check): append
        # every violation to the file instead of failing at the first one
        with open(report, "a") as f:
            for e in errs:
                f.write("%s: %s\n" % (method, e))
        return
    if errs:
        raise SchemaViolation("%s: result does not fit %s:\n  %s" % (
            method, (schema or api())["verbs"][method]["result_text"], "\n  ".join(errs)))
