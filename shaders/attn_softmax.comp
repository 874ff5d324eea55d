#version 450
// attn_softmax.comp - posenc_attention's softmax (internal.h, struct pe_attn_softmax_op),
// in place on the f32 logits, as cl/attention.cl pe_attn_softmax: one workgroup per row
// (q, h, b) at a time (a grid-stride loop over rows, uniform in the workgroup), its 64
// invocations striding over the keys. With qp = q + q_offset, keys k + k_offset > qp are
// masked when causal (PE_ATTN_FLAG_CAUSAL): only keys k < kn take part.
//   x_k = logits[k] + mask[k]      (PE_ATTN_FLAG_HAS_MASK; else the logit)
//   m   = max over k < kn of x_k   (shared-memory tree reduction, fixed order)
//   m == -inf:  every p_k = 0      (all keys masked: zeros, not NaN)
//   else        p_k = exp(x_k - m) / sum_{j < kn} exp(x_j - m)  (0 for k >= kn)
// written over the logits and, with PE_ATTN_FLAG_HAS_W, into weights (f32, or f16: whole
// words with PE_ATTN_FLAG_PAIRS, else atomicAnd / atomicOr on the element's word).
// Everything in f32; the two reductions are trees over the invocations' partial results,
// each of which is accumulated in order of k, so results do not depend on timing.
//
// Push (attention_params.glsl, PE_PUSH_ATTN_SOFTMAX). Variants (glslc -D): MASK_F16,
// W_F16. Bindings: 0 logits (read and written), 1 mask (the logits when there is none),
// 2 weights (the logits when there are none).
#extension GL_GOOGLE_include_directive : require

#ifndef MASK_F16
#define MASK_F16 0
#endif
#ifndef W_F16
#define W_F16 0
#endif

#define PE_PUSH_ATTN_SOFTMAX
#include "common.glsl"
#include "attention_params.glsl"

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in; // PE_VK_ATTN_SOFTMAX_WG

layout(std430, set = 0, binding = 0) buffer LBuf { float lg[]; };
#if MASK_F16
layout(std430, set = 0, binding = 1) readonly buffer MBuf { uint mk_w[]; };
#else
layout(std430, set = 0, binding = 1) readonly buffer MBuf { float mk_f[]; };
#endif
#if W_F16
layout(std430, set = 0, binding = 2) buffer WBuf { uint w_w[]; };
#else
layout(std430, set = 0, binding = 2) writeonly buffer WBuf { float w_f[]; };
#endif

shared float red[PE_ATTN_WG];

float load_mask(uint e)
{
#if MASK_F16
    return pe_load_f16(mk_w[e >> 1], e & 1u);
#else
    return mk_f[e];
#endif
}

// The max (is_max) or the sum of v over the workgroup, in every invocation. Every
// invocation must call it (barriers).
float reduce(float v, bool is_max)
{
    const uint lid = gl_LocalInvocationID.x;
    barrier(); // red may still be read from the previous reduction
    red[lid] = v;
    memoryBarrierShared();
    barrier();
    for (uint s = PE_ATTN_WG / 2u; s > 0u; s >>= 1) {
        if (lid < s)
            red[lid] = is_max ? max(red[lid], red[lid + s]) : red[lid] + red[lid + s];
        memoryBarrierShared();
        barrier();
    }
    return red[0];
}

// Weights element e (f16: atomically on its half of the word).
void store_w(uint e, float p)
{
#if W_F16
    uint sh = (e & 1u) * 16u;
    atomicAnd(w_w[e >> 1], ~(0xffffu << sh));
    atomicOr(w_w[e >> 1], pe_f32_to_f16(p) << sh);
#else
    w_f[e] = p;
#endif
}

// p_k = exp(x_k - m) / s.
float prob(uint lb, uint mb, uint k, float m, float s)
{
    float x = lg[lb + k * pc.lg_st0];
    if ((pc.flags & PE_ATTN_FLAG_HAS_MASK) != 0u)
        x += load_mask(mb + k * pc.mk_st0);
    return exp(x - m) / s;
}

