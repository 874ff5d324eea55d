#version 450
// softmax.comp - posenc_softmax (internal.h, struct pe_softmax_op; ggml's GGML_OP_SOFT_MAX),
// as cl/softmax.cl pe_softmax: one workgroup per row (i1, i2, i3) at a time (a grid-stride
// loop over rows, uniform in the workgroup), its 64 invocations striding over the row, so
// rows of any length run. Three passes, everything in f32:
//   1. m = max(max_k v_k, sink)   v_k = scale*x_k + slope*mask_k   (shared-memory tree)
//   2. s = sum_k exp(v_k - m) + exp(sink - m): each invocation's terms with Kahan
//      compensation (`precise`), then a tree over the invocations (fixed order: results
//      do not depend on timing)
//   3. dst_k = exp(v_k - m) * (1/s), each element read and written by the same invocation
//      after both reductions, so dst may be x (in place)
// m == -inf (every v_k is -inf and no finite sink): every dst_k is NaN, as ggml. A key
// whose v_k is -inf gets exactly 0.
//
// f16 tensors are 32-bit words (common.glsl; no 16-bit storage feature needed): f16 dst
// elements are written with atomicAnd / atomicOr on their half of the word (rows of
// neighbouring workgroups may share a word), or two to a word with PE_SM_FLAG_PAIRS.
//
// Variants (glslc -D): X_F16, DST_F16, MASK_F16. Bindings: 0 x, 1 dst, 2 mask, 3 sinks
// (f32), 4 slopes (f32 [n_head], the host's table); absent ones are bound to x.
#extension GL_GOOGLE_include_directive : require

#ifndef X_F16
#define X_F16 0
#endif
#ifndef DST_F16
#define DST_F16 0
#endif
#ifndef MASK_F16
#define MASK_F16 0
#endif

#include "common.glsl"

#define PE_SM_WG 64u // PE_VK_SM_WG
#define PE_SM_FLAG_MASK 0x1u
#define PE_SM_FLAG_SINKS 0x2u
#define PE_SM_FLAG_SLOPES 0x4u
#define PE_SM_FLAG_PAIRS 0x8u

// Mirrors struct pe_vk_softmax_push (src/kernel_abi.h, where the fields are explained).
layout(push_constant, std430) uniform PeSoftmaxPush {
    uint x_off, x_st0, x_st1, x_st2, x_st3;             // 0
    uint d_off, d_st0, d_st1, d_st2, d_st3;             // 20
    uint m_off, m_st0, m_st1, m_st2, m_st3;             // 40
    uint s_off, s_st0;                                  // 60
    uint n, n_r, n_h, n_rows;                           // 68
    uint m_ne2, m_ne3, h_off, b_off;                    // 84
    float scale;                                        // 100
    uint flags;                                         // 104
} pc;                                                   // 108 bytes

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in; // PE_VK_SM_WG

#if X_F16
layout(std430, set = 0, binding = 0) readonly buffer XBuf { uint x_w[]; };
#else
layout(std430, set = 0, binding = 0) readonly buffer XBuf { float x_f[]; };
#endif
#if DST_F16
layout(std430, set = 0, binding = 1) buffer DBuf { uint d_w[]; };
#else
layout(std430, set = 0, binding = 1) writeonly buffer DBuf { float d_f[]; };
#endif
#if MASK_F16
layout(std430, set = 0, binding = 2) readonly buffer MBuf { uint m_w[]; };
#else
layout(std430, set = 0, binding = 2) readonly buffer MBuf { float m_f[]; };
#endif
layout(std430, set = 0, binding = 3) readonly buffer SBuf { float sinks[]; };
layout(std430, set = 0, binding = 4) readonly buffer PBuf { float slopes[]; };

shared float red[PE_SM_WG];

float load_x(uint e)
{
#if X_F16
    return pe_load_f16(x_w[e >> 1], e & 1u);
#else
    return x_f[e];
#endif
}

float load_mask(uint e)
{
#if MASK_F16
    return pe_load_f16(m_w[e >> 1], e & 1u);
#else
    return m_f[e];
#endif
}

