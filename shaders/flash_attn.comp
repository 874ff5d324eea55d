#version 450
// flash_attn.comp - posenc_attention in one pass (internal.h, struct pe_attn_fused_op):
// scores, softcap, ALiBi / relative bias, mask (times a per-head slope), causal mask,
// online softmax (running max m and sum l per row) and the weighted sum of V, in f32.
//
// An invocation owns R rows that read the same K/V head: rows f = rb*R .. rb*R + R - 1 of
// the NF = group * Tq rows of one (kv head hk, batch b), row f being query f / group of
// head hk * group + f % group (GQA: one K/V read serves the whole group). It keeps their
// q (R x D) and accumulators (R x DV) in registers and walks its keys in blocks of KB = 4:
// per block, R x 4 scores, the bias and masks, one online-softmax step per row (the old
// accumulator rescaled by exp(m_old - m_new) in the same multiply-adds as the new terms),
// then acc += p * V. Every K and V element is loaded once per invocation and used for R
// rows, in 8-element chunks (one uvec4 of halves or two vec4 of f32 when the rows are
// contiguous and aligned: FA_KVEC / FA_VVEC).
//
// Two grids (specialization constant FLAGS):
//   split-K (decode: few rows): invocation = (row block, key split); it reads its own key
//     range from K/V directly (no other invocation shares it) and writes either dst
//     (one split) or the partial (m, l, acc) of each row (FA_PARTIAL), which
//     flash_merge.comp combines in a second dispatch.
//   FA_TILE (prefill: many rows): a work-group = WG consecutive row blocks of one (hk, b);
//     all its invocations need the same keys, so tiles of BK keys of K and V are staged
//     in shared memory (converted to f32 once per work-group) and every invocation reads
//     them from there. Key tiles past the last key a causal work-group can see are
//     skipped.
// Rows that see no unmasked key and no finite sink give 0. Everything in f32; results do
// not depend on timing (fixed orders everywhere).
//
// The head dims, R, WG, BK and the features are specialization constants, so the loops
// over dims are unrolled (register arrays stay registers) and unused features cost
// nothing (lavapipe would execute both sides of a run-time branch).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require

#include "common.glsl"
#include "flash_params.glsl"

layout(local_size_x_id = 0, local_size_y = 1, local_size_z = 1) in;

// Each buffer through the blocks its dtypes need (aliases of one binding).
layout(std430, set = 0, binding = 0) readonly buffer QF { float q_f[]; };
layout(std430, set = 0, binding = 0) readonly buffer QW { uint q_w[]; };
layout(std430, set = 0, binding = 1) readonly buffer KF { float k_f[]; };
layout(std430, set = 0, binding = 1) readonly buffer KW { uint k_w[]; };
layout(std430, set = 0, binding = 1) readonly buffer KF4 { vec4 k_f4[]; };
layout(std430, set = 0, binding = 1) readonly buffer KW4 { uvec4 k_w4[]; };
layout(std430, set = 0, binding = 2) readonly buffer VF { float v_f[]; };
layout(std430, set = 0, binding = 2) readonly buffer VW { uint v_w[]; };
layout(std430, set = 0, binding = 2) readonly buffer VF4 { vec4 v_f4[]; };
layout(std430, set = 0, binding = 2) readonly buffer VW4 { uvec4 v_w4[]; };
layout(std430, set = 0, binding = 3) readonly buffer MF { float m_f[]; };
layout(std430, set = 0, binding = 3) readonly buffer MW { uint m_w[]; };
layout(std430, set = 0, binding = 4) readonly buffer TF { float t_f[]; };
layout(std430, set = 0, binding = 4) readonly buffer TW { uint t_w[]; };
layout(std430, set = 0, binding = 4) readonly buffer TF4 { vec4 t_f4[]; };
layout(std430, set = 0, binding = 7) buffer OF { float o_f[]; };
layout(std430, set = 0, binding = 7) buffer OW { uint o_w[]; };
layout(std430, set = 0, binding = 7) writeonly buffer OF4 { vec4 o_f4[]; };

