/*
 * backend_opencl.c - the OpenCL backend: one device, one in-order queue, programs built
 * from the embedded cl/ sources on first use and cached per context and on disk.
 *
 * Programs are common.cl + <op>.cl, built with "-cl-std=CL1.2 -w" plus -D options that pick
 * the storage types (see cl/common.cl); no fast-math options. Each distinct option string
 * is built once per context (struct pe_cl_program cache), and its binary is kept in an
 * on-disk cache (see "The on-disk program-binary cache" below) so that the next process
 * skips the compiler. POSENC_CL_KERNEL_DIR=<dir> loads the .cl files from <dir> instead of
 * the embedded copies (kernel development).
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
 *   NDRange (K, Q, H*B).
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
/* realpath and S_ISVTX (the program-binary cache's trust checks) are XSI */
#if !defined(_WIN32) && !defined(_XOPEN_SOURCE)
#define _XOPEN_SOURCE 700
#endif
#include "backend_opencl.h"
#include "preset.h"
#include "cl_kernels.h"
#include "posenc_config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if !defined(_WIN32)
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>
#endif

#ifndef CL_PLATFORM_NOT_FOUND_KHR
#define CL_PLATFORM_NOT_FOUND_KHR -1001
#endif

_Static_assert(offsetof(struct pe_cl_backend, base) == 0,
               "struct pe_backend must be the first member of struct pe_cl_backend");

extern const struct pe_backend_vtable pe_opencl_vtable;

/* ------------------------------------------------------------------------------------ */
/* Errors                                                                               */
/* ------------------------------------------------------------------------------------ */

