//! Tests on a real CUDA GPU (device 0). Run them with
//! `cargo test -p devpool-cuda --test gpu -- --ignored --test-threads=1`.

mod vm;

use devpool_core::{direct, Allocator, Backend, BackendError, DeviceId, Error, Request, StreamId};
use devpool_cuda::{cuda_malloc, device_info, CudaBackend, CudaMallocAsync};
use devpool_testing::gpu_checks::{check_no_overlap, check_stream_order, StreamOrderCheck};
use std::sync::Arc;

fn gpu() -> Arc<CudaBackend> {
    CudaBackend::new(0).expect("a CUDA device 0")
}

/// Bytes used on the device now, by everyone.
fn used(b: &CudaBackend) -> u64 {
    let (free, total) = b.mem_info().unwrap();
    total - free
}

/// Slack for memory the driver takes for itself (page tables and the like) between
/// two readings of the device's used memory.
const SLACK: u64 = 64 << 20;

#[test]
#[ignore = "needs a CUDA GPU"]
fn backend_regions_streams_and_events() {
    let b = gpu();
    let info = device_info(0).unwrap();
    println!("{info}");
    assert_eq!(info.name, b.device_name());
    assert!(b.granularity().is_power_of_two());

    let p = b.alloc_region(1 << 20).unwrap();
    let big = b.alloc_region(3 * b.granularity()).unwrap();
    assert!(
        big.is_aligned(b.granularity()),
        "large regions are page aligned"
    );
    let c = b.counters();
    assert_eq!(
        c.bytes_in_use.current,
        (b.region_bytes(1 << 20).unwrap() + 3 * b.granularity()) as u64,
        "regions are counted as the driver takes them"
    );
    assert!(matches!(
        b.free_region(p, 4096),
        Err(BackendError::InvalidArgument { .. })
    ));
    assert!(b.free_region(p.offset(256), 1 << 20).is_err());
    b.free_region(p, 1 << 20).unwrap();
    b.free_region(big, 3 * b.granularity()).unwrap();
    assert!(b.free_region(p, 1 << 20).is_err(), "double free");
    assert_eq!(b.counters().bytes_in_use.current, 0);

    // An event after long work is not done at once, and is after waiting.
    let s = b.create_stream().unwrap();
    let work = b.alloc_region(1 << 30).unwrap();
    for i in 0..32 {
        b.memset(work, i, 1 << 30, s).unwrap();
    }
    let e = b.create_event().unwrap();
    b.record_event(e, s).unwrap();
    assert!(
        !b.event_done(e).unwrap(),
        "32 GiB of memset is still running"
    );
    b.wait_event(e).unwrap();
    assert!(b.event_done(e).unwrap());
    let mut back = vec![0u8; 4096];
    b.copy_to_host(&mut back, work.offset(12345), s).unwrap();
    assert!(back.iter().all(|&x| x == 31), "the last memset won");
    let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7) as u8).collect();
    b.copy_to_device(work.offset(999), &data, s).unwrap();
    let mut again = vec![0u8; data.len()];
    b.copy_to_host(&mut again, work.offset(999), StreamId::DEFAULT)
        .unwrap();
    assert_eq!(again, data);
    b.free_region(work, 1 << 30).unwrap();
    b.destroy_event(e).unwrap();
    assert!(b.event_done(e).is_err(), "a destroyed event is refused");
    b.destroy_stream(s).unwrap();
    assert!(b.destroy_stream(s).is_err());
    assert!(b.destroy_stream(StreamId::DEFAULT).is_err());
    // Six calls above were refused: a wrong size, a pointer inside a region, a
    // double free, a destroyed event, a destroyed stream and the default stream.
    assert_eq!(b.counters().failures, 6, "every refused call is counted");
}

