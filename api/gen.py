#!/usr/bin/python3
"""api/gen.py - turn the API schema (api/*.yaml) into what the build uses.

    gen.py [--api DIR] [--c FILE] [--json FILE] [--md FILE] [--check-md FILE]
           [--man FILE] [--check-man FILE]

  --c FILE        the C declaration tables (struct rpc_verb_decl, rpc/rpc.h)
  --json FILE     the machine-readable schema (types parsed, for the tests'
                  response validator)
  --md FILE       docs/api.md (one line per verb)
  --check-md FILE exit 1 when FILE differs from what --md would write
  --man FILE      rewrite the VERBS section of the man page FILE
                  (man/vdsm-client.1) between its marker comments
                  '.\\" BEGIN GENERATED VERBS' and '.\\" END GENERATED VERBS';
                  everything outside them is kept byte for byte
  --check-man FILE exit 1 when the section in FILE differs from what --man
                  would write

The format is described in api/README.md.  Only Python 3 and python3-yaml.
Every error names the file, the verb or type and the field, and exits 1.
"""
import argparse
import json
import os
import re
import sys

import yaml

# Schema-wide vocabulary ---------------------------------------------------

# Builtin type names (type expressions, api/README.md).  The value is the C
# parameter type (enum rpc_ptype) a parameter of that type gets.
BUILTINS = {
    "any": "RPC_T_ANY",
    "null": "RPC_T_ANY",
    "boolean": "RPC_T_BOOL",
    "string": "RPC_T_STRING",
    "uuid": "RPC_T_UUID",
    "int": "RPC_T_INT",
    "uint": "RPC_T_INT",
    "float": "RPC_T_NUMBER",
    "number": "RPC_T_NUMBER",
    "object": "RPC_T_OBJECT",
    "array": "RPC_T_ARRAY",
    # engine reading rules (engine-flows.json "reads")
    "int-or-numstring": "RPC_T_INTSTR",  # JSON int, or a string of digits
    "numstring": "RPC_T_STRING",         # a string holding a decimal number
    "float-string": "RPC_T_STRING",      # a number as a string, or a JSON float
    "bool-or-string": "RPC_T_BOOL",      # true/false, or "true"/"false" (any case)
}

FLAGS = {"blocking": "RPC_F_BLOCKING", "always": "RPC_F_ALWAYS"}

# Backend -> the C table of its verbs (rpc/schema.h).  A new backend adds a
# line here and its extern in rpc/schema.h.
BACKENDS = {
    "host": "rpc_schema_host",
    "virt": "rpc_schema_vm",
    "storage": "rpc_schema_storage",
    "net": "rpc_schema_net",
    "image": "rpc_schema_image",
}
UNIMPL_TABLE = "rpc_schema_unimplemented"

MAX_PARAMS = 16  # RPC_MAX_PARAMS
NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
TYPE_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
VERB_KEYS = {"description", "implemented", "backend", "flags", "params",
             "result", "errors"}
PARAM_KEYS = {"name", "type", "required", "default", "description"}
TYPE_KEYS = {"description", "kind", "fields", "open", "values", "type", "of"}
FIELD_KEYS = {"type", "required", "description"}


class SchemaError(Exception):
    pass


def fail(where, msg):
    raise SchemaError("%s: %s" % (where, msg))


# Type expressions -----------------------------------------------------------
#   expr  := alt ('|' alt)*
#   alt   := 'list<' expr '>' | 'map<' expr '>' | NAME
# parsed to {"t": "list"|"map", "of": ...}, {"t": "union", "of": [...]},
# {"t": "name", "name": NAME}.

def parse_type(text, where):
    if not isinstance(text, str) or not text.strip():
        fail(where, "type must be a non-empty string, got %r" % (text,))
    toks = re.findall(r"list<|map<|>|\||[A-Za-z_][A-Za-z0-9_-]*|\S", text)
    pos = [0]

    def peek():
        return toks[pos[0]] if pos[0] < len(toks) else None

    def take():
        t = peek()
        pos[0] += 1
        return t

    def alt():
        t = take()
        if t in ("list<", "map<"):
            inner = expr()
            if take() != ">":
                fail(where, "type %r: missing '>'" % text)
            return {"t": t[:-1], "of": inner}
        if t is None or not TYPE_NAME_RE.match(t):
            fail(where, "type %r: unexpected %r" % (text, t))
        return {"t": "name", "name": t}

    def expr():
        alts = [alt()]
        while peek() == "|":
            take()
            alts.append(alt())
        return alts[0] if len(alts) == 1 else {"t": "union", "of": alts}

    tree = expr()
    if peek() is not None:
        fail(where, "type %r: trailing %r" % (text, peek()))
    return tree


