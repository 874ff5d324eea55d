// flash_params.glsl - what flash_attn.comp and flash_merge.comp share: the specialization
// constants, the layout of the parameter block (a host table, binding 6) and the bindings.
// Mirrors enum pe_vk_fa_* in src/vulkan/ops_flash_vk.c; change both together.
//
// The parameters do not fit the 128 bytes of push constants (seven views with their
// strides), so they travel in a host-visible table (pe_vk_table) of 32-bit words: the
// block below, then the ALiBi slopes [Hq] (f32), the mask slopes [Hq] (f32) and the
// relative-position bucket list [n_rel] (i32) at the word offsets the block gives. Each
// invocation reads the words it needs once, before its loops.
//
// Offsets and strides are in elements of each view's own dtype (an f16 element e is half
// (e & 1) of 32-bit word e >> 1); a stride of a dimension with one element is 0.

#ifndef PE_FLASH_PARAMS_GLSL
#define PE_FLASH_PARAMS_GLSL

layout(constant_id = 0) const uint WG = 64u;    // invocations per work-group
layout(constant_id = 1) const uint D = 128u;    // head dim of q and k
layout(constant_id = 2) const uint DV = 128u;   // head dim of v and dst
layout(constant_id = 3) const uint R = 4u;      // rows (query, head) per invocation
layout(constant_id = 4) const uint BK = 1u;     // keys per shared-memory tile (FA_TILE)
layout(constant_id = 5) const uint FLAGS = 0u;  // FA_* below
// RoPE on k (FA_KROT): the pair window's first dim and its pairs (pe_attn_fused_op.krot)
layout(constant_id = 6) const uint KR_OFF = 0u;
layout(constant_id = 7) const uint KR_P = 0u;

// Head dims padded to whole chunks of 8 elements (one uvec4 of halves, two vec4 of f32).
const uint DP = ((D + 7u) / 8u) * 8u;
const uint DVP = ((DV + 7u) / 8u) * 8u;

#define FA_Q16      0x1u     // q is f16
#define FA_K16      0x2u     // k is f16
#define FA_V16      0x4u     // v is f16
#define FA_O16      0x8u     // dst is f16
#define FA_M16      0x10u    // mask is f16
#define FA_T16      0x20u    // relative-bias table is f16
#define FA_MASK     0x40u    // a mask is added
#define FA_ALIBI    0x80u    // ALiBi bias
#define FA_ALIBI_SYM 0x100u  // ... symmetric (|qp - kp|)
#define FA_ALIBI_CAUSAL 0x200u // ... -inf where kp > qp
#define FA_RELB     0x400u   // relative-position bias (table, bucket list)
#define FA_SOFTCAP  0x800u   // softcap * tanh(s / softcap)
#define FA_CAUSAL   0x1000u  // -inf where kp > qp
#define FA_SINKS    0x2000u  // sinks (final normalisation)
#define FA_MSLOPES  0x4000u  // the mask is multiplied by a per-head slope
#define FA_TILE     0x8000u  // a work-group per row tile, key tiles through shared memory
#define FA_PARTIAL  0x10000u // write (m, l, acc) partials (split-K); else dst
#define FA_PAIRS    0x20000u // f16 dst written as whole words
#define FA_KVEC     0x40000u // k rows: unit stride, 16-byte aligned (vector loads)
#define FA_VVEC     0x80000u // v rows: the same
#define FA_KROT     0x100000u // k rotated by the keys' RoPE table (binding 4, words P_T)
#define FA_KR_ADJ   0x200000u // ... pairs of adjacent dims (else NeoX: KR_P apart)
#define FA_TVEC     0x400000u // ... the table's rows unit-stride, 16-byte aligned (vec4 loads)

// Words of the parameter block.
#define P_Q      0u  // q: off, st0..st3 (d, h, q, b)
#define P_K      5u  // k: off, st0..st3 (d, hk, k, b)
#define P_V      10u // v: off, st0..st3 (d, hk, k, b)
#define P_O      15u // dst: off, st0..st3 (d, h, q, b)
#define P_M      20u // mask: off, st0..st3 (k, q, h, b; broadcast dims 0)
#define P_T      25u // relative-bias table: off, st0 (bucket), st1 (head); with FA_KROT
                     // the RoPE table instead: off, st2 (key), st3 (batch)
#define P_S      28u // sinks: off, st0
#define P_TQ     30u
#define P_TK     31u
#define P_HK     32u
#define P_GROUP  33u
#define P_NF     34u // rows per (kv head, batch): group * Tq
#define P_RB     35u // row blocks per (kv head, batch): ceil(NF / R)
#define P_NITEMS 36u // invocations (split-K) or row tiles (FA_TILE) of the grid
#define P_NS     37u // key splits
#define P_KS     38u // keys per split
#define P_QOFF   39u // q_offset (int)
#define P_KOFF   40u // k_offset (int)
#define P_SCALE  41u // f32
#define P_CAP    42u // f32 softcap
#define P_RELMIN 43u // int
#define P_NREL   44u
#define P_SLOPES 45u // word offset of the ALiBi slopes
#define P_MSL    46u // word offset of the mask slopes
#define P_BUCKET 47u // word offset of the bucket list
#define P_NROWS  48u // rows in all: NF * Hk * B (the partials' row count)
#define P_TILES  49u // row tiles per (kv head, batch) (FA_TILE)
#define P_WORDS  50u

// Bindings: 0 q (merge: dst), 1 k, 2 v, 3 mask, 4 relative-bias table or the keys' RoPE
// table (f32; a call has one encoding), 5 sinks,
// 6 the parameter table, 7 dst or the partials (merge: the partials).
layout(std430, set = 0, binding = 6) readonly buffer ParBuf { uint par[]; };
layout(std430, set = 0, binding = 5) readonly buffer SinkBuf { float sink_f[]; };

// A partial record: m, l, two pad words, then acc[DVP] (vec4 aligned).
const uint PREC = 4u + DVP;

uint pu(uint i) { return par[i]; }
int pi(uint i) { return int(par[i]); }
float pf(uint i) { return uintBitsToFloat(par[i]); }

#endif
