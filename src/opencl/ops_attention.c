/*
 * ops_attention.c - the OpenCL host side of posenc_attention's three steps (internal.h).
 *
 * The two matrix products go through CLBlast when posenc was built with its header
 * (POSENC_HAVE_CLBLAST) and libclblast loads at run time (pe_clblast_load, on the first
 * attention call of the process), on the backend's own in-order queue, so they are
 * ordered with posenc's kernels like any other launch:
 *
 *   scores  for every (h, b):  L_hb (Tq x Tk) = scale * Q_hb (Tq x D) . K_hb^T
 *           Q_hb row q = q[:, h, q, b], K_hb row k = k[:, h / group, k, b]
 *   output  for every (h, b):  O_hb (Tq x Dv) = P_hb (Tq x Tk) . V_hb (Tk x Dv)
 *
 * both row-major, one batch per (h, b): CLBlastSgemmStridedBatched when the batch offsets
 * of A, B and C are arithmetic progressions (one K/V head per query head, or a single K/V
 * head, and a uniform batch stride; one (h, b) too), else CLBlastSgemmBatched with one
 * offset per batch (GQA: K/V head h / group). An operand
 * is used in place when it is f32 with unit element stride and a row stride >= its row
 * length; otherwise (f16, a strided or broadcast view) pe_attn_copy first packs it into
 * an f32 temporary. The output GEMM writes a packed f32 temporary that pe_attn_copy then
 * stores into dst (any view, f32 or f16): beta = 0, but the user's dst is never handed
 * to CLBlast, so its old contents (NaN included) cannot leak into the result.
 *
 * f16 is storage only in posenc (f32 arithmetic everywhere): f16 operands are widened by
 * pe_attn_copy and multiplied with CLBlastSgemm*, never CLBlastHgemm*, which computes and
 * accumulates in half precision (and returns CLBlastNoHalfPrecision on devices without
 * cl_khr_fp16, such as PoCL).
 *
 * Without CLBlast (not built, not loadable, or POSENC_CL_NO_CLBLAST=1 in the environment,
 * to test this path), pe_attn_scores / pe_attn_output compute one element per work-item
 * over strided views.
 * The softmax is always posenc's pe_attn_softmax (one work-group per row).
 *
 * Kernel argument order (cl/attention.cl; every "mem, long, long4" triple is a tensor:
 * buffer, offset and strides in its own elements):
 *
 *   pe_attn_softmax  (-DHAS_X (mask) -DX_F16 -DHAS_W -DDST_F16 (weights), -DPE_ATTN_WG
 *                    (pe_cl_reduce_wg: its __local array))
 *     0-2   logits             f32 [Tk, Tq, Hq, B], read and written
 *     3-5   mask               f32 or f16, strides 0 where broadcast; logits again without
 *     6-8   weights            f32 or f16; logits again without
 *     9     long4 shape        (Tk, Tq, Hq, B)
 *    10     long4 offs         (q_offset, k_offset, causal, 0)
 *   NDRange (wg, Tq*Hq*B, 1), local (wg, 1, 1), wg a power of two <= PE_ATTN_WG <= 64.
 *
 *   pe_attn_copy  (-DHAS_X=1 -DX_F16 (src) -DDST_F16 (dst))
 *     0-2   dst;  3-5 src;  6 long4 shape (n0, n1, n2, n3).  NDRange (n0, n1, n2*n3).
 *
 *   pe_attn_scores  (-DHAS_X=1 -DX_F16 (q) -DTAB_F16 (k))
 *     0-2   logits f32;  3-5 q;  6-8 k;  9 long4 shape (Tk, Tq, Hq, B);
 *     10    long4 dims (D, group, 0, 0);  11 float scale.   NDRange (Tk, Tq, Hq*B).
 *
 *   pe_attn_output  (-DTAB_F16 (v) -DDST_F16 (dst))
 *     0-2   dst;  3-5 p f32;  6-8 v;  9 long4 shape (Dv, Tq, Hq, B);
 *     10    long4 dims (Tk, group, 0, 0).                     NDRange (Dv, Tq, Hq*B).
 */
#include "backend_opencl.h"
#include "posenc_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PE_ATTN_WG 64 /* the largest work-group asked for (cl/attention.cl's default) */

