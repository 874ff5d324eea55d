#version 450
// learned_bwd.comp - posenc_learned_backward (as cl/learned.cl pe_learned_bwd): one unit
// per (i0, segment s), idx = i0 + d*s, grid-stride. A segment is the tokens of one table
// row (host lists, bindings 2-4):
//   acc = sum over k in [seg_start[s], seg_start[s+1]) of dy[i0, t, b], e = entries[k],
//         t = e % T, b = e / T, added in that order in f32
//   dtable[i0, seg_row[s]] += acc
// Each (i0, row) has exactly one invocation and no float atomics are used: the result is
// the same bits on every run. Variants DST_F16 (dtable), X_F16 (dy).
#extension GL_GOOGLE_include_directive : require
#define PE_PUSH_LEARNED_BWD
#include "common.glsl"
#include "encodings_params.glsl"
#include "encodings_io.glsl"

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in; // PE_VK_ENC_WG

layout(std430, set = 0, binding = 2) readonly buffer SegStart { int seg_start[]; };
layout(std430, set = 0, binding = 3) readonly buffer SegRow { int seg_row[]; };
layout(std430, set = 0, binding = 4) readonly buffer Entries { int entries[]; };

void main()
{
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint idx = gl_GlobalInvocationID.x; idx < pc.n_total; idx += stride) {
        uint s = pe_udiv(idx, pc.i0_magic, pc.shifts & 0xffu);
        uint i0 = idx - s * pc.n_i0;
        uint k1 = uint(seg_start[s + 1u]);
        uint yr = pc.dy_off + i0 * pc.dy_st0;
        precise float acc = 0.0f;
        for (uint k = uint(seg_start[s]); k < k1; k++) {
            uint e = uint(entries[k]);
            uint b = pe_udiv(e, pc.tok_magic, (pc.shifts >> 8) & 0xffu);
            uint t = e - b * pc.n_tok;
            acc += load_x(yr + t * pc.dy_st1 + b * pc.dy_st2);
        }
        uint di = pc.dtab_off + i0 * pc.dtab_st0 + uint(seg_row[s]) * pc.dtab_st1;
        store_dst(di, load_dst(di) + acc);
    }
}
