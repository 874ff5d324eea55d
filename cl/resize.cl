/*
 * resize.cl - resize a learned position grid (posenc_resize_2d): bicubic or bilinear,
 * as torch's interpolate with align_corners=False. The host computed every tap's index
 * and weight (in double, rounded to f32); the kernel only gathers and sums.
 *
 * Storage types from -D options (0 or 1, common.cl): DST_F16, X_F16 (the source grid;
 * HAS_X=1). Offsets and strides are in elements of each tensor's own type; all index
 * arithmetic is 64-bit. The NDRange may be rounded up past `shape`. The host
 * (src/opencl/backend_opencl.c) lists the argument order.
 *
 * One work-item per (channel i0, dst row j). With cls, row j = 0 is the class token and
 * is copied from src row 0. Every other row is grid cell (r, c), j = cls + r*dst_w + c:
 *   acc = 0; for a < 4 (outer), b < 4 (inner):
 *       acc += (wy[4r+a] * wx[4c+b]) * src[i0, cls + iy[4r+a]*src_w + ix[4c+b]]
 * in f32, in that fixed order; unused taps have weight 0 and a valid index.
 *
 * tab (32-bit words, one upload per call): wx[4*dst_w], wy[4*dst_h] (f32 bits), then
 * ix[4*dst_w], iy[4*dst_h] (int32).
 * shape = (d, dst_h, dst_w, cls).
 */
__kernel void pe_resize_2d(__global DST_T *dst, const long dst_off, const long4 dst_st,
                           __global const X_T *src, const long src_off, const long4 src_st,
                           __global const int *tab, const long4 shape, const long src_w)
{
    const long i0 = (long)get_global_id(0);
    const long j = (long)get_global_id(1);
    const long dst_h = shape.s1, dst_w = shape.s2, cls = shape.s3;
    if (i0 >= shape.s0 || j >= cls + dst_h * dst_w)
        return;
    const long sr = src_off + i0 * src_st.s0;
    const long dr = dst_off + i0 * dst_st.s0;
    if (j < cls) {
        PE_STORE_DST(dst, dr, PE_LOAD_X(src, sr));
        return;
    }
    const long g = j - cls;
    const long r = g / dst_w;
    const long c = g % dst_w;
    __global const int *wx = tab;
    __global const int *wy = wx + 4 * dst_w;
    __global const int *ix = wy + 4 * dst_h;
    __global const int *iy = ix + 4 * dst_w;

    float acc = 0.0f;
    for (int a = 0; a < 4; a++) {
        const float w_a = as_float(wy[4 * r + a]);
        const long src_row = cls + (long)iy[4 * r + a] * src_w;
        for (int b = 0; b < 4; b++) {
            const float w = w_a * as_float(wx[4 * c + b]);
            const float v = PE_LOAD_X(src, sr + (src_row + (long)ix[4 * c + b]) * src_st.s1);
            acc += w * v;
        }
    }
    PE_STORE_DST(dst, dr + j * dst_st.s1, acc);
}