static posenc_status fail(struct pe_cl_backend *be, const char *call, cl_int err)
{
    return pe_error(be->base.ctx, pe_cl_err_is_oom(err) ? POSENC_ERR_OUT_OF_MEMORY : POSENC_ERR_BACKEND,
                    "%s failed: OpenCL error %d", call, (int)err);
}

/* An f32 buffer of n elements (n > 0), released by the caller once its last use is
 * enqueued (OpenCL keeps it alive until those commands are done). */
static posenc_status tmp_f32(struct pe_cl_backend *be, const char *what, int64_t n, cl_mem *out)
{
    cl_int err = CL_SUCCESS;
    if (n <= 0 || (uint64_t)n > SIZE_MAX / sizeof(float))
        return pe_error(be->base.ctx, POSENC_ERR_OUT_OF_MEMORY,
                        "attention: a temporary of %lld floats (%s) does not fit", (long long)n,
                        what);
    *out = pe_fault_device_alloc()
               ? (err = CL_MEM_OBJECT_ALLOCATION_FAILURE, NULL)
               : clCreateBuffer(be->context, CL_MEM_READ_WRITE, (size_t)n * sizeof(float), NULL,
                                &err);
    if (!*out || err != CL_SUCCESS) {
        *out = NULL;
        char call[96];
        snprintf(call, sizeof(call), "clCreateBuffer(attention %s, %lld floats)", what,
                 (long long)n);
        return fail(be, call, err != CL_SUCCESS ? err : CL_MEM_OBJECT_ALLOCATION_FAILURE);
    }
    return POSENC_OK;
}

/* dst <- src element by element (same ne), converting the storage type. */
static posenc_status copy_view(struct pe_cl_backend *be, const struct pe_view *dst,
                               const struct pe_view *src)
{
    char defines[PE_CL_OPTS_MAX];
    snprintf(defines, sizeof(defines), "-DDST_F16=%d -DHAS_X=1 -DX_F16=%d", is_f16(dst),
             is_f16(src));
    struct pe_cl_program *p = NULL;
    PE_RETURN_IF_ERROR(pe_cl_get_program(be, "attention.cl", "pe_attn_copy", defines, &p));
    cl_mem dst_mem = (cl_mem)dst->mem, src_mem = (cl_mem)src->mem;
    const cl_long dst_off = dst->offset, src_off = src->offset;
    const cl_long4 dst_st = view_st(dst), src_st = view_st(src);
    const cl_long4 shape = long4_of(src->ne[0], src->ne[1], src->ne[2], src->ne[3]);
    const struct pe_cl_arg args[] = {ARG(dst_mem), ARG(dst_off), ARG(dst_st),
                                     ARG(src_mem), ARG(src_off), ARG(src_st), ARG(shape)};
    const uint64_t n[3] = {(uint64_t)src->ne[0], (uint64_t)src->ne[1],
                           (uint64_t)src->ne[2] * (uint64_t)src->ne[3]};
    return pe_cl_launch(be, p, args, PE_ARRAY_SIZE(args), n);
}

/* A packed f32 view [ne] of buffer `mem`. */
static struct pe_view packed_view(cl_mem mem, const int64_t ne[4])
{
    struct pe_view v;
    memset(&v, 0, sizeof(v));
    v.mem = mem;
    v.dtype = POSENC_DTYPE_F32;
    for (int i = 0; i < 4; i++)
        v.ne[i] = ne[i];
    v.st[0] = 1;
    v.st[1] = ne[0];
    v.st[2] = ne[0] * ne[1];
    v.st[3] = ne[0] * ne[1] * ne[2];
    return v;
}

#if POSENC_HAVE_CLBLAST

/* Whether the GEMMs go through CLBlast: not with POSENC_CL_NO_CLBLAST=1, and only when
 * libclblast loads (once per process); otherwise posenc's own kernels, and one DEBUG line
 * per context names what was looked for. */
static int use_clblast(struct pe_cl_backend *be)
{
    const char *e = getenv("POSENC_CL_NO_CLBLAST");
    if (e && e[0] && strcmp(e, "0") != 0)
        return 0;
    const char *why = NULL;
    if (pe_clblast_load(&why))
        return 1;
    if (!be->clblast_logged) {
        be->clblast_logged = 1;
        pe_log(be->base.ctx, POSENC_LOG_DEBUG, "opencl: %s; attention uses posenc's own GEMM "
               "kernels", why);
    }
    return 0;
}

