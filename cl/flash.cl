/*
 * flash.cl - posenc_attention in one pass (internal.h, struct pe_attn_fused_op): scores,
 * soft-capping, the ALiBi / relative bias, the mask (times a per-head slope), the causal
 * mask, an online softmax with sinks and the weighted sum of V, without the logits in
 * memory. The host (src/opencl/ops_flash.c) lists the argument order and picks the sizes.
 *
 * pe_flash: one work-group of FA_WG work-items per (key chunk, block of FA_R rows, K/V
 * head and batch). The rows of a K/V head are its (query, query head) pairs, heads inner:
 * row j of the head is query j / group, head hk*group + j % group. So a work-group shares
 * every K and V element it reads among the group's query heads (GQA) and neighbouring
 * queries (prefill). The chunk's keys stream through in tiles of FA_WG keys:
 *   1. scores: work-item t takes key k0 + t and computes x for each of the FA_R rows
 *      (q rows held in local memory, f32 dot products) into sc[r][t];
 *   2. work-item r < FA_R scans row r of the tile: its max mt, the new running max
 *      mn = max(m, mt) and the rescale factor alpha = exp(m - mn) (1 while mn = -inf);
 *   3. work-item t replaces sc[r][t] by p = exp(x - mn) (exactly 0 for x = -inf);
 *   4. work-item r < FA_R keeps the running sum l_r = l_r*alpha + sum_t p[r][t]; every
 *      work-item keeps the outputs it owns, dims d = lid + j*FA_WG (j < FA_DPW), for
 *      every row: acc = acc*alpha + sum_t p[r][t] * v[d, t].
 * One rescale per tile and row (not per key). Keys past the chunk, past the causal
 * limit of the block's last row, and rows past the head's last are -inf / skipped.
 * FA_SPLIT = 0 (one chunk): the work-group finishes the rows itself, with the sink:
 *   M = max(m, sink), dst = acc*exp(m - M) / (l*exp(m - M) + exp(sink - M)), 0 when
 *   M = -inf (every key masked and no finite sink).
 * FA_SPLIT = 1: it writes (m, l, acc[Dv]) to the partials buffer, row-major by (chunk,
 * row), and pe_flash_merge combines the chunks of each row with the same formula.
 *
 * Everything is f32 arithmetic; f16 tensors are read with vload_half and dst written
 * with vstore_half_rte (no cl_khr_fp16). Index arithmetic is 64-bit; offsets and strides
 * are in each tensor's own elements.
 *
 * Options (-D, 0 or 1 unless said): FA_Q_F16, FA_K_F16, FA_V_F16, FA_M_F16, FA_T_F16,
 * FA_O_F16 (storage types of q, k, v, the mask, the relative-bias table, dst); FA_K4 (k rows unit-stride and 4-aligned, D %
 * 4 == 0: 4-wide loads); FA_V1 (v's dim 0 is unit-stride); FA_ALIBI, FA_RELBIAS, FA_MASK,
 * FA_MSLOPE, FA_SOFTCAP, FA_SINKS, FA_SPLIT; sizes FA_WG (work-group and key tile, a power
 * of two), FA_R (rows per work-group), FA_DQ (D, the q rows' length in local memory),
 * FA_DPW (ceil(Dv / FA_WG)).
 */

/* Every option defaults to 0 (sizes to 1): pe_flash_merge is built with only its own. */
#ifndef FA_Q_F16
#define FA_Q_F16 0
#endif
#ifndef FA_K_F16
#define FA_K_F16 0
#endif
#ifndef FA_V_F16
#define FA_V_F16 0
#endif
#ifndef FA_M_F16
#define FA_M_F16 0
#endif
#ifndef FA_T_F16
#define FA_T_F16 0
#endif
#ifndef FA_O_F16
#define FA_O_F16 0
#endif
#ifndef FA_K4
#define FA_K4 0
#endif
#ifndef FA_V1
#define FA_V1 0
#endif
#ifndef FA_ALIBI
#define FA_ALIBI 0
#endif
#ifndef FA_RELBIAS
#define FA_RELBIAS 0
#endif
#ifndef FA_MASK
#define FA_MASK 0
#endif
#ifndef FA_MSLOPE
#define FA_MSLOPE 0
#endif
#ifndef FA_SOFTCAP
#define FA_SOFTCAP 0
#endif
#ifndef FA_SINKS
#define FA_SINKS 0
#endif
#ifndef FA_SPLIT
#define FA_SPLIT 0
#endif
#ifndef FA_WG
#define FA_WG 1
#endif
#ifndef FA_R
#define FA_R 1
#endif
#ifndef FA_DQ
#define FA_DQ 1
#endif
#ifndef FA_DPW
#define FA_DPW 1
#endif

#define FA_LOAD(f16, p, i) ((f16) ? vload_half((size_t)(i), (__global const half *)(p)) \
                                  : ((__global const float *)(p))[(i)])

#if FA_K4
#if FA_K_F16
#define FA_LOAD_K4(p, i) vload_half4(0, (__global const half *)(p) + (i))
#else
#define FA_LOAD_K4(p, i) vload4(0, (__global const float *)(p) + (i))
#endif
#endif

