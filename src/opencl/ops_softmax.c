/*
 * ops_softmax.c - the OpenCL host side of posenc_softmax (internal.h, struct
 * pe_softmax_op): one launch of cl/softmax.cl pe_softmax, one work-group per row.
 *
 * Kernel argument order (every "mem, long, long4" triple is a tensor: buffer, offset and
 * strides in its own elements):
 *
 *   pe_softmax  (-DHAS_X=1 -DX_F16 (x) -DDST_F16 (dst) -DTAB_F16 (mask) -DSM_MASK
 *                -DSM_SINKS -DSM_SLOPES)
 *     0-2   dst                f32 or f16 [n, rows, H, B]; may be the x view itself
 *     3-5   x                  f32 or f16 [n, rows, H, B]
 *     6-8   mask               f32 or f16 [n, rows, M2, M3]; x again without
 *     9-11  sinks, off, long st   f32 [n_head]; x again without
 *    12     mem   slopes       f32 [n_head] (the persistent ALiBi table); x without
 *    13     long4 shape        (n, rows, H, B)
 *    14     long4 bcast        (M2, M3, h_off, b_off)
 *    15     float scale
 *    16     __local float[wg]  the reduction's scratch (size only, set at each launch)
 *   NDRange (wg, rows*H*B, 1), local (wg, 1, 1), wg a power of two <= 256 within the
 *   device's work-group and local-memory limits (pe_cl_reduce_wg).
 */
#include "backend_opencl.h"

#include <stdio.h>
#include <string.h>

#define PE_SM_WG 256 /* the largest work-group asked for */

posenc_status pe_cl_softmax(struct pe_backend *base, const struct pe_softmax_op *op)
{
    struct pe_cl_backend *be = (struct pe_cl_backend *)base;
    const struct pe_view *x = &op->x, *d = &op->dst;
    const bool has_mask = op->mask.mem != NULL, has_sinks = op->sinks.mem != NULL;
    const bool has_slopes = has_mask && op->slopes_f32 != NULL;
    const struct pe_view *mk = has_mask ? &op->mask : x;
    char defines[PE_CL_OPTS_MAX];
    snprintf(defines, sizeof(defines),
             "-DHAS_X=1 -DX_F16=%d -DDST_F16=%d -DTAB_F16=%d -DSM_MASK=%d -DSM_SINKS=%d "
             "-DSM_SLOPES=%d",
             is_f16(x), is_f16(d), has_mask && is_f16(mk), has_mask, has_sinks, has_slopes);
    struct pe_cl_program *p = NULL;
    PE_RETURN_IF_ERROR(pe_cl_get_program(be, "softmax.cl", "pe_softmax", defines, &p));

    cl_mem slopes_mem = (cl_mem)x->mem;
    if (has_slopes) /* the same persistent table as posenc_alibi: ALiBi slopes per head */
        PE_RETURN_IF_ERROR(pe_cl_table(be, &be->tab_alibi, "alibi slopes", op->slopes_f32,
                                       (size_t)op->n_head * sizeof(float), &slopes_mem));
    cl_mem d_mem = (cl_mem)d->mem, x_mem = (cl_mem)x->mem, m_mem = (cl_mem)mk->mem;
    cl_mem s_mem = has_sinks ? (cl_mem)op->sinks.mem : (cl_mem)x->mem;
    const cl_long d_off = d->offset, x_off = x->offset, m_off = mk->offset;
    const cl_long s_off = has_sinks ? op->sinks.offset : 0;
    const cl_long s_st = has_sinks ? op->sinks.st[0] : 0;
    const cl_long4 d_st = view_st(d), x_st = view_st(x), m_st = view_st(mk);
    const cl_long4 shape = long4_of(x->ne[0], x->ne[1], x->ne[2], x->ne[3]);
    const cl_long4 bcast = long4_of(has_mask ? mk->ne[2] : 1, has_mask ? mk->ne[3] : 1,
                                    op->h_off, op->b_off);
    const cl_float scale = op->scale_f32;
    const struct pe_cl_arg args[] = {
        ARG(d_mem), ARG(d_off), ARG(d_st),  ARG(x_mem), ARG(x_off),      ARG(x_st),
        ARG(m_mem), ARG(m_off), ARG(m_st),  ARG(s_mem), ARG(s_off),      ARG(s_st),
        ARG(slopes_mem),        ARG(shape), ARG(bcast), ARG(scale)};
    PE_RETURN_IF_ERROR(pe_cl_set_args(be, p, args, PE_ARRAY_SIZE(args)));

    /* one work-group per row: the largest power of two <= 256 the kernel and the device's
     * work-group and local-memory limits allow, and no more than the row needs (rounded
     * up to a power of two) */
    size_t cap = pe_cl_reduce_wg(be, PE_SM_WG, sizeof(cl_float));
    if (cap < PE_SM_WG)
        pe_log(base->ctx, POSENC_LOG_DEBUG,
               "opencl: pe_softmax: reductions over at most %zu work-items (the device's "
               "work-group and local-memory limits)",
               cap);
    if (p->kernel_wg_size < cap)
        cap = p->kernel_wg_size;
    size_t wg = 1;
    while (wg * 2 <= cap && (int64_t)wg < x->ne[0])
        wg *= 2;
    const uint64_t rows = (uint64_t)x->ne[1] * (uint64_t)x->ne[2] * (uint64_t)x->ne[3];
    if (rows > (uint64_t)SIZE_MAX)
        return pe_error(base->ctx, POSENC_ERR_UNSUPPORTED,
                        "pe_softmax: %llu rows do not fit this device's size_t",
                        (unsigned long long)rows);
    const size_t global[3] = {wg, (size_t)rows, 1}, local[3] = {wg, 1, 1};
    /* the reduction's scratch: wg floats of local memory (a size only, not remembered by
     * pe_cl_set_args) */
    cl_int err = clSetKernelArg(p->kernel, 16, wg * sizeof(cl_float), NULL);
    if (err != CL_SUCCESS)
        return pe_error(base->ctx, POSENC_ERR_BACKEND,
                        "clSetKernelArg(pe_softmax, 16, %zu bytes of local memory) failed: "
                        "OpenCL error %d",
                        wg * sizeof(cl_float), (int)err);
    if (be->base.prepare_only)
        return POSENC_OK;
    PE_RETURN_IF_ERROR(pe_cl_before_enqueue(be));
    cl_event ev = NULL;
    err = clEnqueueNDRangeKernel(be->queue, p->kernel, 3, NULL, global, local, 0, NULL, &ev);
    if (err != CL_SUCCESS)
        return pe_error(base->ctx,
                        pe_cl_err_is_oom(err) ? POSENC_ERR_OUT_OF_MEMORY : POSENC_ERR_BACKEND,
                        "clEnqueueNDRangeKernel(pe_softmax) failed: OpenCL error %d", (int)err);
    pe_cl_track(be, ev);
    return POSENC_OK;
}