/* The packed-logits guarantee of internal.h, checked (a GEMM writes C with ldc = Tk). */
static bool logits_packed(const struct pe_view *l)
{
    return l->st[0] == 1 && l->st[1] == l->ne[0] && l->st[2] == l->ne[0] * l->ne[1] &&
           l->st[3] == l->ne[0] * l->ne[1] * l->ne[2];
}

/* CLBlast passes offsets and sizes to its kernels as int: every element a GEMM touches
 * must have an index below 2^31 (else the one-work-item-per-element kernels run). */
static bool int_indexed(const struct pe_view *v)
{
    int64_t last = v->offset;
    for (int i = 0; i < 4; i++)
        last += (v->ne[i] - 1) * v->st[i];
    return last < INT32_MAX && v->ne[0] * v->ne[1] * v->ne[2] * v->ne[3] < INT32_MAX;
}

/* A GEMM operand used in place: f32, unit element stride, row stride >= its row length. */
static bool gemm_in_place(const struct pe_view *v)
{
    return v->dtype == POSENC_DTYPE_F32 && v->st[0] == 1 && v->st[2] >= v->ne[0];
}

static int64_t n_elems(const struct pe_view *v)
{
    return v->ne[0] * v->ne[1] * v->ne[2] * v->ne[3];
}

/* The temporary of `slot` (ATTN_*) for n floats: the one pe_cl_attn_prepare made, or (a
 * step called without it) a new one that *owned then holds. */
enum { ATTN_Q, ATTN_K, ATTN_V, ATTN_O };

static posenc_status attn_tmp(struct pe_cl_backend *be, int slot, const char *what, int64_t n,
                              cl_mem *out, cl_mem *owned)
{
    *owned = NULL;
    if (be->attn_tmp[slot] && be->attn_tmp_n[slot] >= n) {
        *out = be->attn_tmp[slot];
        return POSENC_OK;
    }
    PE_RETURN_IF_ERROR(tmp_f32(be, what, n, owned));
    *out = *owned;
    return POSENC_OK;
}

/* A GEMM operand: rows along dim 2 of a [n0, heads, rows, B] view, n0 columns. Either the
 * view itself (gemm_in_place) or a packed f32 copy in the temporary of `slot` (*owned holds
 * it when this step had to make it: release it after the GEMM is enqueued). */
static posenc_status gemm_operand(struct pe_cl_backend *be, int slot, const char *what,
                                  const struct pe_view *v, struct pe_view *out, cl_mem *owned)
{
    *owned = NULL;
    if (gemm_in_place(v)) {
        *out = *v;
        return POSENC_OK;
    }
    cl_mem mem = NULL;
    PE_RETURN_IF_ERROR(attn_tmp(be, slot, what, n_elems(v), &mem, owned));
    *out = packed_view(mem, v->ne);
    posenc_status st = copy_view(be, out, v);
    if (st != POSENC_OK && *owned) {
        pe_cl_release_mem(be, *owned);
        *owned = NULL;
    }
    return st;
}

static posenc_status clblast_fail(struct pe_cl_backend *be, const char *routine,
                                  const char *what, size_t m, size_t n, size_t k, size_t batches,
                                  CLBlastStatusCode code)
{
    posenc_status st = pe_cl_err_is_oom((cl_int)code) ? POSENC_ERR_OUT_OF_MEMORY : POSENC_ERR_BACKEND;
    return pe_error(be->base.ctx, st,
                    "%s (attention %s: m = %zu, n = %zu, k = %zu, %zu batches) failed: CLBlast "
                    "status %d",
                    routine, what, m, n, k, batches, (int)code);
}

/* True when off[i] = off[0] + i*stride for every i (stride >= 0). */
static bool arithmetic(const size_t *off, size_t n, size_t *stride)
{
    *stride = n > 1 ? off[1] - off[0] : 0;
    if (n > 1 && off[1] < off[0])
        return false;
    for (size_t i = 1; i < n; i++)
        if (off[i] != off[0] + i * *stride)
            return false;
    return true;
}

/* The batch lists of one GEMM of `batches` matrices in the backend's scratch (grown only,
 * struct pe_cl_backend): three offset lists and the alpha / beta lists, any may be NULL.
 * The scores and output GEMMs of posenc_attention have the same batch count, and
 * attn_scores runs first: only it can allocate, before anything is written. */
