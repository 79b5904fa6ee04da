/*
 * devpool from C: allocate, free, misuse, statistics, trim.
 *
 *   ./devpool_example                 mock backend: runs anywhere, no GPU needed
 *   ./devpool_example cuda            the CUDA backend, device 0
 *   ./devpool_example mock slab       another strategy (default: hybrid)
 *
 * Built with -DDEVPOOL_EXAMPLE_CUDART and linked with -lcudart, it also writes
 * a pattern into every block with the CUDA runtime, reads it back, and frees a
 * block on a stream of its own. See README.md beside this file.
 *
 * Exits 0 when every check passes.
 */
#ifdef DEVPOOL_EXAMPLE_CUDART
#include <cuda_runtime.h>
#endif
#include "devpool.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

#define CHECK(cond, ...)                                                     \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "FAILED %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                    \
            fprintf(stderr, " (last error: %s)\n", devpool_last_error());    \
            failures++;                                                      \
        }                                                                    \
    } while (0)

#ifdef DEVPOOL_EXAMPLE_CUDART
/* Fill the block with a byte derived from its index, read back both ends. */
static void check_data(void *p, size_t size, int i) {
    unsigned char v = (unsigned char)(0x5a ^ i), first = 0, last = 0;
    if (size == 0) return;
    CHECK(cudaMemset(p, v, size) == cudaSuccess, "cudaMemset %zu B", size);
    CHECK(cudaMemcpy(&first, p, 1, cudaMemcpyDeviceToHost) == cudaSuccess, "copy");
    CHECK(cudaMemcpy(&last, (char *)p + size - 1, 1, cudaMemcpyDeviceToHost) == cudaSuccess,
          "copy");
    CHECK(first == v && last == v, "block %d read back %#x/%#x, wrote %#x", i, first, last, v);
}
#endif

int main(int argc, char **argv) {
    const char *backend = argc > 1 ? argv[1] : "mock";
    const char *strategy = argc > 2 ? argv[2] : "hybrid";
    char config[160];
    snprintf(config, sizeof config, "backend=%s;strategy=%s", backend, strategy);
    int rc = devpool_configure(config);
    CHECK(rc == DEVPOOL_OK, "devpool_configure(\"%s\") returned %d", config, rc);
    printf("devpool %s, config \"%s\"\n", devpool_version(), config);

    /* Sizes from nothing to 64 MiB: slab, TLSF and the edges between them. */
    const size_t sizes[] = {0, 1, 1000, 4096, 1 << 20, (1 << 20) + 1, 3 << 20, 64 << 20};
    enum { N = sizeof sizes / sizeof sizes[0] };
    void *blocks[N];
    for (int i = 0; i < N; i++) {
        blocks[i] = devpool_malloc(sizes[i], 0, NULL);
        CHECK(blocks[i] != NULL, "devpool_malloc(%zu)", sizes[i]);
        CHECK(((uintptr_t)blocks[i] & 255) == 0, "%p is not 256-byte aligned", blocks[i]);
        for (int j = 0; j < i; j++) CHECK(blocks[i] != blocks[j], "block %d repeats %d", i, j);
#ifdef DEVPOOL_EXAMPLE_CUDART
        if (blocks[i]) check_data(blocks[i], sizes[i], i);
#endif
    }
    if (failures) {
        printf("allocation failed: %s\n", devpool_last_error());
        return 1;
    }
    CHECK(devpool_record_stream(blocks[3], 0, NULL) == DEVPOOL_OK, "record_stream");

    /* Free every other block and take the memory again. */
    for (int i = 0; i < N; i += 2) devpool_free(blocks[i], sizes[i], 0, NULL);
    for (int i = 0; i < N; i += 2) {
        blocks[i] = devpool_malloc(sizes[i], 0, NULL);
        CHECK(blocks[i] != NULL, "devpool_malloc(%zu) again", sizes[i]);
    }

#ifdef DEVPOOL_EXAMPLE_CUDART
    /* A block used on a stream of its own, freed on that stream. */
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s) == cudaSuccess, "cudaStreamCreate");
    void *q = devpool_malloc(8 << 20, 0, s);
    CHECK(q != NULL, "devpool_malloc on a stream");
    CHECK(cudaMemsetAsync(q, 1, 8 << 20, s) == cudaSuccess, "cudaMemsetAsync");
    devpool_free(q, 8 << 20, 0, s);
    CHECK(cudaStreamSynchronize(s) == cudaSuccess, "cudaStreamSynchronize");
    CHECK(cudaStreamDestroy(s) == cudaSuccess, "cudaStreamDestroy");
#endif

    /* Misuse: reported, never a crash, nothing changes. */
    devpool_free(NULL, 0, 0, NULL); /* like free(NULL): nothing at all */
    int dummy;
    devpool_free(&dummy, sizeof dummy, 0, NULL); /* not devpool's pointer */
    CHECK(strlen(devpool_last_error()) > 0, "a foreign free leaves a message");
    CHECK(devpool_record_stream(&dummy, 0, NULL) == DEVPOOL_ERR_NOT_FOUND, "foreign record");
    CHECK(devpool_configure("strategy=slab") == DEVPOOL_ERR_TOO_LATE, "configure after use");
    CHECK(devpool_malloc(1, -1, NULL) == NULL, "a negative device");

    for (int i = 0; i < N; i++) devpool_free(blocks[i], sizes[i], 0, NULL);
    devpool_free(blocks[0], sizes[0], 0, NULL); /* double free: reported, ignored */

    char *json = devpool_stats_json(0);
    CHECK(json != NULL, "devpool_stats_json");
    if (json) {
        printf("stats: %s\n", json);
        CHECK(strstr(json, "\"live_pointers\":0") != NULL, "every block is freed");
        devpool_string_free(json);
    }
    size_t released = devpool_trim(0);
    printf("trim released %zu bytes\n", released);
    json = devpool_stats_json(0);
    if (json) {
        CHECK(strstr(json, "\"reserved_bytes\":0") != NULL, "nothing held after trim");
        devpool_string_free(json);
    }

    if (failures) {
        printf("%d check(s) failed\n", failures);
        return 1;
    }
    printf("ok: every check passed (%s backend, %s)\n", backend, strategy);
    return 0;
}
