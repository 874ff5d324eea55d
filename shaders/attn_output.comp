#version 450
// attn_output.comp - posenc_attention's output (internal.h, struct pe_attn_output_op):
//   dst[i, h, q, b] = sum_{k < Tk} p[k, q, h, b] * v[i, h / group, k, b]
// as a tiled GEMM per (h, b), the scheme of attn_scores.comp: a workgroup of 64
// invocations computes 64 dims i (x) by 16 queries (y), each invocation a 4 x 4 block,
// walking the keys in chunks of 16 staged in shared memory (P: 16 queries x 16 keys, V:
// 16 keys x 64 dims, zeros past the edges). f32 accumulation in order of k.
// An f16 dst whose rows are contiguous, even in length and start on even elements
// (PE_ATTN_FLAG_PAIRS) is written as whole words (an invocation owns dims 4c .. 4c + 3,
// two words); otherwise f16 elements are written with atomicAnd / atomicOr on their word
// (the other half may belong to another invocation or to data outside dst).
//
// Push (PE_PUSH_ATTN_GEMM): A = p [Tk, Tq, Hq, B] f32 (a_st0..3 for k, q, h, b), B = v
// [Dv, Hk, Tk, B] (i, hk, k, b), C = dst [Dv, Hq, Tq, B] (i, h, q, b); n_red = Tk,
// n_x = Dv, n_y = Tq, n_h = Hq.
// Variants (glslc -D): V_F16, DST_F16. Bindings: 0 p, 1 v, 2 dst.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require

#ifndef V_F16
#define V_F16 0
#endif
#ifndef DST_F16
#define DST_F16 0
#endif

#define PE_PUSH_ATTN_GEMM
#include "common.glsl"
#include "attention_params.glsl"

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in; // PE_VK_ATTN_WG

layout(std430, set = 0, binding = 0) readonly buffer PBuf { float p_f[]; };
#if V_F16
layout(std430, set = 0, binding = 1) readonly buffer VBuf { uint v_w[]; };
#else
layout(std430, set = 0, binding = 1) readonly buffer VBuf { float v_f[]; };
#endif
#if DST_F16
layout(std430, set = 0, binding = 2) buffer DBuf { uint d_w[]; };
#else
layout(std430, set = 0, binding = 2) writeonly buffer DBuf { float d_f[]; };
#endif

// P of key k, query y0 + y (0 outside the tensor).
float p_at(uint k, uint y, uint y0, uint h, uint b)
{
    if (y0 + y >= pc.n_y || k >= pc.n_red)
        return 0.0f;
    return p_f[pc.a_off + k * pc.a_st0 + (y0 + y) * pc.a_st1 + h * pc.a_st2 + b * pc.a_st3];
}

// V of dim x0 + x, key k (0 outside the tensor).
float v_at(uint k, uint x, uint x0, uint hk, uint b)
{
    if (x0 + x >= pc.n_x || k >= pc.n_red)
        return 0.0f;
    uint e = pc.b_off + (x0 + x) * pc.b_st0 + hk * pc.b_st1 + k * pc.b_st2 + b * pc.b_st3;
#if V_F16
    return pe_load_f16(v_w[e >> 1], e & 1u);
#else
    return v_f[e];
#endif
}

#if DST_F16
// f16 element e, atomically on its half of the word.
void store_half(uint e, float v)
{
    uint sh = (e & 1u) * 16u;
    atomicAnd(d_w[e >> 1], ~(0xffffu << sh));
    atomicOr(d_w[e >> 1], pe_f32_to_f16(v) << sh);
}
#endif

shared vec4 ta[PE_ATTN_R][PE_ATTN_TY / 4u]; // P: [key in chunk][4 queries]
shared vec4 tb[PE_ATTN_R][PE_ATTN_TX / 4u]; // V: [key in chunk][4 dims]

void main()
{
    const uint id = gl_LocalInvocationID.x;
    const uint lx = id % (PE_ATTN_TX / 4u), ly = id / (PE_ATTN_TX / 4u); // 4x4 block
    for (uint t = gl_WorkGroupID.x; t < pc.n_tiles; t += gl_NumWorkGroups.x) {
        uint h, b, hk, x0, y0;
        pe_attn_tile(t, h, b, hk, x0, y0);

        vec4 acc[4] = vec4[4](vec4(0.0f), vec4(0.0f), vec4(0.0f), vec4(0.0f));
        for (uint k0 = 0u; k0 < pc.n_red; k0 += PE_ATTN_R) {
            // Stage the chunk. P: lanes along the keys (unit stride in the packed
            // probabilities): key id % 16, queries 4c .. 4c + 3 with c = id / 16.
            uint r = id % PE_ATTN_R, c = id / PE_ATTN_R, k = k0 + r;
            ta[r][c] = vec4(p_at(k, 4u * c, y0, h, b), p_at(k, 4u * c + 1u, y0, h, b),
                            p_at(k, 4u * c + 2u, y0, h, b), p_at(k, 4u * c + 3u, y0, h, b));
            // V: lanes along the dims: dims 4 lx .. 4 lx + 3, key k0 + ly + 4s.
            [[unroll]] for (uint s = 0u; s < PE_ATTN_R / 4u; s++) {
                uint rk = ly + 4u * s;
                tb[rk][lx] = vec4(v_at(k0 + rk, 4u * lx, x0, hk, b),
                                  v_at(k0 + rk, 4u * lx + 1u, x0, hk, b),
                                  v_at(k0 + rk, 4u * lx + 2u, x0, hk, b),
                                  v_at(k0 + rk, 4u * lx + 3u, x0, hk, b));
            }
            memoryBarrierShared();
            barrier();
            [[unroll]] for (uint rr = 0u; rr < PE_ATTN_R; rr++) {
                vec4 a = ta[rr][ly], vv = tb[rr][lx];
                acc[0] += a.x * vv;
                acc[1] += a.y * vv;
                acc[2] += a.z * vv;
                acc[3] += a.w * vv;
            }
            memoryBarrierShared();
            barrier(); // the tiles are rewritten by the next chunk
        }
        // acc[j][c]: query y0 + 4 ly + j, dim x0 + 4 lx + c
        const uint i = x0 + 4u * lx;
        [[unroll]] for (uint j = 0u; j < 4u; j++) {
            uint q = y0 + 4u * ly + j;
            if (q >= pc.n_y)
                continue;
            uint e = pc.c_off + i * pc.c_st0 + h * pc.c_st1 + q * pc.c_st2 + b * pc.c_st3;
#if DST_F16
            if ((pc.flags & PE_ATTN_FLAG_PAIRS) != 0u) {
                // c_st0 == 1, e even, n_x even: dims i + 1 and i + 3 are in dst with i, i + 2
                if (i < pc.n_x)
                    d_w[e >> 1] = pe_f32_to_f16(acc[j].x) | (pe_f32_to_f16(acc[j].y) << 16);
                if (i + 2u < pc.n_x)
                    d_w[(e >> 1) + 1u] =
                        pe_f32_to_f16(acc[j].z) | (pe_f32_to_f16(acc[j].w) << 16);
                continue;
            }
#endif
            [[unroll]] for (uint c = 0u; c < 4u; c++) {
                if (i + c < pc.n_x) {
#if DST_F16
                    store_half(e + c * pc.c_st0, acc[j][c]);
#else
                    d_f[e + c * pc.c_st0] = acc[j][c];
#endif
                }
            }
        }
    }
}
