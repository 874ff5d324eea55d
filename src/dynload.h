/*
 * dynload.h - opening a shared library at run time (dlopen / dlsym), shared by the OpenCL
 * and CLBlast loader (src/opencl/cl_loader.c) and the Vulkan loader (src/vulkan/vk_loader.c).
 * See docs/loading.md for what is opened when and from where.
 *
 * Libraries opened here are never closed (no dlclose): contexts, buffers and function
 * tables of any thread may point into them at any time, and the loaders and drivers keep
 * process-wide state of their own. The handle lives until the process exits, like a
 * library linked at build time.
 */
#ifndef POSENC_DYNLOAD_H
#define POSENC_DYNLOAD_H

#include <stddef.h>

/* Any function pointer (cast to the real type before calling). */
typedef void (*pe_dl_fn)(void);

/*
 * Open the library `what` (a description for messages, e.g. "the OpenCL ICD loader").
 * When the environment variable `env_var` is set and not empty, its value (a path, or a
 * name the dynamic linker searches for) is the only thing tried; otherwise each of the
 * n_names `names` in order. Returns the handle, or NULL with `why` saying what was looked
 * for, the first error of the dynamic linker, and which variable points at another file.
 */
void *pe_dl_open(const char *what, const char *env_var, const char *const *names,
                 size_t n_names, char *why, size_t why_size);

/* The address of `name` in `lib`, or NULL. */
pe_dl_fn pe_dl_sym(void *lib, const char *name);

#endif
