// bias_vec8.glsl - the 8-key row I/O of the vector paths of alibi.comp and relbias.comp in
// their variants with an f16 dst or logits (src/kernel_abi.h): a row's 8 keys as one
// uvec4 of halves (an f16 view, rows on multiples of 8 elements) or two vec4 (an f32 view,
// multiples of 4). Include after encodings_io.glsl, with DST_F16 / X_F16 defined, in a
// shader whose dst is binding 0 and logits binding 1. f32 math; one rounding to f16.

#ifndef PE_BIAS_VEC8_GLSL
#define PE_BIAS_VEC8_GLSL

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

// The logits' 8 keys from element e (a multiple of 8, or of 4 for f32).
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

// dst's 8 keys from element e.
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

#endif
