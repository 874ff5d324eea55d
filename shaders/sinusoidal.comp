#version 450
// sinusoidal.comp - sinusoidal positional encoding, table or fused add (posenc_sinusoidal).
//
// Variants (glslc -D, see shaders/meson.build): DST_F16, X_F16 = 0 (f32) or 1 (f16
// stored in 32-bit words). The layout, positions' dtype and whether x is present are
// push-constant flags. One invocation per (frequency i, row): it computes the angle
// pos*freq[i] once and writes both the sin and the cos element.
#extension GL_GOOGLE_include_directive : require

#ifndef DST_F16
#define DST_F16 0
#endif
#ifndef X_F16
#define X_F16 0
#endif

#include "common.glsl"
#include "sinusoidal_params.glsl"

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in; // PE_VK_SIN_WG

// Whole buffers; x is dst again when there is no x (then never read), and may be the
// same memory as dst (in place: each element is read before it is written by the same
// invocation).
#if DST_F16
layout(std430, set = 0, binding = 0) buffer DstBuf { uint dst_w[]; };
#else
layout(std430, set = 0, binding = 0) buffer DstBuf { float dst_f[]; };
#endif
#if X_F16
layout(std430, set = 0, binding = 1) readonly buffer XBuf { uint x_w[]; };
#else
layout(std430, set = 0, binding = 1) readonly buffer XBuf { float x_f[]; };
#endif
layout(std430, set = 0, binding = 2) readonly buffer PosBuf { int pos_i[]; };
layout(std430, set = 0, binding = 3) readonly buffer FreqBuf { float freq[]; };

float load_x(uint e)
{
#if X_F16
    return pe_load_f16(x_w[e >> 1], e & 1u);
#else
    return x_f[e];
#endif
}

void store_dst(uint e, float v)
{
#if DST_F16
    // Another invocation may own the other half of this word: clear our 16 bits, then
    // set them, both atomically, so its bits are never overwritten.
    uint sh = (e & 1u) * 16u;
    atomicAnd(dst_w[e >> 1], ~(0xffffu << sh));
    atomicOr(dst_w[e >> 1], pe_f32_to_f16(v) << sh);
#else
    dst_f[e] = v;
#endif
}

void main()
{
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    uint lay = pc.flags & PE_SIN_FLAG_LAYOUT_MASK;
    bool has_x = (pc.flags & PE_SIN_FLAG_HAS_X) != 0u;
    bool pos_f32 = (pc.flags & PE_SIN_FLAG_POS_F32) != 0u;

    for (uint idx = gl_GlobalInvocationID.x; idx < pc.n_pairs; idx += stride) {
        uint i = idx % pc.n_half;
        uint row = idx / pc.n_half;
        uint i1 = row % pc.ne1;
        uint r23 = row / pc.ne1;
        uint i2 = r23 % pc.ne2;
        uint i3 = r23 / pc.ne2;

        int praw = pos_i[pc.pos_off + i1 * pc.pos_st0 + i2 * pc.pos_st1 + i3 * pc.pos_st2];
        float p = pos_f32 ? intBitsToFloat(praw) : float(praw);
        precise float angle = p * freq[i];
        float s, c;
        pe_sincos(angle, s, c);

        uint i0s, i0c;
        if (lay == PE_SIN_INTERLEAVED) {
            i0s = 2u * i;
            i0c = 2u * i + 1u;
        } else if (lay == PE_SIN_HALF_SPLIT) {
            i0s = i;
            i0c = pc.n_half + i;
        } else {
            i0c = i;
            i0s = pc.n_half + i;
        }

        if (has_x) {
            uint xb = pc.x_off + i1 * pc.x_st1 + i2 * pc.x_st2 + i3 * pc.x_st3;
            s = load_x(xb + i0s * pc.x_st0) * pc.x_scale + s;
            c = load_x(xb + i0c * pc.x_st0) * pc.x_scale + c;
        }

        uint db = pc.dst_off + i1 * pc.dst_st1 + i2 * pc.dst_st2 + i3 * pc.dst_st3;
#if DST_F16
        if ((pc.flags & PE_SIN_FLAG_DST_WORDS) != 0u) {
            // interleaved, dst_st0 == 1, db even: (sin, cos) is exactly one word
            dst_w[(db + i0s) >> 1] = pe_f32_to_f16(s) | (pe_f32_to_f16(c) << 16);
            continue;
        }
#endif
        store_dst(db + i0s * pc.dst_st0, s);
        store_dst(db + i0c * pc.dst_st0, c);
    }
}
