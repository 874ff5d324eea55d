/*
 * flash_cpu.cl - posenc_attention in one pass (internal.h, struct pe_attn_fused_op) shaped
 * for CPU devices: the same math as cl/flash.cl's pe_flash, for decode (few rows per K/V
 * head), one work-item per work-group. The host (src/opencl/ops_flash.c) picks it on
 * CPU devices and lists the argument order (pe_flash's, then counts).
 *
 * Why a second kernel: a CPU implementation (PoCL) runs a work-group's work-items in a loop
 * on one core, vectorising across work-items where it can; pe_flash's tiles (a work-item
 * per key, then per output group, barriers between, the score tile in local memory) turn
 * into several passes over context arrays per tile, and its split across many small
 * work-groups reads each key row in slices. Here one work-item does what a CPU thread
 * would: it walks its chunk of keys in order, reading each key's row of every K/V head of
 * its block (contiguous in memory: ne = {D, Hk, Tk}), with explicit FA_KW / FA_VW-wide
 * vectors (vload_halfN / vloadN: no fp16 extension), the q rows and the accumulators in
 * private memory (registers and the L1 cache).
 *
 * pe_flash_cpu: NDRange (n_chunks, ceil(Hk / FA_HB), B), local (1, 1, 1). Work-item
 * (chunk, hbk, b) takes the keys [chunk * CK, min(Tk, (chunk + 1) * CK)) of the FA_HB K/V
 * heads hk0 = hbk * FA_HB ... and their FA_RG = group * Tq rows each (row j of head hk:
 * query j / group, head hk * group + j % group). Per tile of FA_TK keys:
 *   1. x[r][t] = q.k: for each key, each head's k row loaded once (FA_D / FA_KW vectors)
 *      and dotted with the head's FA_RG q rows (f32 products, a lane-wise sum, then the
 *      lanes' sum; with FA_RG = 4, four keys per head at a time and the lanes of the 16
 *      products summed together, or with FA_HEAD_MAJOR head by head, the q rows in
 *      registers);
 *   2. per row, FA_TK / 16 vectors of 16 keys at a time: scale, soft-cap, ALiBi /
 *      relative bias, mask, causal limit and keys past the chunk (-inf); the tile's max
 *      mt, mn = max(m, mt), alpha = exp(m - mn) (1 while mn = -inf), p = exp(x - mn) (0
 *      for x = -inf), l = l*alpha + sum_t p;
 *   3. acc = acc*alpha, then acc[r] += p[r][t] * v[t]: key by key in memory order, FA_KB
 *      keys per pass, every head's v rows (the accumulators in private memory), or with
 *      FA_HEAD_MAJOR head by head over the tile's keys (the accumulators in registers).
 * Memory is read in order (each key's rows of every head of the block: K in step 1, by
 * blocks of 4 keys with FA_RG = 4, V in step 3), which CPU prefetchers follow; head by
 * head, the next tile's rows are prefetched a row per row read (FA_PF_NEXT). The end is
 * pe_flash's: FA_SPLIT = 0 writes dst with the sink, FA_SPLIT = 1 writes the partial (m,
 * l, acc[Dv]) of each row to the partials buffer (row-major by (row, chunk)) for
 * pe_flash_cpu_merge (below).
 *
 * FA_MERGE_LAST = 1 (with FA_SPLIT, CPU devices): the last work-item of each head block to
 * finish merges the block's rows itself (one launch, not two), counting in counts (an int
 * per (head block, batch), zero before the launch and again after it; unused otherwise).
 *
 * Options (-D): FA_FLAGS (cl/flash.cl's bits, decoded in common.cl), FA_FMA, FA_MERGE_LAST,
 * FA_KW / FA_VW (4, 8 or 16: k / v rows unit-stride, their starts multiples of the width,
 * D / Dv multiples of it), FA_D, FA_DV (D, Dv), FA_HB, FA_RG, FA_TK (a multiple of 16 and
 * of FA_KB), FA_KB; FA_KROT with FA_KR_OFF, FA_KR_P, FA_KR_ADJ (RoPE on k: each key row is
 * rotated in registers after it is loaded, fa_krot_row).
 */

#ifndef FA_FLAGS
#error "FA_FLAGS: the host passes it (src/opencl/ops_flash.c); common.cl decodes its bits"
#endif
#ifndef FA_KW
#define FA_KW 4
#endif
#ifndef FA_VW
#define FA_VW 4
#endif
#ifndef FA_D
#define FA_D 4
#endif
#ifndef FA_DV
#define FA_DV 4
#endif
#ifndef FA_HB
#define FA_HB 1
#endif
#ifndef FA_RG
#define FA_RG 1
#endif
#ifndef FA_TK
#define FA_TK 16
#endif
#ifndef FA_KB
#define FA_KB 1
#endif
#ifndef FA_MERGE_LAST
#define FA_MERGE_LAST 0
#endif

/* FA_MAD, FA_LOAD and FA_CAT: common.cl */
#define FA_KT FA_CAT(float, FA_KW)
#define FA_VT FA_CAT(float, FA_VW)
/* k and v rows of halves to floats, FA_KW / FA_VW at a time. On x86 with AVX-512F (PoCL
 * builds for the host's CPU and defines __AVX512F__ there) 16 halves take one vcvtph2ps
 * of a 512-bit register; PoCL's vload_half16 is two 256-bit conversions and an insert
 * (three instructions, eight of them per 64-wide key row of K and of V). Exact, as
 * every f16 -> f32 conversion is; denormal halves convert to normal floats either way. */
