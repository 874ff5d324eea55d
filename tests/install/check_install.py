#!/usr/bin/env python3
"""posenc as its users get it: installed (pkg-config) and as a meson subproject.

  check_install.py pkgconfig  --build-root B --source-root S --meson M --pkg-config P --cc CC
  check_install.py subproject --build-root B --source-root S --meson M --cc CC

pkgconfig:
  1. `meson install --destdir TMP` of the build tree B (nothing outside TMP is touched);
  2. the installed files: posenc.h, libposenc.so -> .so.MAJOR -> .so.VERSION with SONAME
     libposenc.so.MAJOR, libposenc.a, posenc.pc, the posenc tool (when built);
  3. the shared library exports exactly the functions posenc.h declares with POSENC_API
     (`nm -D --defined-only`), and every global symbol of the static library starts with
     posenc_ or pe_ (nothing that can collide in a user's link);
  4. tests/install/consumer.c built with `cc $(pkg-config --cflags --libs posenc)` against
     TMP (PKG_CONFIG_PATH and PKG_CONFIG_SYSROOT_DIR point into it), run with the installed
     libposenc.so; then linked statically against libposenc.a with
     `pkg-config --static --libs posenc` (Libs.private / Requires.private complete). The
     consumer runs one op on every backend; one that POSENC_TEST_REQUIRE names must run;
  5. the installed `posenc info` runs.
subproject:
  a throw-away meson project with a copy of the source tree in subprojects/posenc uses
  dependency('posenc', fallback: 'posenc') (forced to the fallback), builds consumer.c
  with it and runs it.

Exit 0 on success, 1 on a failure, 77 (skip) when a tool it needs is missing or the build
uses sanitizers (an instrumented library cannot be linked by a plain cc, and meson, ninja
and the compilers would run with the sanitizer runtime preloaded).
"""
import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
CFLAGS = ["-std=c11", "-Wall", "-Wextra", "-Wpedantic", "-Werror"]
HERE = os.path.dirname(os.path.abspath(__file__))


class Failure(Exception):
    pass


def run(cmd, env=None, cwd=None, quiet=False):
    """Run cmd (a list); raise Failure with its output when it fails."""
    shown = " ".join(shlex.quote(c) for c in cmd)
    if not quiet:
        print(f"$ {shown}", flush=True)
    p = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        raise Failure(f"command failed (exit {p.returncode}): {shown}\n{p.stdout}")
    return p.stdout


def build_options(build_root):
    with open(os.path.join(build_root, "meson-info", "intro-buildoptions.json")) as f:
        return {o["name"]: o["value"] for o in json.load(f)}


def declared_functions(header):
    """Every function posenc.h declares with POSENC_API."""
    text = open(header, encoding="utf-8").read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    names = set(re.findall(r"POSENC_API\b[^;{]*?\b(posenc_\w+)\s*\(", text, flags=re.S))
    if not names:
        raise Failure(f"{header}: no POSENC_API declarations found")
    return names


def check_symbols(so, static, header):
    """libposenc.so exports exactly the POSENC_API functions; libposenc.a defines them all and
    no global symbol outside posenc_* / pe_*."""
    declared = declared_functions(header)
    if so:
        out = run(["nm", "-D", "--defined-only", so], quiet=True)
        exported = {l.split()[-1] for l in out.splitlines() if len(l.split()) >= 3}
        # symbols the linker itself may define in any shared object
        exported -= {"_init", "_fini", "_edata", "_end", "__bss_start"}
        leaked = sorted(s for s in exported if s not in declared)
        missing = sorted(declared - exported)
        print(f"libposenc.so exports {len(exported)} symbols; posenc.h declares "
              f"{len(declared)} POSENC_API functions")
        if leaked:
            raise Failure("libposenc.so exports symbols posenc.h does not declare: " +
                          ", ".join(leaked))
        if missing:
            raise Failure("posenc.h declares functions libposenc.so does not export: " +
                          ", ".join(missing))
    if static:
        out = run(["nm", "-g", "--defined-only", static], quiet=True)
        syms = {l.split()[-1] for l in out.splitlines()
                if len(l.split()) == 3 and l.split()[1] in "TDBRCVW"}
        bad = sorted(s for s in syms if not s.startswith(("posenc_", "pe_")))
        missing = sorted(declared - syms)
        print(f"libposenc.a defines {len(syms)} global symbols")
        if bad:
            raise Failure("libposenc.a defines global symbols outside posenc_* / pe_*: " +
                          ", ".join(bad[:20]))
        if missing:
            raise Failure("posenc.h declares functions libposenc.a does not define: " +
                          ", ".join(missing))