def type_names(tree):
    if tree["t"] == "name":
        yield tree["name"]
    elif tree["t"] in ("list", "map"):
        yield from type_names(tree["of"])
    else:
        for a in tree["of"]:
            yield from type_names(a)


def check_refs(tree, types, where):
    for n in type_names(tree):
        if n not in BUILTINS and n not in types:
            fail(where, "unknown type %r (not builtin, not in api/types.yaml)" % n)


def resolve(name, types, seen=()):
    """The named type after following aliases."""
    if name in seen:
        fail("types.yaml", "alias loop through %r" % name)
    t = types.get(name)
    if t and t["kind"] == "alias" and t["type"]["t"] == "name":
        return resolve(t["type"]["name"], types, seen + (name,))
    return name, t


def c_param_type(tree, types):
    """The enum rpc_ptype a parameter of this type is checked with."""
    if tree["t"] == "list":
        return "RPC_T_ARRAY"
    if tree["t"] == "map":
        return "RPC_T_OBJECT"
    if tree["t"] == "union":
        return "RPC_T_ANY"
    name, t = resolve(tree["name"], types)
    if t is None:
        return BUILTINS[name]
    kind = t["kind"]
    if kind in ("object", "map"):
        return "RPC_T_OBJECT"
    if kind == "enum":
        return "RPC_T_INT" if t["base"] == "int" else "RPC_T_STRING"
    return c_param_type(t["type"], types)  # alias of a compound expression


def default_fits(ptype, value):
    if value is None or ptype == "RPC_T_ANY":
        return True
    if isinstance(value, bool):
        return ptype == "RPC_T_BOOL"
    if isinstance(value, int):
        return ptype in ("RPC_T_INT", "RPC_T_INTSTR", "RPC_T_NUMBER")
    if isinstance(value, float):
        return ptype == "RPC_T_NUMBER"
    if isinstance(value, str):
        if ptype == "RPC_T_UUID":
            return re.match(r"^[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}$", value) is not None
        if ptype == "RPC_T_INTSTR":
            return re.match(r"^[0-9]+$", value) is not None
        return ptype == "RPC_T_STRING"
    if isinstance(value, list):
        return ptype == "RPC_T_ARRAY"
    if isinstance(value, dict):
        return ptype == "RPC_T_OBJECT"
    return False


# Loading -------------------------------------------------------------------

class StrictLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """SafeLoader that refuses a key given twice in one mapping (PyYAML
    keeps the last one silently: a verb declared twice, e.g. after a merge,
    must not hide the other)."""


def _mapping(loader, node, deep=False):
    keys = set()
    for k, _ in node.value:
        key = loader.construct_object(k, deep=True)
        if key in keys:
            raise yaml.constructor.ConstructorError(
                None, None, "key %r given twice" % (key,), k.start_mark)
        keys.add(key)
    return loader.construct_mapping(node, deep)


StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def load_yaml(path):
    with open(path, encoding="utf-8") as f:
        try:
            return yaml.load(f, Loader=StrictLoader)  # noqa: S506 (a SafeLoader)
        except yaml.YAMLError as e:
            raise SchemaError("%s: not valid YAML: %s" % (os.path.basename(path), e))


def need_str(v, where, what):
    if not isinstance(v, str) or not v.strip():
        fail(where, "%s must be a non-empty string" % what)
    return v.strip()


