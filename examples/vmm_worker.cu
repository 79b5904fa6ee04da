// Whether unmapping on a thread of the allocator's own, beside the program's thread,
// takes the unmaps' time off the program, or whether the driver makes the program
// wait for them anyway.
//
//   nvcc -O2 -o vmm_worker examples/vmm_worker.cu -lcuda -lpthread && ./vmm_worker
//
// The program's thread ("caller") does what a training or serving loop does between
// allocations: a kernel launch, an event recorded and queried (devpool's frees and
// page layer query events), timed per iteration. Meanwhile a second thread ("worker")
// unmaps the old addresses of moved memory, as the page layer does on frees: chunks of
// one 2 MiB page mapped at two addresses, the first address unmapped (the memory stays
// mapped at the second, so nothing is freed), then mapped again for the next round.
//
// Phases, each about one second:
//   alone          the caller's loop with nothing beside it
//   beside unmaps  the same while the worker unmaps (and remaps) old addresses
//   moves alone    the caller maps a held chunk at a new address and grants access
//                  (an allocation that moves memory), nothing beside it
//   moves beside   the same while the worker unmaps
// Prints, per phase, the caller's per-iteration latency (median, p99, p99.9, max, in
// microseconds) and the worker's operations.
#include "vmm_common.h"
#include <cuda_runtime.h>
#include <pthread.h>
#include <atomic>

#define RT(x)                                                                          \
    do {                                                                               \
        cudaError_t r_ = (x);                                                          \
        if (r_ != cudaSuccess && r_ != cudaErrorNotReady) {                            \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x,                  \
                    cudaGetErrorString(r_));                                           \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

__global__ void tiny(int *p) {
    if (p) *p += 1;
}

#define CHUNKS 256
#define MAXS 2000000
static CUmemAllocationProp prop;
static CUmemAccessDesc access;
static size_t gran;
static CUmemGenericAllocationHandle handles[CHUNKS];
static CUdeviceptr old_va, new_va, move_va;
static std::atomic<int> stop_worker;
static long worker_unmaps, worker_maps;
static double worker_unmap_us;
static CUcontext ctx;
static int old_mapped[CHUNKS];

static void *worker(void *arg) {
    (void)arg;
    CK(cuCtxSetCurrent(ctx));
    while (!stop_worker.load()) {
        for (int i = 0; i < CHUNKS && !stop_worker.load(); i++) {
            double a = now_us();
            CK(cuMemUnmap(old_va + i * gran, gran));
            worker_unmap_us += now_us() - a;
            old_mapped[i] = 0;
            worker_unmaps++;
        }
        // Map the old addresses again for the next round (the page layer's moves
        // would be making new old addresses all along).
        for (int i = 0; i < CHUNKS; i++) {
            if (old_mapped[i]) continue; // stopped early: still mapped
            CK(cuMemMap(old_va + i * gran, gran, 0, handles[i], 0));
            CK(cuMemSetAccess(old_va + i * gran, gran, &access, 1));
            old_mapped[i] = 1;
            worker_maps++;
        }
    }
    return NULL;
}

static double *samples;

static void report(const char *name, long n) {
    qsort(samples, n, sizeof *samples, cmp);
    printf("%-14s %8ld iterations  median %7.2f  p99 %8.2f  p99.9 %8.2f  max %9.1f us",
           name, n, samples[n / 2], samples[n * 99 / 100], samples[n * 999 / 1000],
           samples[n - 1]);
    printf("   worker: %ld unmaps (mean %.1f us), %ld maps\n", worker_unmaps,
           worker_unmaps ? worker_unmap_us / worker_unmaps : 0.0, worker_maps);
}

// The caller's launch loop for `secs` seconds; returns iterations.
static long launch_loop(cudaStream_t s, cudaEvent_t e, int *dev, double secs) {
    long n = 0;
    double end = now_us() + secs * 1e6;
    while (n < MAXS && now_us() < end) {
        double a = now_us();
        tiny<<<1, 1, 0, s>>>(dev);
        RT(cudaEventRecord(e, s));
        RT(cudaEventQuery(e));
        samples[n++] = now_us() - a;
        if (n % 64 == 0) RT(cudaStreamSynchronize(s));
    }
    RT(cudaStreamSynchronize(s));
    return n;
}

// The caller's moves for `secs` seconds: map a held chunk at a new address, grant
// access, unmap it again (untimed, so the figure is the allocation's part).
static long move_loop(double secs) {
    long n = 0;
    double end = now_us() + secs * 1e6;
    CUmemGenericAllocationHandle h;
    CK(cuMemCreate(&h, gran, &prop, 0));
    while (n < MAXS && now_us() < end) {
        double a = now_us();
        CK(cuMemMap(move_va, gran, 0, h, 0));
        CK(cuMemSetAccess(move_va, gran, &access, 1));
        samples[n++] = now_us() - a;
        CK(cuMemUnmap(move_va, gran));
    }
    CK(cuMemRelease(h));
    return n;
}

static void start_worker(pthread_t *t) {
    stop_worker.store(0);
    worker_unmaps = worker_maps = 0;
    worker_unmap_us = 0;
    pthread_create(t, NULL, worker, NULL);
}

static void stop(pthread_t t) {
    stop_worker.store(1);
    pthread_join(t, NULL);
    // Every old address mapped again, as at the start.
    for (int i = 0; i < CHUNKS; i++) {
        if (old_mapped[i]) continue;
        CK(cuMemMap(old_va + i * gran, gran, 0, handles[i], 0));
        CK(cuMemSetAccess(old_va + i * gran, gran, &access, 1));
        old_mapped[i] = 1;
    }
}

int main(void) {
    RT(cudaSetDevice(0));
    RT(cudaFree(0));
    CK(cuCtxGetCurrent(&ctx));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CK(cuMemAddressReserve(&old_va, CHUNKS * gran, 0, 0, 0));
    CK(cuMemAddressReserve(&new_va, CHUNKS * gran, 0, 0, 0));
    CK(cuMemAddressReserve(&move_va, gran, 0, 0, 0));
    for (int i = 0; i < CHUNKS; i++) {
        CK(cuMemCreate(&handles[i], gran, &prop, 0));
        CK(cuMemMap(new_va + i * gran, gran, 0, handles[i], 0));
        CK(cuMemSetAccess(new_va + i * gran, gran, &access, 1));
        CK(cuMemMap(old_va + i * gran, gran, 0, handles[i], 0));
        CK(cuMemSetAccess(old_va + i * gran, gran, &access, 1));
        old_mapped[i] = 1;
    }
    samples = (double *)malloc(MAXS * sizeof *samples);
    cudaStream_t s;
    cudaEvent_t e;
    int *dev;
    RT(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    RT(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    RT(cudaMalloc(&dev, sizeof(int)));
    launch_loop(s, e, dev, 0.2); // warm
    printf("granularity %zu bytes, %d chunks mapped twice\n", gran, CHUNKS);
    for (int round = 0; round < 2; round++) {
        pthread_t t;
        worker_unmaps = worker_maps = 0;
        worker_unmap_us = 0;
        report("alone", launch_loop(s, e, dev, 1.0));
        start_worker(&t);
        long n = launch_loop(s, e, dev, 1.0);
        stop(t);
        report("beside unmaps", n);
        worker_unmaps = worker_maps = 0;
        worker_unmap_us = 0;
        report("moves alone", move_loop(1.0));
        start_worker(&t);
        n = move_loop(1.0);
        stop(t);
        report("moves beside", n);
    }
    return 0;
}