#if defined(__AVX512F__) && defined(__has_builtin)
#if __has_builtin(__builtin_ia32_vcvtph2ps512_mask)
#define FA_CVT512 1
#endif
#endif
#ifndef FA_CVT512
#define FA_CVT512 0
#endif
#if FA_CVT512
static inline float16 fa_vload_half16(const size_t i, __global const half *p)
{
    const short16 h = as_short16(vload16(0, (__global const ushort *)p + i * 16));
    return __builtin_ia32_vcvtph2ps512_mask(h, (float16)0.0f, (ushort)0xffff, 4);
}
#define FA_VLOAD_HALF16 fa_vload_half16
#else
#define FA_VLOAD_HALF16 vload_half16
#endif
#define FA_VLOAD_HALF4 vload_half4
#define FA_VLOAD_HALF8 vload_half8
#if FA_K_F16
#define FA_LOAD_K(i) FA_CAT(FA_VLOAD_HALF, FA_KW)(0, (__global const half *)k + (i))
#else
#define FA_LOAD_K(i) FA_CAT(vload, FA_KW)(0, (__global const float *)k + (i))
#endif
#if FA_V_F16
#define FA_LOAD_V(i) FA_CAT(FA_VLOAD_HALF, FA_VW)(0, (__global const half *)v + (i))
#else
#define FA_LOAD_V(i) FA_CAT(vload, FA_VW)(0, (__global const float *)v + (i))
#endif
/* the lanes' sum, pairwise */
#define FA_HSUM4(a) (((a).s0 + (a).s1) + ((a).s2 + (a).s3))
#define FA_HSUM8(a) FA_HSUM4((a).lo + (a).hi)
#define FA_HSUM16(a) FA_HSUM8((a).lo + (a).hi)
#define FA_HSUM(a) FA_CAT(FA_HSUM, FA_KW)(a)
#define FA_HMAX4(a) fmax(fmax((a).s0, (a).s1), fmax((a).s2, (a).s3))
#define FA_HMAX8(a) FA_HMAX4(fmax((a).lo, (a).hi))
#define FA_HMAX16(a) FA_HMAX8(fmax((a).lo, (a).hi))
/* 16 floats of a row of pe_flash_cpu's x (rows 64-byte aligned) at vector sv: one aligned
 * load or store (vload16 / vstore16 promise only a float's alignment; PoCL stored each
 * float16 of the softmax step as four 16-byte pieces) */
#define FA_XL(row, sv) (((const float16 *)(row))[sv])
#define FA_XS(row, sv, val) (((float16 *)(row))[sv] = (val))

/* Software prefetch (where the compiler has clang's __builtin_prefetch: PoCL, and other
 * LLVM-based CPU implementations; OpenCL's prefetch() is a no-op in PoCL): each row is
 * requested FA_TK keys before it is read, in the order the loops read (memory order), a
 * row per row read, so that the requests are spread over the work. */
#if defined(__has_builtin)
#if __has_builtin(__builtin_prefetch)
#define FA_HAVE_PF 1
#endif
#endif
#ifndef FA_HAVE_PF
#define FA_HAVE_PF 0
#endif
#define FA_KES (FA_K_F16 ? 2 : 4)
#define FA_VES (FA_V_F16 ? 2 : 4)
#if FA_HAVE_PF
#define FA_PF_ROW(base, idx, bytes)                                                    \
    do {                                                                                 \
        __global const char *p_ = (__global const char *)(base) + (idx);                 \
        for (int o_ = 0; o_ < (bytes); o_ += 64)                                         \
            __builtin_prefetch(p_ + o_, 0, 1);                                           \
    } while (0)
#else
#define FA_PF_ROW(base, idx, bytes) ((void)0)
#endif

/* The next tile's rows in address order. Where the item's nh heads' rows of a key make one
 * dense block (FA_PF_DENSE: st.s1 = a row of DD elements, st.s2 = nh rows), the loops below
 * request, as they read a row, row R of the block of nh rows a key from key kn
 * (FA_PF_BLOCK_ROW: key kn + R / nh, head R % nh), R counting up over the heads' loops, so
 * that the block is requested from its start to its end; elsewhere the row FA_TK keys
 * after the one read. They use pe_flash_cpu's Tk, b, hk0 and nh; whether K and V are
 * dense is worked out once per work-item (pf_kd, pf_vd). On PoCL (the Zen 4 host,
 * 32|8 heads, f16, K and V from memory, the old and new order alternated call by call in
 * one process, medians, 2026-12-05): d 64 (head by head) 1 x 4096 437-460 against 453-472
 * us, 1 x 32768 2.57 against 2.85 ms, back to back the same (290 us); d 128 (4 keys at a
 * time) 1 x 4096 764-854 against 793-859 us (tenth percentiles 648-674 against 663-718),
 * 1 x 32768 5.45 against 5.78 ms. */
#define FA_PF_DENSE(st, DD) ((st).s1 == (DD) && (st).s2 == nh * (DD))
#define FA_PF_BLOCK_ROW(base, off, st, DD, ES, kn, R)                                     \
    do {                                                                                 \
        if ((long)(R) < (Tk - (kn)) * nh) /* key kn + R / nh < Tk, without a division */ \
            FA_PF_ROW(base, ((off) + b * (st).s3 + (kn) * (st).s2 + hk0 * (st).s1 +      \
                             (long)(R) * (DD)) * (ES), (DD) * (ES));                     \
    } while (0)
/* Head by head (FA_HEAD_MAJOR): at row t of head hb (row: its index), row hb FA_TK + t of
 * the next tile's block (dense: FA_PF_DENSE of st). */
#define FA_PF_NEXT(base, off, st, DD, ES, dense, hb, t, row)                               \
    do {                                                                                 \
        if (dense)                                                                       \
            FA_PF_BLOCK_ROW(base, off, st, DD, ES, k0 + FA_TK, (hb) * FA_TK + (t));       \
        else if (k0 + (t) + FA_TK < Tk)                                                  \
            FA_PF_ROW(base, ((row) + FA_TK * (st).s2) * (ES), (DD) * (ES));              \
    } while (0)

/* 4 rows' lane-wise products with the key row kx (FA_NK vectors), summed over its vectors:
 * c[rr] for the row qa, qb, qc, qd (FA_NK vectors each) */
#define FA_DOT4(qa, qb, qc, qd, kx, c)                                                    \
    do {                                                                                 \
        (c)[0] = (qa)[0] * (kx)[0];                                                      \
        (c)[1] = (qb)[0] * (kx)[0];                                                      \
        (c)[2] = (qc)[0] * (kx)[0];                                                      \
        (c)[3] = (qd)[0] * (kx)[0];                                                      \
        _Pragma("unroll") for (int i_ = 1; i_ < FA_NK; i_++) {                           \
            (c)[0] = FA_MAD((qa)[i_], (kx)[i_], (c)[0]);                                 \
            (c)[1] = FA_MAD((qb)[i_], (kx)[i_], (c)[1]);                                 \
            (c)[2] = FA_MAD((qc)[i_], (kx)[i_], (c)[2]);                                 \
            (c)[3] = FA_MAD((qd)[i_], (kx)[i_], (c)[3]);                                 \
        }                                                                                \
    } while (0)

