#include "harness.h"
int main(int argc, char **argv) { int rc = th_init(argc, argv, "set_rows"); if (rc >= 0) return rc; th_fini(); return 0; }
