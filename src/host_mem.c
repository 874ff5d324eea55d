/*
 * host_mem.c - host memory for buffers that live in host memory: the CPU backend's, and
 * on CPU devices (PoCL) the OpenCL backend's (pe_host_alloc, internal.h).
 *
 * From PE_HOST_HUGE_PAGE bytes up a buffer starts on a 2 MiB boundary, its size rounded up
 * to a multiple of 2 MiB, and where the OS has transparent huge pages (Linux) it asks for
 * them: in THP's "madvise" mode (Debian's default) memory gets them only when it asks. A
 * decode call reads K and V from many 4 KiB pages at once (src/cpu/cpu_attn.c), each a
 * page walk once other work has flushed the TLB. Every buffer (a 64 MiB copy's two, f16 K
 * and V of 4 MiB each; 32|8 heads, d 64, 1 x 4096 keys) in 2 MiB pages against all in
 * 4 KiB pages, alternated call by call in one process (2026-12-03): the CPU backend's
 * copy 17.59 / 24.13 / 23.08 GB/s against 17.32 / 23.15 / 22.68, its decode call 0.593 /
 * 0.502 / 0.517 ms against 0.600 / 0.509 / 0.535; PoCL's copy 18.94 / 18.22 against
 * 18.40 / 17.64 GB/s, its call 0.767 / 0.759 against 0.781 / 0.778 ms. Both 1-4% faster.
 * The cost: up to 2 MiB - 64 bytes more than asked for, per buffer of 2 MiB or more.
 */
#define _DEFAULT_SOURCE /* madvise, MADV_HUGEPAGE */
#include "internal.h"

#include <stdint.h>
#include <stdlib.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

void *pe_host_alloc(size_t size, bool *huge)
{
    *huge = false;
    size_t align = 64;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (size >= PE_HOST_HUGE_PAGE && size <= SIZE_MAX - PE_HOST_HUGE_PAGE)
        align = PE_HOST_HUGE_PAGE;
#endif
    if (size > SIZE_MAX - (align - 1))
        return NULL;
    const size_t rounded = (size + align - 1) & ~(align - 1); /* aligned_alloc's rule */
    void *p = aligned_alloc(align, rounded);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (p && align == PE_HOST_HUGE_PAGE) {
        (void)madvise(p, rounded, MADV_HUGEPAGE); /* advice only: 4 KiB pages if refused */
        *huge = true;
    }
#endif
    return p;
}
