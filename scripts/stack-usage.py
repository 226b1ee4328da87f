#!/usr/bin/env python3
"""Worst-case stack depth of each public entry point of libdistlock, from
GCC's -fcallgraph-info=su output (.ci files), own code only.

Usage: cmake -DCMAKE_C_FLAGS="-fstack-usage -fcallgraph-info=su" ...; build
the distlock target; then  scripts/stack-usage.py BUILD_DIR [--nodes N]
No frame depends on N: the core has no variable-length arrays (the build
has -Werror=vla; per-node arrays are on the heap, in the connection set),
so a frame GCC calls "dynamic", not "dynamic,bounded" (alloca), has no
bound here and fails the check. Calls into other libraries (hiredis, libc)
are listed, not counted. A call through a stream's functions table
(transport.h's distlock__stream_* wrappers: an indirect call to GCC)
counts as a call to the deepest of the functions the tables in core/src
name; so does a call through a node kind's table (t->kind[i]->HOOK, to the
functions nodekind.c's tables put there). Exits 1 if an entry point exceeds --limit bytes
(default 4096) or a frame of our code is dynamic."""
import glob, os, re, sys, argparse

ap = argparse.ArgumentParser()
ap.add_argument("build")
ap.add_argument("--nodes", type=int, default=8)
ap.add_argument("--limit", type=int, default=4096)
a = ap.parse_args()
N = a.nodes
size, dyn, edges, names = {}, {}, {}, {}
for f in glob.glob(f"{a.build}/core/CMakeFiles/distlock_objects.dir/src/*.ci"):
    txt = open(f).read()
    for m in re.finditer(r'node: \{ title: "([^"]+)" label: "([^"]*)"', txt):
        title, label = m.group(1), m.group(2)
        name = label.split("\\n")[0]
        names[title] = name
        s = re.search(r"(\d+) bytes \(([\w,]+)", label)
        if s:
            size[title] = int(s.group(1))
            # "dynamic,bounded" (GCC knows the most, counted in the size) is
            # fine; plain "dynamic" (alloca, a VLA) is not
            dyn[title] = s.group(2) == "dynamic"
        else:
            size.setdefault(title, 0)
    for m in re.finditer(r'edge: \{ sourcename: "([^"]+)" targetname: "([^"]+)"', txt):
        edges.setdefault(m.group(1), set()).add(m.group(2))
# A stream function called through its table (transport.h's inline
# wrappers, `s->fn->SLOT(`): an edge to the function each
# distlock__stream_funcs table puts in that slot.
src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "core", "src")
hdr = open(os.path.join(src, "transport.h")).read()
slots = re.findall(r"\(\*(\w+)\)\(", re.search(
    r"typedef struct distlock__stream_funcs \{(.*?)\} distlock__stream_funcs;", hdr, re.S).group(1))
slot_at = {}  # transport.h line -> slot called there
for no, line in enumerate(hdr.split("\n"), 1):
    m = re.search(r"s->fn->(\w+)\(", line)
    if m:
        slot_at[no] = m.group(1)
slot_fns = {}  # slot -> function names
for f in glob.glob(os.path.join(src, "*.c")):
    for m in re.finditer(r"const distlock__stream_funcs distlock__stream_\w+ = \{([^}]*)\}",
                         open(f).read()):
        for slot, fn in zip(slots, (x.strip() for x in m.group(1).split(","))):
            if fn != "NULL":
                slot_fns.setdefault(slot, set()).add(fn)
for f in glob.glob(f"{a.build}/core/CMakeFiles/distlock_objects.dir/src/*.ci"):
    for m in re.finditer(r'edge: \{ sourcename: "([^"]+)" targetname: "__indirect_call" '
                         r'label: "[^"]*transport\.h:(\d+):', open(f).read()):
        fns = slot_fns.get(slot_at.get(int(m.group(2)), ""), set())
        titles = {t for t, n in names.items() if n in fns and t in size}
        if len({names[t] for t in titles}) != len(fns) or not fns:
            sys.exit(f"stack-usage: transport.h:{m.group(2)}: the stream functions it calls "
                     f"({sorted(fns)}) are not all in the call graph")
        edges.setdefault(m.group(1), set()).update(titles)
# A node kind's hook (core/src/nodekind.c, transport.h's distlock__node_kind)
# called through t->kind[i]->HOOK(...): an edge to every function that fills
# that hook in a kind's table, so the round's deepest paths (a re-route
# inside a round nested in another) are counted through them.
hooks = {}  # hook -> function names
for table in re.findall(r"const distlock__node_kind distlock__kind_\w+ = \{(.*?)\n\};",
                        open(os.path.join(src, "nodekind.c")).read(), re.S):
    for hook, fn in re.findall(r"\.(\w+) = ([a-z_]\w*),", table):
        hooks.setdefault(hook, set()).add(fn)
lines = {}
for f in glob.glob(f"{a.build}/core/CMakeFiles/distlock_objects.dir/src/*.ci"):
    for m in re.finditer(r'edge: \{ sourcename: "([^"]+)" targetname: "__indirect_call" '
                         r'label: "([^":]+):(\d+):\d+"', open(f).read()):
        path, line = m.group(2), int(m.group(3))
        if path not in lines:
            lines[path] = open(path).read().split("\n")
        text = " ".join(lines[path][max(0, line - 2):line + 1])
        for hook in re.findall(r"->kind\[[^\]]*\]->(\w+)\(", text):
            if not hooks.get(hook):
                sys.exit(f"stack-usage: {path}:{line}: no kind fills the hook {hook}")
            edges.setdefault(m.group(1), set()).update(hooks[hook])
# resolve targets by function name (titles differ across units)
by_name = {}
for t, n in names.items():
    if t in size and (n not in by_name or size[t] > size.get(by_name[n], 0)):
        by_name[n] = t
def key(t):
    n = names.get(t, t.split(":")[-1])
    return by_name.get(n, t)
memo = {}
def depth(t, stack=()):
    """Deepest chain of frames from t, over simple paths (a call back into a
    function already on the chain is not followed: the engine's one resend
    is bounded). Memoised only where no cycle was cut below, so the figure
    does not depend on the order the graph is walked in."""
    t = key(t)
    if t in memo:
        return memo[t]
    n = names.get(t, t.split(":")[-1])
    own = size.get(t, 0)
    best, cut = (0, []), False
    for c in edges.get(t, ()):
        ck = key(c)
        if ck not in size:
            continue  # another library
        if ck in stack or ck == t:
            cut = True
            continue
        d, dcut = depth(ck, stack + (t,))
        cut = cut or dcut
        if d[0] > best[0]:
            best = d
    r = ((own + best[0], [f"{n}:{own}"] + best[1]), cut)
    if not cut:
        memo[t] = r
    return r
worst = 0
rows = []
for t, n in names.items():
    if n.startswith("distlock_") and not n.startswith("distlock__") and t in size:
        (d, path), _ = depth(t)
        rows.append((d, n, path))
for d, n, path in sorted(rows, reverse=True):
    print(f"{d:6d}  {n}  <- " + " > ".join(path))
    worst = max(worst, d)
print(f"worst {worst} bytes for N={N} (limit {a.limit})")
unbounded = sorted(names[t] for t, d in dyn.items() if d)
for n in unbounded:
    print(f"{n}: a dynamic frame (alloca?): its size has no bound here")
sys.exit(1 if worst > a.limit or unbounded else 0)
