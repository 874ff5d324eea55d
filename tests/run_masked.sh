#!/bin/sh
# run_masked.sh PROGRAM [ARGS...]: run PROGRAM where the OpenCL ICD loader, CLBlast and the
# Vulkan loader cannot be loaded by their usual names, without root and without changing
# the machine: in a private user + mount namespace (unshare), /dev/null is bind-mounted
# over each file the dynamic linker's cache lists for libOpenCL.so.1, libOpenCL.so,
# libclblast.so.1, libclblast.so, libvulkan.so.1 and libvulkan.so, so dlopen finds the
# name but cannot load it -- what posenc meets on a machine without them (issue #18).
# Exits 77 (meson: skipped) where unprivileged user namespaces are not allowed.
set -eu
# The helpers below run without a preload the test runner may add for the test program
# (scripts/test's ASan pass preloads the ASan runtime): it goes to PROGRAM only.
preload=${LD_PRELOAD-}
unset LD_PRELOAD
files=""
for name in libOpenCL.so.1 libOpenCL.so libclblast.so.1 libclblast.so libvulkan.so.1 \
            libvulkan.so; do
  for p in $( (/sbin/ldconfig -p 2>/dev/null || ldconfig -p 2>/dev/null || true) |
              awk -v n="$name" '$1 == n { print $NF }'); do
    files="$files $(readlink -f "$p")"
  done
done
if ! unshare --user --map-root-user --mount true 2>/dev/null; then
  echo "SKIP: no unprivileged user + mount namespaces here (unshare -rm)"
  exit 77
fi
exec unshare --user --map-root-user --mount sh -c '
  for f in $1; do mount --bind /dev/null "$f"; done
  if [ -n "$2" ]; then export LD_PRELOAD="$2"; fi
  shift 2
  exec "$@"' run_masked "$files" "$preload" "$@"