static posenc_status gemm_lists(struct pe_cl_backend *be, size_t batches, size_t **o0,
                                size_t **o1, size_t **o2, float **alphas, float **betas)
{
    const size_t bytes = batches * (3 * sizeof(size_t) + 2 * sizeof(float));
    if (batches > SIZE_MAX / (4 * sizeof(size_t)))
        return pe_error(be->base.ctx, POSENC_ERR_OUT_OF_MEMORY,
                        "out of host memory for %zu GEMM batches", batches);
    if (bytes > be->gemm_scratch_cap) {
        void *grown = malloc(bytes);
        if (!grown)
            return pe_error(be->base.ctx, POSENC_ERR_OUT_OF_MEMORY,
                            "out of host memory for %zu GEMM batches", batches);
        free(be->gemm_scratch);
        be->gemm_scratch = grown;
        be->gemm_scratch_cap = bytes;
    }
    size_t *offs = be->gemm_scratch;
    float *f = (float *)(offs + 3 * batches);
    if (o0)
        *o0 = offs;
    if (o1)
        *o1 = offs + batches;
    if (o2)
        *o2 = offs + 2 * batches;
    if (alphas)
        *alphas = f;
    if (betas)
        *betas = f + batches;
    return POSENC_OK;
}

/*
 * One row-major GEMM per batch i:  C_i (m x n) = alpha * A_i (m x k) . op(B_i)  with
 * op(B) = B^T (B_i stored n x k) when b_trans, else B (stored k x n); beta = 0.
 */
static posenc_status batched_gemm(struct pe_cl_backend *be, const char *what, bool b_trans,
                                  size_t m, size_t n, size_t k, float alpha, cl_mem a,
                                  const size_t *a_off, size_t lda, cl_mem b, const size_t *b_off,
                                  size_t ldb, cl_mem c, const size_t *c_off, size_t ldc,
                                  size_t batches)
{
    const CLBlastTranspose tb = b_trans ? CLBlastTransposeYes : CLBlastTransposeNo;
    size_t sa, sb, sc;
    CLBlastStatusCode code;
    /* One routine for every regular batch pattern (a single batch too), so a device
     * compiles at most two CLBlast programs. CLBlast 1.5.3 rejects a zero C stride
     * (CLBlastInvalidDimension), even for one batch. A zero A / B stride (a K/V head shared
     * by every batch, GQA) is accepted but gave wrong results on PoCL for 2 x 2048 x 2048
     * (posenc verify's attention/rope .../Hq=2/Hk=1/Tq=2048/Tk=2048 case: zeros and inf
     * in dst; fine at 1024): such batches take CLBlastSgemmBatched with explicit offsets. */
    if (arithmetic(a_off, batches, &sa) && arithmetic(b_off, batches, &sb) &&
        arithmetic(c_off, batches, &sc) && (batches == 1 || (sa > 0 && sb > 0 && sc > 0))) {
        if (batches == 1)
            sc = 1;
        be->used_clblast = 1;
        PE_RETURN_IF_ERROR(pe_cl_before_enqueue(be));
        /* CLBlast's event is its last kernel's: on the in-order queue, the whole GEMM's */
        cl_event ev = NULL;
        code = CLBlastSgemmStridedBatched(CLBlastLayoutRowMajor, CLBlastTransposeNo, tb, m, n, k,
                                          alpha, a, a_off[0], lda, sa, b, b_off[0], ldb, sb, 0.0f,
                                          c, c_off[0], ldc, sc, batches, &be->queue, &ev);
        if (code != CLBlastSuccess)
            return clblast_fail(be, "CLBlastSgemmStridedBatched", what, m, n, k, batches, code);
        pe_cl_track(be, ev);
        return POSENC_OK;
    }
    float *alphas = NULL, *betas = NULL; /* set by gemm_lists (gcc -O3 cannot tell) */
    PE_RETURN_IF_ERROR(gemm_lists(be, batches, NULL, NULL, NULL, &alphas, &betas));
    for (size_t i = 0; i < batches; i++) {
        alphas[i] = alpha;
        betas[i] = 0.0f;
    }
    be->used_clblast = 1;
    PE_RETURN_IF_ERROR(pe_cl_before_enqueue(be));
    cl_event ev = NULL;
    code = CLBlastSgemmBatched(CLBlastLayoutRowMajor, CLBlastTransposeNo, tb, m, n, k, alphas, a,
                               a_off, lda, b, b_off, ldb, betas, c, c_off, ldc, batches,
                               &be->queue, &ev);
    if (code != CLBlastSuccess)
        return clblast_fail(be, "CLBlastSgemmBatched", what, m, n, k, batches, code);
    pe_cl_track(be, ev);
    return POSENC_OK;
}

