/*
 * ops_encodings.c - the OpenCL host side of learned positions (cl/learned.cl), grid
 * resize (cl/resize.cl) and the attention-logit biases (cl/bias.cl).
 *
 * Each op picks a program variant by the storage types of its tensors (-D options, see
 * cl/common.cl; built once per context), uploads its small host tables (segment lists,
 * tap indices and weights, buckets, slopes) as one read-only buffer per call, enqueues
 * one kernel and releases the table right away (OpenCL keeps it until the kernel is
 * done). The argument order of every kernel is listed at the top of backend_opencl.c.
 */
#include "backend_opencl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* Launch, then release the per-call table (if any) whatever happened. */
static posenc_status launch_and_release(struct pe_cl_backend *be, struct pe_cl_program *p,
                                        const struct pe_cl_arg *args, size_t n_args,
                                        const uint64_t n[3], cl_mem table)
{
    posenc_status st = pe_cl_launch(be, p, args, n_args, n);
    /* Safe right after enqueueing: OpenCL keeps the buffer until the kernel is done. */
    if (table)
        pe_cl_release_mem(be, table);
    return st;
}

/* ---- learned ------------------------------------------------------------------------- */

posenc_status pe_cl_learned(struct pe_backend *base, const struct pe_learned_op *op)
{
    struct pe_cl_backend *be = (struct pe_cl_backend *)base;
    const struct pe_view *dst = &op->dst, *tab = &op->table, *pos = &op->pos;
    const bool has_x = op->x.mem != NULL;
    const struct pe_view *x = has_x ? &op->x : dst;
    /* unit strides, rows aligned: pe_learned_vec, PE_KPW elements per work-item (16; on CPU
     * devices PE_CL_CPU_ROW_SPAN) */
    const bool vec = pe_cl_rows_aligned(dst, 16) && pe_cl_rows_aligned(x, 16) &&
                     pe_cl_rows_aligned(tab, 16);
    const int kpw = !vec ? 1 : pe_cl_is_cpu(be) ? PE_CL_CPU_ROW_SPAN : 16;
    const uint64_t n[3] = {((uint64_t)dst->ne[0] + (uint64_t)kpw - 1) / (uint64_t)kpw,
                           (uint64_t)dst->ne[1], (uint64_t)dst->ne[2]};
    if (n[0] == 0 || n[1] == 0 || n[2] == 0)
        return POSENC_OK;

    /* large out-of-place outputs on CPU devices: streaming stores (PE_NT_STORE; posenc
     * bench --backend opencl --op learned, f32 [1024, 2048, 8] with x, see CHANGELOG) */
    const bool nt = vec && has_x && pe_cl_stream_out(be, x, dst);
    char defines[PE_CL_OPTS_MAX];
    snprintf(defines, sizeof(defines),
             "-DDST_F16=%d -DHAS_X=%d -DX_F16=%d -DTAB_F16=%d -DPE_KPW=%d%s", is_f16(dst), has_x,
             has_x && is_f16(x), is_f16(tab), kpw, nt ? " -DPE_NT_STORE=1" : "");
    struct pe_cl_program *p = NULL;
    PE_RETURN_IF_ERROR(pe_cl_get_program(be, "learned.cl", vec ? "pe_learned_vec" : "pe_learned",
                                         defines, &p));

    cl_mem dst_mem = (cl_mem)dst->mem, x_mem = (cl_mem)x->mem, tab_mem = (cl_mem)tab->mem,
           pos_mem = (cl_mem)pos->mem;
    const cl_long dst_off = dst->offset, x_off = x->offset, tab_off = tab->offset,
                  pos_off = pos->offset;
    const cl_long4 dst_st = view_st(dst), x_st = view_st(x), tab_st = view_st(tab);
    const cl_long4 pos_st = long4_of(pos->st[0], pos->st[1], 0, 0);
    const cl_long4 shape = long4_of(dst->ne[0], dst->ne[1], dst->ne[2], 0);
    const struct pe_cl_arg args[] = {
        ARG(dst_mem), ARG(dst_off), ARG(dst_st), ARG(x_mem),   ARG(x_off),
        ARG(x_st),    ARG(tab_mem), ARG(tab_off), ARG(tab_st), ARG(pos_mem),
        ARG(pos_off), ARG(pos_st),  ARG(shape),
    };
    return pe_cl_launch(be, p, args, PE_ARRAY_SIZE(args), n);
}

