/*
 * backend_opencl.c - the OpenCL backend: one device, one in-order queue, programs built
 * from the embedded cl/ sources on first use and cached per context and on disk.
 *
 * Programs are common.cl + <op>.cl, built with "-cl-std=CL1.2 -w" plus -D options that pick
 * the storage types (see cl/common.cl); no fast-math options. Each distinct option string
 * is built once per context (struct pe_cl_program cache), and its binary is kept in an
 * on-disk cache (see "The on-disk program-binary cache" in cl_program.c) so that the next
 * process skips the compiler. POSENC_CL_KERNEL_DIR=<dir> loads the .cl files from <dir>
 * instead of the embedded copies (kernel development).
 *
 * This file holds the backend's life cycle (create / destroy, finish, flush), its buffers,
 * the launch helpers the op files share, the persistent tables and the vtable. The rest
 * of src/opencl: cl_device.c (errors, platforms and devices), cl_program.c (kernel sources,
 * the program cache, the on-disk program-binary cache), cl_sync.c (events, wrapped host
 * memory), cl_loader.c (the OpenCL library, opened at run time), ops_rope.c (rope,
 * sinusoidal, copy) and the other ops_*.c files.
 *
 * Nothing is allocated per call in the steady state: the small host tables of rope,
 * sinusoidal and alibi live in persistent device buffers (pe_cl_table) that are uploaded
 * again only when their contents change.
 *
 * Kernel argument order (the one place it is written down; the cl/ files must match):
 *
 *   pe_sinusoidal  (built with -DDST_F16 -DHAS_X -DX_F16 -DPOS_I32, each 0 or 1)
 *     0  mem    dst       f32 or f16 (half *)
 *     1  long   dst_off   elements
 *     2  long4  dst_st    elements, (st0, st1, st2, st3)
 *     3  mem    x         f32 or f16; the dst buffer again when there is no x
 *     4  long   x_off
 *     5  long4  x_st
 *     6  mem    pos       int32 or f32
 *     7  long   pos_off
 *     8  long4  pos_st    (st[0] for i1, st[1] for i2, st[2] for i3, 0)
 *     9  mem    freq      f32 [half], read-only (a persistent table)
 *    10  long4  shape     (half, ne1, ne2, ne3)
 *    11  int    layout    posenc_sin_layout
 *    12  float  x_scale
 *   NDRange (half, ne1, ne2*ne3), each rounded up to the local size.
 *
 *   pe_sinusoidal_vec  (same file, arguments and options, plus -DPE_CPU_ORDER): rows
 *   with unit stride aligned to 16 elements, half % 8 == 0. NDRange (half/8, ne1,
 *   G2*ne3), G2 = 1 when the positions are broadcast over dim 2, else ne2 (launch_vec).
 *
 *   pe_rope  (cl/rope.cl; built with -DHAS_X=1 -DX_F16 -DDST_F16 -DHAS_X2 -DX2_F16
 *             -DDST2_F16 -DPOS_I32 -DHAS_FROM -DPOS_FROM_I32, each 0 or 1)
 *     0  mem    x         f32 or f16
 *     1  long   x_off     elements
 *     2  long4  x_st      elements, (st0, st1, st2, st3)
 *     3  mem    dst       f32 or f16 (may be the x buffer: in place, or a disjoint view)
 *     4  long   dst_off
 *     5  long4  dst_st
 *     6  mem    x2        fused Q/K: k (f32 or f16); x again without it
 *     7  long   x2_off
 *     8  long4  x2_st
 *     9  mem    dst2      fused Q/K: k_out; dst again without it
 *    10  long   dst2_off
 *    11  long4  dst2_st
 *    12  mem    pos       int32 or f32
 *    13  long   pos_off
 *    14  long4  pos_st    (st[0] for the token, st[1] for the stream, st[2] for the batch, 0)
 *    15  mem    pos_from  rerotate: int32 or f32; pos again without it
 *    16  long   pos_from_off
 *    17  long4  pos_from_st
 *    18  mem    tab       f32 [4 * n_pairs]: freq, freq_from (0 without), stream,
 *                         stream_from (as floats); read-only, uploaded per call
 *    19  long4  shape     (n_pairs, ne2, ne3, n_copy)   n_copy: dims outside the window
 *                         when some tensor is not rotated in place, else 0
 *    20  long4  dims      (x ne1, x2 ne1 or 0, n_offs, pairing)
 *    21  int    flags     bit 0: copy x -> dst outside the window; bit 1: x2 -> dst2
 *    22  float  mscale
 *    23  int    sign      +1 forward (and rerotate), -1 backward
 *   NDRange (n_pairs + n_copy, ne2, ne3), each rounded up to the local size. Each
 *   work-item takes sin/cos once and loops over all heads of x and x2. tab (18) is a
 *   persistent table.
 *
 *   pe_rope_vec  (same file, arguments and options, plus -DPE_CPU_ORDER): every tensor
 *   with unit innermost stride and rows aligned to 16 elements, n_pairs % 8 == 0,
 *   n_offs % 16 == 0. NDRange (n_pairs/8, ne2, ne3) (launch_vec).
 *
 *   pe_rope_tok  (same file and arguments as pe_rope_vec, plus -DPE_NU = n_pairs / 8 <= 16):
 *   CPU devices, under pe_rope_vec's conditions. NDRange (chunks, ne2, ne3), local
 *   (1, up to 8 tokens, 1): one work-item per token and chunk of heads.
 *
 *   posenc_rope_set_rows: the same three kernels built with -DHAS_ROWS=1 -DROWS_I64 (0 or
 *   1) take three more arguments after their last one (pe_rope: 24-26; pe_rope_vec and
 *   pe_rope_tok: 25-27):
 *       mem    rows_idx  i32 or i64 indices, read as 32-bit words
 *       long   rows_off  in index elements
 *       long4  rows_st   (st for the token, st for the batch (0: shared), R = dst rows, 0)
 *   and write token (i2, i3) at dst token rows[...] (skipped outside [0, R)).
 *
 *   pe_copy  (cl/copy.cl; -DCOPY_MODE: 0 same 4-byte type, 1 same f16, 2 f32->f16,
 *             3 f16->f32)
 *     0-2   dst, dst_off, dst_st
 *     3-5   src, src_off, src_st
 *     6     long4 shape               (ne0, ne1, ne2, ne3)
 *   NDRange (ne0, ne1, ne2*ne3).
 *
 *   pe_copy_flat  (cl/copy.cl; same options): both tensors one contiguous run
 *     0-1   dst, dst_off              (dst_off % 4 == 0)
 *     2-3   src, src_off              (src_off % 4 == 0)
 *     4     long  n                   elements
 *   NDRange (ceil(n/4), 1, 1).
 *
 * The ops below are enqueued by src/opencl/ops_encodings.c. Every "mem/long/long4" triple
 * is a tensor: buffer, offset and strides (st0, st1, st2, st3) in its own elements. An
 * absent optional input gets the dst triple again (its -D option is 0). Every NDRange
 * is rounded up to the local size; the kernels check their bounds.
 *
 *   pe_learned  (cl/learned.cl; -DDST_F16 -DHAS_X -DX_F16 -DTAB_F16)
 *     0-2   dst, dst_off, dst_st      f32 or f16 [d, T, B]
 *     3-5   x, x_off, x_st            f32 or f16; may be the dst view itself
 *     6-8   table, tab_off, tab_st    f32 or f16 [d, rows]
 *     9-11  pos, pos_off, pos_st      int32; pos_st = (st for t, st for b, 0, 0)
 *    12     long4 shape               (d, T, B, 0)
 *   NDRange (d, T, B).
 *
 *   pe_learned_bwd  (cl/learned.cl; -DDST_F16 (dtable) -DHAS_X=1 -DX_F16 (dy))
 *     0-2   dtable, off, st           f32 or f16 [d, rows], read and written
 *     3-5   dy, off, st               f32 or f16 [d, T, B]
 *     6     mem   segs                int32: seg_start[n_seg+1], seg_row[n_seg], entries
 *     7     long4 shape               (d, n_seg, T, 0)
 *   NDRange (d, n_seg, 1).
 *
 *   pe_resize_2d  (cl/resize.cl; -DDST_F16 -DHAS_X=1 -DX_F16 (src))
 *     0-2   dst, off, st              f32 or f16 [d, cls + dst_h*dst_w]
 *     3-5   src, off, st              f32 or f16 [d, cls + src_h*src_w]
 *     6     mem   taps                32-bit words: wx[4*dst_w], wy[4*dst_h] (f32 bits),
 *                                     ix[4*dst_w], iy[4*dst_h] (int32)
 *     7     long4 shape               (d, dst_h, dst_w, cls)
 *     8     long  src_w
 *   NDRange (d, cls + dst_h*dst_w, 1).
 *
 *   pe_relbias  (cl/bias.cl; -DDST_F16 -DHAS_X -DX_F16 (logits) -DTAB_F16)
 *     0-2   dst, off, st              f32 or f16 [K, Q, H, B]
 *     3-5   logits, off, st           f32 or f16; may be the dst view itself
 *     6-8   table, off, st            f32 or f16 [n_buckets, H]
 *     9     mem   bucket              int32 [n_rel]
 *    10     long4 shape               (K, Q, H, B)
 *    11     long4 offs                (q_offset, k_offset, rel_min, 0)
 *   NDRange (K, Q, H*B). pe_relbias_row (CPU devices, unit key strides; -DPE_KPW
 *   -DPE_VEC16 -DPE_RB): the same arguments, NDRange (ceil(K / PE_KPW), Q, H*B); with
 *   PE_RB=1 args 6-8 are pe_relbias_expand's rb, 0, (1, n_rel, 0, 0) and arg 9 is unread.
 *
 *   pe_relbias_expand  (cl/bias.cl; -DTAB_F16 -DPE_KPW)
 *     0     mem   rb                  f32 [H][n_rel], written
 *     1-3   table, off, st            f32 or f16 [n_buckets, H]
 *     4     mem   bucket              int32 [n_rel]
 *     5     long  n_rel
 *     6     long  H
 *   NDRange (ceil(n_rel / PE_KPW), H, 1).
 *
 *   pe_relbias_bwd  (cl/bias.cl; -DDST_F16 (dtable) -DHAS_X=1 -DX_F16 (dlogits))
 *     0-2   dtable, off, st           f32 or f16 [n_buckets, H], read and written
 *     3-5   dlogits, off, st          f32 or f16 [K, Q, H, B]
 *     6     mem   segs                int32: seg_start[n_buckets+1], rels[...]
 *     7     long4 shape               (K, Q, H, B)
 *     8     long4 offs                (q_offset, k_offset, rel_min, n_buckets)
 *   NDRange (n_buckets, H, 1).
 *
 *   pe_alibi  (cl/bias.cl; -DDST_F16 -DHAS_X -DX_F16 (logits))
 *     0-2   dst, off, st              f32 or f16 [K, Q, H, B]
 *     3-5   logits, off, st           f32 or f16; may be the dst view itself
 *     6     mem   slopes              f32, the op's every head (slope h: slopes[off + h])
 *     7     long  off                 the launch's first head in the op (a head cut)
 *     8     long4 shape               (K, Q, H, B)
 *     9     long4 offs                (q_offset, k_offset, causal, symmetric)
 *   NDRange (K, Q, H*B). slopes is a persistent table.
 *
 *   pe_alibi_vec  (cl/bias.cl; same arguments and options, plus -DPE_KPW): dst and logits
 *   with unit key stride and rows aligned to 16 elements. NDRange (ceil(K/PE_KPW), Q, H*B):
 *   PE_KPW = 16 keys per work-item, PE_CL_CPU_ROW_SPAN on CPU devices.
 *
 * posenc_fill and posenc_set_rows (cl/rows.cl: pe_fill, pe_set_rows) are listed in
 * src/opencl/ops_rows.c.
 *
 * posenc_attention's kernels (cl/attention.cl: pe_attn_softmax, pe_attn_copy and the
 * no-CLBlast pe_attn_scores / pe_attn_output) and its CLBlast calls are listed in
 * src/opencl/ops_attention.c.
 */
