//! Two GPUs at once: one pool per device, each thread on its own device and streams,
//! every block filled and read back, and pairs per second with 16 threads split over
//! the two devices. Run with
//! `cargo test -p devpool-cuda --test multi_gpu -- --ignored --test-threads=1 --nocapture`.
//! `DEVPOOL_MULTI_SECS` sets how long the fill-and-check run lasts (default 60 s).

use devpool_core::{Allocator, Backend, Block, DeviceId, Devices, Request, Rng, StreamId};
use devpool_cuda::CudaBackend;
use devpool_hybrid::{hybrid, HybridConfig, HybridPool};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

type Hybrid = devpool_core::StreamOrdered<HybridPool>;
/// The two backends and one hybrid per device.
type TwoDevices = (Vec<Arc<CudaBackend>>, Arc<Devices<Hybrid>>);

/// The two devices, or `None` (saying the test is skipped) on a machine with fewer.
fn two_devices() -> Option<TwoDevices> {
    let n = devpool_cuda::device_count().unwrap_or(0);
    if n < 2 {
        eprintln!("skipped: needs two CUDA devices, this machine has {n}");
        return None;
    }
    let gpus: Vec<Arc<CudaBackend>> = (0..2)
        .map(|d| CudaBackend::new(d).expect("device"))
        .collect();
    let devs = Devices::new(
        gpus.iter()
            .map(|g| hybrid(g.clone(), HybridConfig::training())),
    );
    Some((gpus, Arc::new(devs)))
}

