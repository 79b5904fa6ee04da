// What the driver-measuring examples (vmm_pieces.c, vmm_worker.cu) share: a driver
// call checked (the program stops with the call and the driver's error name), a
// monotonic clock in microseconds, and an ascending order of doubles for qsort.
#ifndef DEVPOOL_VMM_COMMON_H
#define DEVPOOL_VMM_COMMON_H

#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CK(x)                                                                          \
    do {                                                                               \
        CUresult r_ = (x);                                                             \
        if (r_ != CUDA_SUCCESS) {                                                      \
            const char *s_;                                                            \
            cuGetErrorName(r_, &s_);                                                   \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, s_);             \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#endif
