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

float value(uint i0, uint t, uint b, uint row)
{
    float v = load_tab(pc.tab_off + i0 * pc.tab_st0 + row * pc.tab_st1);
    if ((pc.flags & PE_ENC_FLAG_HAS_X) != 0u)
        v = load_x(pc.x_off + i0 * pc.x_st0 + t * pc.x_st1 + b * pc.x_st2) + v;
    return v;
}

void main()
{
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