def load_types(path, base=None):
    """The types of path; with base (already loaded), base's types join
    the result unless path declares the same name (path wins)."""
    doc = load_yaml(path) or {}
    where0 = os.path.relpath(path, os.path.dirname(os.path.dirname(path))) \
        if base is not None else os.path.basename(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("types", {}), dict):
        fail(where0, "expected a mapping 'types:'")
    out = {}
    for name, t in (doc.get("types") or {}).items():
        where = "%s: type %s" % (where0, name)
        if not TYPE_NAME_RE.match(str(name)) or name in BUILTINS:
            fail(where, "bad or builtin type name")
        if not isinstance(t, dict):
            fail(where, "must be a mapping")
        extra = set(t) - TYPE_KEYS
        if extra:
            fail(where, "unknown keys %s" % sorted(extra))
        kind = t.get("kind")
        r = {"kind": kind, "description": need_str(t.get("description"), where, "description")}
        if kind == "object":
            fields = t.get("fields") or {}
            if not isinstance(fields, dict):
                fail(where, "fields must be a mapping")
            r["open"] = bool(t.get("open", False))
            r["fields"] = {}
            for fname, f in fields.items():
                fw = "%s: field %s" % (where, fname)
                if isinstance(f, str):
                    f = {"type": f}
                if not isinstance(f, dict):
                    fail(fw, "must be a type string or a mapping")
                if set(f) - FIELD_KEYS:
                    fail(fw, "unknown keys %s" % sorted(set(f) - FIELD_KEYS))
                req = f.get("required", True)
                if not isinstance(req, bool):
                    fail(fw, "required must be true or false")
                r["fields"][str(fname)] = {
                    "type": parse_type(f.get("type"), fw),
                    "type_text": f.get("type"),
                    "required": req,
                    "description": f.get("description", ""),
                }
        elif kind == "enum":
            vals = t.get("values")
            if not isinstance(vals, list) or not vals:
                fail(where, "an enum needs a non-empty list 'values'")
            if all(isinstance(v, str) for v in vals):
                r["base"] = "string"
            elif all(isinstance(v, int) and not isinstance(v, bool) for v in vals):
                r["base"] = "int"
            else:
                fail(where, "enum values must be all strings or all ints")
            r["values"] = vals
        elif kind == "map":
            r["of"] = parse_type(t.get("of"), where + ": of")
        elif kind == "alias":
            r["type"] = parse_type(t.get("type"), where + ": type")
        else:
            fail(where, "kind must be object, enum, map or alias, got %r" % (kind,))
        out[str(name)] = r
    for name, r in (base or {}).items():
        out.setdefault(name, r)
    for name, r in out.items():
        where = "%s: type %s" % (where0, name)
        for f, fd in r.get("fields", {}).items():
            check_refs(fd["type"], out, "%s: field %s" % (where, f))
        for k in ("of", "type"):
            if k in r:
                check_refs(r[k], out, where)
        if r["kind"] == "alias":
            resolve(name, out)
    return out


def load_verbs(path, types):
    where0 = os.path.basename(path)
    doc = load_yaml(path)
    if not isinstance(doc, dict) or set(doc) != {"namespace", "verbs"}:
        fail(where0, "expected exactly the keys 'namespace' and 'verbs'")
    ns = need_str(doc["namespace"], where0, "namespace")
    if where0 != ns + ".yaml":
        fail(where0, "namespace %s belongs in %s.yaml" % (ns, ns))
    verbs = []
    for short, v in (doc["verbs"] or {}).items():
        name = "%s.%s" % (ns, short)
        where = "%s: %s" % (where0, name)
        if not NAME_RE.match(str(short)):
            fail(where, "bad verb name")
        if not isinstance(v, dict):
            fail(where, "must be a mapping")
        extra = set(v) - VERB_KEYS
        if extra:
            fail(where, "unknown keys %s" % sorted(extra))
        for k in ("description", "implemented", "result", "errors"):
            if k not in v:
                fail(where, "missing '%s'" % k)
        impl = v["implemented"]
        if not isinstance(impl, bool):
            fail(where, "implemented must be true or false")
        backend = v.get("backend")
        if impl and backend not in BACKENDS:
            fail(where, "an implemented verb needs backend: one of %s" % sorted(BACKENDS))
        if not impl and backend is not None:
            fail(where, "backend is only for implemented verbs")
        flags = v.get("flags") or []
        if not isinstance(flags, list) or any(f not in FLAGS for f in flags):
            fail(where, "flags must be a list of %s" % sorted(FLAGS))
        errors = v["errors"] or []
        if not isinstance(errors, list) or any(
                not isinstance(c, int) or isinstance(c, bool) or c == 0 for c in errors):
            fail(where, "errors must be a list of VDSM error codes (non-zero ints)")
        if len(set(errors)) != len(errors):
            fail(where, "an error code is listed twice")
        result_text = v["result"]
        result = parse_type(result_text, where + ": result")
        check_refs(result, types, where + ": result")
        params = []
        for i, p in enumerate(v.get("params") or []):
            pw = "%s: param %d" % (where, i + 1)
            if not isinstance(p, dict):
                fail(pw, "must be a mapping")
            if set(p) - PARAM_KEYS:
                fail(pw, "unknown keys %s" % sorted(set(p) - PARAM_KEYS))
            pname = need_str(p.get("name"), pw, "name")
            pw = "%s: param %s" % (where, pname)
            if any(q["name"] == pname for q in params):
                fail(pw, "declared twice")
            ptree = parse_type(p.get("type"), pw)
            check_refs(ptree, types, pw)
            has_def = "default" in p
            req = p.get("required")
            if has_def and req is not None:
                fail(pw, "give either required or default, not both")
            if not has_def and not isinstance(req, bool):
                fail(pw, "needs required: true/false or a default")
            ctype = c_param_type(ptree, types)
            if has_def and not default_fits(ctype, p["default"]):
                fail(pw, "default %r does not fit type %s" % (p["default"], p["type"]))
            params.append({
                "name": pname, "type": ptree, "type_text": p["type"],
                "ctype": ctype, "required": bool(req),
                "has_default": has_def and p["default"] is not None,
                "default": p.get("default"),
                "description": need_str(p.get("description"), pw, "description"),
            })
        if len(params) > MAX_PARAMS:
            fail(where, "%d params (max %d)" % (len(params), MAX_PARAMS))
        verbs.append({
            "name": name, "namespace": ns,
            "description": need_str(v["description"], where, "description"),
            "implemented": impl, "backend": backend, "flags": flags,
            "errors": errors, "result": result, "result_text": result_text.strip(),
            "params": params,
        })
    return verbs


