/* minimal.c - add sinusoidal position encodings to 3 token embeddings of 6 dims. */
#include <posenc.h>

#include <math.h>
#include <stdio.h>

int main(void)
{
    enum { D = 6, T = 3 };
    /* token embeddings [T][D] (posenc's tensor [D, T]); token 0's is worked out below */
    float emb[T][D] = {{0.51f, -0.22f, 0.88f, 0.14f, 0.0f, 0.0f}, {0}, {0}};
    const int32_t pos[T] = {0, 1, 2}; /* the position of each token */

    /* NULL params: AUTO (a GPU if there is one, else the CPU); the environment variable
     * POSENC_BACKEND=cpu|opencl|vulkan picks one. */
    posenc_context *ctx = NULL;
    char err[256];
    posenc_status st = posenc_context_create(NULL, &ctx, err, sizeof err);
    if (st != POSENC_OK) {
        fprintf(stderr, "posenc: %s\n", err);
        return st == POSENC_ERR_UNAVAILABLE ? 77 : 1; /* 77: "skipped", for test runners */
    }

    /* device memory, then tensors: typed views of it, ggml-style (ne = {D, T, 1, 1}) */
    posenc_buffer *xbuf = NULL, *pbuf = NULL;
    if ((st = posenc_buffer_create(ctx, sizeof emb, &xbuf)) == POSENC_OK &&
        (st = posenc_buffer_create(ctx, sizeof pos, &pbuf)) == POSENC_OK &&
        (st = posenc_buffer_write(xbuf, 0, emb, sizeof emb)) == POSENC_OK &&
        (st = posenc_buffer_write(pbuf, 0, pos, sizeof pos)) == POSENC_OK) {
        posenc_tensor x = posenc_tensor_contiguous(xbuf, 0, POSENC_DTYPE_F32, D, T, 1, 1);
        posenc_tensor p = posenc_tensor_contiguous(pbuf, 0, POSENC_DTYPE_I32, T, 1, 1, 1);
        /* x = x + PE(pos), in place; NULL params: the paper's (base 10000, sin/cos
         * interleaved) */
        st = posenc_sinusoidal(ctx, &x, &p, &x, NULL);
        if (st == POSENC_OK)
            st = posenc_buffer_read(xbuf, 0, emb, sizeof emb); /* waits for the op */
    }
    if (st != POSENC_OK)
        fprintf(stderr, "posenc: %s: %s\n", posenc_status_string(st),
                posenc_context_last_error(ctx));
    posenc_buffer_destroy(&xbuf);
    posenc_buffer_destroy(&pbuf);
    posenc_context_destroy(&ctx);
    if (st != POSENC_OK)
        return 1;

    /* two worked examples (3 decimals): token 0 = its embedding + PE(0), and token 2
     * (a zero embedding) = PE(2) */
    const float want[2][D] = {{0.51f, 0.78f, 0.88f, 1.14f, 0.0f, 1.0f},
                              {0.909f, -0.416f, 0.092f, 0.995f, 0.004f, 0.999f}};
    int bad = 0;
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < D; i++) {
            printf("%9.5f%s", emb[2 * t][i], i + 1 < D ? " " : "\n");
            bad |= fabsf(emb[2 * t][i] - want[t][i]) > 1e-3f;
        }
    return bad;
}
