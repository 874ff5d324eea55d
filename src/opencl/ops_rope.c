/*
 * ops_rope.c - the OpenCL host side of RoPE (cl/rope.cl: posenc_rope, posenc_rope_qk,
 * posenc_rope_rerotate and posenc_rope_set_rows), the sinusoidal encoding
 * (cl/sinusoidal.cl) and posenc_copy (cl/copy.cl).
 *
 * RoPE and sinusoidal pick a kernel by the tensors' alignment and the device (scalar, 8
 * pairs per work-item, or one work-item per token on CPU devices), remember the program
 * of each variant (pe_cl_memo_find) and keep their small host tables in persistent device
 * buffers (pe_cl_table). The argument order of every kernel is listed at the top of
 * backend_opencl.c.
 */
#include "backend_opencl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ------------------------------------------------------------------------- */

/* Whether two views are the same elements (in place). The front end guarantees that a
 * destination is either exactly its input or disjoint from it. */
static bool same_view(const struct pe_view *a, const struct pe_view *b)
{
    return a->mem == b->mem && a->dtype == b->dtype && a->offset == b->offset &&
           a->st[0] == b->st[0] && a->st[1] == b->st[1] && a->st[2] == b->st[2] &&
           a->st[3] == b->st[3];
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
    const size_t global[3] = {(size_t)g[0], (size_t)g[1], (size_t)g[2]};
    return pe_cl_enqueue(be, p, args, n_args, global, l);
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

/* ---- copy ---------------------------------------------------------------------------- */

posenc_status pe_cl_copy(struct pe_backend *base, const struct pe_copy_op *op)
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
        PE_RETURN_IF_ERROR(pe_cl_get_program(be, "copy.cl", "pe_copy_flat", defines, &p));
        const struct pe_cl_arg args[] = {ARG(dst_mem), ARG(dst_off), ARG(src_mem), ARG(src_off),
                                         ARG(count)};
        const uint64_t nd[3] = {(uint64_t)(count + 3) / 4, 1, 1};
        return pe_cl_launch(be, p, args, PE_ARRAY_SIZE(args), nd);
    }
    PE_RETURN_IF_ERROR(pe_cl_get_program(be, "copy.cl", "pe_copy", defines, &p));
    const cl_long4 dst_st = view_st(dst), src_st = view_st(src);
    const cl_long4 shape = long4_of(dst->ne[0], dst->ne[1], dst->ne[2], dst->ne[3]);
    const struct pe_cl_arg args[] = {ARG(dst_mem), ARG(dst_off), ARG(dst_st), ARG(src_mem),
                                     ARG(src_off), ARG(src_st), ARG(shape)};
    const uint64_t nd[3] = {(uint64_t)dst->ne[0], (uint64_t)dst->ne[1],
                            (uint64_t)dst->ne[2] * (uint64_t)dst->ne[3]};
    return pe_cl_launch(be, p, args, PE_ARRAY_SIZE(args), nd);
}

/* ---- sinusoidal ---------------------------------------------------------------------- */


posenc_status pe_cl_sinusoidal(struct pe_backend *base, const struct pe_sinusoidal_op *op)
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
    /* op 2 = sinusoidal (see pe_cl_rope) */
    const uint64_t memo_key = 2u | (uint64_t)dst_f16 << 8 | (uint64_t)has_x << 9 |
                              (uint64_t)x_f16 << 10 | (uint64_t)pos_i32 << 11 |
                              (uint64_t)nt << 12 | (uint64_t)vec << 13 | (uint64_t)tok << 14 |
                              (uint64_t)nh << 24 | (uint64_t)tb << 40;
    struct pe_cl_program *p = pe_cl_memo_find(be, memo_key);
    if (!p) {
        char defines[PE_CL_OPTS_MAX];
        char nh_def[40] = "";
        if (tok)
            snprintf(nh_def, sizeof(nh_def), " -DPE_NH=%d -DPE_TB=%d", nh, tb);
        snprintf(defines, sizeof(defines),
                 "-DDST_F16=%d -DHAS_X=%d -DX_F16=%d -DPOS_I32=%d -DPE_CPU_ORDER=%d "
                 "-DPE_FMA=%d -DPE_NT_STORE=%d%s",
                 dst_f16, has_x, x_f16, pos_i32, pe_cl_is_cpu(be), be->hw_fma, nt, nh_def);
        PE_RETURN_IF_ERROR(pe_cl_get_program(be, "sinusoidal.cl",
                                             tok   ? "pe_sinusoidal_tok"
                                             : vec ? "pe_sinusoidal_vec"
                                                   : "pe_sinusoidal",
                                             defines, &p));
        pe_cl_memo_put(be, memo_key, p);
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


posenc_status pe_cl_rope(struct pe_backend *base, const struct pe_rope_op *op)
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
    struct pe_cl_program *p = pe_cl_memo_find(be, memo_key);
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
        PE_RETURN_IF_ERROR(pe_cl_get_program(be, "rope.cl",
                                             tok   ? "pe_rope_tok"
                                             : vec ? "pe_rope_vec"
                                                   : "pe_rope",
                                             defines, &p));
        pe_cl_memo_put(be, memo_key, p);
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