/*
 * NDRange (FA_WG * n_chunks, n_blocks, Hk * B), local (FA_WG, 1, 1).
 *   dims   (D, Dv, group, Tq)       shape  (Hq, Tk, B, chunk length in keys)
 *   offs   (q_offset, k_offset, causal, rel_min)   aoffs (alibi q_offset, k_offset,
 *          alibi causal, alibi symmetric)
 *   tabs: slopes f32 [Hq] (ALiBi), mslopes f32 [Hq] (mask slopes), buckets int32,
 *   the relative-bias table view, the sinks (f32, off, st).
 */
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
                       const long4 aoffs, const float scale, const float softcap)
{
    __local float qs[FA_R * FA_DQ];
    __local float sc[FA_R * FA_WG];
    __local float m_run[FA_R], alpha[FA_R], l_fin[FA_R];
    __local long row_q[FA_R], row_m[FA_R];
    __local int row_h[FA_R];

    const int lid = (int)get_local_id(0);
    const long chunk = (long)get_group_id(0);
    const long blk = (long)get_group_id(1);
    const long hb = (long)get_group_id(2);
    const long D = dims.s0, Dv = dims.s1, group = dims.s2, Tq = dims.s3;
    const long Hq = shape.s0, Tk = shape.s1, CK = shape.s3;
    const long Hk = Hq / group;
    const long hk = hb % Hk, b = hb / Hk;
    const long n_rows = group * Tq;
    const long row0 = blk * FA_R;
    const int nr = (int)min((long)FA_R, n_rows - row0);

    /* the rows: head, query position, mask row base; q into local memory */
    for (int r = lid; r < FA_R; r += FA_WG) {
        const long j = row0 + r;
        const long iq = j / group, h = hk * group + j % group;
        row_h[r] = (int)h;
        row_q[r] = iq;
        row_m[r] = m_off + iq * m_st.s1 + h * m_st.s2 + b * m_st.s3;
        m_run[r] = -INFINITY;
    }
    for (long e = lid; e < (long)FA_R * D; e += FA_WG) {
        const int r = (int)(e / D);
        const long i = e % D;
        float val = 0.0f;
        if (r < nr) {
            const long j = row0 + r;
            const long iq = j / group, h = hk * group + j % group;
            val = FA_LOAD(FA_Q_F16, q, q_off + i * q_st.s0 + h * q_st.s1 + iq * q_st.s2 +
                                           b * q_st.s3);
        }
        qs[r * FA_DQ + i] = val;
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    /* the keys of this chunk, cut at the causal limit of the block's last row */
    long k_beg = chunk * CK, k_end = min(Tk, k_beg + CK);
    const long qp_last = row_q[nr - 1] + offs.s0;
    if (offs.s2 != 0)
        k_end = min(k_end, qp_last - offs.s1 + 1);
#if FA_ALIBI
    if (aoffs.s2 != 0)
        k_end = min(k_end, row_q[nr - 1] + aoffs.s0 - aoffs.s1 + 1);
#endif

    float acc[FA_R][FA_DPW];
    for (int r = 0; r < FA_R; r++)
        for (int j = 0; j < FA_DPW; j++)
            acc[r][j] = 0.0f;
    float l_own = 0.0f; /* work-item r < FA_R: row r's running sum */

    const long kv_k = k_off + hk * k_st.s1 + b * k_st.s3;
    const long kv_v = v_off + hk * v_st.s1 + b * v_st.s3;

    for (long k0 = k_beg; k0 < k_end; k0 += FA_WG) {
        /* ---- 1. scores of key k0 + lid ---- */
        const long kk = k0 + lid;
        if (kk < k_end) {
            float a[FA_R];
            for (int r = 0; r < FA_R; r++)
                a[r] = 0.0f;
            const long kr = kv_k + kk * k_st.s2;
#if FA_K4
            for (long i = 0; i < D; i += 4) {
                const float4 kx = FA_LOAD_K4(k, kr + i);
                for (int r = 0; r < FA_R; r++) {
                    const float4 qx = vload4(0, qs + r * FA_DQ + i);
                    a[r] += qx.x * kx.x + qx.y * kx.y + qx.z * kx.z + qx.w * kx.w;
                }
            }
#else
            for (long i = 0; i < D; i++) {
                const float kx = FA_LOAD(FA_K_F16, k, kr + i * k_st.s0);
                for (int r = 0; r < FA_R; r++)
                    a[r] += qs[r * FA_DQ + i] * kx;
            }
#endif
            const long kp = kk + offs.s1;
            for (int r = 0; r < FA_R; r++) {
                float x = -INFINITY;
                if (r < nr) {
                x = scale * a[r];
#if FA_SOFTCAP
                x = softcap * tanh(x / softcap);
#endif
                const long h = row_h[r], iq = row_q[r];
#if FA_ALIBI
                {
                    const long aqp = iq + aoffs.s0, akp = kk + aoffs.s1;
                    long dist = aqp - akp;
                    if (aoffs.s3 != 0 && dist < 0)
                        dist = -dist;
                    x = (aoffs.s2 != 0 && akp > aqp) ? -INFINITY
                                                     : x + -(slopes[h] * convert_float_rte(dist));
                }
#endif
#if FA_RELBIAS
                {
                    const long rel = kp - (iq + offs.s0);
                    const long u = buckets[rel - offs.s3];
                    x = x + FA_LOAD(FA_T_F16, rtab, r_off + u * r_st.s0 + h * r_st.s1);
                }
#endif
#if FA_MASK
                {
                    const float mv = FA_LOAD(FA_M_F16, mk, row_m[r] + kk * m_st.s0);
#if FA_MSLOPE
                    x = x + mslopes[h] * mv;
#else
                    x = x + mv;
#endif
                }
#endif
                if (offs.s2 != 0 && kp > iq + offs.s0)
                    x = -INFINITY;
                }
                sc[r * FA_WG + lid] = x;
            }
        } else {
            for (int r = 0; r < FA_R; r++)
                sc[r * FA_WG + lid] = -INFINITY;
        }
        barrier(CLK_LOCAL_MEM_FENCE);

        /* ---- 2. the running max of each row ---- */
        if (lid < FA_R) {
            float mt = -INFINITY;
            for (int t = 0; t < FA_WG; t++)
                mt = fmax(mt, sc[lid * FA_WG + t]);
            const float mo = m_run[lid];
            const float mn = fmax(mo, mt);
            alpha[lid] = mn == -INFINITY ? 1.0f : exp(mo - mn);
            m_run[lid] = mn;
        }
        barrier(CLK_LOCAL_MEM_FENCE);

        /* ---- 3. probabilities of key k0 + lid ---- */
        for (int r = 0; r < FA_R; r++) {
            const float x = sc[r * FA_WG + lid];
            sc[r * FA_WG + lid] = x == -INFINITY ? 0.0f : exp(x - m_run[r]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);

        /* ---- 4. running sums and outputs ---- */
        const int nt = (int)min((long)FA_WG, k_end - k0);
        if (lid < FA_R) {
            float s = 0.0f;
            for (int t = 0; t < nt; t++)
                s += sc[lid * FA_WG + t];
            l_own = l_own * alpha[lid] + s;
        }
        for (int r = 0; r < FA_R; r++) {
            const float al = alpha[r];
            for (int j = 0; j < FA_DPW; j++)
                acc[r][j] *= al;
        }
        for (int j = 0; j < FA_DPW; j++) {
            const long d = lid + (long)j * FA_WG;
            if (d < Dv) {
#if FA_V1
                const long vb = kv_v + d;
#else
                const long vb = kv_v + d * v_st.s0;
#endif
                for (int t = 0; t < nt; t++) {
                    const float vx = FA_LOAD(FA_V_F16, v, vb + (k0 + t) * v_st.s2);
                    for (int r = 0; r < FA_R; r++)
                        acc[r][j] += sc[r * FA_WG + t] * vx;
                }
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE); /* sc is rewritten by the next tile */
    }

    if (lid < FA_R)
        l_fin[lid] = l_own;
    barrier(CLK_LOCAL_MEM_FENCE);

    for (int r = 0; r < FA_R; r++) {
        if (r >= nr)
            break;
        const float m = m_run[r], l = l_fin[r];
        const long h = row_h[r], iq = row_q[r];
#if FA_SPLIT
        /* partial (m, l, acc) of row (h, iq, b), chunk `chunk` */
        const long pr = (h + Hq * (iq + Tq * b)) * (long)get_num_groups(0) + chunk;
        __global float *pp = part + pr * (Dv + 2);
        if (lid == 0) {
            pp[0] = m;
            pp[1] = l;
        }
        for (int j = 0; j < FA_DPW; j++) {
            const long d = lid + (long)j * FA_WG;
            if (d < Dv)
                pp[2 + d] = acc[r][j];
        }
#else
#if FA_SINKS
        const float sink = sinks[s_off + h * s_st];
#else
        const float sink = -INFINITY;
#endif
        const float M = fmax(m, sink);
        float f = 0.0f, inv = 0.0f;
        if (M != -INFINITY) {
            f = exp(m - M); /* 0 for m = -inf */
            inv = 1.0f / (l * f + exp(sink - M));
        }
        for (int j = 0; j < FA_DPW; j++) {
            const long d = lid + (long)j * FA_WG;
            if (d < Dv) {
                const float o = M == -INFINITY ? 0.0f : acc[r][j] * f * inv;
                const long oi = o_off + d * o_st.s0 + h * o_st.s1 + iq * o_st.s2 + b * o_st.s3;
#if FA_O_F16
                vstore_half_rte(o, (size_t)oi, (__global half *)dst);
#else
                ((__global float *)dst)[oi] = o;
#endif
            }
        }
#endif
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
#if FA_SINKS
    const float sink = sinks[s_off + h * s_st];
#else
    const float sink = -INFINITY;
#endif
    float M = sink;
    for (long c = 0; c < nc; c++)
        M = fmax(M, pp[c * (Dv + 2)]);
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
