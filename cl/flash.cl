/*
 * flash.cl - posenc_attention in one pass (internal.h, struct pe_attn_fused_op): scores,
 * soft-capping, the ALiBi / relative bias, the mask (times a per-head slope), the causal
 * mask, an online softmax with sinks and the weighted sum of V, without the logits in
 * memory. The host (src/opencl/ops_flash.c) lists the argument order and picks the sizes.
 *
 * pe_flash: one work-group of FA_WG work-items per (key chunk, block of FA_RG rows of
 * FA_HB K/V heads, batch). The rows of a K/V head are its (query, query head) pairs, heads inner:
 * row j of the head is query j / group, head hk*group + j % group. So a work-group shares
 * every K and V element it reads among the group's query heads (GQA) and neighbouring
 * queries (prefill). The chunk's keys stream through in tiles of FA_WG keys:
 *   1. scores: work-item t takes key k0 + t and computes x for each of the FA_R rows
 *      (q rows held in local memory, f32 dot products) into sc[r][t];
 *   2. work-item r < FA_R scans row r of the tile: its max mt, the new running max
 *      mn = max(m, mt) and the rescale factor alpha = exp(m - mn) (1 while mn = -inf);
 *   3. work-item t replaces sc[r][t] by p = exp(x - mn) (exactly 0 for x = -inf);
 *   4. work-item r < FA_R keeps the running sum l_r = l_r*alpha + sum_t p[r][t]; the
 *      outputs are dealt to the work-items in groups of FA_VW dims (4- or 8-wide loads of
 *      v), FA_LANES work-items per group taking a run of the tile's keys each, each
 *      keeping acc = acc*alpha + sum_t p[r][t] * v[g, t] for every row; the lanes' sums
 *      are added at the end (in lane order).
 * One rescale per tile and row (not per key). Keys past the chunk, past the causal
 * limit of the block's last row, and rows past the head's last are -inf / skipped.
 * FA_SPLIT = 0 (one chunk): the work-group finishes the rows itself, with the sink:
 *   M = max(m, sink), dst = acc*exp(m - M) / (l*exp(m - M) + exp(sink - M)), 0 when
 *   M = -inf (every key masked and no finite sink).
 * FA_SPLIT = 1: it writes (m, l, acc[Dv]) to the partials buffer, row-major by (row,
 * chunk), and pe_flash_merge combines the chunks of each row with the same formula.
 *
 * Everything is f32 arithmetic; f16 tensors are read with vload_half and dst written
 * with vstore_half_rte (no cl_khr_fp16). Index arithmetic is 64-bit; offsets and strides
 * are in each tensor's own elements.
 *
 * Options (-D): FA_FLAGS, whose bits are FA_Q_F16, FA_K_F16, FA_V_F16, FA_M_F16, FA_T_F16,
 * FA_O_F16 (storage types of q, k, v, the mask, the relative-bias table, dst); FA_ALIBI,
 * FA_RELBIAS, FA_MASK, FA_MSLOPE, FA_SOFTCAP, FA_SINKS, FA_SPLIT; the sizes listed above
 * pe_flash.
 */

/* The flags (FA_FLAGS, decoded in common.cl) and the sizes (1 unless given:
 * pe_flash_merge is built with the flags only). */
#ifndef FA_FLAGS
#error "FA_FLAGS: the host passes it (src/opencl/ops_flash.c); common.cl decodes its bits"
#endif
#ifndef FA_QG
#define FA_QG 0
#endif
#ifndef FA_KW
#define FA_KW 1
#endif
#ifndef FA_VW
#define FA_VW 1
#endif
#ifndef FA_WG
#define FA_WG 1
#endif
#ifndef FA_HB
#define FA_HB 1
#endif
#ifndef FA_RG
#define FA_RG 1
#endif
#ifndef FA_DQ
#define FA_DQ 1
#endif
#ifndef FA_NVG
#define FA_NVG 1
#endif
#ifndef FA_LANES
#define FA_LANES 1
#endif
#ifndef FA_VGPW
#define FA_VGPW 1
#endif
#ifndef FA_SC
#define FA_SC 1
#endif