def _yaml_files(d):
    if not os.path.isdir(d):
        return []
    return [os.path.join(d, fn) for fn in sorted(os.listdir(d))
            if fn.endswith(".yaml") and fn != "types.yaml"]


def load(api_dir):
    """(types, verbs) of the schema in api_dir.  api_dir/vdsm/ is the
    baseline taken from VDSM's API: its verbs must be implemented: false,
    and a verb or type that api_dir's own files declare replaces the
    baseline's of the same name (api/README.md)."""
    vdsm_dir = os.path.join(api_dir, "vdsm")
    base_types = {}
    if os.path.exists(os.path.join(vdsm_dir, "types.yaml")):
        base_types = load_types(os.path.join(vdsm_dir, "types.yaml"), {})
    types = load_types(os.path.join(api_dir, "types.yaml"), base_types)
    verbs = []
    for path in _yaml_files(api_dir):
        verbs += load_verbs(path, types)
    seen = set()
    for v in verbs:
        if v["name"] in seen:
            fail(v["name"], "declared twice")
        seen.add(v["name"])
    for path in _yaml_files(vdsm_dir):
        for v in load_verbs(path, types):
            if v["implemented"]:
                fail("vdsm/%s: %s" % (os.path.basename(path), v["name"]),
                     "the baseline holds unimplemented verbs only: move the entry "
                     "to api/%s.yaml" % v["namespace"])
            if v["name"] not in seen:
                seen.add(v["name"])
                verbs.append(v)
    return types, verbs


# Output ----------------------------------------------------------------------

def c_str(s):
    if s is None:
        return "NULL"
    out = []
    for b in s.encode("utf-8"):
        c = chr(b)
        if c in '"\\':
            out.append("\\" + c)
        elif 32 <= b < 127 and c != "?":
            out.append(c)
        else:
            out.append("\\%03o" % b)
    return '"' + "".join(out) + '"'


def c_ident(name):
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