/* Two float16s' lanes picked by 16 constant indices (16-31: y's). clang's own builtin
 * where there is one: PoCL's LLVM 15 turned OpenCL's vector-literal swizzles of the same
 * lanes into chains of two-source permutes (vpermt2pd) in fa_sum16x4. */
#if defined(__clang__) && defined(__has_builtin)
#if __has_builtin(__builtin_shufflevector)
#define FA_SHUF16(x, y, ...) __builtin_shufflevector(x, y, __VA_ARGS__)
/* for fa_krot_row: each pair's first lane in both (DUPE), its second in both (DUPO), the
 * two swapped (SWAP), 4, 8 or 16 lanes */
#define FA_KR_DUPE4(v) __builtin_shufflevector(v, v, 0, 0, 2, 2)
#define FA_KR_DUPE8(v) __builtin_shufflevector(v, v, 0, 0, 2, 2, 4, 4, 6, 6)
#define FA_KR_DUPE16(v)                                                                   \
    __builtin_shufflevector(v, v, 0, 0, 2, 2, 4, 4, 6, 6, 8, 8, 10, 10, 12, 12, 14, 14)
#define FA_KR_DUPO4(v) __builtin_shufflevector(v, v, 1, 1, 3, 3)
#define FA_KR_DUPO8(v) __builtin_shufflevector(v, v, 1, 1, 3, 3, 5, 5, 7, 7)
#define FA_KR_DUPO16(v)                                                                   \
    __builtin_shufflevector(v, v, 1, 1, 3, 3, 5, 5, 7, 7, 9, 9, 11, 11, 13, 13, 15, 15)
#define FA_KR_SWAP4(v) __builtin_shufflevector(v, v, 1, 0, 3, 2)
#define FA_KR_SWAP8(v) __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6)
#define FA_KR_SWAP16(v)                                                                   \
    __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14)
#define FA_KR_PAIRS 1
#endif
#endif
#ifndef FA_SHUF16
#define FA_SHUF16(x, y, ...) shuffle2(x, y, (uint16)(__VA_ARGS__))
#endif

/* 4 keys' dot products with 4 rows, a[u * 4 + rr] (16 lanes each), summed by one tree and
 * stored as x[r + rr][t + u]. Lanes (e, e ^ 8), then 4, 2 and 1 apart, as the CPU
 * backend's sums4x4 (cpu_attn_x86.c) adds them: each step adds two picks of its two
 * vectors that stay within 128-bit lanes or move whole ones (vshuff64x2, vshufpd,
 * vshufps), and the result holds row rr's four keys in 128-bit lane rr (four 16-byte
 * stores). PoCL, warm, 32|8 heads, 1 x 4096, alternated call by call: d 64 decode
 * 261-267 against 272-280 us, d 128 473 against 483 (an earlier tree that crossed 128-bit
 * lanes in its last two steps: vpermt2pd, vhaddps, and stores of gathered lanes). */
