//! Several devices on the mock: pools keyed by ordinal, wrong-device frees, peer access.
use devpool_core::{
    direct, Allocator, Backend, Block, DeviceId, Devices, Error, Request, Rng, StreamId,
};
use devpool_testing::conformance::check_blocks;
use devpool_testing::{MockBackend, MockConfig};
use std::sync::Arc;

fn two() -> (
    Vec<Arc<MockBackend>>,
    Devices<devpool_core::StreamOrdered<devpool_core::DirectPool>>,
) {
    let mocks = MockBackend::devices(2, MockConfig::default().host_backed().capacity(4 << 30));
    let devs = Devices::new(mocks.iter().cloned().map(direct));
    (mocks, devs)
}

#[test]
fn blocks_come_from_their_own_device() {
    let (mocks, devs) = two();
    let mut per: [Vec<Block>; 2] = [Vec::new(), Vec::new()];
    let mut rng = Rng::new(5);
    for i in 0..200 {
        let d = (i % 2) as u32;
        let b = devs
            .allocate(DeviceId(d), Request::new(rng.log_uniform(1, 1 << 20)))
            .unwrap();
        assert_eq!(b.device, DeviceId(d));
        // The block's memory is the device's own: its mock can write it, the other cannot.
        mocks[d as usize]
            .memset(b.ptr, d as u8 + 1, b.requested.max(1), StreamId::DEFAULT)
            .unwrap();
        assert!(mocks[1 - d as usize]
            .memset(b.ptr, 9, 1, StreamId::DEFAULT)
            .is_err());
        per[d as usize].push(b);
    }
    let all: Vec<Block> = per.iter().flatten().copied().collect();
    check_blocks(&all);
    for d in 0..2 {
        assert_eq!(mocks[d].counters().region_allocs, per[d].len() as u64);
    }
    for (d, blocks) in per.into_iter().enumerate() {
        for b in blocks {
            devs.deallocate(DeviceId(d as u32), b, StreamId::DEFAULT)
                .unwrap();
        }
    }
    for m in &mocks {
        assert_eq!(m.counters().bytes_in_use.current, 0);
    }
}

#[test]
fn a_free_on_the_wrong_device_is_an_error_that_changes_nothing() {
    let (_mocks, devs) = two();
    let b = devs.allocate(DeviceId(0), Request::new(4096)).unwrap();
    let e = devs
        .deallocate(DeviceId(1), b, StreamId::DEFAULT)
        .unwrap_err();
    assert!(matches!(e, Error::WrongDevice { .. }), "{e}");
    // Handing the block straight to the other device's allocator is caught too.
    assert!(matches!(
        devs.get(DeviceId(1)).unwrap().free(b),
        Err(Error::WrongDevice { .. })
    ));
    assert_eq!(
        devs.get(DeviceId(0)).unwrap().stats().live_blocks.current,
        1
    );
    assert!(
        devs.allocate(DeviceId(2), Request::new(1)).is_err(),
        "no such device"
    );
    devs.deallocate(DeviceId(0), b, StreamId::DEFAULT).unwrap();
}

#[test]
fn peer_copies_need_peer_access() {
    let (mocks, devs) = two();
    let a = devs.allocate(DeviceId(0), Request::new(1 << 20)).unwrap();
    let b = devs.allocate(DeviceId(1), Request::new(1 << 20)).unwrap();
    let data: Vec<u8> = (0..1 << 20).map(|i| (i * 7) as u8).collect();
    mocks[0]
        .copy_to_device(a.ptr, &data, StreamId::DEFAULT)
        .unwrap();
    let copy = || mocks[1].copy_from_peer(b.ptr, &*mocks[0], a.ptr, 1 << 20, StreamId::DEFAULT);
    assert!(copy().is_err(), "no peer access yet");
    devs.enable_peer_access(DeviceId(1), DeviceId(0)).unwrap();
    assert!(mocks[0].peer_access_enabled(DeviceId(1)));
    copy().unwrap();
    let mut back = vec![0u8; 1 << 20];
    mocks[1]
        .copy_to_host(&mut back, b.ptr, StreamId::DEFAULT)
        .unwrap();
    assert_eq!(back, data);
    devs.deallocate(DeviceId(0), a, StreamId::DEFAULT).unwrap();
    devs.deallocate(DeviceId(1), b, StreamId::DEFAULT).unwrap();
}

#[test]
fn two_threads_one_per_device() {
    let (mocks, devs) = two();
    let devs = Arc::new(devs);
    let handles: Vec<_> = (0..2u32)
        .map(|d| {
            let devs = devs.clone();
            let mock = mocks[d as usize].clone();
            std::thread::spawn(move || {
                let mut rng = Rng::new(d as u64);
                let mut live: Vec<(Block, u8)> = Vec::new();
                for i in 0..2000u32 {
                    if live.is_empty() || rng.below(2) == 0 {
                        let b = devs
                            .allocate(DeviceId(d), Request::new(rng.log_uniform(1, 256 << 10)))
                            .unwrap();
                        let tag = (i % 250) as u8 + 1;
                        mock.memset(b.ptr, tag, b.requested.max(1), b.stream)
                            .unwrap();
                        live.push((b, tag));
                    } else {
                        let (b, tag) = live.swap_remove(rng.below(live.len() as u64) as usize);
                        let mut back = vec![0u8; b.requested.max(1)];
                        mock.copy_to_host(&mut back, b.ptr, b.stream).unwrap();
                        assert!(back.iter().all(|&x| x == tag));
                        assert_eq!(b.device, DeviceId(d));
                        devs.deallocate(DeviceId(d), b, b.stream).unwrap();
                    }
                }
                for (b, _) in live {
                    devs.deallocate(DeviceId(d), b, b.stream).unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    for m in &mocks {
        assert_eq!(m.counters().bytes_in_use.current, 0);
    }
}