def emit_c(types, verbs):
    o = ["/* Generated by api/gen.py from the api/ YAML files - do not edit. */",
         '#include "rpc/schema.h"', ""]
    for v in verbs:
        ident = c_ident(v["name"])
        if v["params"]:
            o.append("static const struct rpc_param p_%s[] = {" % ident)
            for p in v["params"]:
                d = json.dumps(p["default"], separators=(",", ":")) if p["has_default"] else None
                o.append("\t{ %s, %s, %s, %s, %s }," % (
                    c_str(p["name"]), p["ctype"], "true" if p["required"] else "false",
                    c_str(d), c_str(p["description"])))
            o.append("};")
        if v["errors"]:
            o.append("static const int e_%s[] = { %s };" % (
                ident, ", ".join(str(c) for c in v["errors"])))
    o.append("")
    tables = {t: [] for t in list(BACKENDS.values()) + [UNIMPL_TABLE]}
    for v in verbs:
        tables[BACKENDS[v["backend"]] if v["implemented"] else UNIMPL_TABLE].append(v)
    for table, vs in tables.items():
        o.append("const struct rpc_verb_decl %s[] = {" % table)
        for v in vs:
            ident = c_ident(v["name"])
            flags = [FLAGS[f] for f in v["flags"]]
            if not v["implemented"]:
                flags.append("RPC_F_UNIMPLEMENTED")
            o.append("\t{ .name = %s," % c_str(v["name"]))
            if v["params"]:
                o.append("\t  .params = p_%s, .nparams = %d," % (ident, len(v["params"])))
            if v["errors"]:
                o.append("\t  .errors = e_%s, .nerrors = %d," % (ident, len(v["errors"])))
            o.append("\t  .flags = %s," % (" | ".join(flags) or "0"))
            o.append("\t  .result = %s," % c_str(v["result_text"]))
            o.append("\t  .desc = %s }," % c_str(v["description"]))
        o.append("\t{ .name = NULL },")
        o.append("};")
        o.append("")
    o.append("const struct rpc_verb_decl *const rpc_schema_families[] = {")
    for table in tables:
        o.append("\t%s," % table)
    o.append("\tNULL,")
    o.append("};")
    return "\n".join(o) + "\n"


def emit_json(types, verbs):
    def strip(d):
        return {k: v for k, v in d.items() if k not in ("type_text",)}
    out = {"builtins": sorted(BUILTINS), "types": {}, "verbs": {}}
    for name, t in types.items():
        t = dict(t)
        if "fields" in t:
            t["fields"] = {f: strip(fd) for f, fd in t["fields"].items()}
        out["types"][name] = t
    for v in verbs:
        out["verbs"][v["name"]] = {
            "description": v["description"], "implemented": v["implemented"],
            "backend": v["backend"], "flags": v["flags"], "errors": v["errors"],
            "result": v["result"], "result_text": v["result_text"],
            "params": [{"name": p["name"], "type": p["type"], "type_text": p["type_text"],
                        "required": p["required"], "default": p["default"]}
                       for p in v["params"]],
        }
    return json.dumps(out, indent=1, sort_keys=True) + "\n"


def emit_md(types, verbs):
    impl = sum(1 for v in verbs if v["implemented"])
    o = ["# vdsmd API", "",
         "Generated by api/gen.py from the schema in api/; do not edit (run `make docs/api.md`).",
         "The schema format and how to add a verb: api/README.md.", "",
         "%d verbs declared, %d implemented by vdsmd; an unimplemented verb answers "
         "-32601 naming it." % (len(verbs), impl), ""]
    ns = None
    for v in sorted(verbs, key=lambda v: v["name"]):
        if v["namespace"] != ns:
            ns = v["namespace"]
            o += ["", "## %s" % ns, "",
                  "| verb | params | result | vdsmd | description |",
                  "|---|---|---|---|---|"]
        params = ", ".join(p["name"] if p["required"] else "[%s]" % p["name"]
                           for p in v["params"])
        o.append("| %s | %s | `%s` | %s | %s |" % (
            v["name"], params, v["result_text"].replace("|", "\\|"),
            "yes" if v["implemented"] else "no", v["description"].replace("|", "\\|")))
    return "\n".join(o) + "\n"


MAN_BEGIN = '.\\" BEGIN GENERATED VERBS'
MAN_END = '.\\" END GENERATED VERBS'


def roff(text):
    """Plain text for a roff text line: backslashes escaped, a line never
    starts with a control character, hyphens in code kept as minus signs
    by the caller (roff_code)."""
    t = str(text).replace("\\", "\\e").replace("\n", " ")
    if t.startswith((".", "'")):
        t = "\\&" + t
    return t


def roff_code(text):
    """Text that is typed as written (names, types, defaults): '-' stays
    an ASCII minus when copied from the rendered page."""
    return roff(text).replace("-", "\\-")