/* Per-batch element offsets of the (h, b) matrices, batch i = h + Hq*b, into off. For K/V
 * views (kv), head h reads head h / group. */
static size_t *batch_offsets(size_t *off, const struct pe_view *v, int64_t Hq, int64_t B,
                             int64_t group, int head_dim, int batch_dim)
{
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++)
            off[h + Hq * b] =
                (size_t)(v->offset + (h / group) * v->st[head_dim] + b * v->st[batch_dim]);
    return off;
}

static posenc_status clblast_scores(struct pe_cl_backend *be, const struct pe_attn_scores_op *op)
{
    const int64_t D = op->q.ne[0], Hq = op->q.ne[1], Tq = op->q.ne[2], B = op->q.ne[3];
    const int64_t Tk = op->k.ne[2];
    const struct pe_view *l = &op->logits;
    struct pe_view qv, kv;
    cl_mem q_tmp = NULL, k_tmp = NULL;
    size_t *qo = NULL, *ko = NULL, *lo = NULL;
    posenc_status st = gemm_operand(be, ATTN_Q, "q", &op->q, &qv, &q_tmp);
    if (st == POSENC_OK)
        st = gemm_operand(be, ATTN_K, "k", &op->k, &kv, &k_tmp);
    if (st == POSENC_OK)
        st = gemm_lists(be, (size_t)(Hq * B), &qo, &ko, &lo, NULL, NULL);
    if (st == POSENC_OK) {
        batch_offsets(qo, &qv, Hq, B, 1, 1, 3);
        batch_offsets(ko, &kv, Hq, B, op->group, 1, 3);
        batch_offsets(lo, l, Hq, B, 1, 2, 3);
    }
    if (st == POSENC_OK)
        st = batched_gemm(be, "scores", true, (size_t)Tq, (size_t)Tk, (size_t)D, op->scale_f32,
                          (cl_mem)qv.mem, qo, (size_t)qv.st[2], (cl_mem)kv.mem, ko,
                          (size_t)kv.st[2], (cl_mem)l->mem, lo, (size_t)l->st[1],
                          (size_t)(Hq * B));
    if (q_tmp)
        pe_cl_release_mem(be, q_tmp);
    if (k_tmp)
        pe_cl_release_mem(be, k_tmp);
    return st;
}

static posenc_status clblast_output(struct pe_cl_backend *be, const struct pe_attn_output_op *op)
{
    const struct pe_view *d = &op->dst, *p = &op->p;
    const int64_t Dv = d->ne[0], Hq = d->ne[1], Tq = d->ne[2], B = d->ne[3];
    const int64_t Tk = p->ne[0];
    struct pe_view vv, ov;
    cl_mem v_tmp = NULL, o_tmp = NULL, o_mem = NULL;
    size_t *po = NULL, *vo = NULL, *oo = NULL;
    posenc_status st = gemm_operand(be, ATTN_V, "v", &op->v, &vv, &v_tmp);
    if (st == POSENC_OK)
        st = attn_tmp(be, ATTN_O, "output", Dv * Hq * Tq * B, &o_mem, &o_tmp);
    if (st == POSENC_OK)
        st = gemm_lists(be, (size_t)(Hq * B), &po, &vo, &oo, NULL, NULL);
    if (st == POSENC_OK) {
        ov = packed_view(o_mem, d->ne);
        batch_offsets(po, p, Hq, B, 1, 2, 3);
        batch_offsets(vo, &vv, Hq, B, op->group, 1, 3);
        batch_offsets(oo, &ov, Hq, B, 1, 1, 3);
    }
    if (st == POSENC_OK)
        st = batched_gemm(be, "output", false, (size_t)Tq, (size_t)Dv, (size_t)Tk, 1.0f,
                          (cl_mem)p->mem, po, (size_t)p->st[1], (cl_mem)vv.mem, vo,
                          (size_t)vv.st[2], o_mem, oo, (size_t)ov.st[2], (size_t)(Hq * B));
    if (st == POSENC_OK)
        st = copy_view(be, d, &ov);
    if (v_tmp)
        pe_cl_release_mem(be, v_tmp);
    if (o_tmp)
        pe_cl_release_mem(be, o_tmp);
    return st;
}