#include "backend_opencl.h"
#include "posenc_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if !defined(_WIN32)
#include <sched.h>
#endif

_Static_assert(offsetof(struct pe_cl_backend, base) == 0,
               "struct pe_backend must be the first member of struct pe_cl_backend");

extern const struct pe_backend_vtable pe_opencl_vtable;

/* ------------------------------------------------------------------------------------ */
/* Create / destroy                                                                     */
/* ------------------------------------------------------------------------------------ */

static void cl_destroy(struct pe_backend *base);
static void table_free(struct pe_cl_table *t);

static posenc_status cl_create(posenc_context *ctx, int32_t device, bool gpu_only,
                               struct pe_backend **out)
{
    *out = NULL;
    if (device < 0)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "device %d is negative", (int)device);
    cl_platform_id plat = NULL;
    cl_device_id dev = NULL;
    PE_RETURN_IF_ERROR(pe_cl_find_device(ctx, device, gpu_only, &plat, &dev));

    struct pe_cl_backend *be = calloc(1, sizeof(*be));
    if (!be)
        return pe_error(ctx, POSENC_ERR_OUT_OF_MEMORY, "out of host memory");
    be->base.vt = &pe_opencl_vtable;
    be->base.ctx = ctx;
    be->platform = plat;
    be->device = dev;

    posenc_status st = pe_cl_check_device(be, device);
    if (st != POSENC_OK)
        goto fail;
    cl_int err;

    const cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)plat,
                                           0};
    be->context = clCreateContext(props, 1, &dev, NULL, NULL, &err);
    if (!be->context || err != CL_SUCCESS) {
        be->context = NULL;
        st = pe_cl_fail(ctx, "clCreateContext", err);
        goto fail;
    }
    be->queue = clCreateCommandQueue(be->context, dev, 0, &err);
    if (!be->queue || err != CL_SUCCESS) {
        be->queue = NULL;
        st = pe_cl_fail(ctx, "clCreateCommandQueue", err);
        goto fail;
    }

    pe_cl_cache_init(be);
    pe_log(ctx, POSENC_LOG_INFO, "opencl: device %d: %s (%s, driver %s)", (int)device,
           be->info.device_name, be->info.api_version, be->info.driver_version);
    /* a hint only: posenc never sets the variable itself (README, "Choosing a backend";
     * docs/performance.md, "PoCL's workers pinned") */
    if (pe_cl_is_pocl(be) && pe_cl_is_cpu(be) && !getenv("POCL_AFFINITY"))
        pe_log(ctx, POSENC_LOG_INFO,
               "opencl: PoCL's worker threads are not pinned; POCL_AFFINITY=1 in the "
               "environment before the first OpenCL call pins them one to a core (decode "
               "attention 1.4-1.9x faster on a two-core machine)");
    *out = &be->base;
    return POSENC_OK;

