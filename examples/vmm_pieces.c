// What the driver charges for mapping one run of pages as several mappings, and
// whether the pieces could share one physical allocation (mapped at offsets into
// it) instead of each having its own, as devpool's page layer gives them: one
// allocation per run would cost one cuMemCreate instead of one per piece.
//
//   nvcc -O2 -o vmm_pieces examples/vmm_pieces.c -lcuda && ./vmm_pieces
//
// Prints, per run size and piece count, the median of 15 tries in microseconds of
// cuMemCreate, cuMemMap, cuMemSetAccess (one call over the whole run) and
// cuMemUnmap (every piece), for one physical allocation per piece; then whether one
// cuMemUnmap can cover several adjacent mappings and what it costs against one call
// per mapping; then whether cuMemMap takes a nonzero offset into a physical
// allocation (CUDA 13.0's documentation says the offset must be zero).
#include "vmm_common.h"

static double median(double *v, int n) {
    qsort(v, n, sizeof *v, cmp);
    return v[n / 2];
}

#define TRIES 15
static CUmemAllocationProp prop;
static CUmemAccessDesc access;
static size_t gran;

// One try: map `bytes` at `va` as `pieces` mappings, each its own physical
// allocation; the times of the four steps go to t[0..4].
static void one_try(CUdeviceptr va, size_t bytes, int pieces, double *t) {
    size_t piece = bytes / pieces;
    CUmemGenericAllocationHandle h[64];
    double a = now_us();
    for (int i = 0; i < pieces; i++) CK(cuMemCreate(&h[i], piece, &prop, 0));
    double b = now_us();
    for (int i = 0; i < pieces; i++) CK(cuMemMap(va + i * piece, piece, 0, h[i], 0));
    double c = now_us();
    CK(cuMemSetAccess(va, bytes, &access, 1));
    double d = now_us();
    // The mappings keep the memory: the handles can go now, as devpool does.
    for (int i = 0; i < pieces; i++) CK(cuMemRelease(h[i]));
    double e = now_us();
    for (int i = 0; i < pieces; i++) CK(cuMemUnmap(va + i * piece, piece));
    double f = now_us();
    t[0] = b - a;
    t[1] = c - b;
    t[2] = d - c;
    t[3] = f - e;
}

int main(void) {
    CK(cuInit(0));
    CUdevice dev;
    CK(cuDeviceGet(&dev, 0));
    CUcontext ctx;
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    size_t span = (size_t)1 << 34;
    CUdeviceptr va;
    CK(cuMemAddressReserve(&va, span, 0, 0, 0));
    printf("granularity %zu KiB; median of %d tries, microseconds\n", gran >> 10, TRIES);
    printf("%10s %6s %10s %10s %12s %10s %10s\n", "run", "pieces", "create", "map",
           "setaccess", "unmap", "total");
    size_t runs[] = {32 << 20, 128 << 20, 512 << 20};
    int piece_counts[] = {1, 4, 16};
    for (int r = 0; r < 3; r++) {
        for (int p = 0; p < 3; p++) {
            int pieces = piece_counts[p];
            double v[4][TRIES];
            for (int k = 0; k < TRIES; k++) {
                double t[4];
                one_try(va, runs[r], pieces, t);
                for (int j = 0; j < 4; j++) v[j][k] = t[j];
            }
            double m[4], tot = 0;
            for (int j = 0; j < 4; j++) tot += (m[j] = median(v[j], TRIES));
            printf("%7zu MiB %6d %10.1f %10.1f %12.1f %10.1f %10.1f\n", runs[r] >> 20, pieces,
                   m[0], m[1], m[2], m[3], tot);
        }
    }
    // Can one cuMemUnmap cover several adjacent mappings, and what does it cost?
    {
        int pieces = 16;
        size_t piece = gran, bytes = pieces * piece, f0, f1, f2, total;
        double one[TRIES], each[TRIES];
        CUresult r1 = CUDA_SUCCESS;
        for (int k = 0; k < TRIES; k++) {
            for (int way = 0; way < 2; way++) {
                CUmemGenericAllocationHandle hs[16];
                CK(cuMemGetInfo(&f0, &total));
                for (int i = 0; i < pieces; i++) CK(cuMemCreate(&hs[i], piece, &prop, 0));
                for (int i = 0; i < pieces; i++) CK(cuMemMap(va + i * piece, piece, 0, hs[i], 0));
                CK(cuMemSetAccess(va, bytes, &access, 1));
                for (int i = 0; i < pieces; i++) CK(cuMemRelease(hs[i]));
                CK(cuMemGetInfo(&f1, &total));
                double a = now_us();
                if (way == 0) {
                    r1 = cuMemUnmap(va, bytes);
                    if (r1 != CUDA_SUCCESS)
                        for (int i = 0; i < pieces; i++) CK(cuMemUnmap(va + i * piece, piece));
                } else {
                    for (int i = 0; i < pieces; i++) CK(cuMemUnmap(va + i * piece, piece));
                }
                double b = now_us();
                CK(cuMemGetInfo(&f2, &total));
                if (f0 > f2 + (4 << 20) || f0 < f1 + bytes) {
                    printf("memory not given back after the unmap (way %d)\n", way);
                    return 1;
                }
                (way == 0 ? one : each)[k] = b - a;
            }
        }
        const char *name;
        cuGetErrorName(r1, &name);
        printf("cuMemUnmap over %d adjacent 2 MiB mappings in one call: %s, %.1f us; one "
               "call per mapping: %.1f us (medians)\n",
               pieces, name, median(one, TRIES), median(each, TRIES));
    }
    // Can two mappings share one physical allocation, at offsets into it?
    CUmemGenericAllocationHandle h;
    size_t bytes = 4 * gran;
    CK(cuMemCreate(&h, bytes, &prop, 0));
    CUresult r = cuMemMap(va + gran, gran, gran, h, 0);
    const char *name;
    cuGetErrorName(r, &name);
    printf("cuMemMap of a 2 MiB piece at offset 2 MiB into a %zu MiB allocation: %s\n",
           bytes >> 20, name);
    if (r == CUDA_SUCCESS) CK(cuMemUnmap(va + gran, gran));
    CK(cuMemRelease(h));
    CK(cuMemAddressFree(va, span));
    return 0;
}