static const char *cl_err_name(cl_int err)
{
    switch (err) {
#define PE_CL_ERR(e) case e: return #e;
    PE_CL_ERR(CL_SUCCESS)
    PE_CL_ERR(CL_DEVICE_NOT_FOUND)
    PE_CL_ERR(CL_DEVICE_NOT_AVAILABLE)
    PE_CL_ERR(CL_COMPILER_NOT_AVAILABLE)
    PE_CL_ERR(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    PE_CL_ERR(CL_OUT_OF_RESOURCES)
    PE_CL_ERR(CL_OUT_OF_HOST_MEMORY)
    PE_CL_ERR(CL_PROFILING_INFO_NOT_AVAILABLE)
    PE_CL_ERR(CL_MEM_COPY_OVERLAP)
    PE_CL_ERR(CL_IMAGE_FORMAT_MISMATCH)
    PE_CL_ERR(CL_IMAGE_FORMAT_NOT_SUPPORTED)
    PE_CL_ERR(CL_BUILD_PROGRAM_FAILURE)
    PE_CL_ERR(CL_MAP_FAILURE)
    PE_CL_ERR(CL_MISALIGNED_SUB_BUFFER_OFFSET)
    PE_CL_ERR(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    PE_CL_ERR(CL_COMPILE_PROGRAM_FAILURE)
    PE_CL_ERR(CL_LINKER_NOT_AVAILABLE)
    PE_CL_ERR(CL_LINK_PROGRAM_FAILURE)
    PE_CL_ERR(CL_DEVICE_PARTITION_FAILED)
    PE_CL_ERR(CL_KERNEL_ARG_INFO_NOT_AVAILABLE)
    PE_CL_ERR(CL_INVALID_VALUE)
    PE_CL_ERR(CL_INVALID_DEVICE_TYPE)
    PE_CL_ERR(CL_INVALID_PLATFORM)
    PE_CL_ERR(CL_INVALID_DEVICE)
    PE_CL_ERR(CL_INVALID_CONTEXT)
    PE_CL_ERR(CL_INVALID_QUEUE_PROPERTIES)
    PE_CL_ERR(CL_INVALID_COMMAND_QUEUE)
    PE_CL_ERR(CL_INVALID_HOST_PTR)
    PE_CL_ERR(CL_INVALID_MEM_OBJECT)
    PE_CL_ERR(CL_INVALID_BINARY)
    PE_CL_ERR(CL_INVALID_BUILD_OPTIONS)
    PE_CL_ERR(CL_INVALID_PROGRAM)
    PE_CL_ERR(CL_INVALID_PROGRAM_EXECUTABLE)
    PE_CL_ERR(CL_INVALID_KERNEL_NAME)
    PE_CL_ERR(CL_INVALID_KERNEL_DEFINITION)
    PE_CL_ERR(CL_INVALID_KERNEL)
    PE_CL_ERR(CL_INVALID_ARG_INDEX)
    PE_CL_ERR(CL_INVALID_ARG_VALUE)
    PE_CL_ERR(CL_INVALID_ARG_SIZE)
    PE_CL_ERR(CL_INVALID_KERNEL_ARGS)
    PE_CL_ERR(CL_INVALID_WORK_DIMENSION)
    PE_CL_ERR(CL_INVALID_WORK_GROUP_SIZE)
    PE_CL_ERR(CL_INVALID_WORK_ITEM_SIZE)
    PE_CL_ERR(CL_INVALID_GLOBAL_OFFSET)
    PE_CL_ERR(CL_INVALID_EVENT_WAIT_LIST)
    PE_CL_ERR(CL_INVALID_EVENT)
    PE_CL_ERR(CL_INVALID_OPERATION)
    PE_CL_ERR(CL_INVALID_BUFFER_SIZE)
    PE_CL_ERR(CL_INVALID_GLOBAL_WORK_SIZE)
    PE_CL_ERR(CL_INVALID_PROPERTY)
    PE_CL_ERR(CL_INVALID_COMPILER_OPTIONS)
    PE_CL_ERR(CL_INVALID_LINKER_OPTIONS)
    PE_CL_ERR(CL_PLATFORM_NOT_FOUND_KHR)
#undef PE_CL_ERR
    default:
        return "unknown OpenCL error";
    }
}

bool pe_cl_err_is_oom(cl_int err)
{
    return err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_RESOURCES ||
           err == CL_OUT_OF_HOST_MEMORY;
}

/* A failed cl* call: POSENC_ERR_BACKEND with the call, code and name. */
static posenc_status cl_fail(posenc_context *ctx, const char *call, cl_int err)
{
    /* host memory is never a device problem (also what device_string reports when its own
     * malloc fails) */
    return pe_error(ctx, err == CL_OUT_OF_HOST_MEMORY ? POSENC_ERR_OUT_OF_MEMORY
                                                      : POSENC_ERR_BACKEND,
                    "%s failed: %d (%s)", call, (int)err,
                    cl_err_name(err));
}

/* The same, but allocation failures become POSENC_ERR_OUT_OF_MEMORY (buffers). */
static posenc_status cl_fail_mem(posenc_context *ctx, const char *call, cl_int err)
{
    if (pe_cl_err_is_oom(err))
        return pe_error(ctx, POSENC_ERR_OUT_OF_MEMORY, "%s failed: %d (%s)", call, (int)err,
                        cl_err_name(err));
    return cl_fail(ctx, call, err);
}

/* The two above for the other files of the backend (backend_opencl.h). */
const char *pe_cl_err_name(cl_int err)
{
    return cl_err_name(err);
}

posenc_status pe_cl_fail(posenc_context *ctx, const char *call, cl_int err)
{
    return cl_fail(ctx, call, err);
}

/* ------------------------------------------------------------------------------------ */
/* Platforms and devices                                                                */
/* ------------------------------------------------------------------------------------ */

/* All platforms (malloc'd into *out, count in *out_n). On failure writes a reason and
 * returns POSENC_ERR_UNAVAILABLE (no platform) or another status. */
static posenc_status list_platforms(cl_platform_id **out, cl_uint *out_n, char *reason,
                                    size_t reason_size)
{
    *out = NULL;
    *out_n = 0;
    cl_uint n = 0;
    cl_int err = clGetPlatformIDs(0, NULL, &n);
    if (err == CL_PLATFORM_NOT_FOUND_KHR) {
        snprintf(reason, reason_size, "no OpenCL platform (ICD loader returned %d)", (int)err);
        return POSENC_ERR_UNAVAILABLE;
    }
    if (err == CL_SUCCESS && n == 0) {
        snprintf(reason, reason_size, "no OpenCL platform (the ICD loader found none)");
        return POSENC_ERR_UNAVAILABLE;
    }
    if (err != CL_SUCCESS) {
        snprintf(reason, reason_size, "clGetPlatformIDs failed: %d (%s)", (int)err,
                 cl_err_name(err));
        return POSENC_ERR_UNAVAILABLE;
    }
    cl_platform_id *p = malloc(n * sizeof(*p));
    if (!p) {
        snprintf(reason, reason_size, "out of host memory listing %u OpenCL platforms", n);
        return POSENC_ERR_OUT_OF_MEMORY;
    }
    err = clGetPlatformIDs(n, p, NULL);
    if (err != CL_SUCCESS) {
        free(p);
        snprintf(reason, reason_size, "clGetPlatformIDs failed: %d (%s)", (int)err,
                 cl_err_name(err));
        return POSENC_ERR_UNAVAILABLE;
    }
    *out = p;
    *out_n = n;
    return POSENC_OK;
}

/* Number of devices of `type` on platform p (0 when it has none or cannot say). */
static cl_uint platform_device_count(cl_platform_id p, cl_device_type type)
{
    cl_uint n = 0;
    if (clGetDeviceIDs(p, type, 0, NULL, &n) != CL_SUCCESS)
        return 0;
    return n;
}

static posenc_status cl_device_count(int32_t *out_count, char *reason, size_t reason_size)
{
    char scratch[8];
    if (!reason || reason_size == 0) {
        reason = scratch;
        reason_size = sizeof(scratch);
    }
    *out_count = 0;
    PE_RETURN_IF_ERROR(pe_cl_load(reason, reason_size));
    cl_platform_id *plats;
    cl_uint np;
    posenc_status st = list_platforms(&plats, &np, reason, reason_size);
    if (st != POSENC_OK)
        return st;
    int64_t total = 0;
    for (cl_uint k = 0; k < np; k++)
        total += platform_device_count(plats[k], CL_DEVICE_TYPE_ALL);
    free(plats);
    if (total == 0) {
        snprintf(reason, reason_size, "no OpenCL device on %u platform(s)", np);
        return POSENC_ERR_UNAVAILABLE;
    }
    *out_count = total > INT32_MAX ? INT32_MAX : (int32_t)total;
    return POSENC_OK;
}

/* A string device property, truncated to fit dst (always NUL-terminated). */
static cl_int device_string(cl_device_id dev, cl_device_info param, char *dst, size_t size)
{
    size_t n = 0;
    dst[0] = '\0';
    cl_int err = clGetDeviceInfo(dev, param, 0, NULL, &n);
    if (err != CL_SUCCESS)
        return err;
    char *tmp = malloc(n + 1);
    if (!tmp)
        return CL_OUT_OF_HOST_MEMORY;
    err = clGetDeviceInfo(dev, param, n, tmp, NULL);
    if (err == CL_SUCCESS) {
        tmp[n] = '\0';
        pe_strlcpy(dst, tmp, size);
    }
    free(tmp);
    return err;
}

/* Whether the space-separated extension list of dev contains `ext`. */
static bool device_has_extension(cl_device_id dev, const char *ext)
{
    size_t n = 0;
    if (clGetDeviceInfo(dev, CL_DEVICE_EXTENSIONS, 0, NULL, &n) != CL_SUCCESS)
        return false;
    char *list = malloc(n + 1);
    if (!list)
        return false;
    bool found = false;
    if (clGetDeviceInfo(dev, CL_DEVICE_EXTENSIONS, n, list, NULL) == CL_SUCCESS) {
        list[n] = '\0';
        size_t len = strlen(ext);
        for (const char *s = list; (s = strstr(s, ext)) != NULL; s += len) {
            bool start = s == list || s[-1] == ' ';
            bool end = s[len] == '\0' || s[len] == ' ';
            if (start && end) {
                found = true;
                break;
            }
        }
    }
    free(list);
    return found;
}

/* POSENC_DEVICE_PRESET (src/preset.h): lower what query_device stored, in place, so that
 * every later reader (launch sizes, get_program's local-memory check, get_info) sees the
 * preset's device. Never raises a value. */
static void apply_preset(struct pe_cl_backend *be)
{
    const struct pe_preset *pr = be->base.ctx->preset;
    struct posenc_device_info *info = &be->info;
    if (!pr)
        return;
    const struct pe_preset_cl *c = &pr->cl;
    char was[160];
    snprintf(was, sizeof(was),
             "max work-group %u, work-item sizes %zu x %zu x %zu, local memory %llu, "
             "allocation %llu, fp16 %d, fp64 %d",
             (unsigned)info->max_workgroup_size, be->max_item_size[0], be->max_item_size[1],
             be->max_item_size[2], (unsigned long long)be->local_mem,
             (unsigned long long)info->max_buffer_size, info->f16_native, be->fp64);
    uint64_t wg = info->max_workgroup_size;
    pe_lower_u64(&wg, c->max_wg);
    info->max_workgroup_size = (uint32_t)wg;
    for (int k = 0; k < 3; k++)
        pe_lower_size(&be->max_item_size[k], c->item_size[k]);
    pe_lower_u64(&be->local_mem, c->local_mem);
    pe_lower_u64(&be->const_buf, c->const_buf);
    pe_lower_u64(&info->max_buffer_size, c->max_alloc);
    if (!c->fp16)
        info->f16_native = 0;
    if (!c->fp64)
        be->fp64 = 0;
    /* The kind of device decides among kernel variants (pe_cl_is_cpu): a preset's device
     * is a GPU, so its variants run even on a CPU implementation such as PoCL. */
    info->type = pr->type;
    pe_log(be->base.ctx, POSENC_LOG_INFO,
           "opencl: " PE_PRESET_ENV "=%s (%s): max work-group %u, work-item sizes %zu x %zu "
           "x %zu, local memory %llu, allocation %llu bytes, fp16 %d, fp64 %d (the device: "
           "%s)",
           pr->name, pr->what, (unsigned)info->max_workgroup_size, be->max_item_size[0],
           be->max_item_size[1], be->max_item_size[2], (unsigned long long)be->local_mem,
           (unsigned long long)info->max_buffer_size, info->f16_native, be->fp64, was);
}

/* Query everything get_info reports, once. */
static posenc_status query_device(struct pe_cl_backend *be, int32_t index)
{
    posenc_context *ctx = be->base.ctx;
    cl_device_id dev = be->device;
    struct posenc_device_info *info = &be->info;
    memset(info, 0, sizeof(*info));
    info->backend = POSENC_BACKEND_OPENCL;
    info->device_index = index;

    cl_device_type type = 0;
    cl_bool unified = CL_FALSE;
    cl_ulong max_alloc = 0;
    size_t max_wg = 0;
    cl_uint cus = 0;
    cl_int err;
    if ((err = clGetDeviceInfo(dev, CL_DEVICE_TYPE, sizeof(type), &type, NULL)) != CL_SUCCESS ||
        (err = clGetDeviceInfo(dev, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof(max_alloc), &max_alloc,
                               NULL)) != CL_SUCCESS ||
        (err = clGetDeviceInfo(dev, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof(max_wg), &max_wg,
                               NULL)) != CL_SUCCESS ||
        (err = clGetDeviceInfo(dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof(cus), &cus, NULL)) !=
            CL_SUCCESS ||
        (err = clGetDeviceInfo(dev, CL_DEVICE_MAX_WORK_ITEM_SIZES, sizeof(be->max_item_size),
                               be->max_item_size, NULL)) != CL_SUCCESS ||
        (err = device_string(dev, CL_DEVICE_NAME, info->device_name,
                             sizeof(info->device_name))) != CL_SUCCESS ||
        (err = device_string(dev, CL_DEVICE_VENDOR, info->vendor, sizeof(info->vendor))) !=
            CL_SUCCESS ||
        (err = device_string(dev, CL_DRIVER_VERSION, info->driver_version,
                             sizeof(info->driver_version))) != CL_SUCCESS ||
        (err = device_string(dev, CL_DEVICE_VERSION, info->api_version,
                             sizeof(info->api_version))) != CL_SUCCESS)
        return cl_fail(ctx, "clGetDeviceInfo", err);
    /* Deprecated in 2.0 but still answered; only used to tell integrated GPUs apart. */
    if (clGetDeviceInfo(dev, CL_DEVICE_HOST_UNIFIED_MEMORY, sizeof(unified), &unified, NULL) !=
        CL_SUCCESS)
        unified = CL_FALSE;

    if (type & CL_DEVICE_TYPE_GPU)
        info->type = unified ? POSENC_DEVICE_INTEGRATED_GPU : POSENC_DEVICE_DISCRETE_GPU;
    else if (type & CL_DEVICE_TYPE_CPU)
        info->type = POSENC_DEVICE_CPU;
    else
        info->type = POSENC_DEVICE_OTHER;
    info->f16_storage = 1;
    info->f16_native = device_has_extension(dev, "cl_khr_fp16") ? 1 : 0;
    be->fp64 = device_has_extension(dev, "cl_khr_fp64") ? 1 : 0;
    {
        /* fma in hardware: the angle kernels' fma form (common.cl); the fma-free form
         * (the same as Vulkan's) otherwise, or with POSENC_CL_FMA=0 */
        cl_device_fp_config fpc = 0;
        if (clGetDeviceInfo(dev, CL_DEVICE_SINGLE_FP_CONFIG, sizeof(fpc), &fpc, NULL) !=
            CL_SUCCESS)
            fpc = 0;
        const char *env = getenv("POSENC_CL_FMA");
        be->hw_fma = (fpc & CL_FP_FMA) && !(env && strcmp(env, "0") == 0) ? 1 : 0;
    }
    info->max_buffer_size = max_alloc;
    info->max_workgroup_size = max_wg > UINT32_MAX ? UINT32_MAX : (uint32_t)max_wg;
    info->compute_units = cus;
    {
        cl_ulong lm = 0, cb = 0;
        if (clGetDeviceInfo(dev, CL_DEVICE_LOCAL_MEM_SIZE, sizeof(lm), &lm, NULL) != CL_SUCCESS)
            lm = 32 * 1024; /* OpenCL 1.2's minimum */
        if (clGetDeviceInfo(dev, CL_DEVICE_MAX_CONSTANT_BUFFER_SIZE, sizeof(cb), &cb, NULL) !=
            CL_SUCCESS)
            cb = 64 * 1024;
        be->local_mem = lm;
        be->const_buf = cb;
    }
    apply_preset(be);
    char pname[128] = "", pversion[120] = "";
    clGetPlatformInfo(be->platform, CL_PLATFORM_NAME, sizeof(pname) - 1, pname, NULL);
    clGetPlatformInfo(be->platform, CL_PLATFORM_VERSION, sizeof(pversion) - 1, pversion, NULL);
    snprintf(be->platform_id, sizeof(be->platform_id), "%s %s", pname, pversion);
    return POSENC_OK;
}

/* ------------------------------------------------------------------------------------ */
/* Create / destroy                                                                     */
/* ------------------------------------------------------------------------------------ */

static void cl_destroy(struct pe_backend *base);
static void cache_init(struct pe_cl_backend *be);
static void table_free(struct pe_cl_table *t);

/* Find device `index` among all (or only GPU) devices of all platforms, in order. */
static posenc_status find_device(posenc_context *ctx, int32_t index, bool gpu_only,
                                 cl_platform_id *out_plat, cl_device_id *out_dev)
{
    char reason[PE_ERR_MAX];
    if (pe_cl_load(reason, sizeof(reason)) != POSENC_OK)
        return pe_error(ctx, POSENC_ERR_UNAVAILABLE, "%s", reason);
    cl_platform_id *plats;
    cl_uint np;
    posenc_status st = list_platforms(&plats, &np, reason, sizeof(reason));
    if (st != POSENC_OK)
        return pe_error(ctx, st, "%s", reason);

    const cl_device_type type = gpu_only ? CL_DEVICE_TYPE_GPU : CL_DEVICE_TYPE_ALL;
    int64_t seen = 0;
    st = POSENC_ERR_INTERNAL;
    for (cl_uint k = 0; k < np; k++) {
        cl_uint n = platform_device_count(plats[k], type);
        if (n == 0 || index >= seen + n) {
            seen += n;
            continue;
        }
        cl_device_id *devs = malloc(n * sizeof(*devs));
        if (!devs) {
            free(plats);
            return pe_error(ctx, POSENC_ERR_OUT_OF_MEMORY, "out of host memory");
        }
        cl_int err = clGetDeviceIDs(plats[k], type, n, devs, NULL);
        if (err == CL_SUCCESS) {
            *out_plat = plats[k];
            *out_dev = devs[index - seen];
            st = POSENC_OK;
        } else {
            st = cl_fail(ctx, "clGetDeviceIDs", err);
        }
        free(devs);
        free(plats);
        return st;
    }
    free(plats);
    if (seen == 0)
        return pe_error(ctx, POSENC_ERR_UNAVAILABLE, gpu_only
                            ? "no OpenCL GPU device (%u platform(s); CPU devices such as PoCL "
                              "are used only when the opencl backend is asked for)"
                            : "no OpenCL device (%u platform(s))",
                        np);
    return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                    "device %d is past the last OpenCL %sdevice (there are %lld)", (int)index,
                    gpu_only ? "GPU " : "", (long long)seen);
}

/* Query the device and check that posenc can run on it (OpenCL 1.2, a compiler).
 * `index` is the posenc device index, -1 for the application's device. */
static posenc_status check_device(struct pe_cl_backend *be, int32_t index)
{
    posenc_context *ctx = be->base.ctx;
    PE_RETURN_IF_ERROR(query_device(be, index));
    /* A kernel sees a whole cl_mem, which is at most CL_DEVICE_MAX_MEM_ALLOC_SIZE (or a
     * preset's lower figure): the binding limit src/split.c cuts ops by. */
    be->base.max_binding = be->info.max_buffer_size;
    be->base.max_binding_name =
        ctx->preset ? "OpenCL CL_DEVICE_MAX_MEM_ALLOC_SIZE (" PE_PRESET_ENV ")"
                    : "OpenCL CL_DEVICE_MAX_MEM_ALLOC_SIZE";
    int major = 0, minor = 0;
    if (sscanf(be->info.api_version, "OpenCL %d.%d", &major, &minor) != 2 ||
        major * 100 + minor < 102)
        return pe_error(ctx, POSENC_ERR_UNAVAILABLE,
                        "OpenCL device %d (%s) reports \"%s\"; posenc needs OpenCL 1.2 or later",
                        (int)index, be->info.device_name, be->info.api_version);
    /* The kernels index with 64-bit `long`, which the full profile requires and the
     * embedded profile has only with cles_khr_int64. */
    char profile[64] = "";
    if (device_string(be->device, CL_DEVICE_PROFILE, profile, sizeof(profile)) == CL_SUCCESS &&
        strstr(profile, "EMBEDDED") && !device_has_extension(be->device, "cles_khr_int64"))
        return pe_error(ctx, POSENC_ERR_UNAVAILABLE,
                        "OpenCL device %d (%s) has the embedded profile without cles_khr_int64; "
                        "posenc's kernels need 64-bit integers",
                        (int)index, be->info.device_name);
    cl_bool compiler = CL_FALSE;
    cl_int err = clGetDeviceInfo(be->device, CL_DEVICE_COMPILER_AVAILABLE, sizeof(compiler),
                                 &compiler, NULL);
    if (err != CL_SUCCESS)
        return cl_fail(ctx, "clGetDeviceInfo(CL_DEVICE_COMPILER_AVAILABLE)", err);
    if (!compiler)
        return pe_error(ctx, POSENC_ERR_UNAVAILABLE,
                        "OpenCL device %d (%s) has no compiler (CL_DEVICE_COMPILER_AVAILABLE)",
                        (int)index, be->info.device_name);
    return POSENC_OK;
}

static posenc_status cl_create(posenc_context *ctx, int32_t device, bool gpu_only,
                               struct pe_backend **out)
{
    *out = NULL;
    if (device < 0)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "device %d is negative", (int)device);
    cl_platform_id plat = NULL;
    cl_device_id dev = NULL;
    PE_RETURN_IF_ERROR(find_device(ctx, device, gpu_only, &plat, &dev));

    struct pe_cl_backend *be = calloc(1, sizeof(*be));
    if (!be)
        return pe_error(ctx, POSENC_ERR_OUT_OF_MEMORY, "out of host memory");
    be->base.vt = &pe_opencl_vtable;
    be->base.ctx = ctx;
    be->platform = plat;
    be->device = dev;

    posenc_status st = check_device(be, device);
    if (st != POSENC_OK)
        goto fail;
    cl_int err;

    const cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)plat,
                                           0};
    be->context = clCreateContext(props, 1, &dev, NULL, NULL, &err);
    if (!be->context || err != CL_SUCCESS) {
        be->context = NULL;
        st = cl_fail(ctx, "clCreateContext", err);
        goto fail;
    }
    be->queue = clCreateCommandQueue(be->context, dev, 0, &err);
    if (!be->queue || err != CL_SUCCESS) {
        be->queue = NULL;
        st = cl_fail(ctx, "clCreateCommandQueue", err);
        goto fail;
    }

    cache_init(be);
    pe_log(ctx, POSENC_LOG_INFO, "opencl: device %d: %s (%s, driver %s)", (int)device,
           be->info.device_name, be->info.api_version, be->info.driver_version);
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
                        host->cl_queue, (int)err, cl_err_name(err));
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
        return cl_fail(ctx, "clGetCommandQueueInfo(CL_QUEUE_PROPERTIES)", err);
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
        return cl_fail(ctx, "clGetCommandQueueInfo(CL_QUEUE_DEVICE)", err);
    if ((err = clGetDeviceInfo(dev, CL_DEVICE_PLATFORM, sizeof(plat), &plat, NULL)) !=
        CL_SUCCESS)
        return cl_fail(ctx, "clGetDeviceInfo(CL_DEVICE_PLATFORM)", err);

    struct pe_cl_backend *be = calloc(1, sizeof(*be));
    if (!be)
        return pe_error(ctx, POSENC_ERR_OUT_OF_MEMORY, "out of host memory");
    be->base.vt = &pe_opencl_vtable;
    be->base.ctx = ctx;
    be->platform = plat;
    be->device = dev;
    posenc_status st = check_device(be, -1);
    if (st != POSENC_OK) {
        cl_destroy(&be->base);
        return st;
    }
    if ((err = clRetainContext(context)) != CL_SUCCESS) {
        cl_destroy(&be->base);
        return cl_fail(ctx, "clRetainContext", err);
    }
    be->context = context;
    if ((err = clRetainCommandQueue(queue)) != CL_SUCCESS) {
        cl_destroy(&be->base);
        return cl_fail(ctx, "clRetainCommandQueue", err);
    }
    be->queue = queue;
    cache_init(be);
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
static uint64_t mono_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

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
    const uint64_t t0 = mono_ns();
    for (;;) {
        cl_int s = CL_COMPLETE;
        if (clGetEventInfo(be->last_event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(s), &s,
                           NULL) != CL_SUCCESS ||
            s <= CL_COMPLETE || mono_ns() - t0 > PE_CL_POLL_NS)
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
        return cl_fail(be->base.ctx, "clFinish", err);
    return st;
}