fail:
    cl_destroy(&be->base);
    return st;
}

/*
 * The application's context and queue. Both are retained here and released by
 * cl_destroy like posenc's own, so the application's references are never consumed.
 * Everything else (program cache, binary cache, tables, CLBlast) works on any context.
 */
static posenc_status cl_create_from_host(posenc_context *ctx,
                                         const struct posenc_host_device *host,
                                         struct pe_backend **out)
{
    *out = NULL;
    char why[PE_ERR_MAX];
    if (pe_cl_load(why, sizeof(why)) != POSENC_OK)
        return pe_error(ctx, POSENC_ERR_UNAVAILABLE, "%s", why);
    cl_context context = (cl_context)host->cl_context;
    cl_command_queue queue = (cl_command_queue)host->cl_queue;
    /* The queue first: its context tells whether host->cl_context is the right one
     * without handing an unchecked pointer to clGetContextInfo. */
    cl_context qctx = NULL;
    cl_int err = clGetCommandQueueInfo(queue, CL_QUEUE_CONTEXT, sizeof(qctx), &qctx, NULL);
    if (err != CL_SUCCESS)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "host->cl_queue = %p is not a valid cl_command_queue "
                        "(clGetCommandQueueInfo: %d, %s)",
                        host->cl_queue, (int)err, pe_cl_err_name(err));
    if (qctx != context)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "host->cl_queue = %p belongs to cl_context %p, not to host->cl_context "
                        "= %p",
                        host->cl_queue, (void *)qctx, host->cl_context);
    cl_command_queue_properties qprops = 0;
    cl_device_id dev = NULL;
    cl_platform_id plat = NULL;
    if ((err = clGetCommandQueueInfo(queue, CL_QUEUE_PROPERTIES, sizeof(qprops), &qprops,
                                     NULL)) != CL_SUCCESS)
        return pe_cl_fail(ctx, "clGetCommandQueueInfo(CL_QUEUE_PROPERTIES)", err);
    /* posenc relies on the queue's order between its own commands (a kernel reads what
     * the previous one wrote) and promises the application the same for its commands. */
    if (qprops & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "host->cl_queue = %p is out of order "
                        "(CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE): posenc needs an in-order "
                        "queue",
                        host->cl_queue);
    if ((err = clGetCommandQueueInfo(queue, CL_QUEUE_DEVICE, sizeof(dev), &dev, NULL)) !=
        CL_SUCCESS)
        return pe_cl_fail(ctx, "clGetCommandQueueInfo(CL_QUEUE_DEVICE)", err);
    if ((err = clGetDeviceInfo(dev, CL_DEVICE_PLATFORM, sizeof(plat), &plat, NULL)) !=
        CL_SUCCESS)
        return pe_cl_fail(ctx, "clGetDeviceInfo(CL_DEVICE_PLATFORM)", err);

    struct pe_cl_backend *be = calloc(1, sizeof(*be));
    if (!be)
        return pe_error(ctx, POSENC_ERR_OUT_OF_MEMORY, "out of host memory");
    be->base.vt = &pe_opencl_vtable;
    be->base.ctx = ctx;
    be->platform = plat;
    be->device = dev;
    posenc_status st = pe_cl_check_device(be, -1);
    if (st != POSENC_OK) {
        cl_destroy(&be->base);
        return st;
    }
    if ((err = clRetainContext(context)) != CL_SUCCESS) {
        cl_destroy(&be->base);
        return pe_cl_fail(ctx, "clRetainContext", err);
    }
    be->context = context;
    if ((err = clRetainCommandQueue(queue)) != CL_SUCCESS) {
        cl_destroy(&be->base);
        return pe_cl_fail(ctx, "clRetainCommandQueue", err);
    }
    be->queue = queue;
    pe_cl_cache_init(be);
    pe_log(ctx, POSENC_LOG_INFO, "opencl: the application's queue on %s (%s, driver %s)",
           be->info.device_name, be->info.api_version, be->info.driver_version);
    *out = &be->base;
    return POSENC_OK;
}

