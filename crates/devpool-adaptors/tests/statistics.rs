//! `Statistics`: counts, peaks, totals and the histogram match a model of the run.
use devpool_adaptors::{size_bucket, Statistics, HISTOGRAM_BUCKETS};
use devpool_core::{direct, Allocator, Block, Request, Rng};
use devpool_testing::{MockBackend, MockConfig};
use std::sync::Arc;

/// What the counters must say, kept by the test alongside the run.
#[derive(Default)]
struct Model {
    requested: (u64, u64, u64),
    granted: (u64, u64, u64),
    blocks: (u64, u64, u64),
    frees: u64,
    failures: u64,
    histogram: Vec<u64>,
}

fn up(c: &mut (u64, u64, u64), v: u64) {
    c.0 += v;
    c.1 = c.1.max(c.0);
    c.2 += v;
}

#[test]
fn counters_match_a_model_of_the_run() {
    let mock = MockBackend::shared_with(MockConfig::default().capacity(256 << 20));
    let a = Statistics::new(direct(mock));
    let mut m = Model {
        histogram: vec![0; HISTOGRAM_BUCKETS],
        ..Model::default()
    };
    let mut rng = Rng::new(5);
    let mut live: Vec<Block> = Vec::new();
    for step in 0..2000 {
        if live.is_empty() || rng.below(2) == 0 {
            // Now and then a request far too large for the device, to count failures.
            let size = if step % 97 == 0 {
                1 << 40
            } else {
                rng.log_uniform(1, 4 << 20) - 1
            };
            m.histogram[size_bucket(size)] += 1;
            match a.alloc(size) {
                Ok(b) => {
                    up(&mut m.requested, b.requested as u64);
                    up(&mut m.granted, b.size as u64);
                    up(&mut m.blocks, 1);
                    live.push(b);
                }
                Err(_) => m.failures += 1,
            }
        } else {
            let b = live.swap_remove(rng.below(live.len() as u64) as usize);
            a.free(b).unwrap();
            m.requested.0 -= b.requested as u64;
            m.granted.0 -= b.size as u64;
            m.blocks.0 -= 1;
            m.frees += 1;
        }
        let s = a.snapshot();
        let c = |x: devpool_adaptors::Counter| (x.current, x.peak, x.total);
        assert_eq!(
            c(s.requested_bytes),
            m.requested,
            "requested at step {step}"
        );
        assert_eq!(c(s.granted_bytes), m.granted, "granted at step {step}");
        assert_eq!(c(s.blocks), m.blocks, "blocks at step {step}");
        assert_eq!(s.allocations, m.blocks.2);
        assert_eq!((s.frees, s.failures), (m.frees, m.failures));
        assert_eq!(s.histogram.to_vec(), m.histogram);
    }
    assert!(
        m.failures > 0 && m.frees > 0,
        "the run exercised every counter"
    );
    // The wrapped allocator's own stats agree on what is live.
    let inner = a.stats();
    assert_eq!(inner.live_bytes.current, m.requested.0);
    assert_eq!(inner.allocated_bytes.current, m.granted.0);
    for b in live {
        a.free(b).unwrap();
    }
}

#[test]
fn rejected_frees_change_nothing() {
    let a = Statistics::new(direct(MockBackend::shared()));
    let b = a.alloc(5000).unwrap();
    a.free(b).unwrap();
    let before = a.snapshot();
    assert!(a.free(b).is_err(), "double free");
    let mut forged = b;
    forged.ptr = forged.ptr.offset(1 << 20);
    assert!(a.free(forged).is_err(), "foreign pointer");
    assert_eq!(a.snapshot(), before);
}

#[test]
fn peaks_reset_to_current() {
    let a = Statistics::new(direct(MockBackend::shared()));
    let x = a.alloc(1 << 20).unwrap();
    let y = a.alloc(3 << 20).unwrap();
    a.free(y).unwrap();
    let s = a.snapshot();
    assert_eq!(s.requested_bytes.peak, (x.requested + y.requested) as u64);
    assert_eq!(s.blocks.peak, 2);
    a.reset_peaks();
    let s = a.snapshot();
    assert_eq!(s.requested_bytes.peak, x.requested as u64);
    assert_eq!(s.granted_bytes.peak, x.size as u64);
    assert_eq!(s.blocks.peak, 1);
    assert_eq!(
        s.requested_bytes.total,
        (x.requested + y.requested) as u64,
        "totals stay"
    );
    a.free(x).unwrap();
}

#[test]
fn exact_under_eight_threads() {
    let a = Arc::new(Statistics::new(direct(MockBackend::shared())));
    let handles: Vec<_> = (0..8u64)
        .map(|t| {
            let a = a.clone();
            std::thread::spawn(move || {
                let mut rng = Rng::new(t);
                let (mut bytes, mut n) = (0u64, 0u64);
                let mut live = Vec::new();
                for _ in 0..1000 {
                    if live.len() < 16 && rng.below(2) == 0 {
                        let req = Request::new(rng.log_uniform(1, 1 << 20))
                            .on_stream(devpool_testing::MockBackend::stream(t % 3));
                        let b = a.allocate(req).unwrap();
                        bytes += b.requested as u64;
                        n += 1;
                        live.push(b);
                    } else if let Some(b) = live.pop() {
                        a.free(b).unwrap();
                    }
                }
                for b in live {
                    a.free(b).unwrap();
                }
                (bytes, n)
            })
        })
        .collect();
    let (bytes, n) = handles
        .into_iter()
        .map(|h| h.join().unwrap())
        .fold((0, 0), |x, y| (x.0 + y.0, x.1 + y.1));
    let s = a.snapshot();
    assert_eq!(
        (s.requested_bytes.total, s.allocations, s.frees),
        (bytes, n, n)
    );
    assert_eq!(
        (
            s.requested_bytes.current,
            s.granted_bytes.current,
            s.blocks.current
        ),
        (0, 0, 0)
    );
    assert!(s.blocks.peak <= 8 * 16 && s.blocks.peak >= 1);
    assert_eq!(s.histogram.iter().sum::<u64>(), n);
}

#[test]
fn forwards_and_names() {
    let mock = MockBackend::shared();
    let a = Statistics::new(direct(mock.clone()));
    assert_eq!(a.name(), "stats(direct)");
    assert_eq!(a.backend().name(), "mock");
    let b = a.alloc(1000).unwrap();
    assert_eq!(a.stats().live_blocks.current, 1);
    let text = a.snapshot().to_string();
    assert!(text.contains("allocations 1"), "{text}");
    assert!(
        text.contains("512 B ..="),
        "1000 B falls in [512, 1023]: {text}"
    );
    a.free(b).unwrap();
    assert_eq!(a.trim().unwrap(), 0);
}
