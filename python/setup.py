"""Build the distlock Python package offline.

    pip install --no-build-isolation ./python
    python3 -m build --no-isolation python      (sdist + wheel, Debian's python3-build)

The distribution is named libdistlock (the import name stays distlock): the
name distlock on the Python package index belongs to an unrelated project
(README.md, "Names"); libdistlock is the name of the C library this package
compiles in, as the libsass distribution ships libsass under import name sass.

compiles the C core (core/src/*.c) and the SWIG module (bindings/distlock.i)
into one extension, distlock.__core, with the setuptools already installed:
no package index, no prior cmake step, no libdistlock.so needed at run time.

Source layout: in the git repository the core and the SWIG interface sit
beside this directory (../core, ../bindings); an sdist carries copies of them
inside (./core, ./bindings), put there by the sdist command below, so the
sdist builds on its own.

The 'wheel' package is optional: setuptools < 70 needs it for bdist_wheel
(and so for every pip install); when it is missing (the pyenv python's fresh
venvs have only pip and setuptools), a small built-in bdist_wheel writes the
wheel instead.
"""
import atexit
import base64
import hashlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from glob import glob
from pathlib import Path

from setuptools import Command, Extension, find_packages, setup
try:
    from setuptools.command.build import build as _build
except ImportError:  # setuptools < 62.4 (the pyenv 3.8 / 3.9 venvs' bundled 56 / 58)
    from distutils.command.build import build as _build
from setuptools.command.build_ext import build_ext as _build_ext
from setuptools.command.build_py import build_py as _build_py
from setuptools.command.sdist import sdist as _sdist

HERE = Path(__file__).resolve().parent
PKG = "distlock"  # the import name
DIST_NAME = "libdistlock"  # the distribution name (pip install libdistlock)
MODULE = "__core"  # SWIG module _core -> proxy _core.py + C extension __core


def source_root() -> Path:
    """Directory holding core/ and bindings/: inside an sdist, else the repo."""
    for root in (HERE, HERE.parent):
        if (root / "core" / "include" / "distlock.h").is_file() and (
            root / "bindings" / "distlock.i"
        ).is_file():
            return root
    sys.exit("distlock: core/ and bindings/ not found next to setup.py nor in its parent")


ROOT = source_root()


def version() -> str:
    text = (ROOT / "core" / "include" / "distlock.h").read_text()
    m = re.search(r'#define DISTLOCK_VERSION_STRING "([^"]+)"', text)
    if not m:
        sys.exit("distlock: DISTLOCK_VERSION_STRING not found in distlock.h")
    return m.group(1)


def pkg_config(*args: str) -> list:
    try:
        out = subprocess.run(["pkg-config", *args, "hiredis", "openssl"], check=True,
                             capture_output=True, text=True).stdout
        return out.split()
    except (OSError, subprocess.CalledProcessError):
        return []


class build_ext(_build_ext):
    """Run SWIG on bindings/distlock.i, then compile it with core/src/*.c.

    SWIG writes into build_temp (never into the source tree, so concurrent
    builds from one checkout don't trip over each other); the generated proxy
    _core.py is then copied next to the extension (build_lib, or the source
    package for --inplace)."""

    def run(self):
        include = ROOT / "core" / "include"
        iface = ROOT / "bindings" / "distlock.i"
        temp = Path(self.build_temp).resolve()
        temp.mkdir(parents=True, exist_ok=True)
        wrap = temp / "distlock_wrap.c"
        # -fastproxy: the proxy module binds each C function itself
        # (distlock_release = __core.distlock_release) instead of wrapping it
        # in a Python def, one Python frame less per call.
        self.spawn(["swig", "-python", "-fastproxy", "-I" + str(include), "-outdir", str(temp),
                    "-o", str(wrap), str(iface)])
        vscript = temp / "exports.map"
        vscript.write_text("{ global: PyInit_%s; local: *; };\n" % MODULE)

        # Glob: the core's file list may grow; sorted for reproducible builds.
        core_c = sorted(glob(str(ROOT / "core" / "src" / "*.c")))
        cflags = [f for f in pkg_config("--cflags") if not f.startswith("-I")]
        incs = [f[2:] for f in pkg_config("--cflags-only-I")]
        libs = pkg_config("--libs") or ["-lhiredis", "-lssl", "-lcrypto"]  # TLS: OpenSSL
        for ext in self.extensions:
            ext.sources = [str(wrap)] + core_c
            ext.include_dirs = [str(include), str(ROOT / "core" / "src")] + incs
            ext.define_macros = [("_GNU_SOURCE", None), ("DISTLOCK_BUILDING", None)]
            ext.extra_compile_args = ["-std=gnu11", "-fvisibility=hidden",
                                      "-Wno-unused-parameter"] + cflags
            # Only PyInit is exported: the core's distlock_* symbols stay
            # private, so another copy of libdistlock in the process can't clash.
            ext.extra_link_args = ["-Wl,--version-script=" + str(vscript)] + libs + ["-lpthread"]
            ext.depends = [str(include / "distlock.h"), str(iface)] + sorted(
                glob(str(ROOT / "core" / "src" / "*.h")))
        super().run()
        dst = (HERE if self.inplace else Path(self.build_lib)) / PKG
        dst.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(temp / "_core.py", dst / "_core.py")