static void cl_destroy(struct pe_backend *base)
{
    struct pe_cl_backend *be = (struct pe_cl_backend *)base;
    if (!be)
        return;
    if (be->queue)
        clFinish(be->queue);
#if POSENC_HAVE_CLBLAST
    /* CLBlast's program cache retains every cl_context it has compiled for until the
     * process exits; clear it so this context really goes (other live contexts just
     * rebuild theirs from CLBlast's binary cache on their next GEMM). */
    if (be->used_clblast)
        CLBlastClearCache();
#endif
    for (int k = 0; k < be->n_programs; k++) {
        if (be->programs[k].kernel)
            clReleaseKernel(be->programs[k].kernel);
        if (be->programs[k].program)
            clReleaseProgram(be->programs[k].program);
    }
    for (int k = 0; k < be->n_sources; k++)
        if (be->sources[k].owned)
            free((void *)be->sources[k].data);
    table_free(&be->tab_rope);
    table_free(&be->tab_sin);
    table_free(&be->tab_alibi);
    table_free(&be->tab_relbias);
    pe_cl_attn_end(&be->base);
    if (be->fa_part)
        pe_cl_release_mem(be, be->fa_part);
    if (be->fa_counts)
        pe_cl_release_mem(be, be->fa_counts);
    if (be->relb)
        pe_cl_release_mem(be, be->relb);
    pe_cl_sync_free(be);
    free(be->rope_scratch);
    free(be->gemm_scratch);
    if (be->queue)
        clReleaseCommandQueue(be->queue);
    if (be->context)
        clReleaseContext(be->context);
    free(be);
}

static void cl_get_info(const struct pe_backend *base, struct posenc_device_info *out)
{
    const struct pe_cl_backend *be = (const struct pe_cl_backend *)base;
    *out = be->info;
}

/* How long posenc_context_finish watches the last command of a CPU device before it
 * blocks (cl_finish). */
#define PE_CL_POLL_NS 2000000

#if !defined(_WIN32)

/* On a CPU device, wait for posenc's last command by asking its status, yielding the core
 * between two asks, for up to PE_CL_POLL_NS; the clFinish after it then returns at once.
 * Why: a host thread blocked in clFinish sleeps, and the implementation's worker that
 * completes the command must wake it, which on PoCL (a futex wake, an inter-processor
 * interrupt to an idle core; on a virtual machine, the hypervisor's too) took 40-90 us
 * after the kernel's end, the same for every call (docs/performance.md). A thread that
 * yields takes no time from the workers when they have work (the scheduler runs them
 * first) and runs as soon as one of them stops: d 64 decode calls took 47-57 us (5-6%)
 * less in medians of 300, three runs. Spinning without yielding took a core from the
 * workers (+50%). GPUs keep the blocking wait: there the host thread does not compete
 * with the device, and no device here measured what polling would gain. After
 * PE_CL_POLL_NS (a long call, where the wake is a small share) clFinish blocks. */
static void poll_last(struct pe_cl_backend *be)
{
    if (!be->last_event || !pe_cl_is_cpu(be))
        return;
    if (clFlush(be->queue) != CL_SUCCESS)
        return; /* the clFinish after reports it */
    const int64_t t0 = pe_mono_ns();
    for (;;) {
        cl_int s = CL_COMPLETE;
        if (clGetEventInfo(be->last_event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(s), &s,
                           NULL) != CL_SUCCESS ||
            s <= CL_COMPLETE || pe_mono_ns() - t0 > PE_CL_POLL_NS)
            return;
        sched_yield();
    }
}
#else
static void poll_last(struct pe_cl_backend *be)
{
    (void)be; /* no sched_yield: clFinish alone */
}
#endif

