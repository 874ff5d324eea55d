/*
 * ggml-posenc.h - posenc as a ggml backend.
 *
 * libggml-posenc.so is a dynamically loadable ggml backend (GGML_BACKEND_DL): stock ggml
 * loads it with ggml_backend_load("path/libggml-posenc.so"), or from ggml_backend_load_all()
 * when GGML_BACKEND_PATH names the file. It registers one ggml device per posenc device
 * ("PosencCPU", "PosencOpenCL0", "PosencVulkan0", ...) and runs the ops listed in
 * docs/ggml.md; ggml's scheduler leaves every other op on another backend.
 *
 * This header is for programs that link the backend directly instead of loading it.
 */
#ifndef GGML_POSENC_H
#define GGML_POSENC_H

#include "ggml-backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The registry of posenc's devices (the same object ggml_backend_init() returns when the
 * library is loaded dynamically). Devices are found on the first call; a posenc backend
 * whose driver is missing or fails to open is left out (its reason is logged through
 * ggml's log at WARN level). Never NULL. */
GGML_BACKEND_API ggml_backend_reg_t ggml_backend_posenc_reg(void);

#ifdef __cplusplus
}
#endif

#endif
