#version 450
// learned.comp - learned absolute positions, posenc_learned (as cl/learned.cl pe_learned):
//   dst[i0, t, b] = x[i0, t, b] + table[i0, pos[t, b]]     (no x: the table value)
//
// Variants DST_F16, X_F16, TAB_F16 (encodings_io.glsl). Flat grid-stride loop over units
// idx = u + n_units*(t + T*b); a unit is element i0 = u, or with PE_ENC_FLAG_PAIRS (f16
// dst, rows contiguous, even in length and starting on even elements) the elements
// 2u, 2u+1, stored as one word. Every x element is read before the invocation writes it,
// so x may be the very view of dst. The front end checked every position.
#extension GL_GOOGLE_include_directive : require
#define PE_PUSH_LEARNED
#define PE_TAB_BINDING
#include "common.glsl"
#include "encodings_params.glsl"
#include "encodings_io.glsl"

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in; // PE_VK_ENC_WG

layout(std430, set = 0, binding = 3) readonly buffer PosBuf { int pos[]; };

// Specialization constant 0: 0 = the general path above; 1 = the vector path, for x,
// table and dst with unit strides and rows aligned to G elements, d a multiple of G
// (G = 4 when every tensor is f32, else 8): a unit is G consecutive elements of a row,
// one position load and whole vec4 / uvec4 accesses per tensor. CPU implementations such
// as lavapipe scalarize every buffer access per invocation and component, so the general
// path's four scalar accesses per element (position, table, x, dst) cost about twice a
// copy there.
// Spec 2: the same, positions shared by the batch (pos_st1 = 0): a unit is G elements of
// one token in every batch row, the table read once for all of them.
layout(constant_id = 0) const uint SPEC = 0u;
const bool VEC = SPEC != 0u;
const bool VEC_SHARED = SPEC == 2u;

#if !DST_F16 && !X_F16 && !TAB_F16
const uint G = 4u;
layout(std430, set = 0, binding = 0) writeonly buffer DstV4 { vec4 dst_v[]; };
layout(std430, set = 0, binding = 1) readonly buffer XV4 { vec4 x_v[]; };
layout(std430, set = 0, binding = 2) readonly buffer TabV4 { vec4 tab_v[]; };

void pe_vec_unit(uint xe, uint te, uint de, bool has_x)
{
    vec4 v = tab_v[te >> 2];
    if (has_x)
        v = x_v[xe >> 2] + v;
    dst_v[de >> 2] = v;
}
#else
const uint G = 8u;
#if DST_F16
layout(std430, set = 0, binding = 0) writeonly buffer DstH8 { uvec4 dst_h8[]; };
#else
layout(std430, set = 0, binding = 0) writeonly buffer DstV4 { vec4 dst_v[]; };
#endif
#if X_F16
layout(std430, set = 0, binding = 1) readonly buffer XH8 { uvec4 x_h8[]; };
#else
layout(std430, set = 0, binding = 1) readonly buffer XV4 { vec4 x_v[]; };
#endif
#if TAB_F16
layout(std430, set = 0, binding = 2) readonly buffer TabH8 { uvec4 tab_h8[]; };
#else
layout(std430, set = 0, binding = 2) readonly buffer TabV4 { vec4 tab_v[]; };
#endif

void pe_unpack8(uvec4 w, out vec4 lo, out vec4 hi)
{
    lo = vec4(pe_f16_to_f32(w.x & 0xffffu), pe_f16_to_f32(w.x >> 16),
              pe_f16_to_f32(w.y & 0xffffu), pe_f16_to_f32(w.y >> 16));
    hi = vec4(pe_f16_to_f32(w.z & 0xffffu), pe_f16_to_f32(w.z >> 16),
              pe_f16_to_f32(w.w & 0xffffu), pe_f16_to_f32(w.w >> 16));
}