#endif /* POSENC_HAVE_CLBLAST */

posenc_status pe_cl_attn_scores(struct pe_backend *base, const struct pe_attn_scores_op *op)
{
    struct pe_cl_backend *be = (struct pe_cl_backend *)base;
    const struct pe_view *l = &op->logits, *q = &op->q, *k = &op->k;
#if POSENC_HAVE_CLBLAST
    if (use_clblast(be) && logits_packed(l) && int_indexed(l) && int_indexed(q) && int_indexed(k))
        return clblast_scores(be, op);
#endif
    char defines[PE_CL_OPTS_MAX];
    snprintf(defines, sizeof(defines), "-DHAS_X=1 -DX_F16=%d -DTAB_F16=%d", is_f16(q), is_f16(k));
    struct pe_cl_program *p = NULL;
    PE_RETURN_IF_ERROR(pe_cl_get_program(be, "attention.cl", "pe_attn_scores", defines, &p));
    cl_mem l_mem = (cl_mem)l->mem, q_mem = (cl_mem)q->mem, k_mem = (cl_mem)k->mem;
    const cl_long l_off = l->offset, q_off = q->offset, k_off = k->offset;
    const cl_long4 l_st = view_st(l), q_st = view_st(q), k_st = view_st(k);
    const cl_long4 shape = long4_of(l->ne[0], l->ne[1], l->ne[2], l->ne[3]);
    const cl_long4 dims = long4_of(q->ne[0], op->group, 0, 0);
    const cl_float scale = op->scale_f32;
    const struct pe_cl_arg args[] = {ARG(l_mem), ARG(l_off), ARG(l_st),  ARG(q_mem),
                                     ARG(q_off), ARG(q_st),  ARG(k_mem), ARG(k_off),
                                     ARG(k_st),  ARG(shape), ARG(dims),  ARG(scale)};
    const uint64_t n[3] = {(uint64_t)l->ne[0], (uint64_t)l->ne[1],
                           (uint64_t)l->ne[2] * (uint64_t)l->ne[3]};
    return pe_cl_launch(be, p, args, PE_ARRAY_SIZE(args), n);
}

/* pe_attn_softmax's -D options (the same for pe_cl_attn_prepare and the launch); returns
 * the reduction's largest work-group, from the device's limits (the __local array's size). */
static size_t attn_softmax_defines(const struct pe_cl_backend *be,
                                   const struct pe_attn_softmax_op *op, char *defines,
                                   size_t size)
{
    const struct pe_view *l = &op->logits;
    const bool has_mask = op->mask.mem != NULL, has_w = op->weights.mem != NULL;
    const struct pe_view *mk = has_mask ? &op->mask : l, *w = has_w ? &op->weights : l;
    const size_t wg_max = pe_cl_reduce_wg(be, PE_ATTN_WG, sizeof(cl_float));
    snprintf(defines, size, "-DHAS_X=%d -DX_F16=%d -DHAS_W=%d -DDST_F16=%d -DPE_ATTN_WG=%zu",
             has_mask, has_mask && is_f16(mk), has_w, has_w && is_f16(w), wg_max);
    return wg_max;
}