/* posenc_context_flush: issue the queued commands to the device without waiting. */
static posenc_status cl_flush(struct pe_backend *base)
{
    struct pe_cl_backend *be = (struct pe_cl_backend *)base;
    cl_int err = clFlush(be->queue);
    return err == CL_SUCCESS ? POSENC_OK : cl_fail(be->base.ctx, "clFlush", err);
}

/* ------------------------------------------------------------------------------------ */
/* Buffers                                                                              */
/* ------------------------------------------------------------------------------------ */

static posenc_status cl_buffer_create(struct pe_backend *base, size_t size, void **out_mem)
{
    struct pe_cl_backend *be = (struct pe_cl_backend *)base;
    *out_mem = NULL;
    if ((uint64_t)size > be->info.max_buffer_size)
        return pe_error(be->base.ctx, POSENC_ERR_UNSUPPORTED,
                        "buffer of %zu bytes is larger than this OpenCL device allows "
                        "(CL_DEVICE_MAX_MEM_ALLOC_SIZE = %llu bytes)",
                        size, (unsigned long long)be->info.max_buffer_size);
    cl_int err = CL_SUCCESS;
    cl_mem mem = clCreateBuffer(be->context, CL_MEM_READ_WRITE, size, NULL, &err);
    if (!mem || err != CL_SUCCESS)
        return cl_fail_mem(be->base.ctx, "clCreateBuffer", err != CL_SUCCESS ? err
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
                        (int)err, cl_err_name(err));
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
        return cl_fail(ctx, "clGetMemObjectInfo", err);
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
        return cl_fail(ctx, "clRetainMemObject", err);
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
        return cl_fail_mem(be->base.ctx, "clEnqueueWriteBuffer", err);
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
        return cl_fail_mem(be->base.ctx, "clEnqueueReadBuffer", err);
    pe_cl_track(be, ev);
    return POSENC_OK;
}

/* ------------------------------------------------------------------------------------ */
/* Kernel sources and the program cache                                                 */
/* ------------------------------------------------------------------------------------ */

#if !defined(_WIN32)
static int open_regular(const char *path, bool no_links, struct stat *st, const char **why);
#endif

