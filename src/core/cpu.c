/*
** cpu.c — which builds of the vectorized kernels run. Some kernels are compiled twice, for the
** baseline ISA and for AVX2 (window.c, observer.c), and vmath.c calls libmvec's 4- or 8-lane
** functions; the AVX2 ones run where the CPU has AVX2 and FMA (every AVX2 CPU has both; batch
** norm's build uses the fused multiply-add), unless the environment variable BPCC_ISA is
** "baseline" (read once, at load). The two builds of a kernel compute the same values (libmvec's
** within their ulp bounds); the variable lets the tests run the baseline builds on an AVX2 machine.
*/
#include "core.h"

#include <stdlib.h>

static bool avx2;

#ifdef BPCC_AVX2_CLONES
__attribute__((constructor)) static void cpu_init(void)
{
    __builtin_cpu_init(); /* constructors may run before libgcc's own */
    const char *isa = getenv("BPCC_ISA");
    avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && !(isa && !strcmp(isa, "baseline"));
}
#endif

bool bpcc_cpu_avx2(void) { return avx2; }