void pe_vec_unit(uint xe, uint te, uint de, bool has_x)
{
    vec4 lo, hi;
#if TAB_F16
    pe_unpack8(tab_h8[te >> 3], lo, hi);
#else
    lo = tab_v[te >> 2];
    hi = tab_v[(te >> 2) + 1u];
#endif
    if (has_x) {
        vec4 xl, xh;
#if X_F16
        pe_unpack8(x_h8[xe >> 3], xl, xh);
#else
        xl = x_v[xe >> 2];
        xh = x_v[(xe >> 2) + 1u];
#endif
        lo = xl + lo;
        hi = xh + hi;
    }
#if DST_F16
    dst_h8[de >> 3] = uvec4(pe_f32_to_f16(lo.x) | (pe_f32_to_f16(lo.y) << 16),
                            pe_f32_to_f16(lo.z) | (pe_f32_to_f16(lo.w) << 16),
                            pe_f32_to_f16(hi.x) | (pe_f32_to_f16(hi.y) << 16),
                            pe_f32_to_f16(hi.z) | (pe_f32_to_f16(hi.w) << 16));
#else
    dst_v[de >> 2] = lo;
    dst_v[(de >> 2) + 1u] = hi;
#endif
}
#endif

void pe_vec_main()
{
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    bool has_x = (pc.flags & PE_ENC_FLAG_HAS_X) != 0u;
    if (VEC_SHARED) {
        // idx = u + n_units * t; ne1 = T, ne2 = B
        for (uint idx = gl_GlobalInvocationID.x; idx < pc.n_total; idx += stride) {
            uint t = pe_udiv(idx, pc.units_magic, pc.shifts & 0xffu);
            uint i0 = (idx - t * pc.n_units) * G;
            uint row = uint(pos[pc.pos_off + t * pc.pos_st0]);
            uint te = pc.tab_off + i0 + row * pc.tab_st1;
            for (uint b = 0u; b < pc.ne2; b++)
                pe_vec_unit(pc.x_off + i0 + t * pc.x_st1 + b * pc.x_st2, te,
                            pc.dst_off + i0 + t * pc.dst_st1 + b * pc.dst_st2, has_x);
        }
        return;
    }
    for (uint idx = gl_GlobalInvocationID.x; idx < pc.n_total; idx += stride) {
        uint tb = pe_udiv(idx, pc.units_magic, pc.shifts & 0xffu);
        uint i0 = (idx - tb * pc.n_units) * G;
        uint b = pe_udiv(tb, pc.ne1_magic, (pc.shifts >> 8) & 0xffu);
        uint t = tb - b * pc.ne1;
        uint row = uint(pos[pc.pos_off + t * pc.pos_st0 + b * pc.pos_st1]);
        pe_vec_unit(pc.x_off + i0 + t * pc.x_st1 + b * pc.x_st2, pc.tab_off + i0 + row * pc.tab_st1,
                    pc.dst_off + i0 + t * pc.dst_st1 + b * pc.dst_st2, has_x);
    }
}

float value(uint i0, uint t, uint b, uint row)
{
    float v = load_tab(pc.tab_off + i0 * pc.tab_st0 + row * pc.tab_st1);
    if ((pc.flags & PE_ENC_FLAG_HAS_X) != 0u)
        v = load_x(pc.x_off + i0 * pc.x_st0 + t * pc.x_st1 + b * pc.x_st2) + v;
    return v;
}

void main()
{
    if (VEC) {
        pe_vec_main();
        return;
    }
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    uint np = (pc.flags & PE_ENC_FLAG_PAIRS) != 0u ? 2u : 1u;
    for (uint idx = gl_GlobalInvocationID.x; idx < pc.n_total; idx += stride) {
        uint tb = pe_udiv(idx, pc.units_magic, pc.shifts & 0xffu);
        uint i0 = (idx - tb * pc.n_units) * np;
        uint b = pe_udiv(tb, pc.ne1_magic, (pc.shifts >> 8) & 0xffu);
        uint t = tb - b * pc.ne1;
        uint row = uint(pos[pc.pos_off + t * pc.pos_st0 + b * pc.pos_st1]);
        uint e = pc.dst_off + i0 * pc.dst_st0 + t * pc.dst_st1 + b * pc.dst_st2;
        float v = value(i0, t, b, row);
#if DST_F16
        if (np == 2u) {
            store_dst_pair(e, v, value(i0 + 1u, t, b, row));
            continue;
        }
#endif
        store_dst(e, v);
    }
}
