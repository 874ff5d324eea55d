#!/usr/bin/env python3
"""check_needed.py LIB: the shared library LIB must not list the OpenCL ICD loader, CLBlast
or the Vulkan loader as NEEDED (issue #18: posenc opens them at run time). Reads the ELF
dynamic section itself (no binutils needed); where readelf is installed, its list of
NEEDED entries must be the same (a check of this parser). Fails on a file that is not an
ELF shared library or whose NEEDED list is empty (libposenc needs at least libc)."""
import shutil
import struct
import subprocess
import sys

FORBIDDEN = ('libOpenCL', 'libclblast', 'libvulkan')


def needed(path):
    with open(path, 'rb') as f:
        data = f.read()
    if data[:4] != b'\x7fELF':
        sys.exit('%s: not an ELF file' % path)
    is64 = data[4] == 2
    end = '<' if data[5] == 1 else '>'
    if is64:
        shoff, = struct.unpack_from(end + 'Q', data, 0x28)
        shentsize, shnum = struct.unpack_from(end + 'HH', data, 0x3A)
        sh_fmt, dyn_fmt = end + 'IIQQQQIIQQ', end + 'qQ'
    else:
        shoff, = struct.unpack_from(end + 'I', data, 0x20)
        shentsize, shnum = struct.unpack_from(end + 'HH', data, 0x2E)
        sh_fmt, dyn_fmt = end + 'IIIIIIIIII', end + 'iI'
    sections = [struct.unpack_from(sh_fmt, data, shoff + i * shentsize) for i in range(shnum)]
    SHT_DYNAMIC, DT_NULL, DT_NEEDED = 6, 0, 1
    out = []
    for sh in sections:
        if sh[1] != SHT_DYNAMIC:
            continue
        offset, size, link = sh[4], sh[5], sh[6]
        strtab = sections[link][4]
        step = struct.calcsize(dyn_fmt)
        for pos in range(offset, offset + size, step):
            tag, val = struct.unpack_from(dyn_fmt, data, pos)
            if tag == DT_NULL:
                break
            if tag == DT_NEEDED:
                s = data[strtab + val:data.index(b'\0', strtab + val)]
                out.append(s.decode())
    return out


def main():
    path = sys.argv[1]
    libs = needed(path)
    print('%s NEEDED: %s' % (path, ', '.join(libs) or '(none)'))
    if not libs:
        sys.exit('no NEEDED entry found: the parser is broken or this is not libposenc')
    readelf = shutil.which('readelf')
    if readelf:
        text = subprocess.run([readelf, '-d', path], check=True, capture_output=True,
                              text=True).stdout
        theirs = [l.split('[', 1)[1].rstrip(']') for l in text.splitlines()
                  if '(NEEDED)' in l]
        if theirs != libs:
            sys.exit('readelf -d says %s, this parser %s' % (theirs, libs))
    bad = [l for l in libs if l.startswith(FORBIDDEN)]
    if bad:
        sys.exit('libposenc must load these at run time, not link them: %s' % ', '.join(bad))


main()
