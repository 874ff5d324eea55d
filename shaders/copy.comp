#version 450
// copy.comp - posenc_copy: dst = src converted to dst's dtype (f32 -> f16 rounds to
// nearest even), any strides. Also the Vulkan copy ceiling of the benchmark.
//
// Variants (glslc -D): SRC_F16, DST_F16 = 0 (f32) or 1 (f16 stored in 32-bit words).
// The grid is flat (src/kernel_abi.h): a unit is G = 1, 2 or 4 consecutive elements of
// one row (G > 1: rows contiguous in both views and aligned to G), moved as one aligned
// vector access of each side's dtype. G and whether the grid is a single row are
// specialization constants, so a pipeline holds only the path it runs (lavapipe executes
// both sides of a branch). Same dtypes copy bits, untouched; f16 elements not written as
// whole words use atomicAnd/atomicOr on their word.
#extension GL_GOOGLE_include_directive : require

#ifndef SRC_F16
#define SRC_F16 0
#endif
#ifndef DST_F16
#define DST_F16 0
#endif

#define PE_COPY_PUSH
#include "common.glsl"
#include "rope_params.glsl"

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in; // PE_VK_ROPE_WG

layout(constant_id = 0) const uint LOG2_G = 0u;
layout(constant_id = 1) const uint ONE_ROW = 0u;
const uint G = 1u << LOG2_G;

// Each buffer is seen through blocks of 1-, 2- and 4-word elements (aliases of the same
// binding); a shader variant uses the ones its dtypes need.
layout(std430, set = 0, binding = 0) readonly buffer Src1 { uint src1[]; };
layout(std430, set = 0, binding = 0) readonly buffer Src2 { uvec2 src2[]; };
layout(std430, set = 0, binding = 0) readonly buffer Src4 { uvec4 src4[]; };
layout(std430, set = 0, binding = 1) buffer Dst1 { uint dst1[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Dst2 { uvec2 dst2[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Dst4 { uvec4 dst4[]; };

uint pe_pack2(vec2 v)
{
    return pe_f32_to_f16(v.x) | (pe_f32_to_f16(v.y) << 16);
}

vec2 pe_unpack2(uint w)
{
    return vec2(pe_f16_to_f32(w & 0xffffu), pe_f16_to_f32(w >> 16));
}

// f16 element e of dst: clear and set its half of the word atomically.
void pe_store_half(uint e, uint h)
{
    uint sh = (e & 1u) * 16u;
    atomicAnd(dst1[e >> 1], ~(0xffffu << sh));
    atomicOr(dst1[e >> 1], h << sh);
}

// Copy G elements from src element s to dst element d.
void copy1(uint s, uint d)
{
#if SRC_F16 && DST_F16
    pe_store_half(d, (src1[s >> 1] >> ((s & 1u) * 16u)) & 0xffffu);
#elif SRC_F16
    dst1[d] = floatBitsToUint(pe_load_f16(src1[s >> 1], s & 1u));
#elif DST_F16
    pe_store_half(d, pe_f32_to_f16(uintBitsToFloat(src1[s])));
#else
    dst1[d] = src1[s];
#endif
}

void copy2(uint s, uint d)
{
#if SRC_F16 && DST_F16
    dst1[d >> 1] = src1[s >> 1];
#elif SRC_F16
    dst2[d >> 1] = floatBitsToUint(pe_unpack2(src1[s >> 1]));
#elif DST_F16
    dst1[d >> 1] = pe_pack2(uintBitsToFloat(src2[s >> 1]));
#else
    dst2[d >> 1] = src2[s >> 1];
#endif
}

void copy4(uint s, uint d)
{
#if SRC_F16 && DST_F16
    dst2[d >> 2] = src2[s >> 2];
#elif SRC_F16
    uvec2 w = src2[s >> 2];
    dst4[d >> 2] = floatBitsToUint(vec4(pe_unpack2(w.x), pe_unpack2(w.y)));
#elif DST_F16
    vec4 v = uintBitsToFloat(src4[s >> 2]);
    dst2[d >> 2] = uvec2(pe_pack2(v.xy), pe_pack2(v.zw));
#else
    dst4[d >> 2] = src4[s >> 2];
#endif
}

void pe_copy_unit(uint s, uint d)
{
    if (G == 4u)
        copy4(s, d);
    else if (G == 2u)
        copy2(s, d);
    else
        copy1(s, d);
}

void main()
{
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    if (ONE_ROW != 0u) {
        // A packed tensor (the host merged its dims): no index arithmetic to speak of,
        // which CPU implementations feel (about 20% of a copy on lavapipe).
        uint ss = G * pc.src_st0, ds = G * pc.dst_st0;
        for (uint u = gl_GlobalInvocationID.x; u < pc.n_total; u += stride)
            pe_copy_unit(pc.src_off + u * ss, pc.dst_off + u * ds);
        return;
    }
    for (uint idx = gl_GlobalInvocationID.x; idx < pc.n_total; idx += stride) {
        uint row = pe_udiv(idx, pc.units_magic, pc.shifts & 0xffu);
        uint u = idx - row * pc.n_units;
        uint r23 = pe_udiv(row, pc.ne1_magic, (pc.shifts >> 8) & 0xffu);
        uint i1 = row - r23 * pc.ne1;
        uint i3 = pe_udiv(r23, pc.ne2_magic, (pc.shifts >> 16) & 0xffu);
        uint i2 = r23 - i3 * pc.ne2;
        uint i0 = u * G;
        pe_copy_unit(pc.src_off + i0 * pc.src_st0 + i1 * pc.src_st1 + i2 * pc.src_st2 +
                         i3 * pc.src_st3,
                     pc.dst_off + i0 * pc.dst_st0 + i1 * pc.dst_st1 + i2 * pc.dst_st2 +
                         i3 * pc.dst_st3);
    }
}