static posenc_status cl_finish(struct pe_backend *base)
{
    struct pe_cl_backend *be = (struct pe_cl_backend *)base;
    /* wrapped host memory goes back to the host (posenc_buffer_wrap_host): maps enqueued
     * behind the queued work, waited for by the clFinish */
    posenc_status st = pe_cl_map_hosts(be);
    poll_last(be);
    cl_int err = clFinish(be->queue);
    if (err != CL_SUCCESS)
        return pe_cl_fail(be->base.ctx, "clFinish", err);
    return st;
}

/* posenc_context_flush: issue the queued commands to the device without waiting. */
static posenc_status cl_flush(struct pe_backend *base)
{
    struct pe_cl_backend *be = (struct pe_cl_backend *)base;
    cl_int err = clFlush(be->queue);
    return err == CL_SUCCESS ? POSENC_OK : pe_cl_fail(be->base.ctx, "clFlush", err);
}

/* ------------------------------------------------------------------------------------ */
/* Buffers                                                                              */
/* ------------------------------------------------------------------------------------ */

/* On a CPU device (PoCL), a buffer of PE_HOST_HUGE_PAGE bytes or more is host memory of
 * posenc's own in huge pages (pe_host_alloc, src/host_mem.c, which has the figures), given
 * to the implementation with CL_MEM_USE_HOST_PTR, which a CPU device reads in place; the
 * implementation's own allocations (malloc) stay in 4 KiB pages. */
static void CL_CALLBACK free_host_memory(cl_mem mem, void *host)
{
    (void)mem;
    free(host);
}

/* The buffer in huge pages (above), or NULL: not a CPU device, too small, no huge pages
 * here, or refused (the caller then takes the implementation's own memory). */
static cl_mem huge_page_buffer(struct pe_cl_backend *be, size_t size)
{
    if (size < PE_HOST_HUGE_PAGE || !pe_cl_is_cpu(be))
        return NULL;
    bool huge;
    void *host = pe_host_alloc(size, &huge);
    if (!host || !huge) {
        free(host);
        return NULL;
    }
    cl_int err = CL_SUCCESS;
    cl_mem mem =
        clCreateBuffer(be->context, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, size, host, &err);
    if (mem && err == CL_SUCCESS &&
        clSetMemObjectDestructorCallback(mem, free_host_memory, host) == CL_SUCCESS)
        return mem;
    if (mem && err == CL_SUCCESS)
        clReleaseMemObject(mem); /* no command has used it: released at once */
    free(host);
    return NULL;
}

static posenc_status cl_buffer_create(struct pe_backend *base, size_t size, void **out_mem)
{
    struct pe_cl_backend *be = (struct pe_cl_backend *)base;
    *out_mem = NULL;
    if ((uint64_t)size > be->info.max_buffer_size)
        return pe_error(be->base.ctx, POSENC_ERR_UNSUPPORTED,
                        "buffer of %zu bytes is larger than this OpenCL device allows "
                        "(CL_DEVICE_MAX_MEM_ALLOC_SIZE = %llu bytes)",
                        size, (unsigned long long)be->info.max_buffer_size);
    cl_mem mem = huge_page_buffer(be, size);
    if (mem) {
        *out_mem = mem;
        return POSENC_OK;
    }
    cl_int err = CL_SUCCESS;
    mem = clCreateBuffer(be->context, CL_MEM_READ_WRITE, size, NULL, &err);
    if (!mem || err != CL_SUCCESS)
        return pe_cl_fail_mem(be->base.ctx, "clCreateBuffer", err != CL_SUCCESS ? err
                                                                     : CL_MEM_OBJECT_ALLOCATION_FAILURE);
    *out_mem = mem;
    return POSENC_OK;
}

/* The application's cl_mem: checked, then retained (released by cl_buffer_destroy). */
static posenc_status cl_buffer_wrap_opencl(struct pe_backend *base, void *handle,
                                           size_t *out_size, void **out_mem)
{
    struct pe_cl_backend *be = (struct pe_cl_backend *)base;
    posenc_context *ctx = be->base.ctx;
    cl_mem mem = (cl_mem)handle;
    *out_mem = NULL;
    cl_mem_object_type type = 0;
    cl_int err = clGetMemObjectInfo(mem, CL_MEM_TYPE, sizeof(type), &type, NULL);
    if (err != CL_SUCCESS)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "cl_mem = %p is not a valid cl_mem (clGetMemObjectInfo: %d, %s)", handle,
                        (int)err, pe_cl_err_name(err));
    if (type != CL_MEM_OBJECT_BUFFER)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "cl_mem = %p is an image or pipe (CL_MEM_TYPE 0x%x), not a buffer",
                        handle, (unsigned)type);
    cl_context mctx = NULL;
    cl_mem_flags flags = 0;
    size_t size = 0;
    if ((err = clGetMemObjectInfo(mem, CL_MEM_CONTEXT, sizeof(mctx), &mctx, NULL)) !=
            CL_SUCCESS ||
        (err = clGetMemObjectInfo(mem, CL_MEM_FLAGS, sizeof(flags), &flags, NULL)) !=
            CL_SUCCESS ||
        (err = clGetMemObjectInfo(mem, CL_MEM_SIZE, sizeof(size), &size, NULL)) != CL_SUCCESS)
        return pe_cl_fail(ctx, "clGetMemObjectInfo", err);
    if (mctx != be->context)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "cl_mem = %p belongs to cl_context %p, not to this context's %p", handle,
                        (void *)mctx, (void *)be->context);
    const cl_mem_flags restricted = CL_MEM_READ_ONLY | CL_MEM_WRITE_ONLY |
                                    CL_MEM_HOST_NO_ACCESS | CL_MEM_HOST_READ_ONLY |
                                    CL_MEM_HOST_WRITE_ONLY;
    if (flags & restricted)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "cl_mem = %p has CL_MEM_FLAGS 0x%llx: posenc reads and writes it from "
                        "kernels and the host (no READ_ONLY / WRITE_ONLY / HOST_* flags)",
                        handle, (unsigned long long)flags);
    if (size == 0)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "cl_mem = %p has CL_MEM_SIZE 0",
                        handle);
    if ((err = clRetainMemObject(mem)) != CL_SUCCESS)
        return pe_cl_fail(ctx, "clRetainMemObject", err);
    *out_size = size;
    *out_mem = mem;
    return POSENC_OK;
}