posenc_status pe_cl_attn_softmax(struct pe_backend *base, const struct pe_attn_softmax_op *op)
{
    struct pe_cl_backend *be = (struct pe_cl_backend *)base;
    const struct pe_view *l = &op->logits;
    const bool has_mask = op->mask.mem != NULL, has_w = op->weights.mem != NULL;
    const struct pe_view *mk = has_mask ? &op->mask : l, *w = has_w ? &op->weights : l;
    char defines[PE_CL_OPTS_MAX];
    const size_t wg_max = attn_softmax_defines(be, op, defines, sizeof(defines));
    struct pe_cl_program *p = NULL;
    PE_RETURN_IF_ERROR(pe_cl_get_program(be, "attention.cl", "pe_attn_softmax", defines, &p));

    cl_mem l_mem = (cl_mem)l->mem, mk_mem = (cl_mem)mk->mem, w_mem = (cl_mem)w->mem;
    const cl_long l_off = l->offset, mk_off = mk->offset, w_off = w->offset;
    const cl_long4 l_st = view_st(l), mk_st = view_st(mk), w_st = view_st(w);
    const cl_long4 shape = long4_of(l->ne[0], l->ne[1], l->ne[2], l->ne[3]);
    const cl_long4 offs = long4_of(op->q_offset, op->k_offset, op->causal ? 1 : 0, 0);
    const struct pe_cl_arg args[] = {ARG(l_mem), ARG(l_off), ARG(l_st),  ARG(mk_mem),
                                     ARG(mk_off), ARG(mk_st), ARG(w_mem), ARG(w_off),
                                     ARG(w_st),  ARG(shape), ARG(offs)};
    PE_RETURN_IF_ERROR(pe_cl_set_args(be, p, args, PE_ARRAY_SIZE(args)));
    /* one work-group per row: the largest power of two <= wg_max the kernel allows */
    size_t cap = wg_max;
    if (p->kernel_wg_size < cap)
        cap = p->kernel_wg_size;
    size_t wg = 1;
    while (wg * 2 <= cap)
        wg *= 2;
    const uint64_t rows = (uint64_t)l->ne[1] * (uint64_t)l->ne[2] * (uint64_t)l->ne[3];
    if (rows > (uint64_t)SIZE_MAX)
        return pe_error(base->ctx, POSENC_ERR_UNSUPPORTED,
                        "pe_attn_softmax: %llu rows do not fit this device's size_t",
                        (unsigned long long)rows);
    const size_t global[3] = {wg, (size_t)rows, 1}, local[3] = {wg, 1, 1};
    if (be->base.prepare_only)
        return POSENC_OK;
    PE_RETURN_IF_ERROR(pe_cl_before_enqueue(be));
    cl_event ev = NULL;
    cl_int err = clEnqueueNDRangeKernel(be->queue, p->kernel, 3, NULL, global, local, 0, NULL,
                                        &ev);
    if (err != CL_SUCCESS)
        return fail(be, "clEnqueueNDRangeKernel(pe_attn_softmax)", err);
    pe_cl_track(be, ev);
    return POSENC_OK;
}

posenc_status pe_cl_attn_output(struct pe_backend *base, const struct pe_attn_output_op *op)
{
    struct pe_cl_backend *be = (struct pe_cl_backend *)base;
    const struct pe_view *d = &op->dst, *pv = &op->p, *v = &op->v;
#if POSENC_HAVE_CLBLAST
    if (use_clblast(be) && logits_packed(pv) && int_indexed(pv) && int_indexed(v) &&
        int_indexed(d))
        return clblast_output(be, op);
#endif
    char defines[PE_CL_OPTS_MAX];
    snprintf(defines, sizeof(defines), "-DTAB_F16=%d -DDST_F16=%d", is_f16(v), is_f16(d));
    struct pe_cl_program *p = NULL;
    PE_RETURN_IF_ERROR(pe_cl_get_program(be, "attention.cl", "pe_attn_output", defines, &p));
    cl_mem d_mem = (cl_mem)d->mem, p_mem = (cl_mem)pv->mem, v_mem = (cl_mem)v->mem;
    const cl_long d_off = d->offset, p_off = pv->offset, v_off = v->offset;
    const cl_long4 d_st = view_st(d), p_st = view_st(pv), v_st = view_st(v);
    const cl_long4 shape = long4_of(d->ne[0], d->ne[2], d->ne[1], d->ne[3]);
    const cl_long4 dims = long4_of(pv->ne[0], op->group, 0, 0);
    const struct pe_cl_arg args[] = {ARG(d_mem), ARG(d_off), ARG(d_st),  ARG(p_mem),
                                     ARG(p_off), ARG(p_st),  ARG(v_mem), ARG(v_off),
                                     ARG(v_st),  ARG(shape), ARG(dims)};
    const uint64_t n[3] = {(uint64_t)d->ne[0], (uint64_t)d->ne[2],
                           (uint64_t)d->ne[1] * (uint64_t)d->ne[3]};
    return pe_cl_launch(be, p, args, PE_ARRAY_SIZE(args), n);
}

/*
 * Everything a posenc_attention call's steps can fail to acquire, acquired before its
 * first launch (backend.h, attn_prepare), for the first query block (the largest): the
 * programs of the three steps and of the f32 packs, the CLBlast path's device temporaries
 * (packs of q, k, v that are not usable in place, the output GEMM's result) and its batch
 * lists. The steps then take the temporaries from be->attn_tmp and find their programs
 * built: only a launch itself (an enqueue, a CLBlast call) can still fail after a pass has
 * written dst or weights.
 */