// dst element e (f16: atomically on its half of the word).
void store_dst(uint e, float p)
{
#if DST_F16
    uint sh = (e & 1u) * 16u;
    atomicAnd(d_w[e >> 1], ~(0xffffu << sh));
    atomicOr(d_w[e >> 1], pe_f32_to_f16(p) << sh);
#else
    d_f[e] = p;
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
    for (uint s = PE_SM_WG / 2u; s > 0u; s >>= 1) {
        if (lid < s)
            red[lid] = is_max ? max(red[lid], red[lid + s]) : red[lid] + red[lid + s];
        memoryBarrierShared();
        barrier();
    }
    return red[0];
}

// v_k = scale * x_k + slope * mask_k (no contraction into fma: the same rounding as ggml).
float logit(uint xb, uint mb, uint k, float slope, bool has_mask)
{
    precise float v = pc.scale * load_x(xb + k * pc.x_st0);
    if (has_mask)
        v = v + slope * load_mask(mb + k * pc.m_st0);
    return v;
}

void main()
{
    const uint lid = gl_LocalInvocationID.x;
    const bool has_mask = (pc.flags & PE_SM_FLAG_MASK) != 0u;
    const bool has_sinks = (pc.flags & PE_SM_FLAG_SINKS) != 0u;
    const float neg_inf = uintBitsToFloat(0xff800000u);
    const float nan = uintBitsToFloat(0x7fc00000u);
    for (uint row = gl_WorkGroupID.x; row < pc.n_rows; row += gl_NumWorkGroups.x) {
        const uint hb = row / pc.n_r;
        const uint i1 = row - hb * pc.n_r;
        const uint i3 = hb / pc.n_h;
        const uint i2 = hb - i3 * pc.n_h;
        const uint h = pc.h_off + i2, b = pc.b_off + i3;
        const uint xb = pc.x_off + i1 * pc.x_st1 + i2 * pc.x_st2 + i3 * pc.x_st3;
        const uint db = pc.d_off + i1 * pc.d_st1 + i2 * pc.d_st2 + i3 * pc.d_st3;
        const uint mb = has_mask ? pc.m_off + i1 * pc.m_st1 + (h % pc.m_ne2) * pc.m_st2 +
                                       (b % pc.m_ne3) * pc.m_st3
                                 : 0u;
        // (branches, not selects: an absent table is bound to x and must not be read)
        float slope = 1.0f;
        if ((pc.flags & PE_SM_FLAG_SLOPES) != 0u)
            slope = slopes[h];
        float sink = neg_inf;
        if (has_sinks)
            sink = sinks[pc.s_off + h * pc.s_st0];

        float m = neg_inf;
        for (uint k = lid; k < pc.n; k += PE_SM_WG)
            m = max(m, logit(xb, mb, k, slope, has_mask));
        m = max(reduce(m, true), sink);
        // m is the same in every invocation: the branches on it are uniform
        if (m == neg_inf) { // every v_k is -inf and no finite sink: NaN, as ggml
            for (uint k = lid; k < pc.n; k += PE_SM_WG)
                store_dst(db + k * pc.d_st0, nan);
            continue;
        }
        precise float s = 0.0f, c = 0.0f;
        for (uint k = lid; k < pc.n; k += PE_SM_WG) {
            float v = logit(xb, mb, k, slope, has_mask);
            precise float e = v == neg_inf ? 0.0f : exp(v - m);
            precise float y = e - c;
            precise float t = s + y;
            c = (t - s) - y;
            s = t;
        }
        s = reduce(s, false);
        if (has_sinks)
            s += exp(sink - m);
        const float inv = 1.0f / s;
        if ((pc.flags & PE_SM_FLAG_PAIRS) != 0u) {
#if DST_F16
            // unit stride, even offsets and n: elements 2u, 2u + 1 are one word
            for (uint u = lid; u < pc.n / 2u; u += PE_SM_WG) {
                uint k = 2u * u;
                float v0 = logit(xb, mb, k, slope, has_mask);
                float v1 = logit(xb, mb, k + 1u, slope, has_mask);
                float p0 = v0 == neg_inf ? 0.0f : exp(v0 - m) * inv;
                float p1 = v1 == neg_inf ? 0.0f : exp(v1 - m) * inv;
                d_w[(db + k) >> 1] = pe_f32_to_f16(p0) | (pe_f32_to_f16(p1) << 16);
            }
#endif
        } else {
            for (uint k = lid; k < pc.n; k += PE_SM_WG) {
                float v = logit(xb, mb, k, slope, has_mask);
                store_dst(db + k * pc.d_st0, v == neg_inf ? 0.0f : exp(v - m) * inv);
            }
        }
    }
}