/* Read `name` from `dir` into a malloc'd NUL-terminated string. */
static posenc_status read_source_file(posenc_context *ctx, const char *dir, const char *name,
                                      struct pe_cl_source *out)
{
    char path[4096];
    int n = snprintf(path, sizeof(path), "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= sizeof(path))
        return pe_error(ctx, POSENC_ERR_BACKEND, "POSENC_CL_KERNEL_DIR is too long");
#if defined(_WIN32)
    FILE *f = fopen(path, "rb");
    const char *why = NULL;
#else
    /* a FIFO or device there must not block the op: regular files only */
    struct stat st;
    const char *why = NULL;
    const int fd = open_regular(path, false, &st, &why);
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (fd >= 0 && !f)
        close(fd);
#endif
    if (!f)
        return pe_error(ctx, POSENC_ERR_BACKEND, "POSENC_CL_KERNEL_DIR: cannot open %s: %s",
                        path, why ? why : strerror(errno));
    char *data = NULL;
    size_t size = 0, cap = 0;
    for (;;) {
        if (cap - size < 4096) {
            cap = cap ? cap * 2 : 16384;
            char *grown = realloc(data, cap + 1);
            if (!grown) {
                free(data);
                fclose(f);
                return pe_error(ctx, POSENC_ERR_OUT_OF_MEMORY, "out of host memory reading %s",
                                path);
            }
            data = grown;
        }
        size_t got = fread(data + size, 1, cap - size, f);
        size += got;
        if (got == 0)
            break;
    }
    bool bad = ferror(f) != 0;
    fclose(f);
    if (bad) {
        free(data);
        return pe_error(ctx, POSENC_ERR_BACKEND, "POSENC_CL_KERNEL_DIR: cannot read %s", path);
    }
    data[size] = '\0';
    out->name = name;
    out->data = data;
    out->size = size;
    out->owned = true;
    return POSENC_OK;
}

/* The source of `name` ("common.cl"): embedded, or from POSENC_CL_KERNEL_DIR. Loaded once
 * per context. */
static posenc_status get_source(struct pe_cl_backend *be, const char *name,
                                const struct pe_cl_source **out)
{
    for (int k = 0; k < be->n_sources; k++) {
        if (strcmp(be->sources[k].name, name) == 0) {
            *out = &be->sources[k];
            return POSENC_OK;
        }
    }
    if (be->n_sources >= (int)PE_ARRAY_SIZE(be->sources))
        return pe_error(be->base.ctx, POSENC_ERR_INTERNAL, "opencl: too many kernel sources");
    struct pe_cl_source *src = &be->sources[be->n_sources];
    const char *dir = getenv("POSENC_CL_KERNEL_DIR");
    if (dir && dir[0]) {
        PE_RETURN_IF_ERROR(read_source_file(be->base.ctx, dir, name, src));
        pe_log(be->base.ctx, POSENC_LOG_INFO, "opencl: %s loaded from %s (POSENC_CL_KERNEL_DIR)",
               name, dir);
    } else {
        const struct pe_cl_file *f = pe_cl_find(name);
        if (!f)
            return pe_error(be->base.ctx, POSENC_ERR_INTERNAL,
                            "opencl: kernel source %s is not embedded", name);
        src->name = name;
        src->data = (const char *)f->data;
        src->size = f->size;
        src->owned = false;
    }
    be->n_sources++;
    *out = src;
    return POSENC_OK;
}

/* ------------------------------------------------------------------------------------ */
/* The on-disk program-binary cache                                                     */
/* ------------------------------------------------------------------------------------ */

/*
 * A program built from source is saved (clGetProgramInfo(CL_PROGRAM_BINARIES)) to
 * <dir>/<key>.clbin, and a later process with the same device, driver, source and options
 * loads it with clCreateProgramWithBinary instead of running the compiler. <dir> is
 * $POSENC_CACHE_DIR (empty: no cache), else $XDG_CACHE_HOME/posenc, else ~/.cache/posenc.
 *
 * The key is a 128-bit hash (two FNV-1a 64) of the identity: a format tag, the platform's
 * and the device's name, vendor and version strings, the driver version, the build
 * options and a hash of the exact source. The file holds
 *     "PECLBIN2", u32 identity length, the identity, u64 binary size,
 *     u64 hash of (identity, binary), the binary
 * and is used only if every field matches: the binary is bound to the identity it was
 * stored with, so an entry whose binary was built for another source, options or device
 * (another entry's binary under this identity) is ignored, like a corrupt, truncated or
 * foreign file (the program is built from source and the file replaced). Files are
 * written to a temporary name (created 0600, exclusively) and renamed, so a reader never
 * sees half a file.
 *
 * Trust. A loaded binary is native code on some drivers (PoCL), so the cache is trusted
 * only as far as the user's own files, as ssh treats ~/.ssh: the folder (created 0700)
 * is used only when it is a directory owned by the effective user and not writable by
 * group or others, and every folder above it is owned by that user or root and not
 * writable by others unless sticky (/tmp); otherwise the cache is off for the context
 * (one POSENC_LOG_WARN line). An entry is read only when it is a regular file (not a
 * symbolic link, FIFO or device), owned by the user and not group/world-writable; it is
 * opened with O_NONBLOCK, so nothing at an entry's path can make the op wait. Other
 * cache failures are silent (a DEBUG log line): the cache only ever saves time. These
 * files are the only ones the library opens, apart from POSENC_CL_KERNEL_DIR.
 */
#define PE_CL_CACHE_MAGIC "PECLBIN2"
#define PE_CL_CACHE_MAX_BINARY (256u << 20)

static uint64_t fnv1a(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* Resolve the cache folder once per backend (be->cache_dir, "" = off). */
static void cache_init(struct pe_cl_backend *be)
{
    be->cache_dir[0] = '\0';
#if defined(_WIN32)
    return;
#else
    const char *env = getenv("POSENC_CACHE_DIR");
    int n = -1;
    if (env) {
        if (env[0])
            n = snprintf(be->cache_dir, sizeof(be->cache_dir), "%s", env);
    } else if ((env = getenv("XDG_CACHE_HOME")) != NULL && env[0] == '/') {
        n = snprintf(be->cache_dir, sizeof(be->cache_dir), "%s/posenc", env);
    } else if ((env = getenv("HOME")) != NULL && env[0]) {
        n = snprintf(be->cache_dir, sizeof(be->cache_dir), "%s/.cache/posenc", env);
    }
    if (n < 0 || (size_t)n >= sizeof(be->cache_dir) - 48)
        be->cache_dir[0] = '\0'; /* unset, or too long for <dir>/<key>.clbin */
    pe_log(be->base.ctx, POSENC_LOG_DEBUG, "opencl: program-binary cache %s%s",
           be->cache_dir[0] ? "in " : "off", be->cache_dir);
#endif
}

/* The identity text of a program and the path of its cache file. */
static void cache_identity(const struct pe_cl_backend *be, const struct pe_cl_source *common,
                           const struct pe_cl_source *op, const char *options, char *id,
                           size_t id_size, char *path, size_t path_size)
{
    uint64_t src = fnv1a(0xcbf29ce484222325ull, common->data, common->size);
    src = fnv1a(src, op->name, strlen(op->name) + 1);
    src = fnv1a(src, op->data, op->size);
    snprintf(id, id_size, "posenc-clbin-2|%s|%s|%s|%s|%s|%s|%s|%s|%016llx", be->platform_id,
             be->info.device_name, be->info.vendor, be->info.api_version,
             be->info.driver_version, POSENC_VERSION_STRING, options, op->name,
             (unsigned long long)src);
    const uint64_t k1 = fnv1a(0xcbf29ce484222325ull, id, strlen(id));
    const uint64_t k2 = fnv1a(0x6c62272e07bb0142ull, id, strlen(id));
    snprintf(path, path_size, "%s/%016llx%016llx.clbin", be->cache_dir, (unsigned long long)k1,
             (unsigned long long)k2);
}

#if !defined(_WIN32)
/* mkdir -p for the cache folder (0700 for what it creates). */
static bool make_dirs(const char *dir)
{
    char buf[PE_CL_PATH_MAX];
    if (strlen(dir) >= sizeof(buf))
        return false;
    strcpy(buf, dir);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0700) != 0 && errno != EEXIST)
            return false;
        *p = '/';
    }
    return mkdir(buf, 0700) == 0 || errno == EEXIST;
}
#endif

#if !defined(_WIN32)
/* Open `path` for reading without ever blocking (O_NONBLOCK: a FIFO or device at the path
 * does not wait for a writer) and only if it is a regular file; symbolic links are not
 * followed when `no_links`. Returns the descriptor, or -1 with *why set (NULL: no file). */
static int open_regular(const char *path, bool no_links, struct stat *st, const char **why)
{
    *why = NULL;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | (no_links ? O_NOFOLLOW : 0));
    if (fd < 0) {
        if (errno != ENOENT)
            *why = errno == ELOOP ? "a symbolic link" : strerror(errno);
        return -1;
    }
    if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
        *why = "not a regular file";
        close(fd);
        return -1;
    }
    return fd;
}

/* The cache entry at `path`, read whole into a malloc'd block when it is a regular file
 * of this user that only this user can write, at most `limit` bytes; else NULL (*why
 * says why, NULL when there is no file). */
static unsigned char *read_cache_file(const char *path, size_t limit, size_t *out_size,
                                      const char **why)
{
    struct stat st;
    int fd = open_regular(path, true, &st, why);
    if (fd < 0)
        return NULL;
    unsigned char *data = NULL;
    if (st.st_uid != geteuid())
        *why = "owned by another user";
    else if (st.st_mode & (S_IWGRP | S_IWOTH))
        *why = "writable by group or others";
    else if (st.st_size <= 0 || (uint64_t)st.st_size > (uint64_t)limit)
        *why = "of an impossible size";
    else if (!(data = malloc((size_t)st.st_size)))
        *why = "out of host memory";
    size_t size = 0;
    while (!*why && size < (size_t)st.st_size) {
        ssize_t got = read(fd, data + size, (size_t)st.st_size - size);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            *why = got < 0 ? strerror(errno) : "truncated while read";
        else
            size += (size_t)got;
    }
    close(fd);
    if (*why) {
        free(data);
        return NULL;
    }
    *out_size = size;
    return data;
}

/* Is the cache folder private to this user (see "Trust" above)? Creates it (0700) first
 * with `create`. An untrusted folder is reported once per context at WARN. */
static bool cache_dir_trusted(struct pe_cl_backend *be, bool create)
{
    posenc_context *ctx = be->base.ctx;
    if (create && !make_dirs(be->cache_dir)) {
        pe_log(ctx, POSENC_LOG_DEBUG, "opencl: cannot create the cache folder %s: %s",
               be->cache_dir, strerror(errno));
        return false;
    }
    char real[PATH_MAX];
    if (!realpath(be->cache_dir, real))
        return false; /* not there (yet): nothing to load */
    const uid_t me = geteuid();
    const char *why = NULL;
    struct stat st;
    if (stat(real, &st) != 0 || !S_ISDIR(st.st_mode))
        why = "is not a folder";
    else if (st.st_uid != me)
        why = "is owned by another user";
    else if (st.st_mode & (S_IWGRP | S_IWOTH))
        why = "is writable by group or others";
    /* every folder above: this user's or root's, and not open to others unless sticky */
    for (char *slash = strrchr(real, '/'); !why && slash; slash = strrchr(real, '/')) {
        *slash = '\0';
        const char *up = real[0] ? real : "/";
        if (stat(up, &st) != 0)
            why = "has a folder above it that cannot be examined";
        else if ((st.st_uid != me && st.st_uid != 0) ||
                 ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)))
            why = "is inside a folder that other users can change";
        if (!real[0])
            break;
    }
    if (why && !be->cache_warned) {
        be->cache_warned = true;
        pe_log(ctx, POSENC_LOG_WARN,
               "opencl: program-binary cache %s %s: not used (it must be private to this user, "
               "like ~/.ssh)",
               be->cache_dir, why);
    }
    return why == NULL;
}
#endif

/* A program from the cache file, built (loaded) for the device; NULL when there is none
 * or it does not match. */
