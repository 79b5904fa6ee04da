//! The entry points a framework's allocator uses beyond malloc/free, on the mock:
//! free by pointer alone, the statistics struct against the test's own count, peak
//! reset, block info, and the device count.

mod common;

use common::*;
use devpool_ffi::*;
use std::ptr::{null, null_mut};

fn device_stats(device: i32) -> DevpoolDeviceStats {
    let mut s = DevpoolDeviceStats::default();
    // SAFETY: a valid, writable struct.
    assert_eq!(unsafe { devpool_device_stats(device, &mut s) }, DEVPOOL_OK);
    assert_eq!(s.struct_size as usize, size_of::<DevpoolDeviceStats>());
    s
}

#[test]
fn release_stats_peaks_and_info() {
    setup("");
    // Device 5 is used by no other test of this binary.
    let dev = 5;
    assert_eq!(
        device_stats(dev).blocks.current,
        0,
        "zeros before first use"
    );

    let sizes = [1usize, 256, 4000, 70_000, 3 << 20, 100 << 20];
    let mut ptrs = Vec::new();
    for (i, &s) in sizes.iter().enumerate() {
        let p = malloc(s, dev, i as u64 % 2);
        assert_ne!(p, 0, "{}", last_error());
        ptrs.push(p);
    }
    let want_requested: u64 = sizes.iter().map(|&s| s as u64).sum();
    let s = device_stats(dev);
    assert_eq!(s.requested_bytes.current, want_requested);
    assert_eq!(s.requested_bytes.peak, want_requested);
    assert_eq!(s.blocks.current, sizes.len() as u64);
    assert!(s.allocated_bytes.current >= want_requested);
    assert!(s.reserved_bytes.current >= s.allocated_bytes.current);
    assert!(s.segments > 0 && s.backend_memory_calls > 0);

    // Block info: the requested size and the device; null for a foreign pointer.
    let (mut size, mut device) = (0usize, -1);
    // SAFETY: valid output pointers.
    let start = unsafe { devpool_block_info(as_ptr(ptrs[3]), &mut size, &mut device) };
    assert_eq!(
        (start.addr() as u64, size, device),
        (ptrs[3], sizes[3], dev)
    );
    // SAFETY: null outputs are allowed.
    assert!(unsafe { devpool_block_info(as_ptr(ptrs[3] + 256), null_mut(), null_mut()) }.is_null());

    // Free the largest by pointer alone: the figures fall by exactly its size.
    assert_eq!(devpool_release(as_ptr(ptrs[5])), DEVPOOL_OK);
    assert_eq!(devpool_release(as_ptr(ptrs[5])), DEVPOOL_ERR_NOT_FOUND);
    assert!(
        last_error().contains("not a live block"),
        "{}",
        last_error()
    );
    assert_eq!(devpool_release(null_mut()), DEVPOOL_OK);
    let s = device_stats(dev);
    assert_eq!(s.requested_bytes.current, want_requested - sizes[5] as u64);
    assert_eq!(s.requested_bytes.peak, want_requested, "the peak stays");
    assert_eq!(s.requested_bytes.freed, sizes[5] as u64);
    assert_eq!(s.blocks.freed, 1);
    assert_eq!(
        s.bad_calls, 0,
        "an unknown pointer given to release is not misuse"
    );

    // Reset: peaks come down to the current values, and climb again from there.
    assert_eq!(devpool_reset_peak_stats(dev), DEVPOOL_OK);
    let s = device_stats(dev);
    assert_eq!(s.requested_bytes.peak, s.requested_bytes.current);
    assert_eq!(s.allocated_bytes.peak, s.allocated_bytes.current);
    assert_eq!(s.reserved_bytes.peak, s.reserved_bytes.current);
    let extra = malloc(1 << 20, dev, 0);
    free(extra, 1 << 20, dev, 0);
    let s2 = device_stats(dev);
    assert_eq!(
        s2.requested_bytes.peak,
        s.requested_bytes.current + (1 << 20)
    );

    for (&p, &size) in ptrs[..5].iter().zip(&sizes) {
        free(p, size, dev, 0);
    }
    let s = device_stats(dev);
    assert_eq!((s.requested_bytes.current, s.blocks.current), (0, 0));
}

#[test]
fn bad_arguments_are_errors() {
    setup("");
    // SAFETY: a null output pointer is refused before any write.
    let rc = unsafe { devpool_device_stats(0, null_mut()) };
    assert_eq!(rc, DEVPOOL_ERR_INVALID);
    let mut s = DevpoolDeviceStats::default();
    // SAFETY: a valid struct; the ordinal is refused.
    let rc = unsafe { devpool_device_stats(-1, &mut s) };
    assert_eq!(rc, DEVPOOL_ERR_INVALID);
    assert_eq!(devpool_reset_peak_stats(64), DEVPOOL_ERR_INVALID);
    assert_eq!(devpool_enable_peer_access(0, 99), DEVPOOL_ERR_INVALID);
    // SAFETY: null outputs; an address devpool never handed out.
    assert!(unsafe { devpool_block_info(null(), null_mut(), null_mut()) }.is_null());
    // Without a driver the count is 0 with a reason; with one, at least one device.
    let n = devpool_cuda_device_count();
    assert!(n >= 0);
    if n == 0 {
        assert!(!last_error().is_empty());
    }
}

#[test]
fn peer_access_on_the_mock() {
    setup("");
    // The mock models several devices with peer access.
    assert_eq!(
        devpool_enable_peer_access(6, 7),
        DEVPOOL_OK,
        "{}",
        last_error()
    );
}