static void cl_buffer_destroy(struct pe_backend *base, void *mem)
{
    /* OpenCL keeps the object alive until queued commands that use it have finished. A
     * wrapped cl_mem loses only the reference posenc took at wrap time. */
    if (mem)
        pe_cl_release_mem((struct pe_cl_backend *)base, (cl_mem)mem);
}

static posenc_status cl_buffer_write(struct pe_backend *base, void *mem, size_t offset,
                                     const void *src, size_t size)
{
    struct pe_cl_backend *be = (struct pe_cl_backend *)base;
    if (size == 0)
        return POSENC_OK;
    PE_RETURN_IF_ERROR(pe_cl_before_enqueue(be));
    /* Blocking: the caller may free or reuse `src` as soon as this returns. */
    cl_event ev = NULL;
    cl_int err =
        clEnqueueWriteBuffer(be->queue, (cl_mem)mem, CL_TRUE, offset, size, src, 0, NULL, &ev);
    if (err != CL_SUCCESS)
        return pe_cl_fail_mem(be->base.ctx, "clEnqueueWriteBuffer", err);
    pe_cl_track(be, ev);
    return POSENC_OK;
}

static posenc_status cl_buffer_read(struct pe_backend *base, void *mem, size_t offset, void *dst,
                                    size_t size)
{
    struct pe_cl_backend *be = (struct pe_cl_backend *)base;
    if (size == 0)
        return cl_finish(base);
    PE_RETURN_IF_ERROR(pe_cl_before_enqueue(be));
    cl_event ev = NULL;
    cl_int err =
        clEnqueueReadBuffer(be->queue, (cl_mem)mem, CL_TRUE, offset, size, dst, 0, NULL, &ev);
    if (err != CL_SUCCESS)
        return pe_cl_fail_mem(be->base.ctx, "clEnqueueReadBuffer", err);
    pe_cl_track(be, ev);
    return POSENC_OK;
}

/* ------------------------------------------------------------------------------------ */
/* Launch helpers                                                                       */
/* ------------------------------------------------------------------------------------ */

static size_t pow2_at_least(uint64_t v, size_t cap)
{
    size_t p = 1;
    while (p < v && p < cap)
        p *= 2;
    return p;
}

/* Local size for a 2-D-ish range (n0 x n1 x n2) and the global sizes rounded up to it.
 * Returns false if a global size does not fit a size_t. */
static bool launch_size(const struct pe_cl_backend *be, const struct pe_cl_program *p,
                        const uint64_t n[3], size_t global[3], size_t local[3])
{
    size_t limit = p->kernel_wg_size;
    if (be->info.max_workgroup_size && limit > be->info.max_workgroup_size)
        limit = be->info.max_workgroup_size;
    if (limit > 256)
        limit = 256;
    size_t cap0 = be->max_item_size[0] ? be->max_item_size[0] : 1;
    size_t cap1 = be->max_item_size[1] ? be->max_item_size[1] : 1;
    local[0] = pow2_at_least(n[0], 64);
    while (local[0] > limit || local[0] > cap0)
        local[0] /= 2;
    local[1] = pow2_at_least(n[1], limit / local[0]);
    while (local[1] > 1 && (local[0] * local[1] > limit || local[1] > cap1))
        local[1] /= 2;
    local[2] = 1;
    for (int k = 0; k < 3; k++) {
        uint64_t g = (n[k] + local[k] - 1) / local[k] * local[k];
        if (g > (uint64_t)SIZE_MAX)
            return false;
        global[k] = (size_t)g;
    }
    return true;
}

/* The helpers src/opencl/ops_encodings.c uses (backend_opencl.h). */

posenc_status pe_cl_upload(struct pe_cl_backend *be, const char *what, const void *data,
                           size_t size, cl_mem *out)
{
    *out = NULL;
    cl_int err = CL_SUCCESS;
    /* A zero-sized buffer is invalid in OpenCL: an empty table still gets 4 bytes. */
    static const uint32_t zero = 0;
    if (size == 0) {
        data = &zero;
        size = sizeof(zero);
    }
    cl_mem mem = pe_fault_device_alloc()
                     ? (err = CL_MEM_OBJECT_ALLOCATION_FAILURE, NULL)
                     : clCreateBuffer(be->context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                                      size, (void *)data, &err);
    if (!mem || err != CL_SUCCESS) {
        char call[96];
        snprintf(call, sizeof(call), "clCreateBuffer(%s, %zu bytes)", what, size);
        return pe_cl_fail_mem(be->base.ctx, call,
                              err != CL_SUCCESS ? err : CL_MEM_OBJECT_ALLOCATION_FAILURE);
    }
    *out = mem;
    return POSENC_OK;
}