def check_required(consumer_output):
    """Print the consumer's output; a backend POSENC_TEST_REQUIRE names must have run."""
    print(consumer_output)
    for name in filter(None, os.environ.get("POSENC_TEST_REQUIRE", "").split(",")):
        if re.search(rf"^  {re.escape(name)} +unavailable", consumer_output, flags=re.M):
            raise Failure(f"backend {name} is required (POSENC_TEST_REQUIRE) but unavailable")


def check_no_gpu_stack(exe, env):
    """Issue #18: posenc opens the OpenCL ICD loader, CLBlast and the Vulkan loader at run
    time, so a consumer linked as pkg-config says (shared or --static) must not need them."""
    if not shutil.which("readelf"):
        return
    out = run(["readelf", "-d", exe], quiet=True)
    bad = re.findall(r"\(NEEDED\).*\[((?:libOpenCL|libclblast|libvulkan)[^]]*)\]", out)
    if bad:
        raise Failure(f"{os.path.basename(exe)} links {', '.join(bad)}: posenc.pc must not "
                      "pull in the GPU stacks")


def soname(so):
    out = run(["readelf", "-d", so], quiet=True)
    m = re.search(r"\(SONAME\).*\[(.*)\]", out)
    return m.group(1) if m else None


def sanitized(build_root):
    """A sanitizer build: its library needs the sanitizer runtime, and the test processes
    run with it preloaded (slow for meson, ninja and the compilers)."""
    san = build_options(build_root).get("b_sanitize", "none")
    if san != "none":
        print(f"SKIP: sanitizer build (b_sanitize={san}); the plain build runs this check")
    return san != "none"


def check_pkgconfig(a):
    opts = build_options(a.build_root)
    if sanitized(a.build_root):
        return SKIP
    for tool in ("nm", "readelf"):
        if not shutil.which(tool):
            print(f"SKIP: {tool} not found")
            return SKIP
    if not a.pkg_config:
        print("SKIP: pkg-config not found")
        return SKIP
    version = json.load(open(os.path.join(a.build_root, "meson-info",
                                          "intro-projectinfo.json")))["version"]
    major = version.split(".")[0]
    kind = opts["default_library"]
    cc = shlex.split(a.cc)

    with tempfile.TemporaryDirectory(prefix="posenc-install-") as tmp:
        dest = os.path.join(tmp, "dest")
        run([a.meson, "install", "-C", a.build_root, "--no-rebuild", "--destdir", dest])
        root = dest + opts["prefix"]
        libdir = os.path.join(root, opts["libdir"])
        incdir = os.path.join(root, opts["includedir"])
        bindir = os.path.join(root, opts["bindir"])
        pcdir = os.path.join(libdir, "pkgconfig")

        want = [os.path.join(incdir, "posenc.h"), os.path.join(pcdir, "posenc.pc")]
        so = os.path.join(libdir, "libposenc.so")
        static = os.path.join(libdir, "libposenc.a")
        if kind in ("shared", "both"):
            want += [so, f"{so}.{major}", f"{so}.{version}"]
        if kind in ("static", "both"):
            want.append(static)
        if opts.get("tools"):
            want.append(os.path.join(bindir, "posenc"))
        missing = [w for w in want if not os.path.exists(w)]
        if missing:
            raise Failure("not installed: " + ", ".join(missing))
        print("installed: " + ", ".join(os.path.relpath(w, dest) for w in want))

        if kind != "static":
            if os.path.realpath(so) != os.path.realpath(f"{so}.{version}"):
                raise Failure(f"{so} does not lead to libposenc.so.{version}")
            name = soname(so)
            print(f"SONAME {name}")
            if name != f"libposenc.so.{major}":
                raise Failure(f"SONAME is {name}, expected libposenc.so.{major}")
        check_symbols(so if kind != "static" else None, static if kind != "shared" else None,
                      os.path.join(incdir, "posenc.h"))

        env = dict(os.environ)
        env["PKG_CONFIG_PATH"] = pcdir + (os.pathsep + env["PKG_CONFIG_PATH"]
                                          if env.get("PKG_CONFIG_PATH") else "")
        env["PKG_CONFIG_SYSROOT_DIR"] = dest  # -I / -L paths are inside the destdir
        pc = lambda *args: shlex.split(run([a.pkg_config, *args, "posenc"], env=env, quiet=True))
        modversion = run([a.pkg_config, "--modversion", "posenc"], env=env).strip()
        if modversion != version:
            raise Failure(f"pkg-config --modversion posenc says {modversion}, "
                          f"the project {version}")
        cflags, libs = pc("--cflags"), pc("--libs")
        print(f"pkg-config --cflags --libs posenc: {' '.join(cflags + libs)}")
        if f"-I{incdir}" not in cflags:
            raise Failure(f"pkg-config --cflags does not point at {incdir}")

        src = os.path.join(HERE, "consumer.c")
        runenv = dict(os.environ)
        runenv["LD_LIBRARY_PATH"] = libdir + (os.pathsep + runenv["LD_LIBRARY_PATH"]
                                              if runenv.get("LD_LIBRARY_PATH") else "")
        # the default link: the shared library (a static-only install: libposenc.a, with
        # its dependencies in the public Libs / Requires)
        exe = os.path.join(tmp, "consumer-default")
        run(cc + CFLAGS + [src, "-o", exe] + cflags + libs + ["-lm"])
        if shutil.which("ldd"):
            ldd = run(["ldd", exe], env=runenv, quiet=True)
            line = next((l for l in ldd.splitlines() if "libposenc" in l), "")
            if kind != "static" and libdir not in line:
                raise Failure("consumer-default does not load the installed library: " +
                              line.strip())
            if kind == "static" and line:
                raise Failure(f"consumer-default loads a shared posenc: {line.strip()}")
            if line:
                print(f"consumer-default loads {line.split('=>')[-1].split('(')[0].strip()}")
        check_required(run([exe, version], env=runenv))
        check_no_gpu_stack(exe, runenv)

        if kind == "both":
            exe = os.path.join(tmp, "consumer-static")
            slibs = [static if l == "-lposenc" else l for l in pc("--static", "--libs")]
            run(cc + CFLAGS + [src, "-o", exe] + cflags + slibs + ["-lm"])
            if shutil.which("ldd") and "libposenc" in run(["ldd", exe], quiet=True):
                raise Failure("consumer-static still loads libposenc.so")
            check_required(run([exe, version]))
            check_no_gpu_stack(exe, runenv)

        if opts.get("tools"):
            out = run([os.path.join(bindir, "posenc"), "info"], env=runenv)
            print("installed posenc info: " + (out.splitlines() or [""])[0])
    print("install + pkg-config: OK")
    return 0