/// The driver's rounding of `cuMemAlloc` regions, which the backend (and the mock)
/// count through `driver_region_bytes`, against what `cuMemGetInfo` shows: for each
/// size, 16 regions are taken and the device's free memory compared before and after.
#[test]
#[ignore = "needs a CUDA GPU"]
fn region_bytes_match_cumemgetinfo() {
    let b = gpu();
    let g = b.granularity();
    let free = || {
        b.synchronize_device().unwrap();
        b.mem_info().unwrap().0
    };
    const N: usize = 16;
    println!(
        "{:>12} {:>14} {:>14}",
        "size", "counted/region", "taken/region"
    );
    for size in [
        1,
        4096,
        100_000,
        (256 << 10) + 1,
        (g / 2) - 1,
        g / 2,
        (g / 2) + 1,
        g - 1,
        g,
        g + 1,
        3 * g,
        (32 << 20) + 1,
    ] {
        // Warm the driver's pools for this size first.
        let w = b.alloc_region(size).unwrap();
        b.free_region(w, size).unwrap();
        let before = free();
        let held_before = b.counters().bytes_in_use.current;
        let ptrs: Vec<_> = (0..N).map(|_| b.alloc_region(size).unwrap()).collect();
        let taken = before.saturating_sub(free());
        let counted = b.counters().bytes_in_use.current - held_before;
        println!(
            "{size:>12} {:>14} {:>14}",
            counted / N as u64,
            taken / N as u64
        );
        for p in ptrs {
            b.free_region(p, size).unwrap();
        }
        assert_eq!(counted, (N * b.region_bytes(size).unwrap()) as u64);
        // One shared page of slack in all, far less than one page per region.
        assert!(
            taken.abs_diff(counted) <= g as u64,
            "{N} regions of {size} B: counted {counted} B, the device lost {taken} B"
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn no_overlap_direct() {
    let r = check_no_overlap(&direct(gpu()), 4000, 1).unwrap();
    println!("direct: {r:?}");
    assert_eq!(r.allocations, 4000);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn no_overlap_cuda_malloc() {
    let b = gpu();
    let a = cuda_malloc(b.clone());
    let r = check_no_overlap(&a, 4000, 2).unwrap();
    println!("cuda-malloc: {r:?}");
    // Alignments above what cuMemAlloc promises are honoured too.
    let mut blocks = Vec::new();
    for align in [512usize, 4096, 65536, 2 << 20] {
        for size in [1usize, 1000, 70_000, 3 << 20] {
            let blk = a.allocate(Request::new(size).with_align(align)).unwrap();
            assert!(blk.ptr.is_aligned(align), "{blk:?} not aligned to {align}");
            blocks.push(blk);
        }
    }
    for blk in blocks {
        a.free(blk).unwrap();
    }
    assert_eq!(b.counters().bytes_in_use.current, 0);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn no_overlap_cuda_malloc_async() {
    let a = CudaMallocAsync::new(gpu()).unwrap();
    let r = check_no_overlap(&a, 4000, 3).unwrap();
    println!("cuda-malloc-async: {r:?}");
    let s = a.stats();
    assert_eq!(s.live_blocks.current, 0);
    assert!(s.reserved_bytes.peak > 0, "the pool's own count is read");
    let released = a.trim().unwrap();
    println!("trim released {released} B");
    assert!(a.stats().reserved_bytes.current <= s.reserved_bytes.current);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn stream_order_direct() {
    let r = check_stream_order(&direct(gpu())).unwrap();
    println!("direct: {r:?}");
    assert!(
        r.freed_on_other_stream.busy_at_alloc,
        "the check's premise: the other stream was still busy"
    );
    assert!(!r.freed_on_other_stream.aliased);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn stream_order_check_catches_a_cache_shared_by_streams() {
    let a = devpool_testing::fixtures::shared_cache(gpu());
    let e = check_stream_order(&a).expect_err("the broken cache must be caught");
    println!("{e}");
    assert!(matches!(e, Error::Corrupted { .. }), "{e}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn stream_order_cuda_malloc_async_keeps_data() {
    // The driver may hand a busy block to another stream, making that stream wait:
    // only the data must come out right.
    let a = CudaMallocAsync::new(gpu()).unwrap();
    let check = StreamOrderCheck::default();
    match check.run(&a) {
        Ok(r) => println!("cuda-malloc-async: {r:?}"),
        Err(Error::Corrupted { detail, .. }) if detail.contains("shares memory") => {
            println!("cuda-malloc-async hands busy memory over with a dependency: {detail}")
        }
        Err(e) => panic!("{e}"),
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn virtual_pages_are_really_mapped_and_unmapped() {
    let b = gpu();
    assert!(b.supports_virtual());
    let g = b.granularity();
    let range = b.reserve(16 * g, g).unwrap();
    let before = used(&b);
    b.map(range.offset(2 * g), 4 * g).unwrap();
    let mapped = used(&b);
    assert!(
        mapped >= before + 4 * g as u64 && mapped <= before + 4 * g as u64 + SLACK,
        "used {before} -> {mapped} after mapping {} B",
        4 * g
    );
    // Write across page boundaries and read back.
    let s = StreamId::DEFAULT;
    b.memset(range.offset(2 * g), 0x5A, 4 * g, s).unwrap();
    let data: Vec<u8> = (0..2 * g as u32 + 10).map(|i| (i % 253) as u8).collect();
    b.copy_to_device(range.offset(3 * g - 5), &data, s).unwrap();
    let mut back = vec![0u8; data.len()];
    b.copy_to_host(&mut back, range.offset(3 * g - 5), s)
        .unwrap();
    assert_eq!(back, data);
    // Double mapping and unmapping what is not mapped are refused.
    assert!(b.map(range.offset(5 * g), g).is_err());
    assert!(b.unmap(range.offset(6 * g), g).is_err());
    assert!(b.unreserve(range, 16 * g).is_err(), "pages still mapped");
    // One page alone goes away; the others keep their data.
    b.unmap(range.offset(3 * g), g).unwrap();
    let one_less = used(&b);
    assert!(
        one_less + g as u64 <= mapped && one_less + g as u64 + SLACK >= mapped,
        "used {mapped} -> {one_less} after unmapping one page"
    );
    let mut tail = vec![0u8; 16];
    b.copy_to_host(&mut tail, range.offset(5 * g + 100), s)
        .unwrap();
    assert!(tail.iter().all(|&x| x == 0x5A));
    b.unmap(range.offset(2 * g), g).unwrap();
    b.unmap(range.offset(4 * g), 2 * g).unwrap();
    let after = used(&b);
    assert!(
        after <= before + SLACK && after + SLACK >= before,
        "used {before} -> {after} after unmapping everything"
    );
    b.unreserve(range, 16 * g).unwrap();
    let c = b.counters();
    assert_eq!((c.pages_mapped, c.pages_unmapped), (4, 4));
    assert_eq!(c.bytes_in_use.current, 0);
    assert_eq!(c.bytes_in_use.peak, 4 * g as u64);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn map_beyond_the_device_fails_cleanly() {
    let b = gpu();
    let g = b.granularity();
    let (_, total) = b.mem_info().unwrap();
    let pages = (total as usize).div_ceil(g) + 16;
    let range = b.reserve(pages * g, g).unwrap();
    let before = used(&b);
    let e = b
        .map(range, pages * g)
        .expect_err("more pages than the device has");
    assert!(matches!(e, BackendError::OutOfMemory { .. }), "{e}");
    println!("{e}");
    let after = used(&b);
    assert!(
        after <= before + SLACK,
        "every page mapped before the failure was given back: {before} -> {after}"
    );
    assert_eq!(b.counters().bytes_in_use.current, 0);
    // The range is usable afterwards: the failed call released its claim.
    b.map(range, 2 * g).unwrap();
    b.unmap(range, 2 * g).unwrap();
    b.unreserve(range, pages * g).unwrap();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn out_of_memory_is_an_error_and_the_allocator_goes_on() {
    let b = gpu();
    let (_, total) = b.mem_info().unwrap();
    let too_much = total as usize + (1 << 30);
    let allocators: Vec<Box<dyn Allocator>> = vec![
        Box::new(direct(b.clone())),
        Box::new(cuda_malloc(b.clone())),
        Box::new(CudaMallocAsync::new(b.clone()).unwrap()),
    ];
    for a in allocators {
        let keep = a.alloc(1 << 20).unwrap();
        let e = a.alloc(too_much).expect_err("larger than the device");
        assert!(e.is_oom(), "{}: {e}", a.name());
        println!("{}: {e}", a.name());
        let again = a.alloc(64 << 20).expect("still works after out of memory");
        a.free(again).unwrap();
        a.free(keep).unwrap();
        assert!(a.stats().failures >= 1);
    }
    assert_eq!(b.counters().bytes_in_use.current, 0);
}

#[test]
#[ignore = "needs two CUDA GPUs"]
fn peer_access_and_copies_between_two_devices() {
    let n = devpool_cuda::device_count().unwrap();
    if n < 2 {
        eprintln!("skipped: needs two CUDA devices, this machine has {n}");
        return;
    }
    let (d0, d1) = (gpu(), CudaBackend::new(1).unwrap());
    let s = StreamId::DEFAULT;
    assert!(
        d0.enable_peer_access(DeviceId(0)).is_err(),
        "not with itself"
    );
    // One page mapped before access is granted, one after, and a region.
    let g = d0.granularity();
    let range = d0.reserve(4 * g, g).unwrap();
    d0.map(range, g).unwrap();
    let region = d0.alloc_region(1 << 20).unwrap();
    match d0.enable_peer_access(DeviceId(1)) {
        Ok(()) => {}
        Err(BackendError::Unavailable(why)) => {
            println!("no peer access on this machine: {why}");
            return;
        }
        Err(e) => panic!("{e}"),
    }
    assert!(d0.peer_access_enabled(DeviceId(1)));
    assert!(!d1.peer_access_enabled(DeviceId(0)));
    d0.map(range.offset(g), g).unwrap();
    d0.memset(range, 7, 2 * g, s).unwrap();
    d0.memset(region, 9, 1 << 20, s).unwrap();
    d0.synchronize(s).unwrap();
    let dst = d1.alloc_region(2 * g).unwrap();
    let mut back = vec![0u8; 2 * g];
    d1.copy_from_peer(dst, &*d0, range, 2 * g, s).unwrap();
    d1.copy_to_host(&mut back, dst, s).unwrap();
    assert!(
        back.iter().all(|&x| x == 7),
        "both pages read from device 1"
    );
    d1.copy_from_peer(dst, &*d0, region, 1 << 20, s).unwrap();
    d1.copy_to_host(&mut back[..1 << 20], dst, s).unwrap();
    assert!(back[..1 << 20].iter().all(|&x| x == 9));
    // Device 1 gave device 0 no access: the other way is refused.
    assert!(d0.copy_from_peer(region, &*d1, dst, 4096, s).is_err());
    d1.free_region(dst, 2 * g).unwrap();
    d0.unmap(range, 2 * g).unwrap();
    d0.unreserve(range, 4 * g).unwrap();
    d0.free_region(region, 1 << 20).unwrap();
    d0.synchronize_device().unwrap();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn driver_times_count_each_call_the_backend_makes() {
    let b = gpu();
    let g = b.granularity();
    let range = b.reserve(8 * g, g).unwrap();
    b.reset_driver_times();
    // Three chunks: three creates, maps and releases, one grant of access.
    b.map_chunks(range, &[g, 2 * g, g]).unwrap();
    let calls = |name: &str| {
        b.driver_times()
            .iter()
            .find(|t| t.call == name)
            .map_or(0, |t| t.calls)
    };
    assert_eq!(
        (
            calls("cuMemCreate"),
            calls("cuMemMap"),
            calls("cuMemRelease")
        ),
        (3, 3, 3)
    );
    assert_eq!((calls("cuMemSetAccess"), calls("cuMemUnmap")), (1, 0));
    b.unmap(range, 4 * g).unwrap();
    assert_eq!(calls("cuMemUnmap"), 3, "one unmap per mapping");
    let times = b.driver_times();
    assert!(times.iter().all(|t| t.total_ns >= t.max_ns && t.max_ns > 0));
    assert!(
        times.windows(2).all(|w| w[0].total_ns >= w[1].total_ns),
        "most time first"
    );
    b.unreserve(range, 8 * g).unwrap();
    b.reset_driver_times();
    assert!(b.driver_times().is_empty());
}

/// What each driver call of mapping and unmapping costs, by chunk size: the
/// figures behind the page layer's choices. Prints a table; asserts nothing of
/// time. Each size is mapped and unmapped `REPS` times in a row (memory given back
/// and taken again at once), then `REPS` chunks are created together and freed
/// together.
#[test]
#[ignore = "needs a CUDA GPU"]
fn driver_call_costs_by_chunk_size() {
    const REPS: usize = 12;
    let b = gpu();
    let g = b.granularity();
    let sizes = [g, 8 * g, 32 * g, 128 * g, 512 * g];
    let range = b.reserve(REPS * 512 * g, g).unwrap();
    println!("chunk | map µs (median, max) | unmap µs | creates µs (median, max) | setaccess µs | unmap-each µs | release µs");
    for &s in &sizes {
        let (mut map, mut unmap) = (Vec::new(), Vec::new());
        b.reset_driver_times();
        for _ in 0..REPS {
            let t = std::time::Instant::now();
            b.map_chunks(range, &[s]).unwrap();
            map.push(t.elapsed().as_secs_f64() * 1e6);
            let t = std::time::Instant::now();
            b.unmap(range, s).unwrap();
            unmap.push(t.elapsed().as_secs_f64() * 1e6);
        }
        let per = |name: &str| {
            b.driver_times()
                .iter()
                .find(|t| t.call == name)
                .map_or((0.0, 0.0), |t| {
                    (
                        t.total_ns as f64 / t.calls as f64 / 1e3,
                        t.max_ns as f64 / 1e3,
                    )
                })
        };
        let med = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            (v[v.len() / 2], v[v.len() - 1])
        };
        let (m, u) = (med(&mut map), med(&mut unmap));
        let (c, a, un, r) = (
            per("cuMemCreate"),
            per("cuMemSetAccess"),
            per("cuMemUnmap"),
            per("cuMemRelease"),
        );
        println!(
            "{:>5} MiB | {:.1}, {:.1} | {:.1}, {:.1} | create mean {:.1} max {:.1} | setaccess mean {:.1} max {:.1} | unmap mean {:.1} max {:.1} | release mean {:.1} max {:.1}",
            s >> 20, m.0, m.1, u.0, u.1, c.0, c.1, a.0, a.1, un.0, un.1, r.0, r.1
        );
        // Many chunks at once: taken together, given back together.
        b.reset_driver_times();
        let t = std::time::Instant::now();
        b.map_chunks(range, &[s; REPS]).unwrap();
        let up = t.elapsed().as_secs_f64() * 1e6;
        let t = std::time::Instant::now();
        b.unmap(range, s * REPS).unwrap();
        let down = t.elapsed().as_secs_f64() * 1e6;
        println!(
            "      {REPS} x {} MiB in one call: map {:.0} µs, unmap {:.0} µs; {:?}",
            s >> 20,
            up,
            down,
            b.driver_times()
                .iter()
                .map(|t| format!("{} {:.1}", t.call, t.total_ns as f64 / 1e3))
                .collect::<Vec<_>>()
        );
    }
    b.unreserve(range, REPS * 512 * g).unwrap();
}

/// Whether the driver maps faster from several threads: 32 chunks of 2 MiB mapped
/// and unmapped by one thread, then by 2, 4 and 8 threads at once (each its own
/// share, its own range). Prints the wall time; asserts nothing of time.
#[test]
#[ignore = "needs a CUDA GPU"]
fn driver_mapping_from_several_threads() {
    const CHUNKS: usize = 32;
    let b = gpu();
    let g = b.granularity();
    let range = b.reserve(CHUNKS * g, g).unwrap();
    for threads in [1usize, 2, 4, 8] {
        let per = CHUNKS / threads;
        let mut best = (f64::MAX, f64::MAX);
        for _ in 0..5 {
            let t = std::time::Instant::now();
            std::thread::scope(|s| {
                for i in 0..threads {
                    let b = &b;
                    s.spawn(move || {
                        b.map_chunks(range.offset(i * per * g), &vec![g; per])
                            .unwrap()
                    });
                }
            });
            let up = t.elapsed().as_secs_f64() * 1e6;
            let t = std::time::Instant::now();
            std::thread::scope(|s| {
                for i in 0..threads {
                    let b = &b;
                    s.spawn(move || b.unmap(range.offset(i * per * g), per * g).unwrap());
                }
            });
            let down = t.elapsed().as_secs_f64() * 1e6;
            best = (best.0.min(up), best.1.min(down));
        }
        println!(
            "{CHUNKS} chunks of 2 MiB from {threads} threads: map {:.0} µs, unmap {:.0} µs (best of 5)",
            best.0, best.1
        );
    }
    b.unreserve(range, CHUNKS * g).unwrap();
}