static inline void fa_sum16x4(const float16 *a, float (*x)[FA_TK], const int r, const int t)
{
    float16 w[4];
#pragma unroll
    for (int u = 0; u < 4; u++) {
        const float16 a0 = a[4 * u], a1 = a[4 * u + 1], a2 = a[4 * u + 2], a3 = a[4 * u + 3];
        /* rows 0 and 1 (2 and 3): lanes e + (e ^ 8), row 0's (2's) in lanes 0-7 */
        const float16 s01 =
            FA_SHUF16(a0, a1, 0, 1, 2, 3, 4, 5, 6, 7, 24, 25, 26, 27, 28, 29, 30, 31) +
            FA_SHUF16(a0, a1, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23);
        const float16 s23 =
            FA_SHUF16(a2, a3, 0, 1, 2, 3, 4, 5, 6, 7, 24, 25, 26, 27, 28, 29, 30, 31) +
            FA_SHUF16(a2, a3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23);
        /* 128-bit lanes (0, 1) and (2, 3) of each: row rr's four partial sums in lane rr */
        w[u] = FA_SHUF16(s01, s23, 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27) +
               FA_SHUF16(s01, s23, 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
    }
    /* within each 128-bit lane: elements (e, e ^ 2) of keys 0 and 1 (2 and 3), then (e,
     * e ^ 1): keys 0-3 in order */
    const float16 k01 =
        FA_SHUF16(w[0], w[1], 0, 1, 18, 19, 4, 5, 22, 23, 8, 9, 26, 27, 12, 13, 30, 31) +
        FA_SHUF16(w[0], w[1], 2, 3, 16, 17, 6, 7, 20, 21, 10, 11, 24, 25, 14, 15, 28, 29);
    const float16 k23 =
        FA_SHUF16(w[2], w[3], 0, 1, 18, 19, 4, 5, 22, 23, 8, 9, 26, 27, 12, 13, 30, 31) +
        FA_SHUF16(w[2], w[3], 2, 3, 16, 17, 6, 7, 20, 21, 10, 11, 24, 25, 14, 15, 28, 29);
    const float16 f =
        FA_SHUF16(k01, k23, 0, 2, 16, 18, 4, 6, 20, 22, 8, 10, 24, 26, 12, 14, 28, 30) +
        FA_SHUF16(k01, k23, 1, 3, 17, 19, 5, 7, 21, 23, 9, 11, 25, 27, 13, 15, 29, 31);
    vstore4(f.s0123, 0, &x[r][t]);
    vstore4(f.s4567, 0, &x[r + 1][t]);
    vstore4(f.s89ab, 0, &x[r + 2][t]);
    vstore4(f.scdef, 0, &x[r + 3][t]);
}

#define FA_R (FA_HB * FA_RG)
#define FA_NK (FA_D / FA_KW)
#define FA_NV (FA_DV / FA_VW)
/* Steps 1 and 3 head by head (FA_HEAD_MAJOR) when a head's accumulators, FA_RG rows of
 * FA_NV vectors, fit half the vector registers (16 of AVX-512's 32; 8 elsewhere): d 64
 * with 4 rows per head (GQA 4 decode), d 128 with 2. Then the head's q rows (step 1) and
 * its accumulators (step 3) stay in registers over the tile's keys, which are read in
 * the order of their heads (the tile was prefetched one tile ahead). Otherwise key by
 * key, in memory order, the accumulators in private memory. On PoCL (cold K/V, each call
 * after a 64 MiB copy, medians of per-call differences, alternated in one process): d 64
 * decode -0.04 to -0.06 ms for step 3, -0.02 for step 1, of 0.55-0.85 ms; d 128 key by
 * key measured +0.05 to +0.1 ms head by head (32 accumulators spill). */
#if defined(__AVX512F__)
#define FA_REGS 16
#else
#define FA_REGS 8
#endif
#define FA_HEAD_MAJOR (FA_RG * FA_NV <= FA_REGS)

/* RoPE on k (FA_KROT, common.cl): the key row kx (FA_NK vectors, as loaded) rotated in
 * place with its row kt of the table. Where the window is whole vectors (its start, and
 * with NeoX pairs its half, multiples of FA_KW; adjacent pairs never straddle a vector
 * then) a pair's two dims are lanes of vectors already loaded: NeoX, vector i with
 * vector i + FA_KR_P / FA_KW; adjacent, neighbouring lanes swapped. Otherwise dim by dim. */
#if FA_KROT
#define FA_KR_VEC (FA_KR_OFF % FA_KW == 0 && (FA_KR_ADJ ? 1 : FA_KR_P % FA_KW == 0))
static inline __attribute__((always_inline)) void fa_krot_row(FA_KT *kx, __global const float *kt)
{
#if FA_KR_VEC && !FA_KR_ADJ
#pragma unroll
    for (int i = FA_KR_OFF / FA_KW; i < (FA_KR_OFF + FA_KR_P) / FA_KW; i++) {
        const int j = i + FA_KR_P / FA_KW;
        const FA_KT c = FA_CAT(vload, FA_KW)(0, kt + i * FA_KW);
        const FA_KT s = FA_CAT(vload, FA_KW)(0, kt + j * FA_KW);
        const FA_KT xa = kx[i], xb = kx[j];
        kx[i] = xa * c - xb * s;
        kx[j] = xa * s + xb * c;
    }
#elif FA_KR_VEC
#pragma unroll
    for (int i = FA_KR_OFF / FA_KW; i < (FA_KR_END + FA_KW - 1) / FA_KW; i++) {
        const FA_KT t = FA_CAT(vload, FA_KW)(0, kt + i * FA_KW), x = kx[i];
#ifdef FA_KR_PAIRS
        /* x c - swap(x) s in a pair's first lane, x c + swap(x) s in its second, c and s
         * the pair's cos and sin over both: a product and one fused multiply-add of
         * alternating sign (vfmaddsub on x86; the CPU backend's rotation, cpu_attn_x86_body.h
         * ldk). PoCL, 32|8 heads x 4096, RoPE in the pass, K and V warm, alternated call by
         * call: d 64 365 against 374 us, d 128 631 against 709 (the form below: two products,
         * three swaps, a subtraction and a masked addition) */
        const FA_KT c = FA_CAT(FA_KR_DUPE, FA_KW)(t), sn = FA_CAT(FA_KR_DUPO, FA_KW)(t);
        const FA_KT m = FA_CAT(FA_KR_SWAP, FA_KW)(x) * sn;
        const FA_KT r = select(FA_MAD(x, c, -m), FA_MAD(x, c, m), FA_CAT(FA_KR_ODD, FA_KW));
#else
        const FA_KT p = x * t, q = shuffle(x, FA_CAT(FA_KR_M, FA_KW)(1, 0)) * t;
        const FA_KT r = select(p - shuffle(p, FA_CAT(FA_KR_M, FA_KW)(1, 0)),
                               q + shuffle(q, FA_CAT(FA_KR_M, FA_KW)(1, 0)),
                               FA_CAT(FA_KR_ODD, FA_KW));
#endif
        if ((i + 1) * FA_KW <= FA_KR_END) {
            kx[i] = r;
        } else { /* the window ends inside this vector */
            for (int e = 0; e < FA_KR_END - i * FA_KW; e++)
                ((float *)&kx[i])[e] = ((const float *)&r)[e];
        }
    }
#else
    float *f = (float *)kx;
#pragma unroll
    for (int j = 0; j < FA_KR_P; j++) {
        const int a = FA_KR_ADJ ? FA_KR_OFF + 2 * j : FA_KR_OFF + j;
        const int b = a + (FA_KR_ADJ ? 1 : FA_KR_P);
        const float c = kt[a], s = kt[b], xa = f[a], xb = f[b];
        f[a] = xa * c - xb * s;
        f[b] = xa * s + xb * c;
    }
#endif
}
/* the table's row of key t (batch b) */
#define FA_KR_ROW(t) (krot + kr_off + (t) * kr_st.s2 + b * kr_st.s3)
#define FA_KR_APPLY(kx, t) fa_krot_row((kx), FA_KR_ROW(t))
#else
#define FA_KR_APPLY(kx, t) ((void)0)
#endif

#if FA_TK % 16 != 0 || FA_TK % FA_KB != 0
#error "FA_TK: the softmax step works on float16 vectors, step 3 on FA_KB keys"
#endif

/* The lanes' sums of four FA_KW = 16 vectors, as a float4 (a0's sum first): pairwise
 * additions of halves, quarters, then neighbours, all four rows at once. */
static inline float4 fa_sum4(const float16 a0, const float16 a1, const float16 a2,
                             const float16 a3)
{
    const float16 b01 = (float16)(a0.lo, a1.lo) + (float16)(a0.hi, a1.hi);
    const float16 b23 = (float16)(a2.lo, a3.lo) + (float16)(a2.hi, a3.hi);
    const float16 c = (float16)(b01.s0123, b01.s89ab, b23.s0123, b23.s89ab) +
                      (float16)(b01.s4567, b01.scdef, b23.s4567, b23.scdef);
    const float8 d = c.even + c.odd;
    return d.even + d.odd;
}

/* Row `row` (h + Hq (iq + Tq b)) of dst from its nc chunks' partials (pe_flash_cpu_merge's
 * formula, below). */
static void fa_merge_row(__global void *dst, const long o_off, const long4 o_st,
                         __global const float *part, __global const float *sinks,
                         const long s_off, const long s_st, const long Hq, const long Tq,
                         const long nc, const long row)
{
    const long h = row % Hq, iq = (row / Hq) % Tq, b = row / (Hq * Tq);
    __global const float *pp = part + row * nc * (FA_DV + 2);
    const float sink = fa_sink(sinks, s_off, s_st, h);
    const float M = fa_merge_max(pp, nc, FA_DV + 2, sink);
    FA_VT a[FA_NV];
    for (int g = 0; g < FA_NV; g++)
        a[g] = (FA_VT)0.0f;
    float l = 0.0f, inv = 0.0f;
    if (M != -INFINITY) {
        for (long c = 0; c < nc; c++) {
            __global const float *pc = pp + c * (FA_DV + 2);
            const float m = pc[0];
            if (m == -INFINITY)
                continue;
            const float e = exp(m - M);
            l += pc[1] * e;
            for (int g = 0; g < FA_NV; g++)
                a[g] += FA_CAT(vload, FA_VW)(0, pc + 2 + g * FA_VW) * e;
        }
        inv = l + exp(sink - M);
    }
    const long ob = o_off + h * o_st.s1 + iq * o_st.s2 + b * o_st.s3;
    for (int g = 0; g < FA_NV; g++) {
        for (int e = 0; e < FA_VW; e++) {
            const long d = (long)g * FA_VW + e;
            const float o = M == -INFINITY ? 0.0f : ((float *)&a[g])[e] / inv;
#if FA_O_F16
            vstore_half_rte(o, (size_t)(ob + d * o_st.s0), (__global half *)dst);
#else
            ((__global float *)dst)[ob + d * o_st.s0] = o;
#endif
        }
    }
}

__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void
pe_flash_cpu(__global void *dst, const long o_off, const long4 o_st,
             __global const void *q, const long q_off, const long4 q_st,
             __global const void *k, const long k_off, const long4 k_st,
             __global const void *v, const long v_off, const long4 v_st,
             __global const void *mk, const long m_off, const long4 m_st,
             __global const void *rtab, const long r_off, const long4 r_st,
             __global const int *buckets, __global const float *slopes,
             __global const float *mslopes, __global const float *sinks, const long s_off,
             const long s_st, __global float *part, const long4 dims, const long4 shape,
             const long4 offs, const long4 aoffs, const float scale, const float softcap,
             __global volatile int *counts, __global const float *krot, const long kr_off,
             const long4 kr_st)
{
    const long chunk = (long)get_group_id(0);
    const long hk0 = (long)get_group_id(1) * FA_HB;
    const long b = (long)get_group_id(2);
    const long group = dims.s2, Tq = dims.s3;
    const long Hq = shape.s0, Tk = shape.s1, CK = shape.s3;
    const long Hk = Hq / group;
    const int nh = (int)min((long)FA_HB, Hk - hk0); /* heads of this work-item */
    const int nr = nh * FA_RG;                      /* its rows */
    /* K, V: the item's heads' rows of a key one dense block (the prefetch order) */
    const bool pf_kd = FA_PF_DENSE(k_st, FA_D), pf_vd = FA_PF_DENSE(v_st, FA_DV);
    (void)pf_kd;
    (void)pf_vd;

    FA_KT qv[FA_R][FA_NK];  /* q rows */
    FA_VT acc[FA_R][FA_NV]; /* output accumulators */
    /* the tile's logits, then probabilities; each row (FA_TK floats, a multiple of 16)
     * starts at a 64-byte boundary, read and written as float16s by FA_XL / FA_XS */
    float x[FA_R][FA_TK] __attribute__((aligned(64)));
    float m_run[FA_R], l_run[FA_R], alpha[FA_R];
    long row_q[FA_R], row_h[FA_R], row_m[FA_R];

    for (int r = 0; r < FA_R; r++) {
        const long j = r % FA_RG;
        const long iq = j / group, h = (hk0 + r / FA_RG) * group + j % group;
        row_q[r] = iq;
        row_h[r] = h;
        row_m[r] = m_off + iq * m_st.s1 + h * m_st.s2 + b * m_st.s3;
        m_run[r] = -INFINITY;
        l_run[r] = 0.0f;
        for (int i = 0; i < FA_NV; i++)
            acc[r][i] = (FA_VT)0.0f;
        for (int t = 0; t < FA_TK; t++)
            x[r][t] = 0.0f;
        for (int i = 0; i < FA_NK; i++) {
            float e[FA_KW];
            for (int c = 0; c < FA_KW; c++)
                e[c] = r < nr ? FA_LOAD(FA_Q_F16, q, q_off + (i * FA_KW + c) * q_st.s0 +
                                                         h * q_st.s1 + iq * q_st.s2 + b * q_st.s3)
                              : 0.0f;
            qv[r][i] = FA_CAT(vload, FA_KW)(0, e);
        }
    }

    /* the keys of this chunk, cut at the causal limit of the last query */
    const long k_beg = chunk * CK;
    long k_end = min(Tk, k_beg + CK);
    if (offs.s2 != 0)
        k_end = min(k_end, Tq - 1 + offs.s0 - offs.s1 + 1);
#if FA_ALIBI
    if (aoffs.s2 != 0)
        k_end = min(k_end, Tq - 1 + aoffs.s0 - aoffs.s1 + 1);
#endif
    const int16 tv = (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
#if FA_HAVE_PF
    /* the first tile, which no earlier tile prefetches: every row requested at once, in
     * memory order (K then V), before the first is read */
    for (long t = k_beg; t < min(k_end, k_beg + (long)FA_TK); t++)
        for (int hb = 0; hb < nh; hb++)
            FA_PF_ROW(k, (k_off + b * k_st.s3 + t * k_st.s2 + (hk0 + hb) * k_st.s1) * FA_KES,
                      FA_D * FA_KES);
    for (long t = k_beg; t < min(k_end, k_beg + (long)FA_TK); t++)
        for (int hb = 0; hb < nh; hb++)
            FA_PF_ROW(v, (v_off + b * v_st.s3 + t * v_st.s2 + (hk0 + hb) * v_st.s1) * FA_VES,
                      FA_DV * FA_VES);
#endif

    for (long k0 = k_beg; k0 < k_end; k0 += FA_TK) {
        const int nt = (int)min((long)FA_TK, k_end - k0);

        /* ---- 1. q.k. With FA_HEAD_MAJOR and 4 rows per head (GQA 4 decode at d 64):
         * head by head, the head's 4 q rows in registers over the tile's keys, 4 keys at
         * a time with the 16 dot products' lanes summed together (the last keys of a tile
         * one at a time, each key's 4 dot products summed together: fa_sum4). 4 keys at a
         * time against 1 on PoCL (the Zen 4 host, 32|8 heads, f16, alternated call by call,
         * medians, 2026-12-05): back to back 279 / 331 against 297 / 344 us, after the
         * sweep 477 / 571 against 484 / 572 us, 1 x 32768 2.71 against 2.81 ms. Otherwise
         * key by key, every head's row of the key (in memory order); with 4 rows per head,
         * 4 keys at a time per head, the 16 dot products' lanes summed together ---- */
        int t1 = 0;
#if FA_KW == 16 && FA_RG == 4 && FA_HEAD_MAJOR
        for (int hb = 0; hb < nh; hb++) {
            const long kb0 = k_off + b * k_st.s3 + k0 * k_st.s2 + (hk0 + hb) * k_st.s1;
            const int r = hb * 4;
            FA_KT q0[FA_NK], q1[FA_NK], q2[FA_NK], q3[FA_NK];
#pragma unroll
            for (int i = 0; i < FA_NK; i++) {
                q0[i] = qv[r][i];
                q1[i] = qv[r + 1][i];
                q2[i] = qv[r + 2][i];
                q3[i] = qv[r + 3][i];
            }
            int tq = 0; /* 4 keys at a time, then one */
            for (; tq + 4 <= nt; tq += 4) {
                const long kr = kb0 + tq * k_st.s2;
                float16 a[16];
#pragma unroll
                for (int u = 0; u < 4; u++) {
                    FA_PF_NEXT(k, k_off, k_st, FA_D, FA_KES, pf_kd, hb, tq + u,
                               kr + u * k_st.s2);
                    FA_KT kx[FA_NK];
#pragma unroll
                    for (int i = 0; i < FA_NK; i++)
                        kx[i] = FA_LOAD_K(kr + u * k_st.s2 + i * FA_KW);
                    FA_KR_APPLY(kx, k0 + tq + u);
                    FA_DOT4(q0, q1, q2, q3, kx, a + u * 4);
                }
                fa_sum16x4(a, x, r, tq);
            }
            for (int t = tq; t < nt; t++) {
                const long kr = kb0 + t * k_st.s2;
                FA_PF_NEXT(k, k_off, k_st, FA_D, FA_KES, pf_kd, hb, t, kr);
                FA_KT kx[FA_NK];
#pragma unroll
                for (int i = 0; i < FA_NK; i++)
                    kx[i] = FA_LOAD_K(kr + i * FA_KW);
                FA_KR_APPLY(kx, k0 + t);
                float16 c[4];
                FA_DOT4(q0, q1, q2, q3, kx, c);
                const float4 sv = fa_sum4(c[0], c[1], c[2], c[3]);
                x[r][t] = sv.s0;
                x[r + 1][t] = sv.s1;
                x[r + 2][t] = sv.s2;
                x[r + 3][t] = sv.s3;
            }
        }
        t1 = nt;
#elif FA_KW == 16 && FA_RG == 4
        for (; t1 + 4 <= nt; t1 += 4) {
            const long kb = k_off + b * k_st.s3 + (k0 + t1) * k_st.s2;
            for (int hb = 0; hb < nh; hb++) {
                const long kr = kb + (hk0 + hb) * k_st.s1;
                const int r = hb * 4;
                if (pf_kd) /* rows 4 hb .. 4 hb + 3 of the 4 keys' block */
                    for (int u = 0; u < 4; u++)
                        FA_PF_BLOCK_ROW(k, k_off, k_st, FA_D, FA_KES, k0 + t1 + FA_TK,
                                        hb * 4 + u);
                else if (k0 + t1 + 4 + FA_TK <= Tk)
                    for (int u = 0; u < 4; u++)
                        FA_PF_ROW(k, (kr + (u + FA_TK) * k_st.s2) * FA_KES, FA_D * FA_KES);
                float16 a[16];
#pragma unroll
                for (int u = 0; u < 4; u++) {
                    FA_KT kx[FA_NK];
#pragma unroll
                    for (int i = 0; i < FA_NK; i++)
                        kx[i] = FA_LOAD_K(kr + u * k_st.s2 + i * FA_KW);
                    FA_KR_APPLY(kx, k0 + t1 + u);
                    FA_DOT4(qv[r], qv[r + 1], qv[r + 2], qv[r + 3], kx, a + u * 4);
                }
                fa_sum16x4(a, x, r, t1);
            }
        }
#endif
        for (int t = t1; t < nt; t++) {
            const long kb = k_off + b * k_st.s3 + (k0 + t) * k_st.s2;
            for (int hb = 0; hb < nh; hb++) {
                const long kr = kb + (hk0 + hb) * k_st.s1;
                if (k0 + t + FA_TK < Tk)
                    FA_PF_ROW(k, (kr + FA_TK * k_st.s2) * FA_KES, FA_D * FA_KES);
                FA_KT kx[FA_NK];
#pragma unroll
                for (int i = 0; i < FA_NK; i++)
                    kx[i] = FA_LOAD_K(kr + i * FA_KW);
                FA_KR_APPLY(kx, k0 + t);
#if FA_KW == 16 && FA_RG % 4 == 0
#pragma unroll
                for (int r4 = 0; r4 < FA_RG; r4 += 4) {
                    const int r = hb * FA_RG + r4;
                    float16 a0 = qv[r][0] * kx[0], a1 = qv[r + 1][0] * kx[0];
                    float16 a2 = qv[r + 2][0] * kx[0], a3 = qv[r + 3][0] * kx[0];
#pragma unroll
                    for (int i = 1; i < FA_NK; i++) {
                        a0 = FA_MAD(qv[r][i], kx[i], a0);
                        a1 = FA_MAD(qv[r + 1][i], kx[i], a1);
                        a2 = FA_MAD(qv[r + 2][i], kx[i], a2);
                        a3 = FA_MAD(qv[r + 3][i], kx[i], a3);
                    }
                    const float4 sv = fa_sum4(a0, a1, a2, a3);
                    x[r][t] = sv.s0;
                    x[r + 1][t] = sv.s1;
                    x[r + 2][t] = sv.s2;
                    x[r + 3][t] = sv.s3;
                }
#else
#pragma unroll
                for (int rr = 0; rr < FA_RG; rr++) {
                    const int r = hb * FA_RG + rr;
                    FA_KT a = qv[r][0] * kx[0];
#pragma unroll
                    for (int i = 1; i < FA_NK; i++)
                        a = FA_MAD(qv[r][i], kx[i], a);
                    x[r][t] = FA_HSUM(a);
                }
#endif
            }
        }

        /* ---- 2. per row: the logits (a tile at a time), the running max, the rescale
         * factor, the probabilities and the running sum. What depends on the query only
         * (keys past the chunk or the causal limit, the ALiBi distance) is worked out once
         * per query of the tile (Tq <= FA_RG), not once per row (d 64 decode on PoCL:
         * -0.03 ms of 0.6-0.9 ms, the logits bit for bit the same) ---- */
        int16 qdead[FA_RG][FA_TK / 16];
#if FA_ALIBI
        float16 qdf[FA_RG][FA_TK / 16];
#endif
        for (int iq = 0; iq < (int)Tq; iq++) {
#if FA_ALIBI
            /* the distance aqp - akp of key k0 + t: base - t */
            const long base = (iq + aoffs.s0) - (k0 + aoffs.s1);
            const bool near = base > -0x1000000L && base < 0x1000000L;
#endif
            for (int sv = 0; sv < FA_TK / 16; sv++) {
                const int16 ts = tv + 16 * sv; /* keys k0 + ts */
                int16 dead = ts >= nt;
#if FA_ALIBI
                float16 df;
                if (near) {
                    /* base and t exact in f32: their f32 difference is base - t rounded
                     * to nearest, as convert_float16_rte gives below */
                    df = (float)base - convert_float16(ts);
                    if (aoffs.s3 != 0)
                        df = fabs(df);
                } else {
                    long16 dl = (long16)base - convert_long16(ts);
                    if (aoffs.s3 != 0)
                        dl = select(dl, -dl, dl < 0);
                    df = convert_float16_rte(dl);
                }
                qdf[iq][sv] = df;
                if (aoffs.s2 != 0) /* t > base, base clamped to the tile */
                    dead |= ts > (int)clamp(base, -1L, (long)FA_TK);
#endif
                if (offs.s2 != 0) /* key k0 + t + k_offset after the query's position */
                    dead |= ts > (int)clamp((iq + offs.s0) - (k0 + offs.s1), -1L, (long)FA_TK);
                qdead[iq][sv] = dead;
            }
        }
        for (int r = 0; r < nr; r++) {
            const long h = row_h[r], iq = row_q[r];
#if FA_ALIBI
            const float sl = slopes[h];
#endif
            float16 mv = (float16)(-INFINITY);
            for (int sv = 0; sv < FA_TK / 16; sv++) {
                float16 y = FA_XL(x[r], sv) * scale;
#if FA_SOFTCAP
                y = softcap * tanh(y / softcap);
#endif
#if FA_ALIBI
                y = y + -(sl * qdf[iq][sv]);
#endif
#if FA_RELBIAS || FA_MASK
                FA_XS(x[r], sv, y);
                for (int t = 16 * sv; t < min(nt, 16 * sv + 16); t++) {
                    const long kk = k0 + t;
                    float yt = x[r][t];
#if FA_RELBIAS
                    const long u = buckets[kk + offs.s1 - (iq + offs.s0) - offs.s3];
                    yt = yt + FA_LOAD(FA_T_F16, rtab, r_off + u * r_st.s0 + h * r_st.s1);
#endif
#if FA_MASK
                    const float mkv = FA_LOAD(FA_M_F16, mk, row_m[r] + kk * m_st.s0);
#if FA_MSLOPE
                    yt = yt + mslopes[h] * mkv;
#else
                    yt = yt + mkv;
#endif
#endif
                    x[r][t] = yt;
                }
                y = FA_XL(x[r], sv);
#endif
                y = select(y, (float16)(-INFINITY), qdead[iq][sv]);
                FA_XS(x[r], sv, y);
                mv = fmax(mv, y);
            }
            alpha[r] = fmax(m_run[r], FA_HMAX16(mv)); /* the new max, for now */
        }
        /* the rescale factors: independent exps, not one per row between the passes */
        for (int r = 0; r < nr; r++) {
            const float mo = m_run[r], mn = alpha[r];
            alpha[r] = mn == -INFINITY ? 1.0f : exp(mo - mn);
            m_run[r] = mn;
        }
        for (int r = 0; r < nr; r++) {
            const float mn = m_run[r], al = alpha[r];
            float16 ls = 0.0f; /* lane-wise, one sum of the lanes after the loop */
            for (int sv = 0; sv < FA_TK / 16; sv++) {
                const float16 y = FA_XL(x[r], sv);
                const float16 p = select(exp(y - mn), (float16)0.0f, y == (float16)(-INFINITY));
                FA_XS(x[r], sv, p);
                ls += p;
            }
            l_run[r] = l_run[r] * al + FA_HSUM16(ls);
        }

#if FA_HEAD_MAJOR
        /* ---- 3. the outputs: head by head, the head's accumulators in registers over the
         * tile's keys, rescaled by alpha as they are loaded ---- */
        for (int hb = 0; hb < nh; hb++) {
            const long vb0 = v_off + b * v_st.s3 + k0 * v_st.s2 + (hk0 + hb) * v_st.s1;
            const int r = hb * FA_RG;
            FA_VT a[FA_RG][FA_NV];
#pragma unroll
            for (int rr = 0; rr < FA_RG; rr++)
#pragma unroll
                for (int g = 0; g < FA_NV; g++)
                    a[rr][g] = acc[r + rr][g] * alpha[r + rr];
            for (int t = 0; t < nt; t++) {
                const long vb = vb0 + t * v_st.s2;
                FA_PF_NEXT(v, v_off, v_st, FA_DV, FA_VES, pf_vd, hb, t, vb);
                FA_VT vx[FA_NV];
#pragma unroll
                for (int g = 0; g < FA_NV; g++)
                    vx[g] = FA_LOAD_V(vb + g * FA_VW);
#pragma unroll
                for (int rr = 0; rr < FA_RG; rr++) {
                    const FA_VT p = (FA_VT)x[r + rr][t];
#pragma unroll
                    for (int g = 0; g < FA_NV; g++)
                        a[rr][g] = FA_MAD(p, vx[g], a[rr][g]);
                }
            }
#pragma unroll
            for (int rr = 0; rr < FA_RG; rr++)
#pragma unroll
                for (int g = 0; g < FA_NV; g++)
                    acc[r + rr][g] = a[rr][g];
        }
#else
        /* ---- 3. the outputs: key by key in memory order, FA_KB keys (every head's v rows)
         * per pass; the accumulators stay in private memory (the L1 cache). A vector
         * column of the FA_KB rows at a time (FA_KB vectors live, not FA_KB x FA_NV: at
         * d 128 those 32 spilled), each serving the head's rows: PoCL d 128 decode, 32|8
         * heads x 4096, alternated call by call, warm 510 / 503 against 542 / 523 us,
         * after a sweep 728 / 704 against 739 / 712 us ---- */
        for (int r = 0; r < nr; r++)
            for (int g = 0; g < FA_NV; g++)
                acc[r][g] *= alpha[r];
        for (int t = 0; t < nt; t += FA_KB) {
            const long vt = v_off + b * v_st.s3 + (k0 + t) * v_st.s2;
            for (int hb = 0; hb < nh; hb++) {
                const long vb = vt + (hk0 + hb) * v_st.s1;
                if (pf_vd) /* rows FA_KB hb .. of the FA_KB keys' block */
                    for (int u = 0; u < FA_KB; u++)
                        FA_PF_BLOCK_ROW(v, v_off, v_st, FA_DV, FA_VES, k0 + t + FA_TK,
                                        hb * FA_KB + u);
                else
                    for (int u = 0; u < FA_KB; u++)
                        if (k0 + t + u + FA_TK < Tk)
                            FA_PF_ROW(v, (vb + (u + FA_TK) * v_st.s2) * FA_VES, FA_DV * FA_VES);
#pragma unroll
                for (int g = 0; g < FA_NV; g++) {
                    FA_VT vx[FA_KB];
#pragma unroll
                    for (int u = 0; u < FA_KB; u++) /* keys past the tile: p = 0 */
                        vx[u] = t + u < nt ? FA_LOAD_V(vb + u * v_st.s2 + g * FA_VW)
                                           : (FA_VT)0.0f;
#pragma unroll
                    for (int rr = 0; rr < FA_RG; rr++) {
                        const int r = hb * FA_RG + rr;
                        FA_VT a = acc[r][g];
#pragma unroll
                        for (int u = 0; u < FA_KB; u++)
                            a = FA_MAD((FA_VT)x[r][t + u], vx[u], a);
                        acc[r][g] = a;
                    }
                }
            }
        }
#endif
    }

    /* ---- the rows: partials, or dst with the sink ---- */
    for (int r = 0; r < nr; r++) {
        const float m = m_run[r], l = l_run[r];
        const long h = row_h[r], iq = row_q[r];
#if FA_SPLIT
        const long pr = (h + Hq * (iq + Tq * b)) * (long)get_num_groups(0) + chunk;
        __global float *pp = part + pr * (FA_DV + 2);
        pp[0] = m;
        pp[1] = l;
        for (int g = 0; g < FA_NV; g++)
            FA_CAT(vstore, FA_VW)(acc[r][g], 0, pp + 2 + g * FA_VW);
#else
        const float sink = fa_sink(sinks, s_off, s_st, h);
        const float M = fmax(m, sink);
        float f = 0.0f, inv = 0.0f;
        if (M != -INFINITY) {
            f = exp(m - M); /* 0 for m = -inf */
            inv = 1.0f / (l * f + exp(sink - M));
        }
        const long ob = o_off + h * o_st.s1 + iq * o_st.s2 + b * o_st.s3;
        for (int g = 0; g < FA_NV; g++) {
            for (int e = 0; e < FA_VW; e++) {
                const long d = (long)g * FA_VW + e;
                const float y = M == -INFINITY ? 0.0f : ((float *)&acc[r][g])[e] * f * inv;
#if FA_O_F16
                vstore_half_rte(y, (size_t)(ob + d * o_st.s0), (__global half *)dst);
#else
                ((__global float *)dst)[ob + d * o_st.s0] = y;
#endif
            }
        }
#endif
    }
#if FA_SPLIT && FA_MERGE_LAST
    /* the last work-item to finish a head block's chunks merges the block's rows: a counter
     * per (head block, batch) in counts, zero at the start, counts the work-items done; the
     * atomic orders each one's partials before its count (CPU devices, whose global memory
     * is coherent: the host picks this only there). The merging work-item puts the counter
     * back to zero for the next call (the host keeps the buffer). */
    {
        const long nc = (long)get_num_groups(0);
        __global volatile int *cnt = counts + (get_group_id(1) + get_num_groups(1) * b);
        mem_fence(CLK_GLOBAL_MEM_FENCE);
        if (atomic_inc(cnt) == (int)nc - 1) {
            mem_fence(CLK_GLOBAL_MEM_FENCE);
            for (int r = 0; r < nr; r++)
                fa_merge_row(dst, o_off, o_st, part, sinks, s_off, s_st, Hq, Tq, nc,
                             row_h[r] + Hq * (row_q[r] + Tq * b));
            atomic_xchg(cnt, 0);
        }
    }
#endif
}

/*
 * pe_flash_cpu_merge: flash.cl's pe_flash_merge with one work-item per row (local size 1)
 * instead of one per (d, row): the chunks' weights e_c = exp(m_c - M) are computed once
 * per row, the dims FA_VW at a time. The same formula, the same order of the sums:
 *   M = max(max_c m_c, sink),  dst_d = sum_c acc_c,d e_c / (sum_c l_c e_c + exp(sink - M))
 * (0 for M = -inf). NDRange (Hq*Tq*B, 1, 1); dims (Dv, Hq, Tq, n_chunks). With
 * FA_MERGE_LAST, pe_flash_cpu merges instead (fa_merge_row) and this kernel is not run.
 */
__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void
pe_flash_cpu_merge(__global void *dst, const long o_off, const long4 o_st,
                   __global const float *part, __global const float *sinks, const long s_off,
                   const long s_st, const long4 dims, const long n_rows)
{
    const long row = (long)get_global_id(0);
    if (row >= n_rows)
        return;
    fa_merge_row(dst, o_off, o_st, part, sinks, s_off, s_st, dims.s1, dims.s2, dims.s3, row);
}
