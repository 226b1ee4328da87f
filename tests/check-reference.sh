#!/usr/bin/env bash
# The C reference pages (docs/reference/) against the library and its header:
#  - every exported function (nm -D --defined-only of the shared library,
#    distlock_* text symbols) has its page docs/reference/<function>.md,
#    naming it under NAME and giving its prototype under SYNOPSIS;
#  - no page's NAME or SYNOPSIS names a function the library does not
#    export (a removed or renamed one), nor a name the header does not define;
#  - every prototype in a SYNOPSIS is the header's, whitespace aside;
#  - the index docs/reference/README.md links every page.
#
#   tests/check-reference.sh [LIBDISTLOCK.so [DISTLOCK.h [REFERENCE_DIR]]]
#
# Defaults: build/core/libdistlock.so (scripts/test.sh's shared build; built
# here when missing), core/include/distlock.h, docs/reference. Prints each
# mismatch and exits 1 on any; prints a one-line summary and exits 0 if none.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
lib=${1:-}
header=${2:-$top/core/include/distlock.h}
refdir=${3:-$top/docs/reference}

if [ -z "$lib" ]; then
  build=${DISTLOCK_TEST_BUILD_ROOT:-$top}/build
  lib=$build/core/libdistlock.so
  if [ ! -e "$lib" ]; then
    mkdir -p "$build"
    # scripts/test.sh's configuration of build/, so neither re-configures the other
    flock "$build/.cmake.lock" cmake -S "$top" -B "$build" -DDISTLOCK_BUILD_TESTS=ON \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
    flock "$build/.cmake.lock" cmake --build "$build" -j2 --target distlock >/dev/null
  fi
fi
for f in "$lib" "$header" "$refdir"; do
  [ -e "$f" ] || { echo "check-reference: $f not found" >&2; exit 2; }
done

# Exported functions: text symbols, version suffix (@@DISTLOCK_0) dropped.
exported=$(nm -D --defined-only "$lib" | awk '$2 == "T" { sub(/@.*/, "", $3); print $3 }' |
  grep '^distlock_' | sort -u)

EXPORTED=$exported python3 - "$header" "$refdir" <<'PY'
import os, re, sys

header_path, refdir = sys.argv[1], sys.argv[2]
exported = set(os.environ["EXPORTED"].split())

def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)

def norm(decl):
    """One spelling of a declaration: single spaces, none inside parentheses
    or around '*' and ','."""
    d = re.sub(r"\bDISTLOCK_API\b", " ", decl)
    d = re.sub(r"\s+", " ", d).strip().rstrip(";").strip()
    d = re.sub(r"\s*([(),*])\s*", r"\1", d)
    d = re.sub(r",", ", ", d)
    d = re.sub(r"(\w)\*", r"\1 *", d)   # "char*p" -> "char *p"
    return d + ";"

def statements(code):
    """Top-level declarations of a C text: preprocessor lines dropped,
    split at ';' outside braces."""
    code = re.sub(r"\\\n", " ", strip_comments(code))    # a macro's continued lines
    code = "\n".join(l for l in code.splitlines()
                     if not l.lstrip().startswith("#"))
    code = re.sub(r'extern\s+"C"\s*\{', " ", code)   # C++ guard: not a scope of its own
    out, depth, cur = [], 0, []
    for ch in code:
        if ch == "{": depth += 1
        elif ch == "}": depth = max(depth - 1, 0)
        cur.append(ch)
        if ch == ";" and depth == 0:
            out.append("".join(cur)); cur = []
    return out

FUNC = re.compile(r"^[^(]*?\b(distlock_\w+)\s*\(")

def prototypes(code):
    protos = {}
    for st in statements(code):
        s = st.strip()
        if s.startswith("typedef"):
            continue
        m = FUNC.match(s)
        if m:
            protos[m.group(1)] = norm(s)
    return protos

htext = open(header_path).read()
hprotos = prototypes(htext)
# Every other name the header defines: typedefs, struct/enum tags, enum
# constants, macros.
hnames = set(re.findall(r"#\s*define\s+(\w+)", htext))
hcode = strip_comments(htext)
hnames |= set(re.findall(r"typedef\s+[^;]*?\b(\w+)\s*;", hcode))
hnames |= set(re.findall(r"\(\s*\*\s*(\w+)\s*\)", hcode))          # function pointer typedefs
hnames |= set(re.findall(r"\b(?:struct|enum)\s+(\w+)", hcode))
hnames |= set(re.findall(r"\b(DISTLOCK_[A-Z0-9_]+)\s*=", hcode))   # enum constants

errors = []
def err(msg): errors.append(msg)

def section(text, name):
    m = re.search(r"^## " + name + r"[ \t]*\n(.*?)(?=^## |\Z)", text, flags=re.S | re.M)
    return m.group(1) if m else None

pages = sorted(f for f in os.listdir(refdir) if f.endswith(".md") and f != "README.md")
named = {}
for page in pages:
    text = open(os.path.join(refdir, page)).read()
    name_sec, syn_sec = section(text, "NAME"), section(text, "SYNOPSIS")
    if name_sec is None or syn_sec is None:
        err(f"{page}: no NAME or no SYNOPSIS section")
        continue
    # NAME: "name, name - what it does" on its first non-empty line
    first = next((l for l in name_sec.splitlines() if l.strip()), "")
    names = [n.strip(" `") for n in re.split(r"\s+[-\u2014]\s+", first, 1)[0].split(",")]
    for n in names:
        named[n] = page
        if n in hprotos and n not in exported:
            err(f"{page}: NAME names {n}, which the header declares but the library does not export")
        elif n not in hprotos and n not in hnames:
            err(f"{page}: NAME names {n}, which the header does not define"
                + (" (the library exports it)" if n in exported else ""))
    blocks = re.findall(r"^```[a-z]*\n(.*?)^```", syn_sec, flags=re.S | re.M)
    if not blocks:
        err(f"{page}: SYNOPSIS has no code block")
    for fn, proto in prototypes("\n".join(blocks)).items():
        if fn not in exported:
            err(f"{page}: SYNOPSIS declares {fn}, which the library does not export")
        elif fn not in hprotos:
            err(f"{page}: SYNOPSIS declares {fn}, which the header does not declare")
        elif proto != hprotos[fn]:
            err(f"{page}: SYNOPSIS of {fn} differs from the header:\n"
                f"    page:   {proto}\n    header: {hprotos[fn]}")
        if fn not in names:
            err(f"{page}: SYNOPSIS declares {fn} but NAME does not name it")
    for n in names:
        if n in exported and n not in prototypes("\n".join(blocks)):
            err(f"{page}: NAME names {n} but SYNOPSIS does not give its prototype")

for fn in sorted(exported):
    if not os.path.exists(os.path.join(refdir, fn + ".md")):
        err(f"{fn}: exported, but there is no {os.path.basename(refdir)}/{fn}.md")
    elif named.get(fn) != fn + ".md":
        err(f"{fn}: {fn}.md does not name it under NAME")

index = os.path.join(refdir, "README.md")
itext = open(index).read() if os.path.exists(index) else ""
for page in pages:
    if f"({page})" not in itext:
        err(f"{page}: not linked from {os.path.basename(refdir)}/README.md")

for e in errors:
    print("check-reference: " + e)
if errors:
    print(f"check-reference: FAIL, {len(errors)} problem(s); {len(exported)} exported functions, "
          f"{len(pages)} pages")
    sys.exit(1)
print(f"check-reference: ok, {len(exported)} exported functions, {len(pages)} pages "
      f"({len(pages) - len(exported)} for types and macros), every prototype as in the header")
PY