/* n-wide loads (n = 1, 4, 8) of f32 or f16 elements p[i .. i+n), i a multiple of n
 * (FA_MAD, FA_LOAD and FA_CAT: common.cl) */
#if FA_KW == 1
#define FA_KT float
#define FA_LOAD_K(i) FA_LOAD(FA_K_F16, k, (i))
#define FA_HSUM(a) (a)
#else
#define FA_KT FA_CAT(float, FA_KW)
#if FA_K_F16
#define FA_LOAD_K(i) FA_CAT(vload_half, FA_KW)(0, (__global const half *)k + (i))
#else
#define FA_LOAD_K(i) FA_CAT(vload, FA_KW)(0, (__global const float *)k + (i))
#endif
#if FA_KW == 4
#define FA_HSUM(a) (((a).s0 + (a).s1) + ((a).s2 + (a).s3))
#elif FA_KW == 16
#define FA_HSUM8(a) ((((a).s0 + (a).s1) + ((a).s2 + (a).s3)) + (((a).s4 + (a).s5) + ((a).s6 + (a).s7)))
#define FA_HSUM(a) (FA_HSUM8((a).lo) + FA_HSUM8((a).hi))
#else
#define FA_HSUM(a) ((((a).s0 + (a).s1) + ((a).s2 + (a).s3)) + (((a).s4 + (a).s5) + ((a).s6 + (a).s7)))
#endif
#endif
#if FA_VW == 1
#define FA_VT float
#define FA_LOAD_V(i) FA_LOAD(FA_V_F16, v, (i))
#define FA_VEL(a, e) (a)
#else
#define FA_VT FA_CAT(float, FA_VW)
#if FA_V_F16
#define FA_LOAD_V(i) FA_CAT(vload_half, FA_VW)(0, (__global const half *)v + (i))
#else
#define FA_LOAD_V(i) FA_CAT(vload, FA_VW)(0, (__global const float *)v + (i))
#endif
#define FA_VEL(a, e) ((float *)&(a))[(e)]
#endif

/*
 * NDRange (FA_WG * n_chunks, n_blocks, ceil(Hk / FA_HB) * B), local (FA_WG, 1, 1).
 *   dims   (D, Dv, group, Tq)       shape  (Hq, Tk, B, chunk length in keys)
 *   offs   (q_offset, k_offset, causal, rel_min)   aoffs (ALiBi q_offset, k_offset,
 *          causal, symmetric)
 *   slopes f32 [Hq] (ALiBi), mslopes f32 [Hq] (mask slopes), buckets int32 (relative
 *   bias, index rel - rel_min), the relative-bias table view, the sinks (f32, off, st).
 * A work-group takes FA_HB K/V heads (hk0 = FA_HB * (group id 2 % ceil(Hk / FA_HB)))
 * and, of each, the FA_RG rows blk*FA_RG ...: row r = hb*FA_RG + rr of the group is head
 * hk0 + hb's row blk*FA_RG + rr. Several heads per group (CPU devices, decode) make the
 * group read whole key rows of every head, contiguous in memory, instead of one head's
 * slices a key stride apart.
 * Sizes (host): FA_KW / FA_VW the widths of the k / v loads (1, 4, 8 or 16: k rows, v rows
 * unit-stride, their starts multiples of the width, D / Dv multiples of it); FA_DQ = D;
 * FA_NVG = Dv / FA_VW groups of output dims per head, FA_NG = FA_HB * FA_NVG in all;
 * FA_LANES work-items per group (a run of the tile's keys each, their sums added at the
 * end; FA_LANES * FA_NG <= FA_WG) and FA_VGPW groups per work-item (FA_LANES = 1 when
 * FA_NG > FA_WG); FA_SC the score tile's floats, at least FA_R * FA_WG and FA_LANES *
 * FA_NG * FA_VW (it is reused for the lanes' sums). FA_R = FA_HB * FA_RG <= FA_WG.
 */