SUBPROJECT_MESON = """\
project('posenc_consumer', 'c', default_options: ['c_std=c11', 'warning_level=3'])
# posenc as a subproject: the fallback when no installed posenc is found (forced here).
# Only the CPU backend, no tests or tool: what a parent project needs of it.
posenc_dep = dependency('posenc', version: '>= {version}', fallback: 'posenc',
  default_options: ['tests=disabled', 'tools=false', 'opencl=disabled', 'vulkan=disabled'])
m_dep = meson.get_compiler('c').find_library('m', required: false)
executable('consumer', '{consumer}', dependencies: [posenc_dep, m_dep])
"""


def check_subproject(a):
    if sanitized(a.build_root):
        return SKIP
    version = json.load(open(os.path.join(a.build_root, "meson-info",
                                          "intro-projectinfo.json")))["version"]
    with tempfile.TemporaryDirectory(prefix="posenc-subproject-") as tmp:
        proj = os.path.join(tmp, "proj")
        os.makedirs(os.path.join(proj, "subprojects"))
        shutil.copy(os.path.join(HERE, "consumer.c"), os.path.join(proj, "consumer.c"))
        with open(os.path.join(proj, "meson.build"), "w") as f:
            f.write(SUBPROJECT_MESON.format(version=version, consumer="consumer.c"))

        # a copy of the source tree, without build directories or VCS data
        def ignore(d, names):
            return [n for n in names if n == ".git" or
                    os.path.exists(os.path.join(d, n, "meson-private"))]
        shutil.copytree(a.source_root, os.path.join(proj, "subprojects", "posenc"),
                        ignore=ignore, symlinks=True)
        build = os.path.join(tmp, "build")
        env = dict(os.environ)
        env.pop("PKG_CONFIG_PATH", None)
        env["CC"] = a.cc
        run([a.meson, "setup", build, proj, "--force-fallback-for=posenc"], env=env)
        run(["ninja", "-C", build] if shutil.which("ninja") else [a.meson, "compile", "-C", build],
            env=env)
        print(run([os.path.join(build, "consumer"), version]))
    print("meson subproject: OK")
    return 0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["pkgconfig", "subproject"])
    p.add_argument("--build-root", required=True)
    p.add_argument("--source-root", required=True)
    p.add_argument("--meson", default="")
    p.add_argument("--pkg-config", default="")
    p.add_argument("--cc", default=os.environ.get("CC", "cc"))
    a = p.parse_args()
    if not a.meson or not (os.path.exists(a.meson) or shutil.which(a.meson)):
        print("SKIP: meson not found")
        return SKIP
    try:
        return check_pkgconfig(a) if a.mode == "pkgconfig" else check_subproject(a)
    except Failure as e:
        print(f"FAIL: {e}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