posenc_status pe_cl_learned_backward(struct pe_backend *base, const struct pe_learned_bwd_op *op)
{
    struct pe_cl_backend *be = (struct pe_cl_backend *)base;
    const struct pe_view *dtab = &op->dtable, *dy = &op->dy;
    const int64_t n_seg = op->n_segments;
    const uint64_t n[3] = {(uint64_t)dtab->ne[0], (uint64_t)n_seg, 1};
    if (n[0] == 0 || n_seg <= 0 || op->n_tokens <= 0)
        return POSENC_OK;

    char defines[PE_CL_OPTS_MAX];
    snprintf(defines, sizeof(defines), "-DDST_F16=%d -DHAS_X=1 -DX_F16=%d", is_f16(dtab),
             is_f16(dy));
    struct pe_cl_program *p = NULL;
    PE_RETURN_IF_ERROR(pe_cl_get_program(be, "learned.cl", "pe_learned_bwd", defines, &p));

    /* seg_start[n_seg + 1], seg_row[n_seg], entries[seg_start[n_seg]]: one upload. */
    const size_t ns = (size_t)n_seg, n_ent = (size_t)op->seg_start[n_seg];
    const size_t words = 2 * ns + 1 + n_ent;
    int32_t *segs = malloc(words * sizeof(int32_t));
    if (!segs)
        return pe_error(base->ctx, POSENC_ERR_OUT_OF_MEMORY,
                        "out of host memory (learned_backward segment table, %zu entries)",
                        words);
    memcpy(segs, op->seg_start, (ns + 1) * sizeof(int32_t));
    memcpy(segs + ns + 1, op->seg_row, ns * sizeof(int32_t));
    memcpy(segs + 2 * ns + 1, op->entries, n_ent * sizeof(int32_t));
    cl_mem seg_mem = NULL;
    posenc_status st = pe_cl_upload(be, "learned_backward segments", segs,
                                    words * sizeof(int32_t), &seg_mem);
    free(segs);
    if (st != POSENC_OK)
        return st;

    cl_mem dtab_mem = (cl_mem)dtab->mem, dy_mem = (cl_mem)dy->mem;
    const cl_long dtab_off = dtab->offset, dy_off = dy->offset;
    const cl_long4 dtab_st = view_st(dtab), dy_st = view_st(dy);
    const cl_long4 shape = long4_of(dtab->ne[0], n_seg, op->n_tokens, 0);
    const struct pe_cl_arg args[] = {
        ARG(dtab_mem), ARG(dtab_off), ARG(dtab_st), ARG(dy_mem),
        ARG(dy_off),   ARG(dy_st),    ARG(seg_mem), ARG(shape),
    };
    return launch_and_release(be, p, args, PE_ARRAY_SIZE(args), n, seg_mem);
}

/* ---- resize_2d ----------------------------------------------------------------------- */