class build_py(_build_py):
    """build_ext first, so the generated _core.py is in build_lib; a stale
    _core.py left in the source package by an --inplace build is skipped."""

    def run(self):
        self.run_command("build_ext")
        super().run()

    def find_package_modules(self, package, package_dir):
        return [m for m in super().find_package_modules(package, package_dir)
                if not (package == PKG and m[1] == "_core")]


class build(_build):
    """build_ext before build_py; a private build directory per run unless
    --build-base is given, so parallel pip installs of one checkout are safe."""

    sub_commands = [("build_ext", _build.has_ext_modules)] + [
        c for c in _build.sub_commands if c[0] != "build_ext"]

    def finalize_options(self):
        if self.build_base == "build":
            self.build_base = tempfile.mkdtemp(prefix="distlock-pybuild-")
            atexit.register(shutil.rmtree, self.build_base, True)
        super().finalize_options()


class sdist(_sdist):
    """Put core/ (sources, header) and bindings/distlock.i inside the sdist."""

    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        base = Path(base_dir)
        if ROOT == HERE:  # building an sdist from an sdist: already inside
            return
        for rel in ["core/include/distlock.h", "bindings/distlock.i"] + [
                os.path.relpath(p, ROOT) for p in sorted(glob(str(ROOT / "core/src/*.[ch]")))]:
            dst = base / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(ROOT / rel, dst)


# ------------------------------------------------------------------ wheel
def _wheel_tag() -> str:
    impl = "cp%d%d" % sys.version_info[:2]
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return "%s-%s-%s" % (impl, impl, plat)


class bdist_wheel_fallback(Command):
    """Minimal bdist_wheel for when the 'wheel' package is absent.

    Writes a PEP 427 wheel of the built package (platlib, one tag for this
    interpreter) and provides egg2dist(), which setuptools' dist_info needs.
    """

    description = "build a wheel (built-in fallback; the 'wheel' package is not installed)"
    user_options = [("dist-dir=", "d", "directory to put the wheel in"),
                    ("bdist-dir=", "b", "ignored"), ("keep-temp", "k", "ignored")]
    boolean_options = ["keep-temp"]

    def initialize_options(self):
        self.dist_dir = None
        self.bdist_dir = None
        self.keep_temp = False

    def finalize_options(self):
        self.dist_dir = self.dist_dir or "dist"

    def egg2dist(self, egginfo_path, distinfo_path):
        os.makedirs(distinfo_path, exist_ok=True)
        shutil.copyfile(os.path.join(egginfo_path, "PKG-INFO"),
                        os.path.join(distinfo_path, "METADATA"))
        for name in ("top_level.txt", "entry_points.txt"):
            src = os.path.join(egginfo_path, name)
            if os.path.exists(src):
                shutil.copyfile(src, os.path.join(distinfo_path, name))
        if (HERE / "LICENSE").is_file():  # the METADATA's License-File
            shutil.copyfile(HERE / "LICENSE", os.path.join(distinfo_path, "LICENSE"))
        shutil.rmtree(egginfo_path, ignore_errors=True)

    def run(self):
        self.run_command("build")
        build_lib = Path(self.get_finalized_command("build").build_lib)
        name = self.distribution.get_name()
        ver = self.distribution.get_version()
        distinfo = "%s-%s.dist-info" % (name, ver)
        with tempfile.TemporaryDirectory() as tmp:
            ei = self.reinitialize_command("egg_info")
            ei.egg_base = tmp
            self.run_command("egg_info")
            self.egg2dist(ei.egg_info, os.path.join(tmp, distinfo))
            with open(os.path.join(tmp, distinfo, "WHEEL"), "w") as f:
                f.write("Wheel-Version: 1.0\nGenerator: distlock-setup.py\n"
                        "Root-Is-Purelib: false\nTag: %s\n" % _wheel_tag())
            files = []  # (archive name, path on disk)
            for p in sorted(build_lib.rglob("*")):
                if p.is_file() and "__pycache__" not in p.parts:
                    files.append((p.relative_to(build_lib).as_posix(), p))
            for p in sorted(Path(tmp, distinfo).iterdir()):
                files.append(("%s/%s" % (distinfo, p.name), p))
            os.makedirs(self.dist_dir, exist_ok=True)
            whl = os.path.join(self.dist_dir, "%s-%s-%s.whl" % (name, ver, _wheel_tag()))
            record = []
            with zipfile.ZipFile(whl, "w", zipfile.ZIP_DEFLATED) as z:
                for arc, path in files:
                    data = path.read_bytes()
                    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest())
                    record.append("%s,sha256=%s,%d" % (arc, digest.rstrip(b"=").decode(), len(data)))
                    info = zipfile.ZipInfo(arc, date_time=(1980, 1, 1, 0, 0, 0))
                    info.external_attr = (0o755 if os.access(path, os.X_OK) else 0o644) << 16
                    info.compress_type = zipfile.ZIP_DEFLATED
                    z.writestr(info, data)
                record.append("%s/RECORD,," % distinfo)
                info = zipfile.ZipInfo("%s/RECORD" % distinfo, date_time=(1980, 1, 1, 0, 0, 0))
                info.external_attr = 0o644 << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                z.writestr(info, "\n".join(record) + "\n")
        print("distlock: wrote %s" % whl)


