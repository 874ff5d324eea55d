/* dynload.c - see dynload.h. */
#include "dynload.h"

#include "internal.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(pe_dl_fn) == sizeof(void *),
               "dlsym's object pointer must hold a function pointer (POSIX requires it)");

void *pe_dl_open(const char *what, const char *env_var, const char *const *names,
                 size_t n_names, char *why, size_t why_size)
{
    const char *env = getenv(env_var);
    if (env && *env) {
        /* The application asked for this file: never fall back to another one (that would
         * hide a typo, and tests use a missing path to simulate a machine without it). */
        void *lib = dlopen(env, RTLD_NOW | RTLD_LOCAL);
        if (!lib) {
            const char *err = dlerror();
            snprintf(why, why_size, "%s could not be loaded from %s = \"%s\": %s", what,
                     env_var, env, err ? err : "unknown error");
        }
        return lib;
    }
    char first_err[256] = "";
    for (size_t i = 0; i < n_names; i++) {
        void *lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (lib)
            return lib;
        const char *err = dlerror();
        /* The first name's error: the usual name, and the one that says most (a
         * library that is there but does not load, or the plain "No such file"). */
        if (i == 0)
            pe_strlcpy(first_err, err ? err : "unknown error", sizeof(first_err));
    }
    int n = snprintf(why, why_size, "%s could not be loaded (tried ", what);
    for (size_t i = 0; i < n_names && n >= 0 && (size_t)n < why_size; i++)
        n += snprintf(why + n, why_size - (size_t)n, "%s%s", i ? ", " : "", names[i]);
    if (n >= 0 && (size_t)n < why_size)
        snprintf(why + n, why_size - (size_t)n, "; %s); set %s to its path", first_err,
                 env_var);
    return NULL;
}

pe_dl_fn pe_dl_sym(void *lib, const char *name)
{
    void *p = dlsym(lib, name);
    pe_dl_fn f;
    /* POSIX guarantees the conversion; memcpy keeps ISO C's -Wpedantic quiet. */
    memcpy(&f, &p, sizeof(f));
    return f;
}
