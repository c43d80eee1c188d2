#!/usr/bin/env python3
"""tests/lint-deps.py - no loops among the files of a directory.

Builds two graphs over the production files of each directory given
(default: vdsmd/storage) and fails when either has a cycle (one directory
level: vdsmd means vdsmd/*.c, not its backends' subdirectories):
  - calls: file A -> file B when A's object refers to a function or object
    B's object defines (from `nm` of $BUILD/obj/<dir>/*.o, so build first);
  - includes: header/source A -> B for every #include "..." of a file of the
    same directory.
With --tree the directories given form one graph instead of one each:
calls across directories count, and an include is resolved as the
compiler does (the including file's directory, then the tree's root and
vdsmd/), so no loop can pass through two directories either.
A cycle is reported as its strongly connected component (every file in
it).  Usage: tests/lint-deps.py [--report] [--tree] [dir ...]; --report
prints the graph sizes and every component without failing.  make lint
runs it per directory and with --tree over all of them.
"""
import os
import re
import subprocess
import sys


def sccs(graph):
    """Tarjan's strongly connected components with more than one node."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def symbols(build, d, prefix=""):
    """Per production file of d (named prefix + file): the symbols its
    object uses, and which file defines each symbol (weak ones too)."""
    objdir = os.path.join(build, "obj", d)
    if not os.path.isdir(objdir):
        sys.exit(f"lint-deps: {objdir} missing: build first (make tests)")
    defs, uses = {}, {}
    for name in sorted(os.listdir(objdir)):
        if not name.endswith(".o"):
            continue
        f = name[:-2] + ".c"
        if not os.path.exists(os.path.join(d, f)):
            continue  # left over from a file since renamed or removed
        out = subprocess.run(["nm", os.path.join(objdir, name)], check=True,
                             capture_output=True, text=True).stdout
        uses[prefix + f] = set()
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] == "U":
                uses[prefix + f].add(parts[1])
            elif len(parts) == 3 and parts[1] in "TDBRW":
                defs[parts[2]] = prefix + f
    return defs, uses


def link(defs, uses):
    graph = {f: set() for f in uses}
    for f, syms in uses.items():
        for s in syms:
            g = defs.get(s)
            if g and g != f:
                graph[f].add(g)
    return graph


def call_graph(build, d):
    return link(*symbols(build, d))


INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"/]+)"', re.M)


def include_graph(d):
    graph = {}
    for name in sorted(os.listdir(d)):
        if not name.endswith((".c", ".h")):
            continue
        with open(os.path.join(d, name), encoding="utf-8") as fh:
            text = fh.read()
        graph[name] = {m for m in INCLUDE.findall(text)
                       if os.path.exists(os.path.join(d, m)) and m != name}
    return graph


TREE_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def tree_include_graph(dirs):
    graph = {}
    for d in dirs:
        for name in sorted(os.listdir(d)):
            if not name.endswith((".c", ".h")):
                continue
            f = os.path.join(d, name)
            with open(f, encoding="utf-8") as fh:
                text = fh.read()
            graph[f] = set()
            for m in TREE_INCLUDE.findall(text):
                for base in (d, ".", "vdsmd"):
                    p = os.path.normpath(os.path.join(base, m))
                    if os.path.exists(p):
                        if p != f:
                            graph[f].add(p)
                        break
    return graph


def tree_call_graph(build, dirs):
    defs, uses = {}, {}
    for d in dirs:
        dd, du = symbols(build, d, d + "/")
        defs.update(dd)
        uses.update(du)
    return link(defs, uses)


def main(argv):
    report = "--report" in argv
    dirs = [a for a in argv if not a.startswith("--")] or ["vdsmd/storage"]
    build = os.environ.get("BUILD", "build")
    bad = 0
    if "--tree" in argv:
        sets = [("the tree", (("calls", tree_call_graph(build, dirs)),
                              ("includes", tree_include_graph(dirs))))]
    else:
        sets = [(d, (("calls", call_graph(build, d)), ("includes", include_graph(d))))
                for d in dirs]
    for d, graphs in sets:
        for kind, graph in graphs:
            comps = sccs(graph)
            edges = sum(len(v) for v in graph.values())
            if report or comps:
                print(f"lint-deps: {d} {kind}: {len(graph)} files, {edges} edges, "
                      f"{len(comps)} loop(s)")
            for c in comps:
                print(f"  loop of {len(c)}: {' '.join(c)}")
                if report:
                    for f in c:
                        print(f"    {f} -> {' '.join(sorted(set(graph[f]) & set(c)))}")
            bad += len(comps)
    return 1 if bad and not report else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