static cl_program cache_load(struct pe_cl_backend *be, const char *path, const char *id,
                             const char *options)
{
#if defined(_WIN32)
    (void)be, (void)path, (void)id, (void)options;
    return NULL;
#else
    posenc_context *ctx = be->base.ctx;
    if (!cache_dir_trusted(be, false))
        return NULL;
    size_t size = 0;
    const char *why = NULL;
    unsigned char *data =
        read_cache_file(path, PE_CL_CACHE_MAX_BINARY + PE_CL_ID_MAX + 64, &size, &why);
    if (!data) {
        if (why)
            pe_log(ctx, POSENC_LOG_DEBUG, "opencl: ignoring cache file %s: %s", path, why);
        return NULL;
    }
    const size_t id_len = strlen(id);
    const size_t head = 8 + 4 + id_len + 16;
    uint32_t stored_len = 0;
    uint64_t bin_size = 0, bin_hash = 0;
    if (size < head || memcmp(data, PE_CL_CACHE_MAGIC, 8) != 0) {
        why = "not a posenc cache file";
    } else {
        memcpy(&stored_len, data + 8, 4);
        memcpy(&bin_size, data + 12 + id_len, 8);
        memcpy(&bin_hash, data + 20 + id_len, 8);
        if (stored_len != id_len || memcmp(data + 12, id, id_len) != 0)
            why = "another device, driver, source or options";
        else if (bin_size == 0 || bin_size != size - head)
            why = "truncated";
        else if (fnv1a(fnv1a(0xcbf29ce484222325ull, id, id_len), data + head,
                       (size_t)bin_size) != bin_hash)
            why = "corrupt, or a binary stored for another identity";
    }
    if (why) {
        pe_log(ctx, POSENC_LOG_DEBUG, "opencl: ignoring cache file %s: %s", path, why);
        free(data);
        return NULL;
    }
    const unsigned char *bin = data + head;
    const size_t len = (size_t)bin_size;
    cl_int status = CL_SUCCESS, err = CL_SUCCESS;
    cl_program prog =
        clCreateProgramWithBinary(be->context, 1, &be->device, &len, &bin, &status, &err);
    free(data);
    if (!prog || err != CL_SUCCESS || status != CL_SUCCESS) {
        pe_log(ctx, POSENC_LOG_DEBUG, "opencl: cache file %s rejected by the driver: %d / %d",
               path, (int)err, (int)status);
        if (prog)
            clReleaseProgram(prog);
        return NULL;
    }
    err = clBuildProgram(prog, 1, &be->device, options, NULL, NULL);
    if (err != CL_SUCCESS) {
        pe_log(ctx, POSENC_LOG_DEBUG, "opencl: cache file %s: clBuildProgram failed: %d (%s)",
               path, (int)err, cl_err_name(err));
        clReleaseProgram(prog);
        return NULL;
    }
    return prog;
#endif
}


/* Save a program built from source to its cache file (temporary file + rename). */
static void cache_store(struct pe_cl_backend *be, cl_program prog, const char *path,
                        const char *id)
{
#if defined(_WIN32)
    (void)be, (void)prog, (void)path, (void)id;
#else
    posenc_context *ctx = be->base.ctx;
    cl_uint n_dev = 0;
    size_t bin_size = 0;
    if (clGetProgramInfo(prog, CL_PROGRAM_NUM_DEVICES, sizeof(n_dev), &n_dev, NULL) !=
            CL_SUCCESS ||
        n_dev != 1 ||
        clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof(bin_size), &bin_size, NULL) !=
            CL_SUCCESS ||
        bin_size == 0 || bin_size > PE_CL_CACHE_MAX_BINARY)
        return;
    unsigned char *bin = malloc(bin_size);
    if (!bin)
        return;
    unsigned char *bins[1] = {bin};
    if (clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof(bins), bins, NULL) != CL_SUCCESS) {
        free(bin);
        return;
    }
    if (!cache_dir_trusted(be, true)) {
        free(bin);
        return;
    }
    /* unique per process (pid), context (be) and write (cache_seq) */
    char tmp[PE_CL_PATH_MAX + 160];
    snprintf(tmp, sizeof(tmp), "%s.tmp.%ld.%p.%u", path, (long)getpid(), (void *)be,
             be->cache_seq++);
    const int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (fd >= 0 && !f)
        close(fd);
    bool ok = f != NULL;
    if (ok) {
        const uint32_t id_len = (uint32_t)strlen(id);
        const uint64_t size64 = bin_size;
        const uint64_t hash = fnv1a(fnv1a(0xcbf29ce484222325ull, id, id_len), bin, bin_size);
        ok = fwrite(PE_CL_CACHE_MAGIC, 1, 8, f) == 8 && fwrite(&id_len, 4, 1, f) == 1 &&
             fwrite(id, 1, id_len, f) == id_len && fwrite(&size64, 8, 1, f) == 1 &&
             fwrite(&hash, 8, 1, f) == 1 && fwrite(bin, 1, bin_size, f) == bin_size;
        ok = fclose(f) == 0 && ok;
    }
    if (ok)
        ok = rename(tmp, path) == 0;
    if (!ok) {
        pe_log(ctx, POSENC_LOG_DEBUG, "opencl: cannot write the cache file %s: %s", path,
               strerror(errno));
        unlink(tmp);
    } else {
        pe_log(ctx, POSENC_LOG_DEBUG, "opencl: saved %zu-byte program binary to %s", bin_size,
               path);
    }
    free(bin);
#endif
}

/* The kernel `kernel_name` of common.cl + `file`, built with `defines` (cached). */
/* Test-only (tests/test_faults.c): a smaller program cache than PE_CL_MAX_PROGRAMS, so
 * that a test can fill it (0: the full size). Hidden, in no header. */
int pe_cl_program_cap;

static posenc_status get_program(struct pe_cl_backend *be, const char *file,
                                 const char *kernel_name, const char *defines,
                                 struct pe_cl_program **out)
{
    posenc_context *ctx = be->base.ctx;
    for (int k = 0; k < be->n_programs; k++) {
        struct pe_cl_program *p = &be->programs[k];
        if (strcmp(p->file, file) == 0 && strcmp(p->kernel_name, kernel_name) == 0 &&
            strcmp(p->options, defines) == 0) {
            if (be->pinning)
                p->pin_gen = be->pin_gen;
            *out = p;
            return POSENC_OK;
        }
    }
    if (strlen(defines) >= PE_CL_OPTS_MAX)
        return pe_error(ctx, POSENC_ERR_INTERNAL, "opencl: build options too long");
    if (pe_fault_build())
        return pe_error(ctx, POSENC_ERR_BACKEND, "clBuildProgram(%s, \"%s\") failed "
                        "(injected fault)", file, defines);

    const struct pe_cl_source *common, *op;
    PE_RETURN_IF_ERROR(get_source(be, "common.cl", &common));
    PE_RETURN_IF_ERROR(get_source(be, file, &op));

    char options[PE_CL_OPTS_MAX + 32];
    /* -w: some compilers (PoCL's clang) print warnings straight to the application's
     * stderr, e.g. about the ABI of 512-bit vector types on AVX2 hosts */
    snprintf(options, sizeof(options), "-cl-std=CL1.2 -w %s", defines);
    cl_int err;
    cl_program prog = NULL;
    bool from_binary = false;
    /* Another kernel of the same source and options already built: share its program. */
    for (int k = 0; k < be->n_programs && !prog; k++) {
        struct pe_cl_program *q = &be->programs[k];
        if (strcmp(q->file, file) == 0 && strcmp(q->options, defines) == 0 &&
            clRetainProgram(q->program) == CL_SUCCESS)
            prog = q->program;
    }
    /* The on-disk binary cache: a program built by an earlier process. */
    char cache_path[PE_CL_PATH_MAX + 64] = "";
    char cache_id[PE_CL_ID_MAX] = "";
    if (!prog && be->cache_dir[0]) {
        cache_identity(be, common, op, options, cache_id, sizeof(cache_id), cache_path,
                       sizeof(cache_path));
        prog = cache_load(be, cache_path, cache_id, options);
        from_binary = prog != NULL;
    }
    if (prog) {
        err = CL_SUCCESS;
        goto built;
    }

    const char *strings[2] = {common->data, op->data};
    const size_t lengths[2] = {common->size, op->size};
    prog = clCreateProgramWithSource(be->context, 2, strings, lengths, &err);
    if (!prog || err != CL_SUCCESS)
        return cl_fail(ctx, "clCreateProgramWithSource", err);

    err = clBuildProgram(prog, 1, &be->device, options, NULL, NULL);
    if (err == CL_SUCCESS && cache_path[0])
        cache_store(be, prog, cache_path, cache_id);
    if (err != CL_SUCCESS) {
        char log[PE_CL_BUILD_LOG_SHOWN + 1] = "";
        size_t n = 0;
        if (clGetProgramBuildInfo(prog, be->device, CL_PROGRAM_BUILD_LOG, 0, NULL, &n) ==
                CL_SUCCESS &&
            n > 0) {
            char *full = malloc(n + 1);
            if (full && clGetProgramBuildInfo(prog, be->device, CL_PROGRAM_BUILD_LOG, n, full,
                                              NULL) == CL_SUCCESS) {
                full[n] = '\0';
                pe_log(ctx, POSENC_LOG_DEBUG, "opencl: build log of %s [%s]:\n%s", file,
                       options, full);
                pe_strlcpy(log, full, sizeof(log));
                for (size_t k = strlen(log); k > 0 && (log[k - 1] == '\n' || log[k - 1] == ' ');)
                    log[--k] = '\0';
            }
            free(full);
        }
        clReleaseProgram(prog);
        return pe_error(ctx, POSENC_ERR_BACKEND, "clBuildProgram(%s, \"%s\") failed: %d (%s): %s",
                        file, options, (int)err, cl_err_name(err), log);
    }
built:;
    cl_kernel kernel = clCreateKernel(prog, kernel_name, &err);
    if (!kernel || err != CL_SUCCESS) {
        clReleaseProgram(prog);
        return cl_fail(ctx, "clCreateKernel", err);
    }
    size_t wg = 0;
    err = clGetKernelWorkGroupInfo(kernel, be->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof(wg), &wg,
                                   NULL);
    if (err != CL_SUCCESS) {
        clReleaseKernel(kernel);
        clReleaseProgram(prog);
        return cl_fail(ctx, "clGetKernelWorkGroupInfo", err);
    }
    /* The local memory the kernel declares, against what the device (or its
     * POSENC_DEVICE_PRESET) offers: a kernel that does not fit is refused here, before any
     * launch, instead of failing to enqueue on a smaller device. */
    cl_ulong lm = 0;
    if (clGetKernelWorkGroupInfo(kernel, be->device, CL_KERNEL_LOCAL_MEM_SIZE, sizeof(lm), &lm,
                                 NULL) == CL_SUCCESS &&
        be->local_mem && lm > be->local_mem) {
        clReleaseKernel(kernel);
        clReleaseProgram(prog);
        return pe_error(ctx, POSENC_ERR_UNSUPPORTED,
                        "opencl: kernel %s uses %llu bytes of local memory, more than this "
                        "device's CL_DEVICE_LOCAL_MEM_SIZE = %llu%s",
                        kernel_name, (unsigned long long)lm, (unsigned long long)be->local_mem,
                        ctx->preset ? " (lowered by " PE_PRESET_ENV ")" : "");
    }

