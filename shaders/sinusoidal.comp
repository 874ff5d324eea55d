#version 450
// sinusoidal.comp - sinusoidal positional encoding, table or fused add (posenc_sinusoidal).
//
// Variants (glslc -D, see shaders/meson.build): DST_F16, X_F16 = 0 (f32) or 1 (f16
// stored in 32-bit words). The layout, positions' dtype and whether x is present are
// push-constant flags. Each loop iteration handles one unit of a row (grid layout in
// src/kernel_abi.h): the (sin, cos) pair i, whose angle pos*freq[i] is computed once for
// both elements (binding 3 holds the frequencies' hi words, then their lo words:
// common.glsl's pe_angle_sincos), or two adjacent pairs in the f16 PE_SIN_FLAG_DST_PAIR2 path.
//
// Aligned contiguous rows take the vector paths instead (PE_SIN_SPEC_VEC, below): 4
// pairs per unit as vec4 in f32, 8 pairs per unit as uvec4 of 8 halves with f16.
//
// f16 dst: a general strided view writes each element with two atomics on its word
// (store_dst); when rows are contiguous and start on even elements, whole words are
// stored plainly: (sin, cos) of a pair when interleaved (PE_SIN_FLAG_DST_WORDS), the two
// sin and the two cos values of pairs 2u, 2u+1 in the half-split layouts (..._PAIR2).
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

// PE_SIN_SPEC_* (src/kernel_abi.h): 0 = the general path below; the vector path is
// removed from pipelines that do not run it (and vice versa) when the driver compiles them.
layout(constant_id = 0) const uint SPEC = 0u;
const bool VEC = (SPEC & PE_SIN_SPEC_VEC) != 0u;
const bool VEC_HAS_X = (SPEC & PE_SIN_SPEC_HAS_X) != 0u;
const bool VEC_POS_SHARED = (SPEC & PE_SIN_SPEC_POS_SHARED) != 0u;
const uint VEC_LAY = (SPEC >> PE_SIN_SPEC_LAYOUT_SHIFT) & 3u;

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
// The same bindings as vec4 arrays (the vector paths: f32 rows aligned to 4 elements)
// and uvec4 arrays of 8 halves (f16 rows aligned to 8 elements).
#if DST_F16
layout(std430, set = 0, binding = 0) writeonly buffer DstBuf8 { uvec4 dst_h8[]; };
#else
layout(std430, set = 0, binding = 0) writeonly buffer DstBuf4 { vec4 dst_v[]; };
#endif
#if X_F16
layout(std430, set = 0, binding = 1) readonly buffer XBuf8 { uvec4 x_h8[]; };
#else
layout(std430, set = 0, binding = 1) readonly buffer XBuf4 { vec4 x_v[]; };
#endif
layout(std430, set = 0, binding = 3) readonly buffer FreqBuf4 { vec4 freq_v[]; };

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

// The (sin, cos) pair i at position p: its two i0 indices and values (fused add done).
void pe_pair(uint i, float p, uint lay, uint xb, out uint i0s, out uint i0c, out float s,
             out float c)
{
    pe_angle_sincos(p, freq[i], freq[pc.n_half + i], s, c); // hi and lo words
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
    if ((pc.flags & PE_SIN_FLAG_HAS_X) != 0u) {
        s = load_x(xb + i0s * pc.x_st0) * pc.x_scale + s;
        c = load_x(xb + i0c * pc.x_st0) * pc.x_scale + c;
    }
}

// The vector path (PE_SIN_SPEC_VEC; host conditions in ops_vulkan.c): a unit is 4 pairs
// (4u .. 4u+3) of token i1, batch i3, for every i2 of dim 2. Its (sin, cos) values are
// two vec4 at element offsets oa and ob of a row: (s0 c0 s1 c1) at 8u and (s2 c2 s3 c3)
// at 8u+4 when interleaved, the 4 sin at 4u and the 4 cos at n_half+4u in the half-split
// layouts (cos first: the other way round). They are computed once per unit when the
// position does not depend on i2 (PE_SIN_SPEC_POS_SHARED) and reused for all ne2 rows.
// CPU implementations such as lavapipe scalarize every buffer access per invocation and
// component, so whole vec4 accesses and reuse across rows are what makes this fast.
void pe_vec_values(int praw, vec4 f, vec4 fl, out vec4 ea, out vec4 eb)
{
    float p = (pc.flags & PE_SIN_FLAG_POS_F32) != 0u ? intBitsToFloat(praw) : float(praw);
    vec4 s, c;
    pe_angle_sincos(vec4(p), f, fl, s, c); // frequencies as hi (f) and lo (fl) words
    if (VEC_LAY == PE_SIN_INTERLEAVED) {
        ea = vec4(s.x, c.x, s.y, c.y);
        eb = vec4(s.z, c.z, s.w, c.w);
    } else if (VEC_LAY == PE_SIN_HALF_SPLIT) {
        ea = s;
        eb = c;
    } else {
        ea = c;
        eb = s;
    }
}