posenc_status pe_cl_resize_2d(struct pe_backend *base, const struct pe_resize_op *op)
{
    struct pe_cl_backend *be = (struct pe_cl_backend *)base;
    const struct pe_view *src = &op->src, *dst = &op->dst;
    const int64_t cls = op->cls ? 1 : 0;
    const int64_t rows = cls + op->dst_h * op->dst_w;
    const uint64_t n[3] = {(uint64_t)dst->ne[0], (uint64_t)rows, 1};
    if (n[0] == 0 || rows <= 0)
        return POSENC_OK;

    char defines[PE_CL_OPTS_MAX];
    snprintf(defines, sizeof(defines), "-DDST_F16=%d -DHAS_X=1 -DX_F16=%d", is_f16(dst),
             is_f16(src));
    struct pe_cl_program *p = NULL;
    PE_RETURN_IF_ERROR(pe_cl_get_program(be, "resize.cl", "pe_resize_2d", defines, &p));

    /* wx[4*dst_w], wy[4*dst_h] (f32 bits), ix[4*dst_w], iy[4*dst_h]: one upload. */
    const size_t nw = 4 * (size_t)op->dst_w, nh = 4 * (size_t)op->dst_h;
    const size_t words = 2 * (nw + nh);
    uint32_t *tab = malloc((words ? words : 1) * sizeof(uint32_t));
    if (!tab)
        return pe_error(base->ctx, POSENC_ERR_OUT_OF_MEMORY,
                        "out of host memory (resize_2d tap table, %zu entries)", words);
    memcpy(tab, op->wx_f32, nw * sizeof(float));
    memcpy(tab + nw, op->wy_f32, nh * sizeof(float));
    memcpy(tab + nw + nh, op->ix, nw * sizeof(int32_t));
    memcpy(tab + 2 * nw + nh, op->iy, nh * sizeof(int32_t));
    cl_mem tab_mem = NULL;
    posenc_status st =
        pe_cl_upload(be, "resize_2d taps", tab, words * sizeof(uint32_t), &tab_mem);
    free(tab);
    if (st != POSENC_OK)
        return st;

    cl_mem dst_mem = (cl_mem)dst->mem, src_mem = (cl_mem)src->mem;
    const cl_long dst_off = dst->offset, src_off = src->offset;
    const cl_long4 dst_st = view_st(dst), src_st = view_st(src);
    const cl_long4 shape = long4_of(dst->ne[0], op->dst_h, op->dst_w, cls);
    const cl_long src_w = op->src_w;
    const struct pe_cl_arg args[] = {
        ARG(dst_mem), ARG(dst_off), ARG(dst_st),  ARG(src_mem), ARG(src_off),
        ARG(src_st),  ARG(tab_mem), ARG(shape),   ARG(src_w),
    };
    return launch_and_release(be, p, args, PE_ARRAY_SIZE(args), n, tab_mem);
}

/* ---- relbias ------------------------------------------------------------------------- */

/* posenc_relbias on CPU devices with unit key strides: when every relative position's
 * bias is read by at least this many (query, batch) rows on average, the bias of each
 * relative position per head is laid out first (pe_relbias_expand, [H][n_rel] f32) and
 * the rows read it 16 at a time, as the CPU backend does; otherwise each key gathers its
 * table entry through the bucket list. */
#define PE_CL_RELB_MIN_ROWS 8
/* ... and the laid-out biases at most this many bytes (a larger op gathers). */
#define PE_CL_RELB_MAX_BYTES ((size_t)64 << 20)