posenc_status pe_cl_set_args(struct pe_cl_backend *be, struct pe_cl_program *p,
                             const struct pe_cl_arg *args, size_t n_args)
{
    if (p->arg_gen != be->mem_gen)
        p->n_args_set = 0;
    for (size_t k = 0; k < n_args; k++) {
        const size_t size = args[k].size;
        if ((int)k < p->n_args_set && p->arg_size[k] == size &&
            memcmp(p->arg_val[k], args[k].value, size) == 0)
            continue;
        cl_int err = clSetKernelArg(p->kernel, (cl_uint)k, size, args[k].value);
        if (err != CL_SUCCESS) {
            p->n_args_set = 0;
            return pe_error(be->base.ctx, POSENC_ERR_BACKEND,
                            "clSetKernelArg(%s, %zu) failed: %d (%s)", p->kernel_name, k,
                            (int)err, pe_cl_err_name(err));
        }
        if ((int)k <= p->n_args_set && k < PE_CL_MAX_ARGS && size <= PE_CL_ARG_MAX_BYTES) {
            p->arg_size[k] = (unsigned char)size;
            memcpy(p->arg_val[k], args[k].value, size);
            if ((int)k == p->n_args_set)
                p->n_args_set = (int)k + 1;
        } else if ((int)k < p->n_args_set) {
            p->n_args_set = (int)k; /* not remembered: neither is what follows */
        }
    }
    p->arg_gen = be->mem_gen;
    return POSENC_OK;
}

posenc_status pe_cl_enqueue(struct pe_cl_backend *be, struct pe_cl_program *p,
                            const struct pe_cl_arg *args, size_t n_args, const size_t global[3],
                            const size_t local[3])
{
    PE_RETURN_IF_ERROR(pe_cl_set_args(be, p, args, n_args));
    if (be->base.prepare_only)
        return POSENC_OK;
    PE_RETURN_IF_ERROR(pe_cl_before_enqueue(be));
    cl_event ev = NULL;
    cl_int err =
        clEnqueueNDRangeKernel(be->queue, p->kernel, 3, NULL, global, local, 0, NULL, &ev);
    if (err != CL_SUCCESS) {
        char call[96];
        snprintf(call, sizeof(call), "clEnqueueNDRangeKernel(%s)", p->kernel_name);
        return pe_cl_fail_mem(be->base.ctx, call, err);
    }
    pe_cl_track(be, ev);
    return POSENC_OK;
}

posenc_status pe_cl_launch(struct pe_cl_backend *be, struct pe_cl_program *p,
                           const struct pe_cl_arg *args, size_t n_args, const uint64_t n[3])
{
    size_t global[3], local[3];
    if (!launch_size(be, p, n, global, local))
        return pe_error(be->base.ctx, POSENC_ERR_UNSUPPORTED,
                        "%s: %llu x %llu x %llu work-items do not fit this device's size_t",
                        p->kernel_name, (unsigned long long)n[0], (unsigned long long)n[1],
                        (unsigned long long)n[2]);
    return pe_cl_enqueue(be, p, args, n_args, global, local);
}

/* Whether every row of v starts on a multiple of `n` elements (offset and the outer
 * strides) and the innermost stride is 1: the vector kernels' n-wide loads and stores
 * are then aligned (some implementations, PoCL among them, fault on unaligned vloadn). */
bool pe_cl_rows_aligned(const struct pe_view *v, int64_t n)
{
    return v->st[0] == 1 && v->offset % n == 0 && v->st[1] % n == 0 && v->st[2] % n == 0 &&
           v->st[3] % n == 0;
}


size_t pe_cl_reduce_wg(const struct pe_cl_backend *be, size_t cap, size_t bytes_per_item)
{
    if (be->info.max_workgroup_size && be->info.max_workgroup_size < cap)
        cap = be->info.max_workgroup_size;
    if (be->max_item_size[0] && be->max_item_size[0] < cap)
        cap = be->max_item_size[0];
    if (be->local_mem && bytes_per_item && be->local_mem / bytes_per_item < cap)
        cap = (size_t)(be->local_mem / bytes_per_item);
    size_t wg = 1;
    while (wg * 2 <= cap)
        wg *= 2;
    return wg;
}

/* CPU devices (backend_opencl.h). Among what depends on it: the vector kernels
 * (pe_rope_vec, pe_sinusoidal_vec) are built with PE_CPU_ORDER = 1 there: a barrier after
 * each row makes an implementation that runs a group's work-items one after another
 * (PoCL) walk memory in order. */
bool pe_cl_is_cpu(const struct pe_cl_backend *be)
{
    return be->info.type == POSENC_DEVICE_CPU;
}

/* Streaming stores (PE_NT_STORE) for an out-of-place output of `bytes`: on CPU devices,
 * for outputs much larger than the caches (see PE_FAST_NT_BYTES in src/cpu/cpu_fast_sincos.c). */
bool pe_cl_use_nt(const struct pe_cl_backend *be, double bytes)
{
    return pe_cl_is_cpu(be) && bytes >= 16.0 * 1024 * 1024;
}

bool pe_cl_stream_out(const struct pe_cl_backend *be, const struct pe_view *x,
                      const struct pe_view *dst)
{
    if (x && x->mem == dst->mem && x->offset == dst->offset)
        return false;
    return pe_cl_use_nt(be, (double)posenc_dtype_size(dst->dtype) * (double)dst->ne[0] *
                                (double)dst->ne[1] * (double)dst->ne[2] * (double)dst->ne[3]);
}

