/*
 * devpool.h: the C ABI of devpool (libdevpool_ffi.so), GPU device-memory
 * allocators written in Rust.
 *
 * One allocator per device (ordinals 0..63), made on the first call that names
 * the device, with the settings of that moment: the environment variable
 * DEVPOOL_CONFIG (read once, on first use), then every devpool_configure()
 * string over it. Every function is thread-safe and never aborts or unwinds
 * into the caller.
 *
 * Include <cuda_runtime.h> before this header to use CUDA's own cudaStream_t;
 * otherwise an identical opaque typedef is declared here. A null stream is the
 * legacy default stream.
 *
 * Build against it:
 *   cc -I crates/devpool-ffi/include prog.c -L <dir> -ldevpool_ffi \
 *      -Wl,-rpath,<dir>
 */
#ifndef DEVPOOL_H
#define DEVPOOL_H

#include <stddef.h>

#if !defined(__DRIVER_TYPES_H__) && !defined(DEVPOOL_HAVE_CUDA_STREAM_T)
#define DEVPOOL_HAVE_CUDA_STREAM_T 1
/* The same type as CUDA's driver_types.h declares: a handle, never dereferenced. */
typedef struct CUstream_st *cudaStream_t;
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Return codes of devpool_configure and devpool_record_stream. */
#define DEVPOOL_OK 0
/* Bad argument: a configuration string that does not parse, a bad ordinal. */
#define DEVPOOL_ERR_INVALID (-1)
/* devpool_configure after the first allocation: the settings are fixed. */
#define DEVPOOL_ERR_TOO_LATE (-2)
/* The pointer is not a live block of that device. */
#define DEVPOOL_ERR_NOT_FOUND (-3)
/* The allocator or the CUDA backend failed. */
#define DEVPOOL_ERR_BACKEND (-4)
/* An internal error (a caught panic); the call did nothing. */
#define DEVPOOL_ERR_PANIC (-5)

/*
 * Allocate `size` bytes on `device` for work queued on `stream`. The
 * signature torch.cuda.memory.CUDAPluggableAllocator loads.
 *
 * Returns a 256-byte aligned device pointer, or NULL when out of memory (after
 * giving cached memory back and retrying once) or on error; the reason is in
 * devpool_last_error(). A size of 0 gets a real, unique pointer, freed like
 * any other.
 */
void *devpool_malloc(size_t size, int device, cudaStream_t stream);

/*
 * Free `ptr`, allocated on `device`, whose last use was queued on `stream`.
 * The signature torch.cuda.memory.CUDAPluggableAllocator loads.
 *
 * The memory is reused at once by later work on `stream`, and by other streams
 * only after the work queued so far on `stream` (and on streams named by
 * devpool_record_stream) has completed. `size` is the size given to
 * devpool_malloc, or 0 if unknown; a different nonzero size is reported and
 * the block freed all the same. NULL does nothing. A double free, a foreign
 * pointer or a block of another device is reported (once per kind on stderr,
 * and in devpool_last_error) and nothing is freed.
 */
void devpool_free(void *ptr, size_t size, int device, cudaStream_t stream);

/*
 * Apply a configuration string over the current settings, before the first
 * allocation. Keys (separated by ';'):
 *   strategy=hybrid|hybrid-coarse|hybrid-inference|hybrid-buddy|slab|fixed|
 *            buddy-region|buddy-virtual|buddy|tlsf-region|tlsf-virtual|tlsf|
 *            arena|ring|direct  (hybrid; `devpool strategies` lists them)
 *   backend=cuda|mock          (cuda; mock is a CPU stand-in for tests)
 *   small_max=<bytes>          hybrid: largest request for the slab
 *                              (64K; 1M for hybrid-buddy)
 *   huge_min=<bytes>|off       hybrid: requests from here get own regions
 *                              (off; 1G for hybrid-inference)
 *   cache_floor=<bytes>, move_margin=<0..1>, move_slack=<0..1>,
 *   move_memory=on|off, map_batch=<pages>, chunk_pages=<pages>,
 *   chunk_divisor=<n>, chunk_min_pages=<pages>
 *                              strategies that map pages: the page layer's
 *                              settings (docs/DESIGN.md; coarser chunks and no
 *                              moving: fewer driver calls, more memory)
 *   burst=on|off               strategies that map pages: growth in bursts,
 *                              with little freed meanwhile, maps ahead: fewer
 *                              allocations wait for the driver, a little more
 *                              memory at the peak (off)
 *   reserve=<bytes>            strategies that map pages: mapped at the first
 *                              large allocation and kept while fewer bytes are
 *                              allocated; given back by devpool_trim (0)
 *   mock_capacity=<bytes>      mock: memory per device (141G)
 *   log=off|once|all           misuse messages on stderr (once)
 * Sizes take K, M, G, T suffixes. Example: "strategy=hybrid;backend=cuda".
 *
 * Returns DEVPOOL_OK, DEVPOOL_ERR_INVALID (nothing changes), or
 * DEVPOOL_ERR_TOO_LATE once any device's allocator exists.
 */