posenc_status pe_cl_relbias(struct pe_backend *base, const struct pe_relbias_op *op)
{
    struct pe_cl_backend *be = (struct pe_cl_backend *)base;
    const struct pe_view *dst = &op->dst, *tab = &op->table;
    const bool has_x = op->logits.mem != NULL;
    const struct pe_view *lg = has_x ? &op->logits : dst;
    /* on CPU devices, keys with unit stride: pe_relbias_row, PE_CL_CPU_ROW_SPAN keys per
     * work-item; else one work-item per element (pe_relbias) */
    const bool row = pe_cl_is_cpu(be) && dst->st[0] == 1 && lg->st[0] == 1;
    const uint64_t kpw = row ? PE_CL_CPU_ROW_SPAN : 1;
    const uint64_t n[3] = {((uint64_t)dst->ne[0] + kpw - 1) / kpw, (uint64_t)dst->ne[1],
                           (uint64_t)dst->ne[2] * (uint64_t)dst->ne[3]};
    if (n[0] == 0 || n[1] == 0 || n[2] == 0)
        return POSENC_OK;

    /* The whole op's list (kept in a persistent table: a cut op's or an attention query
     * block's later launches find it there, no allocation after the first launch wrote),
     * or this launch's window. */
    const int32_t *list = op->bucket_all ? op->bucket_all : op->bucket;
    const int64_t rel_min = op->bucket_all ? op->rel_min_all : op->rel_min;
    const int64_t n_rel = op->bucket_all ? op->n_rel_all : op->n_rel;
    const int64_t H = dst->ne[2];
    const uint64_t rows = (uint64_t)dst->ne[1] * (uint64_t)dst->ne[3];
    const bool expand = row && (uint64_t)n_rel * PE_CL_RELB_MIN_ROWS <= rows * (uint64_t)dst->ne[0] &&
                        (uint64_t)n_rel * (uint64_t)H <= PE_CL_RELB_MAX_BYTES / sizeof(float);

    const bool vec16 = row && pe_cl_rows_aligned(dst, 16) && pe_cl_rows_aligned(lg, 16);
    /* large out-of-place outputs: streaming f32 stores (PE_NT_STORE), as ALiBi's */
    const bool nt = vec16 && pe_cl_stream_out(be, has_x ? lg : NULL, dst);
    char defines[PE_CL_OPTS_MAX];
    snprintf(defines, sizeof(defines),
             "-DDST_F16=%d -DHAS_X=%d -DX_F16=%d -DTAB_F16=%d -DPE_KPW=%d -DPE_VEC16=%d "
             "-DPE_RB=%d%s",
             is_f16(dst), has_x, has_x && is_f16(lg), expand ? 0 : is_f16(tab), (int)kpw, vec16,
             expand, nt ? " -DPE_NT_STORE=1" : "");
    struct pe_cl_program *p = NULL, *pe = NULL;
    PE_RETURN_IF_ERROR(pe_cl_get_program(be, "bias.cl", row ? "pe_relbias_row" : "pe_relbias",
                                         defines, &p));
    if (expand) {
        char edef[64];
        snprintf(edef, sizeof(edef), "-DTAB_F16=%d -DPE_KPW=%d", is_f16(tab),
                 PE_CL_CPU_ROW_SPAN);
        PE_RETURN_IF_ERROR(pe_cl_get_program(be, "bias.cl", "pe_relbias_expand", edef, &pe));
        PE_RETURN_IF_ERROR(pe_cl_scratch(be, "relbias biases by relative position", &be->relb,
                                         &be->relb_bytes,
                                         (size_t)n_rel * (size_t)H * sizeof(float), false));
    }

    cl_mem bucket_mem = NULL, owned = NULL;
    if (op->bucket_all) {
        PE_RETURN_IF_ERROR(pe_cl_table(be, &be->tab_relbias, "relbias buckets", list,
                                       (size_t)n_rel * sizeof(int32_t), &bucket_mem));
    } else {
        PE_RETURN_IF_ERROR(pe_cl_upload(be, "relbias buckets", list,
                                        (size_t)n_rel * sizeof(int32_t), &bucket_mem));
        owned = bucket_mem;
    }

    cl_mem dst_mem = (cl_mem)dst->mem, lg_mem = (cl_mem)lg->mem, tab_mem = (cl_mem)tab->mem;
    const cl_long dst_off = dst->offset, lg_off = lg->offset;
    cl_long tab_off = tab->offset;
    const cl_long4 dst_st = view_st(dst), lg_st = view_st(lg);
    cl_long4 tab_st = view_st(tab);
    const cl_long4 shape = long4_of(dst->ne[0], dst->ne[1], dst->ne[2], dst->ne[3]);
    const cl_long4 offs = long4_of(op->q_offset, op->k_offset, rel_min, 0);
    if (expand) {
        /* rb[h][r] = table[bucket[r], h]; the row kernel then reads rb as its table */
        const cl_long nr = n_rel, nh = H;
        const struct pe_cl_arg eargs[] = {ARG(be->relb), ARG(tab_mem), ARG(tab_off), ARG(tab_st),
                                          ARG(bucket_mem), ARG(nr), ARG(nh)};
        const uint64_t en[3] = {((uint64_t)n_rel + PE_CL_CPU_ROW_SPAN - 1) / PE_CL_CPU_ROW_SPAN,
                                (uint64_t)H, 1};
        posenc_status st = pe_cl_launch(be, pe, eargs, PE_ARRAY_SIZE(eargs), en);
        if (st != POSENC_OK) {
            if (owned)
                pe_cl_release_mem(be, owned);
            return st;
        }
        tab_mem = be->relb;
        tab_off = 0;
        tab_st = long4_of(1, n_rel, 0, 0);
    }
    const struct pe_cl_arg args[] = {
        ARG(dst_mem), ARG(dst_off), ARG(dst_st), ARG(lg_mem),     ARG(lg_off), ARG(lg_st),
        ARG(tab_mem), ARG(tab_off), ARG(tab_st), ARG(bucket_mem), ARG(shape),  ARG(offs),
    };
    return launch_and_release(be, p, args, PE_ARRAY_SIZE(args), n, owned);
}