#define FA_R (FA_HB * FA_RG)
#define FA_NG (FA_HB * FA_NVG)

/* RoPE on k (FA_KROT, common.cl): dim i of the key row at kr (elements st0 apart), and
 * dims [i, i + FA_KW) of a unit-stride row, rotated with the key's row kt of the table.
 * The pair's other dim is loaded too (a second read of the same row, from cache). The
 * vector form needs the window's start, and with NeoX pairs its half, on multiples of
 * FA_KW (the host loads k a dim at a time otherwise). */
#if FA_KROT
static inline float fa_krot1(__global const void *k, const long kr, const long st0, const int i,
                             __global const float *kt)
{
    const float x = FA_LOAD(FA_K_F16, k, kr + i * st0);
    if (i < FA_KR_OFF || i >= FA_KR_END)
        return x;
    const int a = FA_KR_A(i), b = FA_KR_B(i);
    const float c = kt[a], s = kt[b];
    const float y = FA_LOAD(FA_K_F16, k, kr + (i == a ? b : a) * st0);
    return i == a ? x * c - y * s : y * s + x * c;
}
#if FA_KW > 1
static inline FA_KT fa_krotv(__global const void *k, const long kr, const int i,
                             __global const float *kt)
{
    const FA_KT x = FA_LOAD_K(kr + i);
    if (i + FA_KW <= FA_KR_OFF || i >= FA_KR_END)
        return x;
#if FA_KR_ADJ
    const FA_KT t = FA_CAT(vload, FA_KW)(0, kt + i);
    const FA_KT c = shuffle(t, FA_CAT(FA_KR_M, FA_KW)(0, 0));
    const FA_KT s = shuffle(t, FA_CAT(FA_KR_M, FA_KW)(1, 1));
    const FA_KT sw = shuffle(x, FA_CAT(FA_KR_M, FA_KW)(1, 0));
    const FA_KT r = x * c + sw * (s * FA_CAT(FA_KR_SGN, FA_KW));
    if (i + FA_KW <= FA_KR_END)
        return r;
    FA_KT out = x; /* the window ends inside these dims */
    for (int e = 0; e < FA_KR_END - i; e++)
        ((float *)&out)[e] = ((const float *)&r)[e];
    return out;
#else
    if (i < FA_KR_OFF + FA_KR_P) {
        const FA_KT y = FA_LOAD_K(kr + i + FA_KR_P);
        const FA_KT c = FA_CAT(vload, FA_KW)(0, kt + i);
        const FA_KT s = FA_CAT(vload, FA_KW)(0, kt + i + FA_KR_P);
        return x * c - y * s;
    }
    const FA_KT y = FA_LOAD_K(kr + i - FA_KR_P);
    const FA_KT c = FA_CAT(vload, FA_KW)(0, kt + i - FA_KR_P);
    const FA_KT s = FA_CAT(vload, FA_KW)(0, kt + i);
    return y * s + x * c;
#endif
}
#endif
#define FA_K1(kr, i, st0) fa_krot1(k, (kr), (st0), (int)(i), kt)
#define FA_KV(kr, i) fa_krotv(k, (kr), (int)(i), kt)
#else
#define FA_K1(kr, i, st0) FA_LOAD(FA_K_F16, k, (kr) + (i) * (st0))
#define FA_KV(kr, i) FA_LOAD_K((kr) + (i))
#endif