#if !DST_F16 && !X_F16

void pe_vec_main()
{
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint idx = gl_GlobalInvocationID.x; idx < pc.n_total; idx += stride) {
        uint row = pe_udiv(idx, pc.units_magic, pc.shifts & 0xffu); // i1 + ne1 * i3
        uint u = idx - row * pc.n_units;
        uint i3 = pe_udiv(row, pc.ne1_magic, (pc.shifts >> 8) & 0xffu);
        uint i1 = row - i3 * pc.ne1;
        uint oa = VEC_LAY == PE_SIN_INTERLEAVED ? 8u * u : 4u * u;
        uint ob = VEC_LAY == PE_SIN_INTERLEAVED ? oa + 4u : pc.n_half + oa;
        uint pb = pc.pos_off + i1 * pc.pos_st0 + i3 * pc.pos_st2;
        uint xb = pc.x_off + i1 * pc.x_st1 + i3 * pc.x_st3;
        uint db = pc.dst_off + i1 * pc.dst_st1 + i3 * pc.dst_st3;
        vec4 f = freq_v[u], fl = freq_v[(pc.n_half >> 2) + u];
        vec4 ea, eb;
        pe_vec_values(pos_i[pb], f, fl, ea, eb);
        for (uint i2 = 0u; i2 < pc.ne2; i2++) {
            if (!VEC_POS_SHARED && i2 > 0u)
                pe_vec_values(pos_i[pb + i2 * pc.pos_st1], f, fl, ea, eb);
            uint d = db + i2 * pc.dst_st2;
            if (VEC_HAS_X) {
                uint x = xb + i2 * pc.x_st2;
                vec4 xa = x_v[(x + oa) >> 2];
                vec4 xbv = x_v[(x + ob) >> 2];
                dst_v[(d + oa) >> 2] = xa * pc.x_scale + ea;
                dst_v[(d + ob) >> 2] = xbv * pc.x_scale + eb;
            } else {
                dst_v[(d + oa) >> 2] = ea;
                dst_v[(d + ob) >> 2] = eb;
            }
        }
    }
}
#endif

#if DST_F16 || X_F16
// The vector path of the variants with an f16 tensor (PE_SIN_SPEC_VEC): as above with
// units of 8 pairs (8u .. 8u+7), so that every access is 16 bytes: a run of 8 elements is
// one uvec4 of halves (f16, rows aligned to 8 elements) or two vec4 (f32). The two runs
// of a unit: elements 16u .. 16u+7 and 16u+8 .. 16u+15 when interleaved, the 8 sin at 8u
// and the 8 cos at n_half+8u in the half-split layouts (cos first: the other way round).
// f32 arithmetic as the general path (x*x_scale + value), then one rounding to f16.
void pe_vec8_values(int praw, vec4 f0, vec4 f1, vec4 fl0, vec4 fl1, out vec4 a0,
                    out vec4 a1, out vec4 b0, out vec4 b1)
{
    vec4 s0, c0, s1, c1;
    pe_vec_values(praw, f0, fl0, a0, a1); // (s c s c | s c s c) or (s | c) of pairs 0-3
    pe_vec_values(praw, f1, fl1, b0, b1); // pairs 4-7
    if (VEC_LAY == PE_SIN_INTERLEAVED) {
        // runs: pairs 0-3 (a0 a1), pairs 4-7 (b0 b1): already in order
        return;
    }
    // half-split: run A = first values of pairs 0-7, run B = second values
    s0 = a0;
    c0 = a1;
    s1 = b0;
    c1 = b1;
    a0 = s0;
    a1 = s1;
    b0 = c0;
    b1 = c1;
}

void pe_ld8_x(uint e, out vec4 lo, out vec4 hi)
{
#if X_F16
    uvec4 w = x_h8[e >> 3];
    lo = vec4(pe_f16_to_f32(w.x & 0xffffu), pe_f16_to_f32(w.x >> 16),
              pe_f16_to_f32(w.y & 0xffffu), pe_f16_to_f32(w.y >> 16));
    hi = vec4(pe_f16_to_f32(w.z & 0xffffu), pe_f16_to_f32(w.z >> 16),
              pe_f16_to_f32(w.w & 0xffffu), pe_f16_to_f32(w.w >> 16));
#else
    lo = x_v[e >> 2];
    hi = x_v[(e >> 2) + 1u];
#endif
}

void pe_st8_dst(uint e, vec4 lo, vec4 hi)
{
#if DST_F16
    dst_h8[e >> 3] = uvec4(pe_f32_to_f16(lo.x) | (pe_f32_to_f16(lo.y) << 16),
                           pe_f32_to_f16(lo.z) | (pe_f32_to_f16(lo.w) << 16),
                           pe_f32_to_f16(hi.x) | (pe_f32_to_f16(hi.y) << 16),
                           pe_f32_to_f16(hi.z) | (pe_f32_to_f16(hi.w) << 16));
#else
    dst_v[e >> 2] = lo;
    dst_v[(e >> 2) + 1u] = hi;
#endif
}

