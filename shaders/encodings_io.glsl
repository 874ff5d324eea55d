// encodings_io.glsl - the tensor bindings of the learned / resize / bias shaders and
// their element loads and stores, in f32 whatever the storage (as cl/common.cl's
// PE_LOAD_* / PE_STORE_DST).
//
// Variant macros (0 or 1, glslc -D, shaders/meson.build): DST_F16 (binding 0, dst or the
// gradient table: read and written), X_F16 (binding 1, x / logits / dy / src: read only),
// and with PE_TAB_BINDING defined, TAB_F16 (binding 2, the learned or relative-bias
// table: read only). f16 element e is half (e & 1) of 32-bit word e >> 1. Element indices
// are uint (the host checked that every index fits). Bindings 0 and 1 may be the same
// buffer (no x, or in place).

#ifndef PE_ENCODINGS_IO_GLSL
#define PE_ENCODINGS_IO_GLSL

#ifndef DST_F16
#define DST_F16 0
#endif
#ifndef X_F16
#define X_F16 0
#endif
#ifndef TAB_F16
#define TAB_F16 0
#endif

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
#ifdef PE_TAB_BINDING
#if TAB_F16
layout(std430, set = 0, binding = 2) readonly buffer TabBuf { uint tab_w[]; };
#else
layout(std430, set = 0, binding = 2) readonly buffer TabBuf { float tab_f[]; };
#endif

float load_tab(uint e)
{
#if TAB_F16
    return pe_load_f16(tab_w[e >> 1], e & 1u);
#else
    return tab_f[e];
#endif
}
#endif

float load_x(uint e)
{
#if X_F16
    return pe_load_f16(x_w[e >> 1], e & 1u);
#else
    return x_f[e];
#endif
}

float load_dst(uint e)
{
#if DST_F16
    return pe_load_f16(dst_w[e >> 1], e & 1u);
#else
    return dst_f[e];
#endif
}

// One element. f16: another invocation may own the other half of the word (or it may
// belong to another tensor): clear our 16 bits, then set them, both atomically.
void store_dst(uint e, float v)
{
#if DST_F16
    uint sh = (e & 1u) * 16u;
    atomicAnd(dst_w[e >> 1], ~(0xffffu << sh));
    atomicOr(dst_w[e >> 1], pe_f32_to_f16(v) << sh);
#else
    dst_f[e] = v;
#endif
}

#if DST_F16
// Elements e (even) and e + 1, a whole word owned by this invocation (PE_ENC_FLAG_PAIRS).
void store_dst_pair(uint e, float v0, float v1)
{
    dst_w[e >> 1] = pe_f32_to_f16(v0) | (pe_f32_to_f16(v1) << 16);
}
#endif

#endif