__kernel void pe_flash(__global void *dst, const long o_off, const long4 o_st,
                       __global const void *q, const long q_off, const long4 q_st,
                       __global const void *k, const long k_off, const long4 k_st,
                       __global const void *v, const long v_off, const long4 v_st,
                       __global const void *mk, const long m_off, const long4 m_st,
                       __global const void *rtab, const long r_off, const long4 r_st,
                       __global const int *buckets, __global const float *slopes,
                       __global const float *mslopes, __global const float *sinks,
                       const long s_off, const long s_st, __global float *part,
                       const long4 dims, const long4 shape, const long4 offs,
                       const long4 aoffs, const float scale, const float softcap,
                       __global const float *krot, const long kr_off, const long4 kr_st)
{
#if FA_QG
    __local long row_qb[FA_R]; /* q rows read from global memory (tiny local memory) */
#else
    __local float qs[FA_R * FA_DQ];
#endif
    __local float sc[FA_SC];
    __local float m_run[FA_R], alpha[FA_R], l_fin[FA_R];
    __local long row_q[FA_R], row_m[FA_R];
    __local int row_h[FA_R];

    const int lid = (int)get_local_id(0);
    const long chunk = (long)get_group_id(0);
    const long blk = (long)get_group_id(1);
    const long hgb = (long)get_group_id(2);
    const long D = dims.s0, Dv = dims.s1, group = dims.s2, Tq = dims.s3;
    const long Hq = shape.s0, Tk = shape.s1, CK = shape.s3;
    const long Hk = Hq / group;
    const long n_hg = (Hk + FA_HB - 1) / FA_HB;
    const long hk0 = (hgb % n_hg) * FA_HB, b = hgb / n_hg;
    const int nh = (int)min((long)FA_HB, Hk - hk0);          /* heads of this group */
    const long row0 = blk * FA_RG;
    const int nrr = (int)min((long)FA_RG, group * Tq - row0); /* rows of each head */

    /* the rows: head, query, mask row; q into local memory */
    for (int r = lid; r < FA_R; r += FA_WG) {
        const long j = row0 + r % FA_RG;
        const long iq = j / group, h = (hk0 + r / FA_RG) * group + j % group;
        row_h[r] = (int)h;
        row_q[r] = iq;
        row_m[r] = m_off + iq * m_st.s1 + h * m_st.s2 + b * m_st.s3;
        m_run[r] = -INFINITY;
    }
#if FA_QG
    for (int r = lid; r < FA_R; r += FA_WG) {
        const long j = row0 + r % FA_RG;
        const long iq = j / group, h = (hk0 + r / FA_RG) * group + j % group;
        row_qb[r] = q_off + h * q_st.s1 + iq * q_st.s2 + b * q_st.s3;
    }
#else
    for (long e = lid; e < (long)FA_R * FA_DQ; e += FA_WG) {
        const int r = (int)(e / FA_DQ);
        const long i = e % FA_DQ;
        float val = 0.0f;
        if (r / FA_RG < nh && r % FA_RG < nrr) {
            const long j = row0 + r % FA_RG;
            const long iq = j / group, h = (hk0 + r / FA_RG) * group + j % group;
            val = FA_LOAD(FA_Q_F16, q, q_off + i * q_st.s0 + h * q_st.s1 + iq * q_st.s2 +
                                           b * q_st.s3);
        }
        qs[e] = val;
    }
#endif
    barrier(CLK_LOCAL_MEM_FENCE);

    /* the keys of this chunk, cut at the causal limit of the block's last query */
    const long iq_last = (row0 + nrr - 1) / group;
    const long k_beg = chunk * CK;
    long k_end = min(Tk, k_beg + CK);
    if (offs.s2 != 0)
        k_end = min(k_end, iq_last + offs.s0 - offs.s1 + 1);
#if FA_ALIBI
    if (aoffs.s2 != 0)
        k_end = min(k_end, iq_last + aoffs.s0 - aoffs.s1 + 1);
#endif

    /* this work-item's outputs: groups gi = g0 + j*FA_WG (j < FA_VGPW) of FA_VW dims, group
     * gi being head hk0 + gi / FA_NVG's dims (gi % FA_NVG)*FA_VW ...; lane: its keys */
    const int lane = lid / FA_NG;
    const int g0 = FA_LANES > 1 ? lid % FA_NG : lid;
    const bool pv_on = lane < FA_LANES;
    FA_VT acc[FA_RG][FA_VGPW];
    for (int r = 0; r < FA_RG; r++)
        for (int j = 0; j < FA_VGPW; j++)
            acc[r][j] = (FA_VT)0.0f;
    float l_own = 0.0f; /* work-item r < FA_R: row r's running sum */

    for (long k0 = k_beg; k0 < k_end; k0 += FA_WG) {
        /* ---- 1. the scores of key k0 + lid, head by head ---- */
        const long kk = k0 + lid;
        const long kp = kk + offs.s1;
        for (int hb = 0; hb < FA_HB; hb++) {
            if (kk >= k_end || hb >= nh) {
                for (int rr = 0; rr < FA_RG; rr++)
                    sc[(hb * FA_RG + rr) * FA_WG + lid] = -INFINITY;
                continue;
            }
            FA_KT a[FA_RG];
#pragma unroll
            for (int rr = 0; rr < FA_RG; rr++)
                a[rr] = (FA_KT)0.0f;
            const long kr = k_off + (hk0 + hb) * k_st.s1 + b * k_st.s3 + kk * k_st.s2;
#if FA_KROT
            __global const float *kt = krot + kr_off + kk * kr_st.s2 + b * kr_st.s3;
#endif
#if FA_QG /* FA_KW == 1 */
            for (long i = 0; i < FA_DQ; i++) {
                const float kx = FA_K1(kr, i, k_st.s0);
                for (int rr = 0; rr < FA_RG; rr++)
                    if (rr < nrr)
                        a[rr] = FA_MAD(FA_LOAD(FA_Q_F16, q, row_qb[hb * FA_RG + rr] +
                                                                i * q_st.s0),
                                       kx, a[rr]);
            }
#elif FA_KW == 1
            __local const float *qh = qs + hb * FA_RG * FA_DQ;
            for (long i = 0; i < FA_DQ; i++) {
                const float kx = FA_K1(kr, i, k_st.s0);
#pragma unroll
                for (int rr = 0; rr < FA_RG; rr++)
                    a[rr] = FA_MAD(qh[rr * FA_DQ + i], kx, a[rr]);
            }
#else
            __local const float *qh = qs + hb * FA_RG * FA_DQ;
            /* unrolled: each load of the row is its own instruction, whose address
             * advances by a key's stride from one work-item to the next (CPU
             * implementations then prefetch it) */
#pragma unroll
            for (long i = 0; i < FA_DQ; i += FA_KW) {
                const FA_KT kx = FA_KV(kr, i);
#pragma unroll
                for (int rr = 0; rr < FA_RG; rr++)
                    a[rr] = FA_MAD(FA_CAT(vload, FA_KW)(0, qh + rr * FA_DQ + i), kx, a[rr]);
            }
#endif
            for (int rr = 0; rr < FA_RG; rr++) {
                const int r = hb * FA_RG + rr;
                float x = -INFINITY;
                if (rr < nrr) {
                    x = scale * FA_HSUM(a[rr]);
#if FA_SOFTCAP
                    x = softcap * tanh(x / softcap);
#endif
                    const long h = row_h[r], iq = row_q[r];
#if FA_ALIBI
                    const long aqp = iq + aoffs.s0, akp = kk + aoffs.s1;
                    long dist = aqp - akp;
                    if (aoffs.s3 != 0 && dist < 0)
                        dist = -dist;
                    x = (aoffs.s2 != 0 && akp > aqp) ? -INFINITY
                                                     : x + -(slopes[h] * convert_float_rte(dist));
#endif
#if FA_RELBIAS
                    const long u = buckets[kp - (iq + offs.s0) - offs.s3];
                    x = x + FA_LOAD(FA_T_F16, rtab, r_off + u * r_st.s0 + h * r_st.s1);
#endif
#if FA_MASK
                    const float mv = FA_LOAD(FA_M_F16, mk, row_m[r] + kk * m_st.s0);
#if FA_MSLOPE
                    x = x + mslopes[h] * mv;
#else
                    x = x + mv;
#endif
#endif
                    if (offs.s2 != 0 && kp > iq + offs.s0)
                        x = -INFINITY;
                }
                sc[r * FA_WG + lid] = x;
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);

        /* ---- 2. the running max of each row and its rescale factor ---- */
        for (int r = lid; r < FA_R; r += FA_WG) {
            float mt = -INFINITY;
            for (int t = 0; t < FA_WG; t++)
                mt = fmax(mt, sc[r * FA_WG + t]);
            const float mo = m_run[r];
            const float mn = fmax(mo, mt);
            alpha[r] = mn == -INFINITY ? 1.0f : exp(mo - mn);
            m_run[r] = mn;
        }
        barrier(CLK_LOCAL_MEM_FENCE);

        /* ---- 3. the probabilities of key k0 + lid ---- */
        for (int r = 0; r < FA_R; r++) {
            const float x = sc[r * FA_WG + lid];
            sc[r * FA_WG + lid] = x == -INFINITY ? 0.0f : exp(x - m_run[r]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);

        /* ---- 4. the running sums and outputs ---- */
        const int nt = (int)min((long)FA_WG, k_end - k0);
        if (lid < FA_R) {
            float s = 0.0f;
            for (int t = 0; t < nt; t++)
                s += sc[lid * FA_WG + t];
            l_own = l_own * alpha[lid] + s;
        }
        if (pv_on) {
            for (int j = 0; j < FA_VGPW; j++) {
                const int gi = g0 + j * FA_WG;
                const int hb = gi / FA_NVG, g = gi % FA_NVG;
                if (gi >= FA_NG || hb >= nh)
                    continue;
                const long kv = v_off + (hk0 + hb) * v_st.s1 + b * v_st.s3;
#if FA_VW == 1
                const long vb = kv + (long)g * v_st.s0 + k0 * v_st.s2;
#else
                const long vb = kv + (long)g * FA_VW + k0 * v_st.s2;
#endif
                /* in registers for the loop (acc lives across barriers: in memory on
                 * implementations that run a group's work-items in turn) */
                FA_VT ra[FA_RG];
#pragma unroll
                for (int rr = 0; rr < FA_RG; rr++)
                    ra[rr] = acc[rr][j] * alpha[hb * FA_RG + rr];
                /* lane L takes the L-th run of the tile's keys: a constant stride */
                const int tr = (nt + FA_LANES - 1) / FA_LANES;
                const int t_end = min(nt, (lane + 1) * tr);
                __local const float *ph = sc + hb * FA_RG * FA_WG;
                for (int t = lane * tr; t < t_end; t++) {
                    const FA_VT vx = FA_LOAD_V(vb + t * v_st.s2);
#pragma unroll
                    for (int rr = 0; rr < FA_RG; rr++)
                        ra[rr] = FA_MAD((FA_VT)ph[rr * FA_WG + t], vx, ra[rr]);
                }
#pragma unroll
                for (int rr = 0; rr < FA_RG; rr++)
                    acc[rr][j] = ra[rr];
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE); /* sc is rewritten by the next tile */
    }

    if (lid < FA_R)
        l_fin[lid] = l_own;
    barrier(CLK_LOCAL_MEM_FENCE);

    for (int rr = 0; rr < FA_RG; rr++) {
        if (rr >= nrr)
            break; /* the same in every work-item: the barriers below stay uniform */
        /* the lanes' sums of row rr of each head, added by lane 0 (in lane order) */
        FA_VT o = acc[rr][0];
#if FA_LANES > 1
        if (pv_on)
            for (int e = 0; e < FA_VW; e++)
                sc[(lane * FA_NG + g0) * FA_VW + e] = FA_VEL(acc[rr][0], e);
        barrier(CLK_LOCAL_MEM_FENCE);
        if (lane == 0)
            for (int L = 1; L < FA_LANES; L++)
                for (int e = 0; e < FA_VW; e++)
                    FA_VEL(o, e) += sc[(L * FA_NG + g0) * FA_VW + e];
        barrier(CLK_LOCAL_MEM_FENCE);
        if (lane != 0)
            continue;
#endif
        for (int j = 0; j < FA_VGPW; j++) {
            const int gi = g0 + j * FA_WG;
            const int hb = gi / FA_NVG, g = gi % FA_NVG;
            if (!pv_on || gi >= FA_NG || hb >= nh)
                continue;
#if FA_LANES == 1
            if (j > 0)
                o = acc[rr][j];
#endif
            const int r = hb * FA_RG + rr;
            const float m = m_run[r], l = l_fin[r];
            const long h = row_h[r], iq = row_q[r];
#if FA_SPLIT
            /* partial (m, l, acc) of row (h, iq, b), chunk `chunk` */
            const long pr = (h + Hq * (iq + Tq * b)) * (long)get_num_groups(0) + chunk;
            __global float *pp = part + pr * (Dv + 2);
            if (g == 0) {
                pp[0] = m;
                pp[1] = l;
            }
#else
            const float sink = fa_sink(sinks, s_off, s_st, h);
            const float M = fmax(m, sink);
            float f = 0.0f, inv = 0.0f;
            if (M != -INFINITY) {
                f = exp(m - M); /* 0 for m = -inf */
                inv = 1.0f / (l * f + exp(sink - M));
            }
            const long ob = o_off + h * o_st.s1 + iq * o_st.s2 + b * o_st.s3;
#endif
            for (int e = 0; e < FA_VW; e++) {
                const long d = (long)g * FA_VW + e;
#if FA_SPLIT
                pp[2 + d] = FA_VEL(o, e);
#else
                const float y = M == -INFINITY ? 0.0f : FA_VEL(o, e) * f * inv;
#if FA_O_F16
                vstore_half_rte(y, (size_t)(ob + d * o_st.s0), (__global half *)dst);
#else
                ((__global float *)dst)[ob + d * o_st.s0] = y;
#endif
#endif
            }
        }
    }
}

/*
 * pe_flash_merge: one work-item per (d, row), row = h + Hq*(iq + Tq*b): the n_chunks
 * partials (m_c, l_c, acc_c) of the row combine into
 *   M = max(max_c m_c, sink),  dst_d = sum_c acc_c,d e_c / (sum_c l_c e_c + exp(sink - M)),
 *   e_c = exp(m_c - M) (0 for m_c = -inf);  M = -inf: dst_d = 0.
 * NDRange (Dv, Hq*Tq*B, 1); dims (Dv, Hq, Tq, n_chunks).
 */
__kernel void pe_flash_merge(__global void *dst, const long o_off, const long4 o_st,
                             __global const float *part, __global const float *sinks,
                             const long s_off, const long s_st, const long4 dims,
                             const long n_rows)
{
    const long d = (long)get_global_id(0);
    const long row = (long)get_global_id(1);
    const long Dv = dims.s0, Hq = dims.s1, Tq = dims.s2, nc = dims.s3;
    if (d >= Dv || row >= n_rows)
        return;
    const long h = row % Hq, iq = (row / Hq) % Tq, b = row / (Hq * Tq);
    __global const float *pp = part + row * nc * (Dv + 2);
    const float sink = fa_sink(sinks, s_off, s_st, h);
    const float M = fa_merge_max(pp, nc, Dv + 2, sink);
    float o = 0.0f;
    if (M != -INFINITY) {
        float l = 0.0f, a = 0.0f;
        for (long c = 0; c < nc; c++) {
            const float m = pp[c * (Dv + 2)];
            if (m == -INFINITY)
                continue;
            const float e = exp(m - M);
            l += pp[c * (Dv + 2) + 1] * e;
            a += pp[c * (Dv + 2) + 2 + d] * e;
        }
        o = a / (l + exp(sink - M));
    }
    const long oi = o_off + d * o_st.s0 + h * o_st.s1 + iq * o_st.s2 + b * o_st.s3;
#if FA_O_F16
    vstore_half_rte(o, (size_t)oi, (__global half *)dst);
#else
    ((__global float *)dst)[oi] = o;
#endif
}