void pe_vec8_main()
{
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint idx = gl_GlobalInvocationID.x; idx < pc.n_total; idx += stride) {
        uint row = pe_udiv(idx, pc.units_magic, pc.shifts & 0xffu); // i1 + ne1 * i3
        uint u = idx - row * pc.n_units;
        uint i3 = pe_udiv(row, pc.ne1_magic, (pc.shifts >> 8) & 0xffu);
        uint i1 = row - i3 * pc.ne1;
        uint oa = VEC_LAY == PE_SIN_INTERLEAVED ? 16u * u : 8u * u;
        uint ob = VEC_LAY == PE_SIN_INTERLEAVED ? oa + 8u : pc.n_half + oa;
        uint pb = pc.pos_off + i1 * pc.pos_st0 + i3 * pc.pos_st2;
        uint xb = pc.x_off + i1 * pc.x_st1 + i3 * pc.x_st3;
        uint db = pc.dst_off + i1 * pc.dst_st1 + i3 * pc.dst_st3;
        vec4 f0 = freq_v[2u * u], f1 = freq_v[2u * u + 1u];
        vec4 fl0 = freq_v[(pc.n_half >> 2) + 2u * u], fl1 = freq_v[(pc.n_half >> 2) + 2u * u + 1u];
        vec4 a0, a1, b0, b1;
        pe_vec8_values(pos_i[pb], f0, f1, fl0, fl1, a0, a1, b0, b1);
        for (uint i2 = 0u; i2 < pc.ne2; i2++) {
            if (!VEC_POS_SHARED && i2 > 0u)
                pe_vec8_values(pos_i[pb + i2 * pc.pos_st1], f0, f1, fl0, fl1, a0, a1, b0, b1);
            uint d = db + i2 * pc.dst_st2;
            if (VEC_HAS_X) {
                uint x = xb + i2 * pc.x_st2;
                vec4 xa0, xa1, xb0, xb1;
                pe_ld8_x(x + oa, xa0, xa1);
                pe_ld8_x(x + ob, xb0, xb1);
                pe_st8_dst(d + oa, xa0 * pc.x_scale + a0, xa1 * pc.x_scale + a1);
                pe_st8_dst(d + ob, xb0 * pc.x_scale + b0, xb1 * pc.x_scale + b1);
            } else {
                pe_st8_dst(d + oa, a0, a1);
                pe_st8_dst(d + ob, b0, b1);
            }
        }
    }
}
#endif

void main()
{
    if (VEC) {
#if DST_F16 || X_F16
        pe_vec8_main();
#else
        pe_vec_main();
#endif
        return;
    }
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    uint lay = pc.flags & PE_SIN_FLAG_LAYOUT_MASK;
    bool pos_f32 = (pc.flags & PE_SIN_FLAG_POS_F32) != 0u;

    for (uint idx = gl_GlobalInvocationID.x; idx < pc.n_total; idx += stride) {
        uint row = pe_udiv(idx, pc.units_magic, pc.shifts & 0xffu);
        uint u = idx - row * pc.n_units;
        uint r23 = pe_udiv(row, pc.ne1_magic, (pc.shifts >> 8) & 0xffu);
        uint i1 = row - r23 * pc.ne1;
        uint i3 = pe_udiv(r23, pc.ne2_magic, (pc.shifts >> 16) & 0xffu);
        uint i2 = r23 - i3 * pc.ne2;

        int praw = pos_i[pc.pos_off + i1 * pc.pos_st0 + i2 * pc.pos_st1 + i3 * pc.pos_st2];
        float p = pos_f32 ? intBitsToFloat(praw) : float(praw);
        uint xb = pc.x_off + i1 * pc.x_st1 + i2 * pc.x_st2 + i3 * pc.x_st3;
        uint db = pc.dst_off + i1 * pc.dst_st1 + i2 * pc.dst_st2 + i3 * pc.dst_st3;

        uint i0s, i0c;
        float s, c;
#if DST_F16
        if ((pc.flags & PE_SIN_FLAG_DST_PAIR2) != 0u) {
            // half-split, dst_st0 == 1, db and n_half even: pairs 2u and 2u+1 have their
            // sin values in one word and their cos values in another
            uint i0s1, i0c1;
            float s1, c1;
            pe_pair(2u * u, p, lay, xb, i0s, i0c, s, c);
            pe_pair(2u * u + 1u, p, lay, xb, i0s1, i0c1, s1, c1);
            dst_w[(db + i0s) >> 1] = pe_f32_to_f16(s) | (pe_f32_to_f16(s1) << 16);
            dst_w[(db + i0c) >> 1] = pe_f32_to_f16(c) | (pe_f32_to_f16(c1) << 16);
            continue;
        }
#endif
        pe_pair(u, p, lay, xb, i0s, i0c, s, c);
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
