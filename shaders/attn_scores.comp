#version 450
// attn_scores.comp - posenc_attention's scores (internal.h, struct pe_attn_scores_op):
//   logits[k, q, h, b] = scale * sum_{i < D} q[i, h, q, b] * k[i, h / group, k, b]
// as a tiled GEMM per (h, b). A workgroup of 64 invocations computes a tile of 64 keys
// (x, one per invocation) by 16 queries (y, 16 accumulators per invocation), walking D in
// chunks of 16: each chunk it stages Q (16 queries x 16) and K (64 keys x 16) in shared
// memory (cooperative loads, f16 widened, zeros past the edges), copies its own key's 16
// values to registers, and adds 16 x 16 products; the Q values it reads are the same for
// every invocation (broadcast reads, no bank conflicts, and scalar loads on CPU
// implementations such as lavapipe, which load divergent addresses one lane at a time).
// Every logit is accumulated in f32 in order of i (padding adds exact zeros), so the
// result does not depend on the tiling, then scaled once.
// Tiles are a flat grid-stride loop over n_tiles (gl_WorkGroupID.x is uniform in the
// workgroup, so every barrier is reached by all invocations).
//
// Push (attention_params.glsl, PE_PUSH_ATTN_GEMM): A = q [D, Hq, Tq, B] (a_st0..3 for
// i, h, q, b), B = k [D, Hk, Tk, B] (i, hk, k, b), C = logits [Tk, Tq, Hq, B] f32
// (k, q, h, b); n_red = D, n_x = Tk, n_y = Tq, n_h = Hq.
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

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in; // PE_VK_ATTN_TILE_X

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

shared float ta[PE_ATTN_TY][PE_ATTN_R];      // [query][i in chunk]
shared float tb[PE_ATTN_R][PE_ATTN_TX + 1u]; // [i in chunk][key] (padded: the stores)

void main()
{
    const uint lx = gl_LocalInvocationID.x;
    for (uint t = gl_WorkGroupID.x; t < pc.n_tiles; t += gl_NumWorkGroups.x) {
        uint r1 = pe_udiv(t, pc.tx_magic, pc.shifts & 0xffu);
        uint tx = t - r1 * pc.tiles_x;
        uint hb = pe_udiv(r1, pc.ty_magic, (pc.shifts >> 8) & 0xffu);
        uint ty = r1 - hb * pc.tiles_y;
        uint b = pe_udiv(hb, pc.h_magic, (pc.shifts >> 16) & 0xffu);
        uint h = hb - b * pc.n_h;
        uint hk = pe_udiv(h, pc.g_magic, pc.shifts >> 24);
        uint x0 = tx * PE_ATTN_TX, y0 = ty * PE_ATTN_TY;
        uint ny = min(PE_ATTN_TY, pc.n_y - y0); // queries in this tile (uniform)

        float acc[PE_ATTN_TY];
        [[unroll]] for (uint y = 0u; y < PE_ATTN_TY; y++)
            acc[y] = 0.0f;
        for (uint d0 = 0u; d0 < pc.n_red; d0 += PE_ATTN_R) {
            // Stage the chunk; lanes run along i (unit stride in packed tensors).
            // Q: element e = lx + 64 s of the 16 x 16 tile is (i = e % 16, query e / 16).
            uint ri = lx % PE_ATTN_R, i = d0 + ri;
            [[unroll]] for (uint s = 0u; s < PE_ATTN_TY * PE_ATTN_R / PE_ATTN_TX; s++) {
                uint y = lx / PE_ATTN_R + s * (PE_ATTN_TX / PE_ATTN_R);
                float v = 0.0f;
                if (y < ny && i < pc.n_red)
                    v = load_q(pc.a_off + i * pc.a_st0 + h * pc.a_st1 + (y0 + y) * pc.a_st2 +
                               b * pc.a_st3);
                ta[y][ri] = v;
            }
            // K: element e = lx + 64 s of the 16 x 64 tile is (i = e % 16, key e / 16).
            [[unroll]] for (uint s = 0u; s < PE_ATTN_R; s++) {
                uint x = lx / PE_ATTN_R + s * (PE_ATTN_TX / PE_ATTN_R);
                float v = 0.0f;
                if (x0 + x < pc.n_x && i < pc.n_red)
                    v = load_k(pc.b_off + i * pc.b_st0 + hk * pc.b_st1 + (x0 + x) * pc.b_st2 +
                               b * pc.b_st3);
                tb[ri][x] = v;
            }
            memoryBarrierShared();
            barrier();
            float kv[PE_ATTN_R]; // this invocation's key
            [[unroll]] for (uint r = 0u; r < PE_ATTN_R; r++)
                kv[r] = tb[r][lx];
            [[unroll]] for (uint y = 0u; y < PE_ATTN_TY; y++) {
                if (y < ny) { // uniform
                    [[unroll]] for (uint r = 0u; r < PE_ATTN_R; r++)
                        acc[y] += ta[y][r] * kv[r];
                }
            }
            memoryBarrierShared();
            barrier(); // the tiles are rewritten by the next chunk
        }
        uint k = x0 + lx;
        if (k < pc.n_x) {
            uint e = pc.c_off + k * pc.c_st0 + h * pc.c_st2 + b * pc.c_st3;
            [[unroll]] for (uint y = 0u; y < PE_ATTN_TY; y++) {
                if (y < ny)
                    lg[e + (y0 + y) * pc.c_st1] = pc.scale * acc[y];
            }
        }
    }
}