posenc_status pe_cl_relbias_backward(struct pe_backend *base, const struct pe_relbias_bwd_op *op)
{
    struct pe_cl_backend *be = (struct pe_cl_backend *)base;
    const struct pe_view *dtab = &op->dtable, *dl = &op->dlogits;
    const int64_t n_buckets = op->n_buckets, H = dl->ne[2];
    const uint64_t n[3] = {(uint64_t)n_buckets, (uint64_t)H, 1};
    if (n_buckets <= 0 || H <= 0 || dl->ne[0] == 0 || dl->ne[1] == 0 || dl->ne[3] == 0)
        return POSENC_OK;

    char defines[PE_CL_OPTS_MAX];
    snprintf(defines, sizeof(defines), "-DDST_F16=%d -DHAS_X=1 -DX_F16=%d", is_f16(dtab),
             is_f16(dl));
    struct pe_cl_program *p = NULL;
    PE_RETURN_IF_ERROR(pe_cl_get_program(be, "bias.cl", "pe_relbias_bwd", defines, &p));

    /* seg_start[n_buckets + 1], rels[seg_start[n_buckets]]: one upload. */
    const size_t nb = (size_t)n_buckets, n_rels = (size_t)op->seg_start[n_buckets];
    const size_t words = nb + 1 + n_rels;
    int32_t *segs = malloc(words * sizeof(int32_t));
    if (!segs)
        return pe_error(base->ctx, POSENC_ERR_OUT_OF_MEMORY,
                        "out of host memory (relbias_backward bucket lists, %zu entries)",
                        words);
    memcpy(segs, op->seg_start, (nb + 1) * sizeof(int32_t));
    memcpy(segs + nb + 1, op->rels, n_rels * sizeof(int32_t));
    cl_mem seg_mem = NULL;
    posenc_status st = pe_cl_upload(be, "relbias_backward bucket lists", segs,
                                    words * sizeof(int32_t), &seg_mem);
    free(segs);
    if (st != POSENC_OK)
        return st;

    cl_mem dtab_mem = (cl_mem)dtab->mem, dl_mem = (cl_mem)dl->mem;
    const cl_long dtab_off = dtab->offset, dl_off = dl->offset;
    const cl_long4 dtab_st = view_st(dtab), dl_st = view_st(dl);
    const cl_long4 shape = long4_of(dl->ne[0], dl->ne[1], dl->ne[2], dl->ne[3]);
    const cl_long4 offs = long4_of(op->q_offset, op->k_offset, op->rel_min, n_buckets);
    const struct pe_cl_arg args[] = {
        ARG(dtab_mem), ARG(dtab_off), ARG(dtab_st), ARG(dl_mem), ARG(dl_off),
        ARG(dl_st),    ARG(seg_mem),  ARG(shape),   ARG(offs),
    };
    return launch_and_release(be, p, args, PE_ARRAY_SIZE(args), n, seg_mem);
}

