#!/usr/bin/env python3
"""The documentation's option lists, written from the core's option table.

The table in core/src/options.c (walked with distlock_option_at()) is the one
place option names, types, ranges, defaults and summaries are written. Every
page that lists the options carries a marked block that this script rewrites
from it; nothing between the markers is written by hand:

  Markdown  <!-- options:begin FORMAT -->  ...  <!-- options:end -->
  roff      .\\" options:begin FORMAT       ...  .\\" options:end

FORMAT is `table` (a Markdown table: C id, name, type, range, default,
summary), `ini` (a fenced ini block of PHP's distlock.<name> entries, each
commented out with its default) or `roff` (man page paragraphs).

  scripts/gen-option-docs.py [--check] [--lib LIBDISTLOCK.so] [FILE...]

Without --check the blocks are rewritten in place; with --check nothing is
written and the exit status is 1 when a committed block differs from what the
table gives (a diff is printed). FILEs default to every page known to carry a
block (PAGES below). tests/check-doc-snippets.sh (the `docs` suite) runs the
check. The table is read by compiling a small C program against
core/include/distlock.h and LIBDISTLOCK.so (default build/core/libdistlock.so).
"""
import argparse
import difflib
import os
import re
import subprocess
import sys
import tempfile

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = ["docs/reference/distlock_option.md", "docs/servers.md", "php-ext/README.md",
         "packaging/distlock.1"]

# Prints the table as tab-separated rows; the C id's spelling is checked
# against the header below, so a row whose name is not DISTLOCK_OPT_<NAME>
# fails the check instead of documenting an id that does not exist.
WALK = r"""
#include <distlock.h>
#include <stdio.h>
int main(void)
{
    const distlock_option_info *o;
    for (size_t i = 0; (o = distlock_option_at(i)) != NULL; i++)
        printf("%s\t%d\t%s\t%ld\t%ld\t%ld\t%s\n", o->name, (int)o->id,
               o->type == DISTLOCK_OPTION_LONG ? "long" : "string", o->min, o->max,
               o->default_value, o->summary);
    return 0;
}
"""


def read_table(lib):
    libdir = os.path.dirname(os.path.abspath(lib))
    with tempfile.TemporaryDirectory() as tmp:
        src, prog = os.path.join(tmp, "walk.c"), os.path.join(tmp, "walk")
        with open(src, "w") as f:
            f.write(WALK)
        subprocess.run(["cc", "-std=c11", "-Wall", "-Werror", "-I", os.path.join(TOP, "core/include"),
                        src, "-L", libdir, "-ldistlock", "-Wl,-rpath," + libdir, "-o", prog],
                       check=True)
        out = subprocess.run([prog], check=True, capture_output=True, text=True).stdout
    header = open(os.path.join(TOP, "core/include/distlock.h")).read()
    rows = []
    for line in out.splitlines():
        name, oid, typ, lo, hi, default, summary = line.split("\t")
        cid = "DISTLOCK_OPT_" + name.upper()
        if not re.search(r"\b%s\s*=\s*%s\b" % (cid, oid), header):
            sys.exit("gen-option-docs: option %r (id %s): the header has no %s = %s"
                     % (name, oid, cid, oid))
        rows.append(dict(name=name, id=cid, type=typ, min=int(lo), max=int(hi),
                         default=int(default), summary=summary))
    if not rows:
        sys.exit("gen-option-docs: distlock_option_at(0) is NULL: an empty table")
    return rows


def md_escape(s):
    return s.replace("|", "\\|")


def render_table(rows):
    out = ["| id | name | type | range | default | summary |", "|---|---|---|---|---|---|"]
    for r in rows:
        if r["type"] == "long":
            typ, rng, default = "integer", "%d..%d" % (r["min"], r["max"]), str(r["default"])
        else:
            typ, rng, default = "string", "at most %d bytes" % r["max"], "unset"
        out.append("| `%s` | `%s` | %s | %s | %s | %s |"
                   % (r["id"], r["name"], typ, rng, default, md_escape(r["summary"])))
    return out


def render_ini(rows):
    lines = []
    for r in rows:
        if r["type"] == "long":
            entry = ";distlock.%s = %d" % (r["name"], r["default"])
            note = "%d..%d: %s" % (r["min"], r["max"], r["summary"])
        else:
            entry = ';distlock.%s = ""' % r["name"]
            note = "at most %d bytes: %s" % (r["max"], r["summary"])
        lines.append((entry, note))
    width = max(len(e) for e, _ in lines)
    return ["```ini"] + ["%-*s ; %s" % (width, e, n) for e, n in lines] + ["```"]


def roff_escape(s):
    s = s.replace("\\", "\\e").replace("-", "\\-")
    return "\\&" + s if s[:1] in (".", "'") else s


def render_roff(rows):
    out = []
    for r in rows:
        out.append(".TP")
        if r["type"] == "long":
            out.append(".BI %s \" N\"" % roff_escape(r["name"]))
            out.append("Integer %d..%d, default %d: %s."
                       % (r["min"], r["max"], r["default"], roff_escape(r["summary"])))
        else:
            out.append(".BI %s \" TEXT\"" % roff_escape(r["name"]))
            out.append("Text of at most %d bytes, unset by default: %s."
                       % (r["max"], roff_escape(r["summary"])))
    return out


RENDER = {"table": render_table, "ini": render_ini, "roff": render_roff}
BEGIN = re.compile(r"^(?:<!--|\.\\\")\s*options:begin\s+(\w+)\s*(?:-->)?\s*$")
END = re.compile(r"^(?:<!--|\.\\\")\s*options:end\s*(?:-->)?\s*$")


def rewrite(text, rows, path):
    lines, out, i, blocks = text.split("\n"), [], 0, 0
    while i < len(lines):
        out.append(lines[i])
        m = BEGIN.match(lines[i])
        i += 1
        if not m:
            continue
        fmt = m.group(1)
        if fmt not in RENDER:
            sys.exit("%s: options block of unknown format %r (one of %s)"
                     % (path, fmt, ", ".join(RENDER)))
        while i < len(lines) and not END.match(lines[i]):
            i += 1
        if i == len(lines):
            sys.exit("%s: options:begin %s without options:end" % (path, fmt))
        out.extend(RENDER[fmt](rows))
        blocks += 1
    if blocks == 0:
        sys.exit("%s: no options:begin ... options:end block" % path)
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--lib", default=os.path.join(TOP, "build/core/libdistlock.so"))
    ap.add_argument("files", nargs="*")
    args = ap.parse_args()
    rows = read_table(args.lib)
    stale = 0
    for rel in args.files or PAGES:
        path = rel if os.path.isabs(rel) else os.path.join(TOP, rel)
        old = open(path, encoding="utf-8").read()
        new = rewrite(old, rows, rel)
        if new == old:
            continue
        if args.check:
            stale += 1
            print("gen-option-docs: %s: the options block differs from the library's table "
                  "(run scripts/gen-option-docs.py):" % rel)
            sys.stdout.writelines(difflib.unified_diff(
                old.splitlines(True), new.splitlines(True), rel + " (committed)",
                rel + " (from the table)", n=0))
        else:
            with open(path, "w", encoding="utf-8") as f:
                f.write(new)
            print("gen-option-docs: rewrote %s" % rel)
    if stale:
        sys.exit(1)
    if args.check:
        print("gen-option-docs: ok, %d options, %d pages as the table gives"
              % (len(rows), len(args.files or PAGES)))


if __name__ == "__main__":
    main()
