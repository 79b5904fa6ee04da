//! `detail()` and `describe_cache()` say where the memory is: blocks per order, pages
//! mapped and unused, bytes lost to rounding, and reserved bytes as the backend counts
//! them.

use devpool_buddy::{buddy, BuddyConfig, BuddyMode, BuddyPool};
use devpool_core::{Allocator, Backend, Pool, Request};
use devpool_testing::{MockBackend, MockConfig};

#[test]
fn virtual_pages_are_counted() {
    let mock = MockBackend::shared();
    let pool = BuddyPool::new(mock.clone(), BuddyConfig::virtual_ranges());
    let page = mock.granularity() as u64;
    let a = pool.allocate(&Request::new(5 << 20)).unwrap(); // 3 pages
    let b = pool.allocate(&Request::new(1000)).unwrap(); // shares a page
    let c = pool.allocate(&Request::new(3000)).unwrap(); // the same page
    let d = pool.detail();
    assert_eq!(d.mode, BuddyMode::Virtual);
    assert_eq!(d.pages.mapped_pages, 4);
    assert_eq!(d.pages.unused_pages, 0);
    assert_eq!(d.pages.page_size, page);
    assert_eq!(a.size as u64, 3 * page, "granted to the page");
    assert_eq!(d.live_bytes, (5 << 20) + 1000 + 3000);
    assert_eq!(d.granted_bytes, (a.size + b.size + c.size) as u64);
    assert_eq!(d.rounding_bytes, d.granted_bytes - d.live_bytes);
    assert_eq!(
        pool.stats().reserved_bytes.current,
        mock.counters().bytes_in_use.current
    );
    assert_eq!(mock.counters().bytes_in_use.current, 4 * page);
    let live: u64 = d.orders.iter().map(|o| o.live).sum();
    assert_eq!(live, 3);
    pool.deallocate(&b).unwrap();
    assert_eq!(pool.detail().pages.unused_pages, 0, "c still uses the page");
    pool.deallocate(&c).unwrap();
    pool.deallocate(&a).unwrap();
    let d = pool.detail();
    assert_eq!(
        (d.pages.mapped_pages, d.pages.unused_pages),
        (4, 4),
        "kept mapped"
    );
    let note = pool.describe_cache();
    assert!(note.contains("buddy-virtual"), "{note}");
    assert!(note.contains("8.00 MiB of it unused"), "{note}");
    assert_eq!(pool.trim().unwrap() as u64, 4 * page);
    let d = pool.detail();
    assert_eq!((d.pages.mapped_pages, d.pages.unused_pages), (0, 0));
    assert!(d.spans.is_empty());
}

#[test]
fn region_rounding_and_spans_are_counted() {
    let mock = MockBackend::shared_with(MockConfig::default().without_virtual());
    let pool = BuddyPool::new(mock.clone(), BuddyConfig::default().span_size(64 << 20));
    assert_eq!(pool.mode(), BuddyMode::Region, "auto picks regions");
    let a = pool.allocate(&Request::new(40 << 20)).unwrap();
    let b = pool.allocate(&Request::new(100 << 20)).unwrap();
    let d = pool.detail();
    assert_eq!(
        d.spans.len(),
        2,
        "the second block needs an span of its own"
    );
    assert_eq!(d.span_bytes, (64 << 20) + (128 << 20));
    assert_eq!(a.size, 40 << 20, "a sixteenth of 64 MiB divides 40 MiB");
    assert_eq!(b.size, 104 << 20, "rounded up to 8 MiB");
    assert_eq!(d.rounding_bytes, 4 << 20);
    assert_eq!(d.address_rounding_bytes, 0, "tails were given back");
    assert_eq!(
        pool.stats().reserved_bytes.current,
        mock.counters().bytes_in_use.current
    );
    // The tails serve other blocks: a's tail is free blocks of 8 and 16 MiB at 40 and
    // 48 MiB, and 16 MiB goes to the lowest that fits.
    let c = pool.allocate(&Request::new(16 << 20)).unwrap();
    assert_eq!(pool.detail().spans.len(), 2);
    assert_eq!(c.ptr, a.ptr.offset(48 << 20));
    for blk in [a, b, c] {
        pool.deallocate(&blk).unwrap();
    }
    assert!(pool.describe_cache().contains("buddy-region"));
    assert_eq!(pool.trim().unwrap(), (64 << 20) + (128 << 20));
    assert_eq!(mock.counters().bytes_in_use.current, 0);
}

#[test]
fn allocator_names_follow_the_mode() {
    let virt = buddy(MockBackend::shared(), BuddyConfig::default());
    assert_eq!(virt.name(), "buddy-virtual");
    let region = buddy(MockBackend::shared(), BuddyConfig::region());
    assert_eq!(region.name(), "buddy-region");
    let no_vm = MockBackend::shared_with(MockConfig::default().without_virtual());
    assert_eq!(buddy(no_vm, BuddyConfig::default()).name(), "buddy-region");
}
