/*
 * ops_rows.c - the OpenCL host side of posenc_fill and posenc_set_rows (cl/rows.cl).
 *
 * Kernel arguments:
 *
 *   pe_fill  (-DFILL_16: 1 for f16, 0 for f32 / i32)
 *     0-2   dst, dst_off, dst_st
 *     3     long4 shape               (ne0, ne1, ne2, ne3)
 *     4     uint  bits                the element's bits (f16: the low 16)
 *   NDRange (ne0, ne1, ne2*ne3).
 *
 *   pe_set_rows  (-DX_F16 (src) -DDST_F16 -DROWS_I64 -DSAME_16 -DSAME_32)
 *     0-2   dst, dst_off, dst_st      f32 or f16 [n, R, d2, d3]
 *     3-5   src, src_off, src_st      f32 or f16 [n, r, d2, d3]
 *     6-8   rows, rows_off, rows_st   i32 or i64 (read as 32-bit words); rows_st =
 *                                     (st for i1, st for j2, st for j3, 0), in index elements
 *     9     long4 shape               (n, r, d2, d3)
 *    10     long4 rdims               (e2, e3, base2, base3)
 *    11     long  n_rows              R
 *   NDRange (n, r, d2*d3).
 */
#include "backend_opencl.h"

#include <stdio.h>
#include <string.h>

posenc_status pe_cl_fill(struct pe_backend *base, const struct pe_fill_op *op)
{
    struct pe_cl_backend *be = (struct pe_cl_backend *)base;
    const struct pe_view *dst = &op->dst;
    char defines[PE_CL_OPTS_MAX];
    snprintf(defines, sizeof(defines), "-DFILL_16=%d", is_f16(dst));
    struct pe_cl_program *p = NULL;
    PE_RETURN_IF_ERROR(pe_cl_get_program(be, "rows.cl", "pe_fill", defines, &p));
    cl_mem dst_mem = (cl_mem)dst->mem;
    const cl_long dst_off = dst->offset;
    const cl_long4 dst_st = view_st(dst);
    const cl_long4 shape = long4_of(dst->ne[0], dst->ne[1], dst->ne[2], dst->ne[3]);
    const cl_uint bits = op->bits, step = op->step;
    const struct pe_cl_arg args[] = {ARG(dst_mem), ARG(dst_off), ARG(dst_st), ARG(shape),
                                     ARG(bits),    ARG(step)};
    const uint64_t n[3] = {(uint64_t)dst->ne[0], (uint64_t)dst->ne[1],
                           (uint64_t)dst->ne[2] * (uint64_t)dst->ne[3]};
    return pe_cl_launch(be, p, args, PE_ARRAY_SIZE(args), n);
}

posenc_status pe_cl_set_rows(struct pe_backend *base, const struct pe_set_rows_op *op)
{
    struct pe_cl_backend *be = (struct pe_cl_backend *)base;
    const struct pe_view *src = &op->src, *dst = &op->dst, *rows = &op->rows;
    const int same = src->dtype == dst->dtype;
    char defines[PE_CL_OPTS_MAX];
    snprintf(defines, sizeof(defines),
             "-DHAS_X=1 -DX_F16=%d -DDST_F16=%d -DROWS_I64=%d -DSAME_16=%d -DSAME_32=%d",
             is_f16(src), is_f16(dst), rows->dtype == POSENC_DTYPE_I64, same && is_f16(src),
             same && !is_f16(src));
    struct pe_cl_program *p = NULL;
    PE_RETURN_IF_ERROR(pe_cl_get_program(be, "rows.cl", "pe_set_rows", defines, &p));
    cl_mem dst_mem = (cl_mem)dst->mem, src_mem = (cl_mem)src->mem, rows_mem = (cl_mem)rows->mem;
    const cl_long dst_off = dst->offset, src_off = src->offset, rows_off = rows->offset;
    const cl_long4 dst_st = view_st(dst), src_st = view_st(src);
    const cl_long4 rows_st = long4_of(rows->st[0], rows->st[1], rows->st[2], 0);
    const cl_long4 shape = long4_of(src->ne[0], src->ne[1], src->ne[2], src->ne[3]);
    const cl_long4 rdims = long4_of(rows->ne[1], rows->ne[2], op->base2, op->base3);
    const cl_long n_rows = op->n_rows;
    const struct pe_cl_arg args[] = {ARG(dst_mem),  ARG(dst_off), ARG(dst_st),  ARG(src_mem),
                                     ARG(src_off),  ARG(src_st),  ARG(rows_mem), ARG(rows_off),
                                     ARG(rows_st),  ARG(shape),   ARG(rdims),   ARG(n_rows)};
    const uint64_t n[3] = {(uint64_t)src->ne[0], (uint64_t)src->ne[1],
                           (uint64_t)src->ne[2] * (uint64_t)src->ne[3]};
    return pe_cl_launch(be, p, args, PE_ARRAY_SIZE(args), n);
}
