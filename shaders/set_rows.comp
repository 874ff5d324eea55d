#version 450
// set_rows.comp - posenc_set_rows: dst[i0, rows[i1, j2, j3], i2, i3] = src[i0, i1, i2, i3],
// j2 = (i2 + base2) % e2, j3 = (i3 + base3) % e3 (src/kernel_abi.h). One invocation per
// source element in a flat grid-stride loop; an index outside [0, n_rows) writes nothing.
// Variants (glslc -D): SRC_F16, DST_F16 (f16 stored in 32-bit words). Specialization
// constant 0: 1 when the indices are i64, read as two words (low first; valid when the
// high word is 0 and the low < n_rows), so no 64-bit integer support is needed. The same
// dtype moves the bits untouched; f32 -> f16 rounds to nearest even (pe_f32_to_f16). f16
// elements are written with a compare-and-swap loop on their word.
#extension GL_GOOGLE_include_directive : require

#ifndef SRC_F16
#define SRC_F16 0
#endif
#ifndef DST_F16
#define DST_F16 0
#endif

#include "common.glsl"
#define PE_SET_ROWS_PUSH
#include "rows_params.glsl"

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in; // PE_VK_ROWS_WG

layout(constant_id = 0) const uint ROWS_I64 = 0u;

layout(std430, set = 0, binding = 0) readonly buffer Src { uint src_w[]; };
layout(std430, set = 0, binding = 1) buffer Dst { uint dst_w[]; };
layout(std430, set = 0, binding = 2) readonly buffer Rows { uint rows_w[]; };

// One compare-and-swap of the whole word: the half lands in one atomic step, so two
// source rows naming one destination row leave one of them, never a mix of their bits
// (an atomicAnd + atomicOr pair would interleave with the other writer's).
void pe_store_half(uint e, uint h)
{
    uint sh = (e & 1u) * 16u;
    uint mask = 0xffffu << sh;
    uint old = dst_w[e >> 1];
    for (;;) {
        uint prev = atomicCompSwap(dst_w[e >> 1], old, (old & ~mask) | (h << sh));
        if (prev == old)
            break;
        old = prev;
    }
}

void main()
{
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint idx = gl_GlobalInvocationID.x; idx < pc.n_total; idx += stride) {
        uint i0 = idx % pc.ne0;
        uint r = idx / pc.ne0;
        uint i1 = r % pc.ne1;
        r /= pc.ne1;
        uint i2 = r % pc.ne2;
        uint i3 = r / pc.ne2;
        uint w = pc.rows_off + i1 * pc.rows_st0 + ((i2 + pc.base2) % pc.e2) * pc.rows_st1 +
                 ((i3 + pc.base3) % pc.e3) * pc.rows_st2;
        uint row = rows_w[w];
        bool ok = ROWS_I64 != 0u ? (rows_w[w + 1u] == 0u && row < pc.n_rows)
                                 : (int(row) >= 0 && row < pc.n_rows);
        if (!ok)
            continue; // POSENC_ROWS_UNCHECKED: skipped
        uint s = pc.src_off + i0 * pc.src_st0 + i1 * pc.src_st1 + i2 * pc.src_st2 +
                 i3 * pc.src_st3;
        uint d = pc.dst_off + i0 * pc.dst_st0 + row * pc.dst_st1 + i2 * pc.dst_st2 +
                 i3 * pc.dst_st3;
#if SRC_F16 && DST_F16
        pe_store_half(d, (src_w[s >> 1] >> ((s & 1u) * 16u)) & 0xffffu);
#elif SRC_F16
        dst_w[d] = floatBitsToUint(pe_load_f16(src_w[s >> 1], s & 1u));
#elif DST_F16
        pe_store_half(d, pe_f32_to_f16(uintBitsToFloat(src_w[s])));
#else
        dst_w[d] = src_w[s];
#endif
    }
}