const uint KB = 4u;            // keys per block
const uint DC = DP / 8u;       // 8-element chunks of a q / k row
const uint DVC = DVP / 8u;     // ... of a v / dst row
const bool TILE = (FLAGS & FA_TILE) != 0u;

// The K / V tile of FA_TILE: BK keys, rows padded to DP / DVP, f32.
shared vec4 ks4[BK * (DP / 4u)];
shared vec4 vs4[BK * (DVP / 4u)];

float ld_q(uint e) { return (FLAGS & FA_Q16) != 0u ? unpackHalf2x16(q_w[e >> 1] >> ((e & 1u) * 16u)).x : q_f[e]; }
float ld_k(uint e) { return (FLAGS & FA_K16) != 0u ? unpackHalf2x16(k_w[e >> 1] >> ((e & 1u) * 16u)).x : k_f[e]; }
float ld_v(uint e) { return (FLAGS & FA_V16) != 0u ? unpackHalf2x16(v_w[e >> 1] >> ((e & 1u) * 16u)).x : v_f[e]; }
float ld_m(uint e) { return (FLAGS & FA_M16) != 0u ? unpackHalf2x16(m_w[e >> 1] >> ((e & 1u) * 16u)).x : m_f[e]; }
float ld_t(uint e) { return (FLAGS & FA_T16) != 0u ? unpackHalf2x16(t_w[e >> 1] >> ((e & 1u) * 16u)).x : t_f[e]; }

// Elements 8c .. 8c + 7 of the K row starting at element `base` (stride st0; 0 past D).
void ld8_k(uint base, uint st0, uint c, out vec4 a, out vec4 b)
{
    if ((FLAGS & FA_KVEC) != 0u) { // st0 == 1, base a multiple of 8 (f16) / 4 (f32)
        if ((FLAGS & FA_K16) != 0u) {
            uvec4 w = k_w4[(base >> 3) + c];
            a = vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y));
            b = vec4(unpackHalf2x16(w.z), unpackHalf2x16(w.w));
        } else {
            a = k_f4[(base >> 2) + 2u * c];
            b = k_f4[(base >> 2) + 2u * c + 1u];
        }
        return;
    }
    float x[8];
    [[unroll]] for (uint i = 0u; i < 8u; i++) {
        uint d = 8u * c + i;
        x[i] = d < D ? ld_k(base + d * st0) : 0.0f;
    }
    a = vec4(x[0], x[1], x[2], x[3]);
    b = vec4(x[4], x[5], x[6], x[7]);
}

void ld8_v(uint base, uint st0, uint c, out vec4 a, out vec4 b)
{
    if ((FLAGS & FA_VVEC) != 0u) {
        if ((FLAGS & FA_V16) != 0u) {
            uvec4 w = v_w4[(base >> 3) + c];
            a = vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y));
            b = vec4(unpackHalf2x16(w.z), unpackHalf2x16(w.w));
        } else {
            a = v_f4[(base >> 2) + 2u * c];
            b = v_f4[(base >> 2) + 2u * c + 1u];
        }
        return;
    }
    float x[8];
    [[unroll]] for (uint i = 0u; i < 8u; i++) {
        uint d = 8u * c + i;
        x[i] = d < DV ? ld_v(base + d * st0) : 0.0f;
    }
    a = vec4(x[0], x[1], x[2], x[3]);
    b = vec4(x[4], x[5], x[6], x[7]);
}

// RoPE on k (FA_KROT): the table (binding 4, f32) has one row of D floats per key, mscale
// cos at the first dim of each pair and mscale sin at its second; pair j < KR_P has dims
// (a, b) = FA_KR_ADJ ? (KR_OFF + 2j, KR_OFF + 2j + 1) : (KR_OFF + j, KR_OFF + j + KR_P), and
//     k'_a = k_a c - k_b s,  k'_b = k_a s + k_b c.
// Dims outside [KR_OFF, KR_OFF + 2 KR_P) are read as stored.
const uint KR_END = KR_OFF + 2u * KR_P;
const bool KR_ADJ = (FLAGS & FA_KR_ADJ) != 0u;

