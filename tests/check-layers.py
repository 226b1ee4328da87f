#!/usr/bin/env python3
"""The core's layering, checked on the compiled objects.

    python3 tests/check-layers.py OBJECT...

OBJECT... are the core's object files (CMake's distlock_objects: one
FILE.c.o per core/src/FILE.c). Each core/src/*.c declares its layer once, in
its header comment, on a line of its own:

     * Layer: 1 transport

A file may call only into its own layer and the layers below it, and no two
files may call each other both ways (core/README.md). The calls are read
from the objects with nm: a global symbol one object leaves undefined and
another defines is a real reference (a call, or a function's or a
variable's address taken), whatever the includes say. Static functions and
inline functions of the headers are invisible here: they belong to the file
that compiles them.

It also checks that every file has an object, that one layer number has one
name, and that the two maps for readers, core/README.md's picture and
src/internal.h's header comment, put every file in its declared layer.
Exits 1 with one line per finding, 0 with a one-line summary.
"""
import os
import re
import subprocess
import sys

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(TOP, "core", "src")
README = os.path.join(TOP, "core", "README.md")
INTERNAL_H = os.path.join(SRC, "internal.h")

LAYER_LINE = re.compile(r"^\s*\*?\s*Layer:\s*(\d+)\s+(\S.*?)\s*(\*/)?\s*$")


def declared_layers(problems):
    """{file.c: (number, name)} from each file's header comment."""
    layers, names = {}, {}
    for f in sorted(os.listdir(SRC)):
        if not f.endswith(".c"):
            continue
        with open(os.path.join(SRC, f), encoding="utf-8") as fh:
            text = fh.read()
        header = text[: text.find("*/") + 2] if text.lstrip().startswith("/*") else ""
        found = [LAYER_LINE.match(line) for line in header.splitlines()]
        found = [m for m in found if m]
        if len(found) != 1:
            problems.append("%s: its header comment must declare its layer once "
                            "('Layer: N name'), found %d" % (f, len(found)))
            continue
        num, name = int(found[0].group(1)), found[0].group(2)
        if names.setdefault(num, name) != name:
            problems.append("%s: layer %d is named '%s' here, '%s' elsewhere"
                            % (f, num, name, names[num]))
        layers[f] = (num, name)
    return layers


def map_in(path, start, end, layer_re, problems):
    """{file.c: layer} from a layer map: the lines from `start` to `end`;
    a line matching layer_re starts a layer, the .c names that follow,
    up to the next one, are in it."""
    with open(path, encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    out, cur, inside = {}, None, False
    for line in lines:
        if not inside:
            inside = start(line)
            continue
        if cur is not None and end(line):
            break
        m = layer_re.match(line)
        if m:
            cur = int(m.group(1))
        for f in re.findall(r"\b(\w+\.c)\b", line):
            if cur is not None:
                out.setdefault(f, cur)
    if not out:
        problems.append("%s: no layer map found" % os.path.relpath(path, TOP))
    return out


def symbols(obj):
    """(defined globals, undefined) of one object file."""
    res = subprocess.run(["nm", "-P", obj], capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit("check-layers: nm %s failed: %s" % (obj, res.stderr.strip()))
    defined, undefined = set(), set()
    for line in res.stdout.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        sym, kind = parts[0], parts[1]
        if kind == "U":
            undefined.add(sym)
        elif kind in "TDBRCGSVW":  # global text, data, bss, rodata, common, weak
            defined.add(sym)
    return defined, undefined


def main(objs):
    problems = []
    layers = declared_layers(problems)
    if not objs:
        sys.exit("usage: check-layers.py OBJECT... (the core's FILE.c.o files)")

    source_of = {}
    for o in objs:
        base = os.path.basename(o)
        src = base[: -len(".o")] if base.endswith(".c.o") else base.replace(".o", ".c")
        source_of[o] = src
        if src not in layers and os.path.exists(os.path.join(SRC, src)):
            continue  # already reported: no declaration
        if src not in layers:
            problems.append("%s: no core/src/%s declaring a layer" % (o, src))
    for f in layers:
        if f not in source_of.values():
            problems.append("%s: no object given for it (is it in core/CMakeLists.txt?)" % f)

    owner, refs = {}, {}
    for o, src in source_of.items():
        defined, undefined = symbols(o)
        for s in defined:
            owner[s] = src
        refs[src] = undefined
    edges = {}
    for src, undefined in refs.items():
        for s in undefined:
            dst = owner.get(s)
            if dst is not None and dst != src:
                edges.setdefault((src, dst), set()).add(s)

    for (src, dst), syms in sorted(edges.items()):
        if src not in layers or dst not in layers:
            continue
        (ls, ns), (ld, nd) = layers[src], layers[dst]
        if ld > ls:
            problems.append("upward call: %s (layer %d %s) uses %s of %s (layer %d %s)"
                            % (src, ls, ns, ", ".join(sorted(syms)), dst, ld, nd))
        if src < dst and (dst, src) in edges:
            problems.append("both ways: %s uses %s of %s, which uses %s of it"
                            % (src, ", ".join(sorted(syms)), dst,
                               ", ".join(sorted(edges[(dst, src)]))))

    readme = map_in(README, lambda l: l.startswith("```"), lambda l: l.startswith("```"),
                    re.compile(r"^\s*(\d+)\s+\S"), problems)
    internal = map_in(INTERNAL_H, lambda l: "internal.h" in l, lambda l: l.strip() == "*",
                      re.compile(r"^\s*\*\s+layer\s+(\d+)\s"), problems)
    for doc, got in (("core/README.md", readme), ("core/src/internal.h", internal)):
        for f, (num, _) in sorted(layers.items()):
            if f not in got:
                problems.append("%s: its layer map does not list %s (layer %d)" % (doc, f, num))
            elif got[f] != num:
                problems.append("%s: its layer map puts %s in layer %d; the file says %d"
                                % (doc, f, got[f], num))
        for f in sorted(set(got) - set(layers)):
            problems.append("%s: its layer map lists %s, which declares no layer" % (doc, f))

    for p in problems:
        print("check-layers: " + p)
    if problems:
        return 1
    print("check-layers: %d files in %d layers, %d references between files, none upward"
          % (len(layers), len({n for n, _ in layers.values()}), len(edges)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