#[test]
#[ignore = "needs two CUDA GPUs"]
fn one_thread_per_device_fill_check_free() {
    let Some((gpus, devs)) = two_devices() else {
        return;
    };
    let secs: u64 = std::env::var("DEVPOOL_MULTI_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let handles: Vec<_> = (0..2u32)
        .map(|d| {
            let devs = devs.clone();
            let gpu = gpus[d as usize].clone();
            std::thread::spawn(move || {
                let streams = [gpu.create_stream().unwrap(), gpu.create_stream().unwrap()];
                let mut rng = Rng::new(d as u64 + 1);
                let mut live: Vec<(Block, u8)> = Vec::new();
                let (mut allocs, mut checked_bytes) = (0u64, 0u64);
                let start = Instant::now();
                let mut i = 0u32;
                while start.elapsed() < Duration::from_secs(secs) {
                    i += 1;
                    if live.len() < 256 && (live.is_empty() || rng.below(2) == 0) {
                        let s = streams[rng.below(2) as usize];
                        let req = Request::new(rng.log_uniform(1, 8 << 20)).on_stream(s);
                        let b = devs.allocate(DeviceId(d), req).expect("allocate");
                        assert_eq!(
                            b.device,
                            DeviceId(d),
                            "a block of device {d} came from {}",
                            b.device
                        );
                        let tag = (i % 251) as u8 + 1;
                        gpu.memset(b.ptr, tag, b.requested.max(1), s)
                            .expect("fill on its own device");
                        live.push((b, tag));
                        allocs += 1;
                    } else {
                        let (b, tag) = live.swap_remove(rng.below(live.len() as u64) as usize);
                        checked_bytes += devpool_testing::conformance::assert_tag(
                            &*gpu,
                            &b,
                            tag,
                            &format!("device {d}"),
                        );
                        devs.deallocate(DeviceId(d), b, b.stream).expect("free");
                    }
                }
                for (b, _) in live {
                    devs.deallocate(DeviceId(d), b, b.stream).unwrap();
                }
                (allocs, checked_bytes)
            })
        })
        .collect();
    for (d, h) in handles.into_iter().enumerate() {
        let (allocs, bytes) = h.join().expect("device thread");
        println!("device {d}: {allocs} blocks, {bytes} bytes read back and checked");
        assert!(allocs > 0);
    }
    // A block of one device handed to the other is refused.
    let b = devs.allocate(DeviceId(0), Request::new(4096)).unwrap();
    assert!(devs.deallocate(DeviceId(1), b, StreamId::DEFAULT).is_err());
    devs.deallocate(DeviceId(0), b, StreamId::DEFAULT).unwrap();
    devs.trim().unwrap();
}

#[test]
#[ignore = "needs two CUDA GPUs"]
fn peer_copy_between_pools_of_two_devices() {
    let Some((gpus, devs)) = two_devices() else {
        return;
    };
    let a = devs.allocate(DeviceId(0), Request::new(96 << 20)).unwrap();
    let b = devs.allocate(DeviceId(1), Request::new(96 << 20)).unwrap();
    gpus[0]
        .memset(a.ptr, 0x5a, 96 << 20, StreamId::DEFAULT)
        .unwrap();
    gpus[0].synchronize(StreamId::DEFAULT).unwrap();
    devs.enable_peer_access(DeviceId(1), DeviceId(0))
        .expect("peer access from device 1 to device 0");
    gpus[1]
        .copy_from_peer(b.ptr, &*gpus[0], a.ptr, 96 << 20, StreamId::DEFAULT)
        .expect("peer copy");
    let mut back = vec![0u8; 96 << 20];
    gpus[1]
        .copy_to_host(&mut back, b.ptr, StreamId::DEFAULT)
        .unwrap();
    assert!(back.iter().all(|&x| x == 0x5a));
    devs.deallocate(DeviceId(0), a, StreamId::DEFAULT).unwrap();
    devs.deallocate(DeviceId(1), b, StreamId::DEFAULT).unwrap();
}

#[test]
#[ignore = "needs two CUDA GPUs"]
fn pairs_per_second_16_threads_over_two_devices() {
    let Some((gpus, devs)) = two_devices() else {
        return;
    };
    let threads = 16;
    let before: Vec<(u64, u64)> = (0..2u32)
        .map(|d| {
            let s = devs.get(DeviceId(d)).unwrap().stats();
            (s.allocations, s.frees)
        })
        .collect();
    // The clock starts before the workers are released and stops after the last one
    // ends: pairs per second of the whole run, not a sum of per-thread rates.
    let barrier = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let devs = devs.clone();
            let d = (t % 2) as u32;
            let gpu = gpus[d as usize].clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                let s = gpu.create_stream().unwrap();
                let req = Request::new(64 << 10).on_stream(s);
                let alloc = devs.get(DeviceId(d)).unwrap();
                for _ in 0..1000 {
                    let b = alloc.allocate(req).unwrap();
                    alloc.free(b).unwrap();
                }
                barrier.wait();
                let start = Instant::now();
                let mut n = 1000u64;
                while start.elapsed() < Duration::from_secs(1) {
                    for _ in 0..256 {
                        let b = alloc.allocate(req).unwrap();
                        assert_eq!(b.device, DeviceId(d), "a block from the wrong device");
                        assert_eq!(b.stream, s, "a block of another stream");
                        alloc.free(b).unwrap();
                    }
                    n += 256;
                }
                (d, n)
            })
        })
        .collect();
    barrier.wait();
    let start = Instant::now();
    let mut per_device = [0u64; 2];
    for h in handles {
        let (d, n) = h.join().expect("worker");
        per_device[d as usize] += n;
    }
    let took = start.elapsed();
    let pairs: u64 = per_device.iter().sum::<u64>() - 16 * 1000;
    for d in 0..2u32 {
        let s = devs.get(DeviceId(d)).unwrap().stats();
        // The allocators' own counts match the pairs the threads made.
        assert_eq!(
            (
                s.allocations - before[d as usize].0,
                s.frees - before[d as usize].1
            ),
            (per_device[d as usize], per_device[d as usize]),
            "device {d}"
        );
        assert_eq!(s.live_blocks.current, 0, "device {d}");
    }
    assert!(pairs > 0);
    println!(
        "16 threads over 2 devices, 64 KiB pairs, own stream each: {:.1} M pairs/s in total \
         ({pairs} pairs in {:.3} s)",
        pairs as f64 / took.as_secs_f64() / 1e6,
        took.as_secs_f64()
    );
}