posenc_status pe_cl_attn_prepare(struct pe_backend *base, const struct pe_attn_scores_op *so,
                                 const struct pe_attn_softmax_op *sm,
                                 const struct pe_attn_output_op *oo)
{
    struct pe_cl_backend *be = (struct pe_cl_backend *)base;
    pe_cl_attn_end(base);
    /* the programs asked for from here to pe_cl_attn_end stay in the program cache */
    be->pin_gen++;
    be->pinning = 1;
    char defines[PE_CL_OPTS_MAX];
    struct pe_cl_program *p = NULL;
    attn_softmax_defines(be, sm, defines, sizeof(defines));
    PE_RETURN_IF_ERROR(pe_cl_get_program(be, "attention.cl", "pe_attn_softmax", defines, &p));
    bool gemm_scores = false, gemm_output = false;
#if POSENC_HAVE_CLBLAST
    gemm_scores = use_clblast(be) && logits_packed(&so->logits) && int_indexed(&so->logits) &&
                  int_indexed(&so->q) && int_indexed(&so->k);
    gemm_output = use_clblast(be) && logits_packed(&oo->p) && int_indexed(&oo->p) &&
                  int_indexed(&oo->v) && int_indexed(&oo->dst);
#endif
    if (!gemm_scores) {
        snprintf(defines, sizeof(defines), "-DHAS_X=1 -DX_F16=%d -DTAB_F16=%d", is_f16(&so->q),
                 is_f16(&so->k));
        PE_RETURN_IF_ERROR(pe_cl_get_program(be, "attention.cl", "pe_attn_scores", defines, &p));
    }
    if (!gemm_output) {
        snprintf(defines, sizeof(defines), "-DTAB_F16=%d -DDST_F16=%d", is_f16(&oo->v),
                 is_f16(&oo->dst));
        PE_RETURN_IF_ERROR(pe_cl_get_program(be, "attention.cl", "pe_attn_output", defines, &p));
    }
#if POSENC_HAVE_CLBLAST
    /* the packs (pe_attn_copy into f32) and the temporaries */
    const struct pe_view *packs[4] = {gemm_scores ? &so->q : NULL, gemm_scores ? &so->k : NULL,
                                      gemm_output ? &oo->v : NULL, NULL};
    static const char *const names[4] = {"q", "k", "v", "output"};
    posenc_status st = POSENC_OK;
    for (int i = 0; i < 4 && st == POSENC_OK; i++) {
        int64_t n = 0;
        if (i == ATTN_O && gemm_output) {
            n = n_elems(&oo->dst);
            snprintf(defines, sizeof(defines), "-DDST_F16=%d -DHAS_X=1 -DX_F16=0",
                     is_f16(&oo->dst));
        } else if (packs[i] && !gemm_in_place(packs[i])) {
            n = n_elems(packs[i]);
            snprintf(defines, sizeof(defines), "-DDST_F16=0 -DHAS_X=1 -DX_F16=%d",
                     is_f16(packs[i]));
        }
        if (n == 0)
            continue;
        st = pe_cl_get_program(be, "attention.cl", "pe_attn_copy", defines, &p);
        if (st == POSENC_OK)
            st = tmp_f32(be, names[i], n, &be->attn_tmp[i]);
        if (st == POSENC_OK)
            be->attn_tmp_n[i] = n;
    }
    /* the batch lists of both GEMMs (the same count), grown here if ever */
    if (st == POSENC_OK && (gemm_scores || gemm_output))
        st = gemm_lists(be, (size_t)(so->q.ne[1] * so->q.ne[3]), NULL, NULL, NULL, NULL, NULL);
    if (st != POSENC_OK)
        pe_cl_attn_end(base);
    return st;
#else
    return POSENC_OK;
#endif
}

/* Release what pe_cl_attn_prepare made (OpenCL keeps each buffer until the kernels
 * enqueued on it are done). */
void pe_cl_attn_end(struct pe_backend *base)
{
    struct pe_cl_backend *be = (struct pe_cl_backend *)base;
    be->pinning = 0;
    for (int i = 0; i < 4; i++) {
        if (be->attn_tmp[i])
            pe_cl_release_mem(be, be->attn_tmp[i]);
        be->attn_tmp[i] = NULL;
        be->attn_tmp_n[i] = 0;
    }
}