def emit_man_section(types, verbs):
    """The lines between the markers of man/vdsm-client.1: a .SH VERBS
    section, per namespace the implemented verbs in full (params in
    positional order, result type, description) and the unimplemented
    ones as one compact list."""
    impl = sum(1 for v in verbs if v["implemented"])
    o = ['.\\" Generated by api/gen.py from api/*.yaml; do not edit between the',
         '.\\" markers (run "make docs/api.md", which also rewrites this section).',
         ".SH VERBS",
         ".na",
         "The API schema declares %d verbs, %d of them implemented by" % (len(verbs), impl),
         ".BR vdsmd ;",
         "calling a verb it does not implement answers \\-32601 naming the verb.",
         "Parameters are listed in positional order; a parameter with a default,",
         "or marked optional, may be left out.",
         "The types are those of the API schema (api/README.md).",
         "The same list as one table: docs/api.md."]
    by_ns = {}
    for v in sorted(verbs, key=lambda v: v["name"]):
        by_ns.setdefault(v["namespace"], []).append(v)
    for ns, vs in by_ns.items():
        o.append(".SS %s" % ns)
        done = [v for v in vs if v["implemented"]]
        later = [v for v in vs if not v["implemented"]]
        for v in done:
            short = v["name"].split(".", 1)[1]
            o += [".TP", "\\fB%s %s\\fR" % (roff_code(ns), roff_code(short)),
                  roff(v["description"])]
            if v["params"]:
                o += [".RS", ".PD 0"]
                for p in v["params"]:
                    if p["required"]:
                        need = "required"
                    elif p["has_default"]:
                        need = "default \\fB%s\\fR" % roff_code(
                            json.dumps(p["default"], separators=(",", ":")))
                    else:
                        need = "optional"
                    o += [".TP 4",
                          "\\fI%s\\fR (\\fB%s\\fR, %s)" % (
                              roff_code(p["name"]), roff_code(p["type_text"].strip()), need),
                          roff(p["description"])]
                o += [".PD", ".RE"]
            o += [".IP", "Result: \\fB%s\\fR" % roff_code(v["result_text"])]
        if later:
            o += [".PP", "Not implemented by vdsmd yet (%d): " % len(later) + ", ".join(
                "\\fB%s\\fR" % roff_code(v["name"].split(".", 1)[1]) for v in later) + "."]
    return o + [".ad"]


def fill_man(page, types, verbs, where="man page"):
    """page (the whole man page text) with the lines between the markers
    replaced by emit_man_section(); SchemaError when the markers are not
    there exactly once each, in order."""
    lines = page.split("\n")
    begins = [i for i, ln in enumerate(lines) if ln.rstrip() == MAN_BEGIN]
    ends = [i for i, ln in enumerate(lines) if ln.rstrip() == MAN_END]
    if len(begins) != 1 or len(ends) != 1 or begins[0] > ends[0]:
        fail(where, "needs exactly one line %s and, after it, one line %s "
             "(found %d and %d)" % (MAN_BEGIN, MAN_END, len(begins), len(ends)))
    b, e = begins[0], ends[0]
    return "\n".join(lines[:b + 1] + emit_man_section(types, verbs) + lines[e:])


def read_text(path):
    try:
        with open(path, encoding="utf-8", newline="") as f:
            return f.read()
    except OSError as e:
        raise SchemaError("%s: cannot read: %s" % (path, e.strerror))


def write(path, text):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def main(argv=None):
    ap = argparse.ArgumentParser(description="generate the API tables from api/*.yaml")
    ap.add_argument("--api", default=os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--c")
    ap.add_argument("--json")
    ap.add_argument("--md")
    ap.add_argument("--check-md")
    ap.add_argument("--man")
    ap.add_argument("--check-man")
    a = ap.parse_args(argv)
    try:
        types, verbs = load(a.api)
    except SchemaError as e:
        print("api/gen.py: %s" % e, file=sys.stderr)
        return 1
    if a.c:
        write(a.c, emit_c(types, verbs))
    if a.json:
        write(a.json, emit_json(types, verbs))
    if a.md:
        write(a.md, emit_md(types, verbs))
    if a.check_md:
        try:
            with open(a.check_md, encoding="utf-8") as f:
                cur = f.read()
        except OSError:
            cur = None
        if cur != emit_md(types, verbs):
            print("api/gen.py: %s is out of date with api/*.yaml; run "
                  "'make docs/api.md' and commit it" % a.check_md, file=sys.stderr)
            return 1
    try:
        if a.man:
            cur = read_text(a.man)
            new = fill_man(cur, types, verbs, a.man)
            if new != cur:
                write(a.man, new)
        if a.check_man:
            cur = read_text(a.check_man)
            if cur != fill_man(cur, types, verbs, a.check_man):
                print("api/gen.py: the VERBS section of %s is out of date with "
                      "api/*.yaml; run 'make docs/api.md' and commit it" % a.check_man,
                      file=sys.stderr)
                return 1
    except SchemaError as e:
        print("api/gen.py: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
