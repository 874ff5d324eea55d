#version 450
// attn_scores.comp - posenc_attention's scores (internal.h, struct pe_attn_scores_op):
//   logits[k, q, h, b] = scale * sum_{i < D} q[i, h, q, b] * k[i, h / group, k, b]
// as a tiled GEMM per (h, b) (the layout is in attention_params.glsl): a workgroup of 64
// invocations computes a tile of 64 keys (x) by 16 queries (y), each invocation a 4 x 4
// block of it, walking D in chunks of 16 staged in shared memory (Q: 16 x 16, K: 64 x 16,
// f16 widened on load, zeros past the edges). Per element of the chunk an invocation
// reads one vec4 of Q and one of K from shared memory and does 16 multiply-adds. Every
// logit is accumulated in f32 in order of i (the padding adds exact zeros), so the result
// does not depend on the tiling, then scaled once.
//
// Push (PE_PUSH_ATTN_GEMM): A = q [D, Hq, Tq, B] (a_st0..3 for i, h, q, b), B = k
// [D, Hk, Tk, B] (i, hk, k, b), C = logits [Tk, Tq, Hq, B] f32 (k, q, h, b); n_red = D,
// n_x = Tk, n_y = Tq, n_h = Hq.
// Variants (glslc -D): Q_F16, K_F16. Bindings: 0 q, 1 k, 2 logits.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require

#ifndef Q_F16
#define Q_F16 0
#endif
#ifndef K_F16
#define K_F16 0
#endif

#define PE_PUSH_ATTN_GEMM
#include "common.glsl"
#include "attention_params.glsl"

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in; // PE_VK_ATTN_WG

#if Q_F16
layout(std430, set = 0, binding = 0) readonly buffer QBuf { uint q_w[]; };
#else
layout(std430, set = 0, binding = 0) readonly buffer QBuf { float q_f[]; };
#endif
#if K_F16
layout(std430, set = 0, binding = 1) readonly buffer KBuf { uint k_w[]; };
#else
layout(std430, set = 0, binding = 1) readonly buffer KBuf { float k_f[]; };
#endif
layout(std430, set = 0, binding = 2) writeonly buffer LBuf { float lg[]; };

float load_q(uint e)
{
#if Q_F16
    return pe_load_f16(q_w[e >> 1], e & 1u);
#else
    return q_f[e];
#endif
}

float load_k(uint e)
{
#if K_F16
    return pe_load_f16(k_w[e >> 1], e & 1u);
#else
    return k_f[e];
#endif
}

// Q of query y0 + y, dim i (0 outside the tensor).
float q_at(uint i, uint y, uint y0, uint h, uint b)
{
    if (y0 + y >= pc.n_y || i >= pc.n_red)
        return 0.0f;
    return load_q(pc.a_off + i * pc.a_st0 + h * pc.a_st1 + (y0 + y) * pc.a_st2 + b * pc.a_st3);
}

// K of key x0 + x, dim i (0 outside the tensor).
float k_at(uint i, uint x, uint x0, uint hk, uint b)
{
    if (x0 + x >= pc.n_x || i >= pc.n_red)
        return 0.0f;
    return load_k(pc.b_off + i * pc.b_st0 + hk * pc.b_st1 + (x0 + x) * pc.b_st2 + b * pc.b_st3);
}

shared vec4 ta[PE_ATTN_R][PE_ATTN_TY / 4u]; // Q: [i in chunk][4 queries]
shared vec4 tb[PE_ATTN_R][PE_ATTN_TX / 4u]; // K: [i in chunk][4 keys]

void main()
{
    const uint id = gl_LocalInvocationID.x;
    const uint lx = id % (PE_ATTN_TX / 4u), ly = id / (PE_ATTN_TX / 4u); // 4x4 block
    for (uint t = gl_WorkGroupID.x; t < pc.n_tiles; t += gl_NumWorkGroups.x) {
        uint h, b, hk, x0, y0;
        pe_attn_tile(t, h, b, hk, x0, y0);

        vec4 acc[4] = vec4[4](vec4(0.0f), vec4(0.0f), vec4(0.0f), vec4(0.0f));
        for (uint d0 = 0u; d0 < pc.n_red; d0 += PE_ATTN_R) {
            // Stage the chunk, lanes along i (unit stride in packed tensors): Q as
            // (i = id % 16, queries 4c .. 4c + 3 with c = id / 16), K as (i = id % 16,
            // keys 4c .. 4c + 3 with c = id / 16 + 4s).
            uint r = id % PE_ATTN_R, c = id / PE_ATTN_R, i = d0 + r;
            ta[r][c] = vec4(q_at(i, 4u * c, y0, h, b), q_at(i, 4u * c + 1u, y0, h, b),
                            q_at(i, 4u * c + 2u, y0, h, b), q_at(i, 4u * c + 3u, y0, h, b));
            [[unroll]] for (uint s = 0u; s < PE_ATTN_TX / 4u / 4u; s++) {
                uint cx = c + 4u * s;
                tb[r][cx] = vec4(k_at(i, 4u * cx, x0, hk, b), k_at(i, 4u * cx + 1u, x0, hk, b),
                                 k_at(i, 4u * cx + 2u, x0, hk, b),
                                 k_at(i, 4u * cx + 3u, x0, hk, b));
            }
            memoryBarrierShared();
            barrier();
            [[unroll]] for (uint rr = 0u; rr < PE_ATTN_R; rr++) {
                vec4 a = ta[rr][ly], kv = tb[rr][lx];
                acc[0] += a.x * kv;
                acc[1] += a.y * kv;
                acc[2] += a.z * kv;
                acc[3] += a.w * kv;
            }
            memoryBarrierShared();
            barrier(); // the tiles are rewritten by the next chunk
        }
        // acc[j][c]: query y0 + 4 ly + j, key x0 + 4 lx + c
        [[unroll]] for (uint j = 0u; j < 4u; j++) {
            uint q = y0 + 4u * ly + j;
            [[unroll]] for (uint c = 0u; c < 4u; c++) {
                uint k = x0 + 4u * lx + c;
                if (q < pc.n_y && k < pc.n_x)
                    lg[pc.c_off + k * pc.c_st0 + q * pc.c_st1 + h * pc.c_st2 + b * pc.c_st3] =
                        pc.scale * acc[j][c];
            }
        }
    }
}