int devpool_configure(const char *config);

/*
 * Statistics of `device` as a JSON object: strategy, backend, config, stats
 * (live/allocated/reserved bytes and live blocks as {current, peak},
 * allocations, frees, backend_calls, failures), backend_counters (bytes_in_use
 * {current, peak}: device memory held), reserved_bytes, peak_reserved_bytes,
 * live_pointers, bad_calls, panics, routes (hybrid), driver_calls (CUDA: time
 * in each driver entry point the backend called). A device without an
 * allocator yet gives {"device", "initialized": false, "config"}.
 * Free the string with devpool_string_free. NULL on error.
 */
char *devpool_stats_json(int device);

/* Free a string from devpool_stats_json. NULL does nothing. */
void devpool_string_free(char *s);

/*
 * Give `device`'s cached memory back to the driver; returns the bytes
 * released (0 if the device has no allocator yet, or on error).
 */
size_t devpool_trim(int device);

/*
 * Declare that the block at `ptr` is also used by work on `stream` (PyTorch's
 * record_stream): its free then also waits for that work. Returns DEVPOOL_OK,
 * DEVPOOL_ERR_NOT_FOUND, DEVPOOL_ERR_INVALID or DEVPOOL_ERR_BACKEND.
 */
int devpool_record_stream(void *ptr, int device, cudaStream_t stream);

/*
 * The message of the last failure on the calling thread, or ""; successful
 * calls leave it. The pointer stays valid until this thread calls
 * devpool_last_error again: no other devpool call frees it.
 */
const char *devpool_last_error(void);

/* The library's version, a static string. */
const char *devpool_version(void);

/*
 * What a framework's allocator needs beyond malloc and free.
 */

/*
 * Free the live block at `ptr`, whichever device it is on, on the stream it
 * was allocated for (its later uses elsewhere declared with
 * devpool_record_stream). For deleters that know only the pointer. Returns
 * DEVPOOL_OK (also for NULL), DEVPOOL_ERR_NOT_FOUND when `ptr` is not a live
 * block (nothing is freed; not counted as misuse, so a caller with a second
 * allocator may try devpool first), or DEVPOOL_ERR_BACKEND.
 */
int devpool_release(void *ptr);

/* One figure as PyTorch keeps it: now, peak since the last reset, and the
 * cumulative amounts added and taken away. */
typedef struct devpool_counter {
    unsigned long long current;
    unsigned long long peak;
    unsigned long long allocated;
    unsigned long long freed;
} devpool_counter_t;

/* The statistics of one device. Bytes and blocks are counted by the C ABI as
 * blocks cross it; reserved_bytes is the device memory held (regions plus
 * mapped pages), its allocated/freed totals are not kept (0). */
typedef struct devpool_device_stats {
    unsigned long long struct_size;      /* sizeof as the library knows it */
    devpool_counter_t requested_bytes;   /* requested bytes of live blocks */
    devpool_counter_t allocated_bytes;   /* granted bytes of live blocks */
    devpool_counter_t blocks;            /* live blocks; allocated/freed: calls */
    devpool_counter_t reserved_bytes;    /* device memory held */
    unsigned long long segments;         /* regions and mapped pages held */
    unsigned long long backend_memory_calls;
    unsigned long long failures;         /* failed allocations */
    unsigned long long bad_calls;        /* unknown pointers, wrong device/size */
} devpool_device_stats_t;

/* Fill *out with the statistics of `device` (zeros before its first
 * allocation). DEVPOOL_OK, or DEVPOOL_ERR_INVALID for NULL or a bad ordinal. */
int devpool_device_stats(int device, devpool_device_stats_t *out);

/* Set the peaks of `device`'s statistics back to their current values. */
int devpool_reset_peak_stats(int device);

/* The start of the live block at `ptr` (the pointer itself), its requested
 * size and device; NULL when `ptr` is not a live block. Outputs may be NULL. */
void *devpool_block_info(const void *ptr, size_t *size, int *device);

/* Let device `peer` access the memory `device` holds now and maps later.
 * DEVPOOL_OK, DEVPOOL_ERR_INVALID or DEVPOOL_ERR_BACKEND. */
int devpool_enable_peer_access(int device, int peer);

/* CUDA devices the driver sees; 0 with no driver or no device. */
int devpool_cuda_device_count(void);

/*
 * For cupy.cuda.memory.CFunctionAllocator(param, malloc, free, owner).
 * `param` is the stream the memory is for: a cudaStream_t, or NULL for the
 * legacy default stream (CuPy's default). Memory freed is reused at once on
 * that stream, so CuPy work must run on it. NULL on error or out of memory:
 * CuPy does not check, so wrap its malloc to raise.
 */
void *devpool_cupy_malloc(void *param, size_t size, int device);
void devpool_cupy_free(void *param, void *ptr, int device);

#ifdef __cplusplus
}
#endif

#endif /* DEVPOOL_H */