/* ---- alibi --------------------------------------------------------------------------- */

posenc_status pe_cl_alibi(struct pe_backend *base, const struct pe_alibi_op *op)
{
    struct pe_cl_backend *be = (struct pe_cl_backend *)base;
    const struct pe_view *dst = &op->dst;
    const bool has_x = op->logits.mem != NULL;
    const struct pe_view *lg = has_x ? &op->logits : dst;
    /* keys innermost, rows aligned: pe_alibi_vec, 16 keys per work-item, or on CPU devices
     * PE_CL_CPU_ROW_SPAN (a work-item's set-up, a 64-bit division among it, cost as much
     * as its 16 keys there) */
    const bool vec = pe_cl_rows_aligned(dst, 16) && pe_cl_rows_aligned(lg, 16);
    const int kpw = !vec ? 1 : pe_cl_is_cpu(be) ? PE_CL_CPU_ROW_SPAN : 16;
    const uint64_t n[3] = {((uint64_t)dst->ne[0] + (uint64_t)kpw - 1) / (uint64_t)kpw,
                           (uint64_t)dst->ne[1], (uint64_t)dst->ne[2] * (uint64_t)dst->ne[3]};
    if (n[0] == 0 || n[1] == 0 || n[2] == 0)
        return POSENC_OK;

    char defines[PE_CL_OPTS_MAX];
    const bool nt = vec && pe_cl_stream_out(be, has_x ? lg : NULL, dst);
    snprintf(defines, sizeof(defines), "-DDST_F16=%d -DHAS_X=%d -DX_F16=%d -DPE_KPW=%d%s",
             is_f16(dst), has_x, has_x && is_f16(lg), kpw,
             nt ? " -DPE_NT_STORE=1" : "");
    struct pe_cl_program *p = NULL;
    PE_RETURN_IF_ERROR(
        pe_cl_get_program(be, "bias.cl", vec ? "pe_alibi_vec" : "pe_alibi", defines, &p));

    /* the slopes: a persistent buffer, uploaded again only when they change; all of the
     * op's, so that the launches of a head cut after the first find them there */
    cl_mem slope_mem = NULL;
    const bool all = op->n_head_all > 0;
    const cl_long slope_off = all ? op->h_off : 0;
    PE_RETURN_IF_ERROR(pe_cl_table(be, &be->tab_alibi, "alibi slopes",
                                   all ? op->slopes_f32 - op->h_off : op->slopes_f32,
                                   (size_t)(all ? op->n_head_all : dst->ne[2]) * sizeof(float),
                                   &slope_mem));

    cl_mem dst_mem = (cl_mem)dst->mem, lg_mem = (cl_mem)lg->mem;
    const cl_long dst_off = dst->offset, lg_off = lg->offset;
    const cl_long4 dst_st = view_st(dst), lg_st = view_st(lg);
    const cl_long4 shape = long4_of(dst->ne[0], dst->ne[1], dst->ne[2], dst->ne[3]);
    const cl_long4 offs = long4_of(op->q_offset, op->k_offset, op->causal ? 1 : 0,
                                   op->symmetric ? 1 : 0);
    const struct pe_cl_arg args[] = {
        ARG(dst_mem), ARG(dst_off),   ARG(dst_st), ARG(lg_mem), ARG(lg_off),
        ARG(lg_st),   ARG(slope_mem), ARG(slope_off), ARG(shape), ARG(offs),
    };
    return pe_cl_launch(be, p, args, PE_ARRAY_SIZE(args), n);
}
