#!/usr/bin/env python3
"""Worst-case stack depth of each public entry point of libdistlock, from
GCC's -fcallgraph-info=su output (.ci files), own code only.

Usage: cmake -DCMAKE_C_FLAGS="-fstack-usage -fcallgraph-info=su" ...; build
the distlock target; then  scripts/stack-usage.py BUILD_DIR [--nodes N]
No frame depends on N: the core has no variable-length arrays (the build
has -Werror=vla; per-node arrays are on the heap, in the connection set),
so a frame GCC calls "dynamic", not "dynamic,bounded" (alloca), has no
bound here and fails the check. Calls into other libraries (hiredis, libc)
are listed, not counted. Exits 1 if an entry point exceeds --limit bytes
(default 4096) or a frame of our code is dynamic."""
import glob, re, sys, argparse

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
# The node kinds' hooks (core/src/nodekind.c, transport.h's
# distlock__node_kind) are called through t->kind[i]->HOOK(...): GCC sees an
# indirect call there. Each such call site gets an edge to every function
# that fills that hook in a kind's table, so the round's deepest paths (a
# re-route inside a release inside an acquire) are counted through them.
src_dir = None
hooks = {}
for f in glob.glob(f"{a.build}/core/CMakeFiles/distlock_objects.dir/src/*.ci"):
    m = re.search(r'label: "(/[^":]+)/nodekind\.c:', open(f).read())
    if m:
        src_dir = m.group(1)
        break
if src_dir:
    kinds = open(f"{src_dir}/nodekind.c").read()
    for table in re.findall(r"const distlock__node_kind distlock__kind_\w+ = \{(.*?)\n\};",
                            kinds, re.S):
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
                for fn in hooks.get(hook, ()):
                    edges.setdefault(m.group(1), set()).add(fn)
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