cmdclass = {"build": build, "build_ext": build_ext, "build_py": build_py, "sdist": sdist}
try:
    import wheel.bdist_wheel  # noqa: F401  (present: setuptools uses it)
except ImportError:
    cmdclass["bdist_wheel"] = bdist_wheel_fallback

# No public repository yet: these addresses are placeholders (the reserved
# .example domain, like package.xml's maintainer address) until there is one.
REPO_URL = "https://a-seed-dab642e6.example/distlock"

setup(
    name=DIST_NAME,
    version=version(),
    description="Distributed locks on Redis: token locks and Redlock over 1..N nodes, "
                "on the libdistlock C core (import distlock)",
    long_description=(HERE / "README.md").read_text(encoding="utf-8")
    if (HERE / "README.md").exists() else "",
    long_description_content_type="text/markdown",
    author="distlock maintainers",
    author_email="maintainers@users.noreply.a-seed-dab642e6.example",
    url=REPO_URL,
    project_urls={
        "Source": REPO_URL,
        "Documentation": REPO_URL + "/blob/main/python/README.md",
        "Changelog": REPO_URL + "/blob/main/CHANGELOG.md",
        "Issues": REPO_URL + "/issues",
    },
    license="MIT",
    license_files=["LICENSE"],  # python/LICENSE links to the top-level LICENSE
    keywords=["redis", "lock", "distributed lock", "redlock", "mutex", "fencing token"],
    python_requires=">=3.8",
    # distlock and any subpackage it grows; py.typed and every stub in each.
    packages=find_packages(include=[PKG, PKG + ".*"]),
    package_data={"": ["py.typed", "*.pyi"]},
    ext_modules=[Extension(PKG + "." + MODULE, sources=[])],  # filled in build_ext
    cmdclass=cmdclass,
    zip_safe=False,
    classifiers=[
        "Development Status :: 3 - Alpha",
        "Intended Audience :: Developers",
        "License :: OSI Approved :: MIT License",
        "Operating System :: POSIX :: Linux",
        "Programming Language :: C",
        "Programming Language :: Python :: 3",
        "Programming Language :: Python :: 3 :: Only",
        "Programming Language :: Python :: 3.8",
        "Programming Language :: Python :: 3.9",
        "Programming Language :: Python :: 3.10",
        "Programming Language :: Python :: 3.11",
        "Programming Language :: Python :: Implementation :: CPython",
        "Topic :: Database",
        "Topic :: System :: Distributed Computing",
        "Typing :: Typed",
    ],
)