bool pe_cl_is_pocl(const struct pe_cl_backend *be)
{
    return strncmp(be->platform_id, "Portable Computing Language", 27) == 0;
}

/* ---- persistent tables ----------------------------------------------------------------- */

posenc_status pe_cl_table(struct pe_cl_backend *be, struct pe_cl_table *t, const char *what,
                          const void *data, size_t size, cl_mem *out)
{
    static const uint32_t zero = 0;
    if (size == 0) { /* a zero-sized buffer is invalid in OpenCL */
        data = &zero;
        size = sizeof(zero);
    }
    if (t->mem && t->size == size && memcmp(t->host, data, size) == 0) {
        *out = t->mem;
        return POSENC_OK;
    }
    /* The host record only ever grows: the launches of an op cut along heads (ALiBi's
     * slopes) come largest first, so later ones do not allocate host memory. */
    if (size > t->host_cap) {
        void *grown = malloc(size);
        if (!grown)
            return pe_error(be->base.ctx, POSENC_ERR_OUT_OF_MEMORY, "out of host memory (%s, "
                            "%zu bytes)", what, size);
        free(t->host);
        t->host = grown;
        t->host_cap = size;
        if (t->mem) { /* the record is gone: so is the match */
            pe_cl_release_mem(be, t->mem);
            t->mem = NULL;
        }
    }
    cl_mem mem = NULL;
    PE_RETURN_IF_ERROR(pe_cl_upload(be, what, data, size, &mem));
    /* The old buffer may still be read by queued kernels: OpenCL keeps it alive until
     * they are done. */
    if (t->mem)
        pe_cl_release_mem(be, t->mem);
    memcpy(t->host, data, size);
    t->mem = mem;
    t->size = size;
    *out = mem;
    return POSENC_OK;
}

posenc_status pe_cl_scratch(struct pe_cl_backend *be, const char *what, cl_mem *mem,
                            size_t *have, size_t bytes, bool zeroed)
{
    if (*mem && *have >= bytes)
        return POSENC_OK;
    void *zeros = NULL;
    if (zeroed && !(zeros = calloc(bytes, 1)))
        return pe_error(be->base.ctx, POSENC_ERR_OUT_OF_MEMORY,
                        "out of host memory for the %s (%zu bytes)", what, bytes);
    cl_int err = CL_SUCCESS;
    cl_mem made = pe_fault_device_alloc()
                      ? (err = CL_MEM_OBJECT_ALLOCATION_FAILURE, NULL)
                      : clCreateBuffer(be->context,
                                       CL_MEM_READ_WRITE | (zeros ? CL_MEM_COPY_HOST_PTR : 0),
                                       bytes, zeros, &err);
    free(zeros);
    if (!made || err != CL_SUCCESS) {
        if (made)
            clReleaseMemObject(made);
        if (err == CL_SUCCESS)
            err = CL_MEM_OBJECT_ALLOCATION_FAILURE;
        return pe_error(be->base.ctx,
                        pe_cl_err_is_oom(err) ? POSENC_ERR_OUT_OF_MEMORY : POSENC_ERR_BACKEND,
                        "clCreateBuffer(%s, %zu bytes) failed: OpenCL error %d", what, bytes,
                        (int)err);
    }
    if (*mem)
        pe_cl_release_mem(be, *mem);
    *mem = made;
    *have = bytes;
    return POSENC_OK;
}

static void table_free(struct pe_cl_table *t)
{
    if (t->mem)
        clReleaseMemObject(t->mem);
    free(t->host);
    memset(t, 0, sizeof(*t));
}

/* ------------------------------------------------------------------------------------ */

const struct pe_backend_vtable pe_opencl_vtable = {
    .kind = POSENC_BACKEND_OPENCL,
    .name = "opencl",
    .device_count = pe_cl_device_count,
    .create = cl_create,
    .create_from_host = cl_create_from_host,
    .destroy = cl_destroy,
    .get_info = cl_get_info,
    .finish = cl_finish,
    .buffer_create = cl_buffer_create,
    .buffer_destroy = cl_buffer_destroy,
    .buffer_write = cl_buffer_write,
    .buffer_read = cl_buffer_read,
    .buffer_wrap_opencl = cl_buffer_wrap_opencl,
    .sinusoidal = pe_cl_sinusoidal,
    .rope = pe_cl_rope,
    .learned = pe_cl_learned,
    .learned_backward = pe_cl_learned_backward,
    .resize_2d = pe_cl_resize_2d,
    .relbias = pe_cl_relbias,
    .relbias_backward = pe_cl_relbias_backward,
    .alibi = pe_cl_alibi,
    .copy = pe_cl_copy,
    .attn_scores = pe_cl_attn_scores,
    .attn_softmax = pe_cl_attn_softmax,
    .attn_output = pe_cl_attn_output,
    .attn_prepare = pe_cl_attn_prepare,
    .prepare_pass = true,
    .attn_end = pe_cl_attn_end,
    .fill = pe_cl_fill,
    .set_rows = pe_cl_set_rows,
    .softmax = pe_cl_softmax,
    .host_alignment = pe_cl_host_alignment,
    .buffer_wrap_host = pe_cl_buffer_wrap_host,
    .buffer_unwrap_host = pe_cl_buffer_unwrap_host,
    .last_event = pe_cl_last_event,
    .wait_events = pe_cl_wait_events,
    .flush = cl_flush,
    .attn_fused = pe_cl_attn_fused,
    .attn_krot = pe_cl_attn_krot,
};
