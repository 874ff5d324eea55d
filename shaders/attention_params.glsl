// attention_params.glsl - push constants and flags of attn_scores.comp, attn_output.comp
// (PE_PUSH_ATTN_GEMM) and attn_softmax.comp (PE_PUSH_ATTN_SOFTMAX). Mirrors
// struct pe_vk_attn_gemm_push / pe_vk_attn_softmax_push and PE_ATTN_FLAG_* in
// src/kernel_abi.h, where sizes and offsets are checked with _Static_assert and the
// fields are explained. Change both together.
//
// Offsets and strides are in elements of each view's own dtype (an f16 element e is half
// (e & 1) of 32-bit word e >> 1), listed in the view's own dimension order; a stride of a
// dimension with one element is 0. Divisions by run-time extents use pe_udiv magic
// numbers, their shifts l packed 8 bits each in `shifts`.

#ifndef PE_ATTENTION_PARAMS_GLSL
#define PE_ATTENTION_PARAMS_GLSL

// The GEMMs: workgroups of 64 invocations (PE_VK_ATTN_WG), tiles of PE_ATTN_TX x
// PE_ATTN_TY outputs, invocation id computing the 4 x 4 block at x = 4 (id % 16),
// y = 4 (id / 16); the reduction is staged PE_ATTN_R at a time. The shaders' staging
// loops assume exactly these numbers.
#define PE_ATTN_TX 64u // PE_VK_ATTN_TILE_X
#define PE_ATTN_TY 16u // PE_VK_ATTN_TILE_Y
#define PE_ATTN_R 16u  // PE_VK_ATTN_CHUNK
#define PE_ATTN_WG 64u // PE_VK_ATTN_SOFTMAX_WG: softmax workgroup (one row at a time)

#define PE_ATTN_FLAG_PAIRS    0x1u // f16 output written as whole words (two elements)
#define PE_ATTN_FLAG_CAUSAL   0x2u // softmax: keys k + k_offset > q + q_offset are masked
#define PE_ATTN_FLAG_HAS_MASK 0x4u // softmax: the mask is added
#define PE_ATTN_FLAG_HAS_W    0x8u // softmax: the weights are written

#if defined(PE_PUSH_ATTN_GEMM)
// C[x, y] over tiles (x, y, h, b) = sum_{r < n_red} A[r, y] * B[r, x] (see the shaders
// for which view dimension is which). tile t = tx + tiles_x*(ty + tiles_y*(h + n_h*b));
// hk = h / group. shifts: tiles_x | tiles_y << 8 | n_h << 16 | group << 24.
layout(push_constant, std430) uniform PeAttnGemmPush {
    uint a_off, a_st0, a_st1, a_st2, a_st3;             // 0
    uint b_off, b_st0, b_st1, b_st2, b_st3;             // 20
    uint c_off, c_st0, c_st1, c_st2, c_st3;             // 40
    uint n_red, n_x, n_y, n_h;                          // 60
    uint tiles_x, tiles_y;                              // 76
    uint tx_magic, ty_magic, h_magic, g_magic;          // 84
    uint shifts;                                        // 100
    uint n_tiles;                                       // 104
    uint flags;                                         // 108
    float scale;                                        // 112
} pc;                                                   // 116 bytes

// Tile t: head h, batch b, K/V head hk = h / group, first x and y of the tile.
void pe_attn_tile(uint t, out uint h, out uint b, out uint hk, out uint x0, out uint y0)
{
    uint r1 = pe_udiv(t, pc.tx_magic, pc.shifts & 0xffu);
    uint hb = pe_udiv(r1, pc.ty_magic, (pc.shifts >> 8) & 0xffu);
    b = pe_udiv(hb, pc.h_magic, (pc.shifts >> 16) & 0xffu);
    h = hb - b * pc.n_h;
    hk = pe_udiv(h, pc.g_magic, pc.shifts >> 24);
    x0 = (t - r1 * pc.tiles_x) * PE_ATTN_TX;
    y0 = (r1 - hb * pc.tiles_y) * PE_ATTN_TY;
}
#elif defined(PE_PUSH_ATTN_SOFTMAX)
// row = q + n_q*(h + n_h*b); shifts: n_q | n_h << 8.
layout(push_constant, std430) uniform PeAttnSoftmaxPush {
    uint lg_off, lg_st0, lg_st1, lg_st2, lg_st3;        // 0
    uint mk_off, mk_st0, mk_st1, mk_st2, mk_st3;        // 20
    uint w_off, w_st0, w_st1, w_st2, w_st3;             // 40
    uint n_k, n_q, n_h;                                 // 60
    uint q_magic, h_magic, shifts;                      // 72
    uint n_rows;                                        // 84
    uint q_offset, k_offset;                            // 88
    uint flags;                                         // 96
} pc;                                                   // 100 bytes
#else
#error "define one PE_PUSH_ATTN_* before including attention_params.glsl"
#endif

#endif