// Element d of the key row at `base` (stride st0), x = its stored value, rotated with the
// key's table row `tr`.
float kr_rot1(uint base, uint st0, uint d, uint tr, float x)
{
    if ((FLAGS & FA_KROT) == 0u || d < KR_OFF || d >= KR_END)
        return x;
    const bool first = KR_ADJ ? ((d - KR_OFF) & 1u) == 0u : d < KR_OFF + KR_P;
    const uint a = first ? d : d - (KR_ADJ ? 1u : KR_P);
    const uint bd = a + (KR_ADJ ? 1u : KR_P);
    const float c = t_f[tr + a], s = t_f[tr + bd];
    const float y = ld_k(base + (first ? bd : a) * st0);
    return first ? x * c - y * s : y * s + x * c;
}

// Elements 8c .. 8c + 7 of the key row (ld8_k's a, b) rotated with its table row tr. The
// pair's other dim comes from the same chunk (adjacent pairs, KR_OFF even), from the
// chunk KR_P / 8 away (NeoX pairs, KR_OFF and KR_P multiples of 8), else a dim at a time.
// A chunk inside the window reads its cos and sin as vec4s where the table's rows are
// 16-byte aligned (FA_TVEC): two loads (adjacent) or four (NeoX) instead of one a dim.
void kr_rot8(uint base, uint st0, uint c, uint tr, inout vec4 a, inout vec4 b)
{
    const uint lo = 8u * c;
    if ((FLAGS & FA_KROT) == 0u || lo + 8u <= KR_OFF || lo >= KR_END)
        return;
    if ((FLAGS & FA_TVEC) != 0u && lo >= KR_OFF && lo + 8u <= KR_END) {
        if (KR_ADJ && (KR_OFF & 1u) == 0u) { // pairs (x, y) of lanes, (cos, sin) likewise
            const vec4 t0 = t_f4[(tr + lo) >> 2], t1 = t_f4[((tr + lo) >> 2) + 1u];
            a = vec4(a.x * t0.x - a.y * t0.y, a.x * t0.y + a.y * t0.x,
                     a.z * t0.z - a.w * t0.w, a.z * t0.w + a.w * t0.z);
            b = vec4(b.x * t1.x - b.y * t1.y, b.x * t1.y + b.y * t1.x,
                     b.z * t1.z - b.w * t1.w, b.z * t1.w + b.w * t1.z);
            return;
        }
        if (!KR_ADJ && (KR_OFF & 7u) == 0u && (KR_P & 7u) == 0u) {
            // the chunk in one half of the window, its partners KR_P / 8 chunks away;
            // pair j's cos at table dim j, its sin KR_P on
            const bool first = lo < KR_OFF + KR_P;
            vec4 pa, pb;
            ld8_k(base, st0, first ? c + KR_P / 8u : c - KR_P / 8u, pa, pb);
            const uint tc = (tr + (first ? lo : lo - KR_P)) >> 2, ts = tc + KR_P / 4u;
            const vec4 c0 = t_f4[tc], c1 = t_f4[tc + 1u], s0 = t_f4[ts], s1 = t_f4[ts + 1u];
            if (first) {
                a = a * c0 - pa * s0;
                b = b * c1 - pb * s1;
            } else {
                a = pa * s0 + a * c0;
                b = pb * s1 + b * c1;
            }
            return;
        }
    }
    float x[8] = float[8](a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w);
    float y[8];
    if (KR_ADJ && (KR_OFF & 1u) == 0u) {
        [[unroll]] for (uint i = 0u; i < 8u; i++)
            y[i] = x[i ^ 1u];
    } else if (!KR_ADJ && (KR_OFF & 7u) == 0u && (KR_P & 7u) == 0u) {
        // the whole chunk is in one half of the window
        const uint cp = lo < KR_OFF + KR_P ? c + KR_P / 8u : c - KR_P / 8u;
        vec4 pa, pb;
        ld8_k(base, st0, cp, pa, pb);
        y = float[8](pa.x, pa.y, pa.z, pa.w, pb.x, pb.y, pb.z, pb.w);
    } else {
        [[unroll]] for (uint i = 0u; i < 8u; i++)
            x[i] = lo + i < D ? kr_rot1(base, st0, lo + i, tr, x[i]) : x[i];
        a = vec4(x[0], x[1], x[2], x[3]);
        b = vec4(x[4], x[5], x[6], x[7]);
        return;
    }
    [[unroll]] for (uint i = 0u; i < 8u; i++) {
        const uint d = lo + i;
        if (d < KR_OFF || d >= KR_END)
            continue;
        const bool first = KR_ADJ ? ((d - KR_OFF) & 1u) == 0u : d < KR_OFF + KR_P;
        const uint da = first ? d : d - (KR_ADJ ? 1u : KR_P);
        const float cs = t_f[tr + da], sn = t_f[tr + da + (KR_ADJ ? 1u : KR_P)];
        x[i] = first ? x[i] * cs - y[i] * sn : y[i] * sn + x[i] * cs;
    }
    a = vec4(x[0], x[1], x[2], x[3]);
    b = vec4(x[4], x[5], x[6], x[7]);
}