void main()
{
    const uint lid = gl_LocalInvocationID.x;
    const bool has_mask = (pc.flags & PE_ATTN_FLAG_HAS_MASK) != 0u;
    const bool has_w = (pc.flags & PE_ATTN_FLAG_HAS_W) != 0u;
    const float neg_inf = uintBitsToFloat(0xff800000u);
    for (uint row = gl_WorkGroupID.x; row < pc.n_rows; row += gl_NumWorkGroups.x) {
        uint hb = pe_udiv(row, pc.q_magic, pc.shifts & 0xffu);
        uint q = row - hb * pc.n_q;
        uint b = pe_udiv(hb, pc.h_magic, (pc.shifts >> 8) & 0xffu);
        uint h = hb - b * pc.n_h;
        uint lb = pc.lg_off + q * pc.lg_st1 + h * pc.lg_st2 + b * pc.lg_st3;
        uint mb = has_mask ? pc.mk_off + q * pc.mk_st1 + h * pc.mk_st2 + b * pc.mk_st3 : 0u;
        uint wb = has_w ? pc.w_off + q * pc.w_st1 + h * pc.w_st2 + b * pc.w_st3 : 0u;
        // keys k < kn are not masked by causality: k + k_offset <= q + q_offset (positions
        // fit int32, so qp and qp - k_offset + 1 do not wrap)
        uint kn = pc.n_k;
        if ((pc.flags & PE_ATTN_FLAG_CAUSAL) != 0u) {
            uint qp = q + pc.q_offset;
            kn = qp < pc.k_offset ? 0u : min(pc.n_k, qp - pc.k_offset + 1u);
        }

        float m = neg_inf;
        for (uint k = lid; k < kn; k += PE_ATTN_WG) {
            float x = lg[lb + k * pc.lg_st0];
            if (has_mask)
                x += load_mask(mb + k * pc.mk_st0);
            m = max(m, x);
        }
        m = reduce(m, true);
        // m is the same in every invocation: the branches on `none` are uniform
        const bool none = m == neg_inf; // every key masked: all zeros, not NaN
        float s = 1.0f;
        if (!none) {
            s = 0.0f;
            for (uint k = lid; k < kn; k += PE_ATTN_WG) {
                float x = lg[lb + k * pc.lg_st0];
                if (has_mask)
                    x += load_mask(mb + k * pc.mk_st0);
                s += exp(x - m);
            }
            s = reduce(s, false);
        }
        const uint kv = none ? 0u : kn; // keys with a nonzero weight: k < kv
        // The pass that writes: each logit is read before it is overwritten, by the same
        // invocation.
        if ((pc.flags & PE_ATTN_FLAG_PAIRS) != 0u) {
            // f16 weights, w_st0 == 1, even offsets and n_k: a unit is keys 2u, 2u + 1
            // and one whole word of weights
            for (uint u = lid; u < pc.n_k / 2u; u += PE_ATTN_WG) {
                uint k = 2u * u;
                float p0 = k < kv ? prob(lb, mb, k, m, s) : 0.0f;
                float p1 = k + 1u < kv ? prob(lb, mb, k + 1u, m, s) : 0.0f;
                lg[lb + k * pc.lg_st0] = p0;
                lg[lb + (k + 1u) * pc.lg_st0] = p1;
#if W_F16
                w_w[(wb + k) >> 1] = pe_f32_to_f16(p0) | (pe_f32_to_f16(p1) << 16);
#endif
            }
        } else {
            for (uint k = lid; k < pc.n_k; k += PE_ATTN_WG) {
                float p = k < kv ? prob(lb, mb, k, m, s) : 0.0f;
                lg[lb + k * pc.lg_st0] = p;
                if (has_w)
                    store_w(wb + k * pc.w_st0, p);
            }
        }
    }
}