    /* A full cache (many dtype combinations) recycles its slots in turn: releasing a
     * kernel that is still enqueued is fine, OpenCL keeps it until the command is done. */
    struct pe_cl_program *p;
    const int cap = pe_cl_program_cap > 0 && pe_cl_program_cap < PE_CL_MAX_PROGRAMS
                        ? pe_cl_program_cap
                        : PE_CL_MAX_PROGRAMS;
    if (be->n_programs < cap) {
        p = &be->programs[be->n_programs++];
    } else {
        /* round robin, passing over the programs a pinning call uses (if all are, the
         * next one goes anyway) */
        int k = be->evict_next % cap;
        for (int i = 0; i < cap && be->pinning; i++) {
            const int j = (be->evict_next + i) % cap;
            if (be->programs[j].pin_gen != be->pin_gen) {
                k = j;
                break;
            }
        }
        p = &be->programs[k];
        be->evict_next = (k + 1) % cap;
        pe_log(ctx, POSENC_LOG_DEBUG, "opencl: program cache full, dropping %s:%s [%s]",
               p->file, p->kernel_name, p->options);
        clReleaseKernel(p->kernel);
        clReleaseProgram(p->program);
    }
    p->file = file;
    p->kernel_name = kernel_name;
    pe_strlcpy(p->options, defines, sizeof(p->options));
    p->program = prog;
    p->kernel = kernel;
    p->kernel_wg_size = wg ? wg : 1;
    p->serial = ++be->next_serial;
    p->pin_gen = be->pinning ? be->pin_gen : 0;
    p->n_args_set = 0;
    pe_log(ctx, POSENC_LOG_INFO, "opencl: %s %s:%s [%s]",
           from_binary ? "loaded from the binary cache" : "built", file, kernel_name, options);
    *out = p;
    return POSENC_OK;
}

/* The program remembered for `key` (an op's variant bits, nonzero), or NULL. */
static struct pe_cl_program *memo_find(struct pe_cl_backend *be, uint64_t key)
{
    for (size_t k = 0; k < PE_ARRAY_SIZE(be->memo); k++) {
        const struct pe_cl_memo *m = &be->memo[k];
        if (m->key == key)
            return m->p->serial == m->serial ? m->p : NULL;
    }
    return NULL;
}

static void memo_put(struct pe_cl_backend *be, uint64_t key, struct pe_cl_program *p)
{
    for (size_t k = 0; k < PE_ARRAY_SIZE(be->memo); k++)
        if (be->memo[k].key == key) {
            be->memo[k].p = p;
            be->memo[k].serial = p->serial;
            return;
        }
    struct pe_cl_memo *m = &be->memo[be->memo_next];
    be->memo_next = (be->memo_next + 1) % (int)PE_ARRAY_SIZE(be->memo);
    m->key = key;
    m->p = p;
    m->serial = p->serial;
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

posenc_status pe_cl_get_program(struct pe_cl_backend *be, const char *file,
                                const char *kernel_name, const char *defines,
                                struct pe_cl_program **out)
{
    return get_program(be, file, kernel_name, defines, out);
}

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
        return cl_fail_mem(be->base.ctx, call,
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
                            (int)err, cl_err_name(err));
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

posenc_status pe_cl_launch(struct pe_cl_backend *be, struct pe_cl_program *p,
                           const struct pe_cl_arg *args, size_t n_args, const uint64_t n[3])
{
    posenc_context *ctx = be->base.ctx;
    size_t global[3], local[3];
    if (!launch_size(be, p, n, global, local))
        return pe_error(ctx, POSENC_ERR_UNSUPPORTED,
                        "%s: %llu x %llu x %llu work-items do not fit this device's size_t",
                        p->kernel_name, (unsigned long long)n[0], (unsigned long long)n[1],
                        (unsigned long long)n[2]);
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
        return cl_fail_mem(ctx, call, err);
    }
    pe_cl_track(be, ev);
    return POSENC_OK;
}

/* ------------------------------------------------------------------------------------ */
/* Ops                                                                                  */
/* ------------------------------------------------------------------------------------ */

/* Whether two views are the same elements (in place). The front end guarantees that a
 * destination is either exactly its input or disjoint from it. */