// dst element e (f16: its half of the word, atomically: another row may share the word).
void st_o(uint e, float x)
{
    if ((FLAGS & FA_O16) != 0u) {
        uint sh = (e & 1u) * 16u;
        atomicAnd(o_w[e >> 1], ~(0xffffu << sh));
        atomicOr(o_w[e >> 1], pe_f32_to_f16(x) << sh);
    } else {
        o_f[e] = x;
    }
}

void main()
{
    const float NEG_INF = uintBitsToFloat(0xff800000u);
    const uint lid = gl_LocalInvocationID.x;
    // the parameters this invocation needs (read once)
    const uint q_off = pu(P_Q), q_st0 = pu(P_Q + 1u), q_st1 = pu(P_Q + 2u),
               q_st2 = pu(P_Q + 3u), q_st3 = pu(P_Q + 4u);
    const uint k_off = pu(P_K), k_st0 = pu(P_K + 1u), k_st1 = pu(P_K + 2u),
               k_st2 = pu(P_K + 3u), k_st3 = pu(P_K + 4u);
    const uint v_off = pu(P_V), v_st0 = pu(P_V + 1u), v_st1 = pu(P_V + 2u),
               v_st2 = pu(P_V + 3u), v_st3 = pu(P_V + 4u);
    const uint Tk = pu(P_TK), Hk = pu(P_HK), group = pu(P_GROUP), NF = pu(P_NF);
    const uint RBn = pu(P_RB), NS = pu(P_NS), KS = pu(P_KS);
    const int qoff = pi(P_QOFF), koff = pi(P_KOFF);
    const float scale = pf(P_SCALE);

    // Items: split-K: invocation item = split s + NS * (rb + RBn * (hk + Hk * b));
    // FA_TILE: work-group item = tile t + tiles * (hk + Hk * b), row blocks
    // t * WG + lid. Both loops are grid-stride; the FA_TILE one is uniform in the
    // work-group (barriers).
    const uint n_items = pu(P_NITEMS);
    const uint tiles = pu(P_TILES);
    const uint stride = TILE ? gl_NumWorkGroups.x : gl_NumWorkGroups.x * WG;
    for (uint item = TILE ? gl_WorkGroupID.x : gl_GlobalInvocationID.x; item < n_items;
         item += stride) {
        uint s = 0u, rb, hkb;
        if (TILE) {
            hkb = item / tiles;
            rb = (item - hkb * tiles) * WG + lid;
        } else {
            uint rest = item / NS;
            s = item - rest * NS;
            hkb = rest / RBn;
            rb = rest - hkb * RBn;
        }
        const uint b = hkb / Hk, hk = hkb - b * Hk;
        const bool live = rb < RBn; // FA_TILE: the last tile may have idle invocations

        // the rows: head h[r], query qq[r], position qp[r]
        uint hh[R], qq[R];
        int qp[R];
        bool rv[R];
        int qp_max = -2147483647;
        [[unroll]] for (uint r = 0u; r < R; r++) {
            uint f = rb * R + r;
            rv[r] = live && f < NF;
            uint fq = min(f, NF - 1u);
            qq[r] = fq / group;
            hh[r] = hk * group + (fq - qq[r] * group);
            qp[r] = int(qq[r]) + qoff;
            if (rv[r])
                qp_max = max(qp_max, qp[r]);
        }
        // keys [k_lo, k_hi) of this item
        uint k_lo = 0u, k_hi = Tk;
        if (!TILE) {
            k_lo = s * KS;
            k_hi = min(Tk, k_lo + KS);
        }
        if ((FLAGS & (FA_CAUSAL | FA_ALIBI_CAUSAL)) != 0u) {
            // keys with kp > qp are masked for every row: stop at the last visible one
            int last;
            if (TILE) {
                // the work-group's last row decides (uniform)
                uint f_last = min(NF, (item - hkb * tiles + 1u) * WG * R) - 1u;
                last = int(f_last / group) + qoff - koff;
            } else {
                last = qp_max - koff;
            }
            k_hi = last < 0 ? 0u : min(k_hi, uint(last) + 1u);
            if (!TILE)
                k_hi = max(k_hi, k_lo);
        }

        // q in registers
        vec4 qv[R * DC * 2u];
        [[unroll]] for (uint r = 0u; r < R; r++) {
            uint qb = q_off + hh[r] * q_st1 + qq[r] * q_st2 + b * q_st3;
            [[unroll]] for (uint c = 0u; c < DC * 2u; c++) {
                vec4 x;
                [[unroll]] for (uint i = 0u; i < 4u; i++) {
                    uint d = 4u * c + i;
                    x[i] = d < D ? ld_q(qb + d * q_st0) : 0.0f;
                }
                qv[r * DC * 2u + c] = x;
            }
        }
        // per-row constants of the bias terms
        float slope[R], mslope[R];
        uint mb[R], tb[R];
        [[unroll]] for (uint r = 0u; r < R; r++) {
            slope[r] = (FLAGS & FA_ALIBI) != 0u ? pf(pu(P_SLOPES) + hh[r]) : 0.0f;
            mslope[r] = (FLAGS & FA_MSLOPES) != 0u ? pf(pu(P_MSL) + hh[r]) : 1.0f;
            mb[r] = (FLAGS & FA_MASK) != 0u ? pu(P_M) + qq[r] * pu(P_M + 2u) +
                                                  hh[r] * pu(P_M + 3u) + b * pu(P_M + 4u)
                                            : 0u;
            tb[r] = (FLAGS & FA_RELB) != 0u ? pu(P_T) + hh[r] * pu(P_T + 2u) : 0u;
        }
        const uint m_st0 = (FLAGS & FA_MASK) != 0u ? pu(P_M + 1u) : 0u;
        const uint t_st0 = (FLAGS & FA_RELB) != 0u ? pu(P_T + 1u) : 0u;
        const int rel_min = pi(P_RELMIN);
        const uint n_rel = pu(P_NREL), bucket0 = pu(P_BUCKET);
        const float cap = pf(P_CAP);

        vec4 acc[R * DVC * 2u];
        [[unroll]] for (uint i = 0u; i < R * DVC * 2u; i++)
            acc[i] = vec4(0.0f);
        float m[R], l[R];
        [[unroll]] for (uint r = 0u; r < R; r++) {
            m[r] = NEG_INF;
            l[r] = 0.0f;
        }

        const uint kbase = k_off + hk * k_st1 + b * k_st3;
        const uint vbase = v_off + hk * v_st1 + b * v_st3;
        // the RoPE table's rows: key k's at trbase + k * tr_st2
        const uint trbase = (FLAGS & FA_KROT) != 0u ? pu(P_T) + b * pu(P_T + 2u) : 0u;
        const uint tr_st2 = (FLAGS & FA_KROT) != 0u ? pu(P_T + 1u) : 0u;
        // FA_TILE: tiles of BK keys; split-K: one "tile" of the whole range
        const uint t_step = TILE ? BK : max(k_hi - k_lo, 1u);
        for (uint k0 = k_lo; k0 < k_hi; k0 += t_step) {
            const uint t_end = min(k_hi, k0 + t_step);
            if (TILE) {
                // stage keys k0 .. k0 + BK - 1 (zeros past t_end and past D / DV)
                barrier(); // the previous tile is no longer read
                for (uint e = lid; e < BK * DP; e += WG) {
                    uint j = e / DP, d = e - j * DP, k = k0 + j;
                    float x = 0.0f;
                    if (k < t_end && d < D) {
                        x = ld_k(kbase + k * k_st2 + d * k_st0);
                        x = kr_rot1(kbase + k * k_st2, k_st0, d, trbase + k * tr_st2, x);
                    }
                    ks4[e >> 2][e & 3u] = x;
                }
                for (uint e = lid; e < BK * DVP; e += WG) {
                    uint j = e / DVP, d = e - j * DVP, k = k0 + j;
                    float x = 0.0f;
                    if (k < t_end && d < DV)
                        x = ld_v(vbase + k * v_st2 + d * v_st0);
                    vs4[e >> 2][e & 3u] = x;
                }
                memoryBarrierShared();
                barrier();
            }
            if (!live)
                continue;
            for (uint kb0 = k0; kb0 < t_end; kb0 += KB) {
                // ---- scores of keys kb0 .. kb0 + 3 for the R rows
                float sc[R * KB];
                [[unroll]] for (uint i = 0u; i < R * KB; i++)
                    sc[i] = 0.0f;
                uint krow[KB];
                [[unroll]] for (uint j = 0u; j < KB; j++)
                    krow[j] = min(kb0 + j, t_end - 1u); // clamped: loads stay in range
                [[unroll]] for (uint c = 0u; c < DC; c++) {
                    [[unroll]] for (uint j = 0u; j < KB; j++) {
                        vec4 ka, kb;
                        if (TILE) {
                            uint jt = krow[j] - k0;
                            ka = ks4[jt * (DP / 4u) + 2u * c];
                            kb = ks4[jt * (DP / 4u) + 2u * c + 1u];
                        } else {
                            ld8_k(kbase + krow[j] * k_st2, k_st0, c, ka, kb);
                            kr_rot8(kbase + krow[j] * k_st2, k_st0, c,
                                    trbase + krow[j] * tr_st2, ka, kb);
                        }
                        [[unroll]] for (uint r = 0u; r < R; r++)
                            sc[r * KB + j] += dot(qv[r * DC * 2u + 2u * c], ka) +
                                              dot(qv[r * DC * 2u + 2u * c + 1u], kb);
                    }
                }
                // ---- scale, softcap, bias, masks; online-softmax step
                float alpha[R];
                [[unroll]] for (uint r = 0u; r < R; r++) {
                    float mx = NEG_INF;
                    [[unroll]] for (uint j = 0u; j < KB; j++) {
                        uint k = kb0 + j;
                        int kp = int(k) + koff;
                        float x = sc[r * KB + j] * scale;
                        if ((FLAGS & FA_SOFTCAP) != 0u)
                            x = cap * tanh(x / cap);
                        if ((FLAGS & FA_ALIBI) != 0u) {
                            int dist = qp[r] - kp;
                            if ((FLAGS & FA_ALIBI_SYM) != 0u)
                                dist = abs(dist);
                            x -= slope[r] * float(dist);
                            if ((FLAGS & FA_ALIBI_CAUSAL) != 0u && kp > qp[r])
                                x = NEG_INF;
                        }
                        if ((FLAGS & FA_RELB) != 0u) {
                            int rel = kp - qp[r] - rel_min;
                            uint ri = uint(clamp(rel, 0, int(n_rel) - 1));
                            int bk = int(par[bucket0 + ri]);
                            x += ld_t(tb[r] + uint(bk) * t_st0);
                        }
                        if ((FLAGS & FA_MASK) != 0u)
                            x += mslope[r] * ld_m(mb[r] + min(k, Tk - 1u) * m_st0);
                        if ((FLAGS & FA_CAUSAL) != 0u && kp > qp[r])
                            x = NEG_INF;
                        if (k >= t_end || !rv[r])
                            x = NEG_INF;
                        sc[r * KB + j] = x;
                        mx = max(mx, x);
                    }
                    float mn = max(m[r], mx);
                    // mn == -inf: nothing seen yet, every p is 0 and acc stays 0
                    float base = mn == NEG_INF ? 0.0f : mn;
                    alpha[r] = exp(m[r] - base);
                    float ps = 0.0f;
                    [[unroll]] for (uint j = 0u; j < KB; j++) {
                        float p = exp(sc[r * KB + j] - base);
                        sc[r * KB + j] = p;
                        ps += p;
                    }
                    l[r] = l[r] * alpha[r] + ps;
                    m[r] = mn;
                }
                // ---- acc = alpha * acc + sum_j p_j * V_j
                [[unroll]] for (uint c = 0u; c < DVC; c++) {
                    vec4 va[KB], vb[KB];
                    [[unroll]] for (uint j = 0u; j < KB; j++) {
                        if (TILE) {
                            uint jt = krow[j] - k0;
                            va[j] = vs4[jt * (DVP / 4u) + 2u * c];
                            vb[j] = vs4[jt * (DVP / 4u) + 2u * c + 1u];
                        } else {
                            ld8_v(vbase + krow[j] * v_st2, v_st0, c, va[j], vb[j]);
                        }
                    }
                    [[unroll]] for (uint r = 0u; r < R; r++) {
                        uint i = r * DVC * 2u + 2u * c;
                        vec4 a0 = acc[i] * alpha[r], a1 = acc[i + 1u] * alpha[r];
                        [[unroll]] for (uint j = 0u; j < KB; j++) {
                            a0 += sc[r * KB + j] * va[j];
                            a1 += sc[r * KB + j] * vb[j];
                        }
                        acc[i] = a0;
                        acc[i + 1u] = a1;
                    }
                }
            }
        }
        if (!live)
            continue;

        // ---- the rows out
        [[unroll]] for (uint r = 0u; r < R; r++) {
            if (!rv[r])
                continue;
            if ((FLAGS & FA_PARTIAL) != 0u) {
                // record (s, row): row = f + NF * (hk + Hk * b)
                uint row = rb * R + r + NF * hkb;
                uint rec = (s * pu(P_NROWS) + row) * PREC;
                o_f[rec] = m[r];
                o_f[rec + 1u] = l[r];
                [[unroll]] for (uint i = 0u; i < DVC * 2u; i++)
                    o_f4[(rec >> 2) + 1u + i] = acc[r * DVC * 2u + i];
                continue;
            }
            float mf = m[r], lf = l[r], w = 1.0f;
            if ((FLAGS & FA_SINKS) != 0u) {
                float sk = sink_f[pu(P_S) + hh[r] * pu(P_S + 1u)];
                float mn = max(mf, sk);
                if (mn != NEG_INF) {
                    w = exp(mf - mn);
                    lf = lf * w + exp(sk - mn);
                }
                mf = mn;
            }
            // every key masked and no finite sink: 0
            float inv = mf == NEG_INF || lf == 0.0f ? 0.0f : w / lf;
            uint ob = pu(P_O) + hh[r] * pu(P_O + 2u) + qq[r] * pu(P_O + 3u) + b * pu(P_O + 4u);
            uint o_st0 = pu(P_O + 1u);
            [[unroll]] for (uint c = 0u; c < DVC * 2u; c++) {
                vec4 x = acc[r * DVC * 2u + c] * inv;
                if ((FLAGS & FA_PAIRS) != 0u) {
                    // f16, unit stride, even offset and DV: whole words
                    [[unroll]] for (uint i = 0u; i < 4u; i += 2u) {
                        uint d = 4u * c + i;
                        if (d < DV)
                            o_w[(ob + d) >> 1] = pe_f32_to_f16(x[i]) |
                                                 (pe_f32_to_f16(x[i + 1u]) << 16);
                    }
                } else {
                    [[unroll]] for (uint i = 0u; i < 4u; i++) {
                        uint d = 4u * c + i;
                        if (d < DV)
                            st_o(ob + d * o_st0, x[i]);
                    }
                }
            }
        }
    }
}