static bool same_view(const struct pe_view *a, const struct pe_view *b)
{
    return a->mem == b->mem && a->dtype == b->dtype && a->offset == b->offset &&
           a->st[0] == b->st[0] && a->st[1] == b->st[1] && a->st[2] == b->st[2] &&
           a->st[3] == b->st[3];
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

/* The largest work-group p's kernel may run here (at most 1024). */
static size_t wg_limit(const struct pe_cl_backend *be, const struct pe_cl_program *p)
{
    size_t limit = p->kernel_wg_size;
    if (be->info.max_workgroup_size && limit > be->info.max_workgroup_size)
        limit = be->info.max_workgroup_size;
    return limit > 1024 ? 1024 : limit;
}

/* Set the arguments of p's kernel and enqueue it over the exact global size g[3] with
 * local size l[3] (each g[k] a multiple of l[k]). */
static posenc_status launch_exact(struct pe_cl_backend *be, struct pe_cl_program *p,
                                  const struct pe_cl_arg *args, size_t n_args, const uint64_t g[3],
                                  const size_t l[3])
{
    posenc_context *ctx = be->base.ctx;
    for (int k = 0; k < 3; k++)
        if (g[k] > (uint64_t)SIZE_MAX || (be->max_item_size[k] && l[k] > be->max_item_size[k]))
            return pe_error(ctx, POSENC_ERR_UNSUPPORTED,
                            "%s: %llu work-items (local %zu) in dimension %d do not fit this "
                            "device", p->kernel_name, (unsigned long long)g[k], l[k], k);
    PE_RETURN_IF_ERROR(pe_cl_set_args(be, p, args, n_args));
    if (be->base.prepare_only)
        return POSENC_OK;
    PE_RETURN_IF_ERROR(pe_cl_before_enqueue(be));
    const size_t global[3] = {(size_t)g[0], (size_t)g[1], (size_t)g[2]};
    cl_event ev = NULL;
    cl_int err = clEnqueueNDRangeKernel(be->queue, p->kernel, 3, NULL, global, l, 0, NULL, &ev);
    if (err != CL_SUCCESS) {
        char call[96];
        snprintf(call, sizeof(call), "clEnqueueNDRangeKernel(%s)", p->kernel_name);
        return cl_fail_mem(ctx, call, err);
    }
    pe_cl_track(be, ev);
    return POSENC_OK;
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
 * for outputs much larger than the caches (see PE_FAST_NT_BYTES in src/cpu/cpu_fast.c). */
bool pe_cl_use_nt(const struct pe_cl_backend *be, double bytes)
{
    return pe_cl_is_cpu(be) && bytes >= 16.0 * 1024 * 1024;
}

static bool use_nt(const struct pe_cl_backend *be, double bytes)
{
    return pe_cl_use_nt(be, bytes);
}

/* Launch a vector kernel over g[0] x g[1] x g[2] work-items. With PE_CPU_ORDER (barriers)
 * every work-item of a group must run the same loop: the local size is (l0, 1, 1) with l0
 * the largest divisor of `unit` (itself a divisor of g[0]) within the limits, so that no
 * work-item is out of range and no group straddles two units. Otherwise pe_cl_launch
 * rounds up and the kernel checks its bounds. */
static posenc_status launch_vec(struct pe_cl_backend *be, struct pe_cl_program *p,
                                const struct pe_cl_arg *args, size_t n_args, const uint64_t g[3],
                                uint64_t unit)
{
    if (!pe_cl_is_cpu(be))
        return pe_cl_launch(be, p, args, n_args, g);
    size_t limit = wg_limit(be, p);
    if (be->max_item_size[0] && limit > be->max_item_size[0])
        limit = be->max_item_size[0];
    size_t l0 = unit < (uint64_t)limit ? (size_t)unit : limit;
    while (l0 > 1 && unit % l0 != 0)
        l0--;
    const size_t l[3] = {l0 ? l0 : 1, 1, 1};
    return launch_exact(be, p, args, n_args, g, l);
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

static void table_free(struct pe_cl_table *t)
{
    if (t->mem)
        clReleaseMemObject(t->mem);
    free(t->host);
    memset(t, 0, sizeof(*t));
}

/* ---- copy ---------------------------------------------------------------------------- */

static posenc_status cl_copy(struct pe_backend *base, const struct pe_copy_op *op)
{
    struct pe_cl_backend *be = (struct pe_cl_backend *)base;
    const struct pe_view *src = &op->src, *dst = &op->dst;
    int mode;
    if (src->dtype == dst->dtype)
        mode = src->dtype == POSENC_DTYPE_F16 ? 1 : 0;
    else
        mode = src->dtype == POSENC_DTYPE_F32 ? 2 : 3;
    char defines[PE_CL_OPTS_MAX];
    snprintf(defines, sizeof(defines), "-DCOPY_MODE=%d", mode);

    /* Merge dim k+1 into dim k while both tensors step over dim k contiguously: a
     * contiguous pair of tensors becomes one flat run for the 4-wide kernel. */
    int64_t ne[4], ss[4], ds[4];
    int n = 0;
    for (int k = 0; k < 4; k++) {
        if (src->ne[k] == 1)
            continue;
        if (n > 0 && src->st[k] == ss[n - 1] * ne[n - 1] && dst->st[k] == ds[n - 1] * ne[n - 1]) {
            ne[n - 1] *= src->ne[k];
            continue;
        }
        ne[n] = src->ne[k];
        ss[n] = src->st[k];
        ds[n] = dst->st[k];
        n++;
    }
    cl_mem dst_mem = (cl_mem)dst->mem, src_mem = (cl_mem)src->mem;
    const cl_long dst_off = dst->offset, src_off = src->offset;
    struct pe_cl_program *p = NULL;
    if (n <= 1 && (n == 0 || (ss[0] == 1 && ds[0] == 1)) && src->offset % 4 == 0 &&
        dst->offset % 4 == 0) {
        const cl_long count = n == 0 ? 1 : ne[0];
        PE_RETURN_IF_ERROR(get_program(be, "copy.cl", "pe_copy_flat", defines, &p));
        const struct pe_cl_arg args[] = {ARG(dst_mem), ARG(dst_off), ARG(src_mem), ARG(src_off),
                                         ARG(count)};
        const uint64_t nd[3] = {(uint64_t)(count + 3) / 4, 1, 1};
        return pe_cl_launch(be, p, args, PE_ARRAY_SIZE(args), nd);
    }
    PE_RETURN_IF_ERROR(get_program(be, "copy.cl", "pe_copy", defines, &p));
    const cl_long4 dst_st = view_st(dst), src_st = view_st(src);
    const cl_long4 shape = long4_of(dst->ne[0], dst->ne[1], dst->ne[2], dst->ne[3]);
    const struct pe_cl_arg args[] = {ARG(dst_mem), ARG(dst_off), ARG(dst_st), ARG(src_mem),
                                     ARG(src_off), ARG(src_st), ARG(shape)};
    const uint64_t nd[3] = {(uint64_t)dst->ne[0], (uint64_t)dst->ne[1],
                            (uint64_t)dst->ne[2] * (uint64_t)dst->ne[3]};
    return pe_cl_launch(be, p, args, PE_ARRAY_SIZE(args), nd);
}

/* ---- sinusoidal ---------------------------------------------------------------------- */


static posenc_status cl_sinusoidal(struct pe_backend *base, const struct pe_sinusoidal_op *op)
{
    struct pe_cl_backend *be = (struct pe_cl_backend *)base;
    const struct pe_view *dst = &op->dst, *x = &op->x, *pos = &op->pos;
    const bool has_x = x->mem != NULL;
    const int64_t half = op->half;
    if (half == 0 || dst->ne[1] == 0 || dst->ne[2] == 0 || dst->ne[3] == 0)
        return POSENC_OK;

    /* The vector kernel: 8 pairs per work-item, sin/cos shared by the rows of a position;
     * on CPU devices one work-item per position (pe_sinusoidal_tok) */
    const bool vec = pe_cl_rows_aligned(dst, 16) && (!has_x || pe_cl_rows_aligned(x, 16)) &&
                     half % 8 == 0;
    const bool tok = vec && pe_cl_is_cpu(be) && half / 8 <= 128;
    const int dst_f16 = dst->dtype == POSENC_DTYPE_F16;
    const int x_f16 = has_x && x->dtype == POSENC_DTYPE_F16;
    const int pos_i32 = pos->dtype == POSENC_DTYPE_I32;
    const int nt = vec && !(has_x && same_view(x, dst)) &&
                   use_nt(be, (double)posenc_dtype_size(dst->dtype) * (double)dst->ne[0] *
                                  (double)dst->ne[1] * (double)dst->ne[2] * (double)dst->ne[3]);
    const int nh = tok ? (int)(half / 8) : 0;
    /* pe_sinusoidal_tok: tokens per work-item, their tables at most 32 KiB of private
     * memory (8 tokens of d = 1024); each row then runs PE_TB tokens in one stretch */
    const int tb = nh ? (512 / nh > 8 ? 8 : 512 / nh < 1 ? 1 : 512 / nh) : 1;
    /* op 2 = sinusoidal (see cl_rope) */
    const uint64_t memo_key = 2u | (uint64_t)dst_f16 << 8 | (uint64_t)has_x << 9 |
                              (uint64_t)x_f16 << 10 | (uint64_t)pos_i32 << 11 |
                              (uint64_t)nt << 12 | (uint64_t)vec << 13 | (uint64_t)tok << 14 |
                              (uint64_t)nh << 24 | (uint64_t)tb << 40;
    struct pe_cl_program *p = memo_find(be, memo_key);
    if (!p) {
        char defines[PE_CL_OPTS_MAX];
        char nh_def[40] = "";
        if (tok)
            snprintf(nh_def, sizeof(nh_def), " -DPE_NH=%d -DPE_TB=%d", nh, tb);
        snprintf(defines, sizeof(defines),
                 "-DDST_F16=%d -DHAS_X=%d -DX_F16=%d -DPOS_I32=%d -DPE_CPU_ORDER=%d "
                 "-DPE_FMA=%d -DPE_NT_STORE=%d%s",
                 dst_f16, has_x, x_f16, pos_i32, pe_cl_is_cpu(be), be->hw_fma, nt, nh_def);
        PE_RETURN_IF_ERROR(get_program(be, "sinusoidal.cl",
                                       tok   ? "pe_sinusoidal_tok"
                                       : vec ? "pe_sinusoidal_vec"
                                             : "pe_sinusoidal",
                                       defines, &p));
        memo_put(be, memo_key, p);
    }
    cl_mem freq = NULL;
    /* hi words then lo words (pe_freq_split) */
    PE_RETURN_IF_ERROR(pe_cl_table(be, &be->tab_sin, "sinusoidal frequencies", op->freq_f32,
                                   2 * (size_t)half * sizeof(float), &freq));

    cl_mem dst_mem = (cl_mem)dst->mem;
    cl_mem x_mem = has_x ? (cl_mem)x->mem : dst_mem;
    cl_mem pos_mem = (cl_mem)pos->mem;
    const cl_long dst_off = dst->offset, x_off = has_x ? x->offset : 0, pos_off = pos->offset;
    const cl_long4 dst_st = view_st(dst);
    const cl_long4 x_st = has_x ? view_st(x) : long4_of(0, 0, 0, 0);
    const cl_long4 pos_st = long4_of(pos->st[0], pos->st[1], pos->st[2], 0);
    const cl_long4 shape = long4_of(half, dst->ne[1], dst->ne[2], dst->ne[3]);
    const cl_int layout = (cl_int)op->layout;
    const cl_float x_scale = op->x_scale;
    const struct pe_cl_arg args[] = {
        ARG(dst_mem), ARG(dst_off), ARG(dst_st), ARG(x_mem),  ARG(x_off),   ARG(x_st),    ARG(pos_mem),
        ARG(pos_off), ARG(pos_st),  ARG(freq),   ARG(shape), ARG(layout), ARG(x_scale),
    };
    if (tok) {
        /* (blocks of tb tokens, batch groups); a group is up to 8 consecutive blocks, which
         * the device runs one after another: memory order */
        const uint64_t gt[3] = {((uint64_t)dst->ne[1] + (uint64_t)tb - 1) / (uint64_t)tb,
                                (pos->st[1] == 0 ? 1 : (uint64_t)dst->ne[2]) *
                                    (uint64_t)dst->ne[3],
                                1};
        size_t l0 = 8;
        while (l0 > 1 && (gt[0] % l0 != 0 ||
                          (be->max_item_size[0] && l0 > be->max_item_size[0]) ||
                          l0 > wg_limit(be, p)))
            l0--;
        const size_t l[3] = {l0, 1, 1};
        return launch_exact(be, p, args, PE_ARRAY_SIZE(args), gt, l);
    }
    if (vec) {
        /* (units of 8 pairs, tokens, batch groups): the rows of dim 2 share a position when
         * the positions are broadcast over it (pos st[1] == 0) */
        const uint64_t g[3] = {(uint64_t)half / 8, (uint64_t)dst->ne[1],
                               (pos->st[1] == 0 ? 1 : (uint64_t)dst->ne[2]) *
                                   (uint64_t)dst->ne[3]};
        return launch_vec(be, p, args, PE_ARRAY_SIZE(args), g, g[0]);
    }
    const uint64_t n[3] = {(uint64_t)half, (uint64_t)dst->ne[1],
                           (uint64_t)dst->ne[2] * (uint64_t)dst->ne[3]};
    return pe_cl_launch(be, p, args, PE_ARRAY_SIZE(args), n);
}

/* ---- rope ---------------------------------------------------------------------------- */


static posenc_status cl_rope(struct pe_backend *base, const struct pe_rope_op *op)
{
    struct pe_cl_backend *be = (struct pe_cl_backend *)base;
    posenc_context *ctx = be->base.ctx;
    const struct pe_view *x = &op->x, *dst = &op->dst, *pos = &op->pos;
    const bool has_x2 = op->x2.mem != NULL;
    const bool has_from = op->pos_from.mem != NULL;
    const struct pe_view *x2 = has_x2 ? &op->x2 : x, *dst2 = has_x2 ? &op->dst2 : dst;
    const struct pe_view *pos_from = has_from ? &op->pos_from : pos;
    const int64_t n_pairs = op->n_pairs;

    const int64_t n_head = x->ne[1], n_head2 = has_x2 ? x2->ne[1] : 0;
    if (n_pairs <= 0 || x->ne[2] == 0 || x->ne[3] == 0 || (n_head == 0 && n_head2 == 0))
        return POSENC_OK;

    /* Dims outside the rotated window, copied by extra slots of dimension 0. */
    cl_int flags = 0;
    if (!same_view(x, dst))
        flags |= 1;
    if (has_x2 && !same_view(x2, dst2))
        flags |= 2;
    const int64_t n_copy = flags ? x->ne[0] - 2 * n_pairs : 0;

    /* The vector kernel: 8 pairs per work-item, sin/cos once per token and pair. */
    const bool vec = pe_cl_rows_aligned(x, 16) && pe_cl_rows_aligned(dst, 16) &&
                     (!has_x2 || (pe_cl_rows_aligned(x2, 16) && pe_cl_rows_aligned(dst2, 16))) &&
                     n_pairs % 8 == 0 && op->n_offs % 16 == 0;

    /* CPU devices: one work-item per token (and chunk of heads), pe_rope_tok */
    const bool tok = vec && pe_cl_is_cpu(be) && n_pairs / 8 <= 16;
    const int x_f16 = x->dtype == POSENC_DTYPE_F16, dst_f16 = dst->dtype == POSENC_DTYPE_F16;
    const int x2_f16 = has_x2 && x2->dtype == POSENC_DTYPE_F16;
    const int dst2_f16 = has_x2 && dst2->dtype == POSENC_DTYPE_F16;
    const int pos_i32 = pos->dtype == POSENC_DTYPE_I32;
    const int pos_from_i32 = !has_from || pos_from->dtype == POSENC_DTYPE_I32;
    const int nt = vec && (flags & 1) && (!has_x2 || (flags & 2)) &&
                   use_nt(be, (double)posenc_dtype_size(dst->dtype) * (double)n_head *
                                  (double)x->ne[0] * (double)x->ne[2] * (double)x->ne[3]);
    const int nu = tok ? (int)(n_pairs / 8) : 0;
    /* posenc_rope_set_rows: the destination token comes from op->rows (-DHAS_ROWS) */
    const int has_rows = op->rows.mem != NULL;
    const int rows_i64 = has_rows && op->rows.dtype == POSENC_DTYPE_I64;
    /* the variant's bits (whether the device is a CPU and has fma are the backend's own): op 1 = rope */
    const uint64_t memo_key = 1u | (uint64_t)has_rows << 19 | (uint64_t)rows_i64 << 20 |
                              (uint64_t)x_f16 << 8 | (uint64_t)dst_f16 << 9 |
                              (uint64_t)has_x2 << 10 | (uint64_t)x2_f16 << 11 |
                              (uint64_t)dst2_f16 << 12 | (uint64_t)pos_i32 << 13 |
                              (uint64_t)has_from << 14 | (uint64_t)pos_from_i32 << 15 |
                              (uint64_t)nt << 16 | (uint64_t)tok << 17 | (uint64_t)vec << 18 |
                              (uint64_t)nu << 24;
    struct pe_cl_program *p = memo_find(be, memo_key);
    if (!p) {
        char defines[PE_CL_OPTS_MAX];
        char nu_def[64] = "";
        if (tok)
            snprintf(nu_def, sizeof(nu_def), " -DPE_NU=%d", nu);
        if (has_rows) /* appended only for rope_set_rows: posenc_rope's options stay as they were */
            snprintf(nu_def + strlen(nu_def), sizeof(nu_def) - strlen(nu_def),
                     " -DHAS_ROWS=1 -DROWS_I64=%d", rows_i64);
        snprintf(defines, sizeof(defines),
                 "-DHAS_X=1 -DX_F16=%d -DDST_F16=%d -DHAS_X2=%d -DX2_F16=%d -DDST2_F16=%d "
                 "-DPOS_I32=%d -DHAS_FROM=%d -DPOS_FROM_I32=%d -DPE_CPU_ORDER=%d "
                 "-DPE_FMA=%d -DPE_NT_STORE=%d%s",
                 x_f16, dst_f16, has_x2, x2_f16, dst2_f16, pos_i32, has_from, pos_from_i32,
                 pe_cl_is_cpu(be), be->hw_fma, nt, nu_def);
        PE_RETURN_IF_ERROR(get_program(be, "rope.cl",
                                       tok   ? "pe_rope_tok"
                                       : vec ? "pe_rope_vec"
                                             : "pe_rope",
                                       defines, &p));
        memo_put(be, memo_key, p);
    }

    /* freq hi, lo, freq_from hi, lo, stream, stream_from (rope.cl): a persistent buffer,
     * uploaded again only when the table changes. The host copy is built in the backend's
     * scratch. */
    const size_t np = (size_t)n_pairs, tab_bytes = 6 * np * sizeof(float);
    if (be->rope_scratch_size < tab_bytes) {
        float *grown = realloc(be->rope_scratch, tab_bytes);
        if (!grown)
            return pe_error(ctx, POSENC_ERR_OUT_OF_MEMORY, "out of host memory (rope table)");
        be->rope_scratch = grown;
        be->rope_scratch_size = tab_bytes;
    }
    float *tab = be->rope_scratch;
    for (size_t j = 0; j < np; j++) {
        tab[j] = op->freq_f32[j];
        tab[np + j] = op->freq_f32[np + j];
        tab[2 * np + j] = has_from ? op->freq_from_f32[j] : 0.0f;
        tab[3 * np + j] = has_from ? op->freq_from_f32[np + j] : 0.0f;
        tab[4 * np + j] = (float)op->stream[j];
        tab[5 * np + j] = has_from ? (float)op->stream_from[j] : 0.0f;
    }
    cl_mem tab_mem = NULL;
    PE_RETURN_IF_ERROR(pe_cl_table(be, &be->tab_rope, "rope table", tab, tab_bytes, &tab_mem));

    cl_mem x_mem = (cl_mem)x->mem, dst_mem = (cl_mem)dst->mem;
    cl_mem x2_mem = (cl_mem)x2->mem, dst2_mem = (cl_mem)dst2->mem;
    cl_mem pos_mem = (cl_mem)pos->mem, pos_from_mem = (cl_mem)pos_from->mem;
    const cl_long x_off = x->offset, dst_off = dst->offset, x2_off = x2->offset,
                  dst2_off = dst2->offset, pos_off = pos->offset,
                  pos_from_off = pos_from->offset;
    const cl_long4 x_st = view_st(x), dst_st = view_st(dst), x2_st = view_st(x2),
                   dst2_st = view_st(dst2);
    const cl_long4 pos_st = long4_of(pos->st[0], pos->st[1], pos->st[2], 0);
    const cl_long4 pos_from_st = long4_of(pos_from->st[0], pos_from->st[1], pos_from->st[2], 0);
    const cl_long4 shape = long4_of(n_pairs, x->ne[2], x->ne[3], n_copy);
    const cl_long4 dims = long4_of(n_head, n_head2, op->n_offs, op->pairing);
    const cl_float mscale = (float)op->mscale;
    const cl_int sign = op->sign < 0 ? -1 : 1;
    const struct pe_cl_arg args[] = {
        ARG(x_mem),        ARG(x_off),       ARG(x_st),    ARG(dst_mem),  ARG(dst_off),
        ARG(dst_st),       ARG(x2_mem),      ARG(x2_off),  ARG(x2_st),    ARG(dst2_mem),
        ARG(dst2_off),     ARG(dst2_st),     ARG(pos_mem), ARG(pos_off),  ARG(pos_st),
        ARG(pos_from_mem), ARG(pos_from_off), ARG(pos_from_st), ARG(tab_mem), ARG(shape),
        ARG(dims),         ARG(flags),       ARG(mscale),  ARG(sign),
    };
    /* rope_set_rows: rows, rows_off, rows_st after the kernel's last argument (rope.cl) */
    cl_mem rows_mem = (cl_mem)op->rows.mem;
    const cl_long rows_off = op->rows.offset;
    const cl_long4 rows_st = long4_of(op->rows.st[0], op->rows.st[1], op->n_rows, 0);
    const struct pe_cl_arg rows_args[] = {ARG(rows_mem), ARG(rows_off), ARG(rows_st)};
    const size_t n_rows_args = has_rows ? PE_ARRAY_SIZE(rows_args) : 0;
    if (vec) {
        /* Few tokens (decode): split the heads into chunks so that about two work-groups
         * per compute unit run; many tokens: one chunk. */
        const uint64_t rows = (uint64_t)(n_head + n_head2);
        const uint64_t groups = (uint64_t)x->ne[2] * (uint64_t)x->ne[3];
        const uint64_t want = 2 * (uint64_t)(be->info.compute_units ? be->info.compute_units : 1);
        uint64_t chunks = groups >= want ? 1 : (want + groups - 1) / groups;
        if (chunks > rows)
            chunks = rows;
        const cl_int rows_per = (cl_int)((rows + chunks - 1) / chunks);
        chunks = (rows + (uint64_t)rows_per - 1) / (uint64_t)rows_per;
        struct pe_cl_arg vargs[PE_ARRAY_SIZE(args) + 1 + PE_ARRAY_SIZE(rows_args)];
        memcpy(vargs, args, sizeof(args));
        vargs[PE_ARRAY_SIZE(args)] = (struct pe_cl_arg)ARG(rows_per);
        memcpy(vargs + PE_ARRAY_SIZE(args) + 1, rows_args, n_rows_args * sizeof(rows_args[0]));
        if (tok) {
            /* (chunks, tokens, batch); a group is up to 8 consecutive tokens of one chunk,
             * which the device runs one after another: memory order */
            const uint64_t gt[3] = {chunks, (uint64_t)x->ne[2], (uint64_t)x->ne[3]};
            size_t l1 = 8;
            while (l1 > 1 && ((uint64_t)x->ne[2] % l1 != 0 ||
                              (be->max_item_size[1] && l1 > be->max_item_size[1]) ||
                              l1 > wg_limit(be, p)))
                l1--;
            const size_t l[3] = {1, l1, 1};
            return launch_exact(be, p, vargs, PE_ARRAY_SIZE(args) + 1 + n_rows_args, gt, l);
        }
        const uint64_t g[3] = {(uint64_t)n_pairs / 8 * chunks, (uint64_t)x->ne[2],
                               (uint64_t)x->ne[3]};
        return launch_vec(be, p, vargs, PE_ARRAY_SIZE(args) + 1 + n_rows_args, g,
                          (uint64_t)n_pairs / 8);
    }
    const uint64_t n[3] = {(uint64_t)(n_pairs + n_copy), (uint64_t)x->ne[2],
                           (uint64_t)x->ne[3]};
    if (has_rows) {
        struct pe_cl_arg sargs[PE_ARRAY_SIZE(args) + PE_ARRAY_SIZE(rows_args)];
        memcpy(sargs, args, sizeof(args));
        memcpy(sargs + PE_ARRAY_SIZE(args), rows_args, sizeof(rows_args));
        return pe_cl_launch(be, p, sargs, PE_ARRAY_SIZE(sargs), n);
    }
    return pe_cl_launch(be, p, args, PE_ARRAY_SIZE(args), n);
}

/* ------------------------------------------------------------------------------------ */

const struct pe_backend_vtable pe_opencl_vtable = {
    .kind = POSENC_BACKEND_OPENCL,
    .name = "opencl",
    .device_count = cl_device_count,
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
    .sinusoidal = cl_sinusoidal,
    .rope = cl_rope,
    .learned = pe_cl_learned,
    .learned_backward = pe_cl_learned_backward,
    .resize_2d = pe_cl_resize_2d,
    .relbias = pe_cl_relbias,
    .relbias_backward = pe_cl_relbias_backward,
    .alibi = pe_cl_alibi,
    .copy = cl_copy,
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
};
