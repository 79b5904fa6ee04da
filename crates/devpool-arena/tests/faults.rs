//! Fault injection: a chunk that cannot be had is an error; nothing live is lost and
//! the arena goes on.
use devpool_arena::{arena, ArenaConfig, MIB};
use devpool_core::{Allocator, Backend, BackendError, Block, Error};
use devpool_testing::conformance::{assert_tag, check_blocks, fill, Rng};
use devpool_testing::{FaultOn, MockBackend, MockConfig};

#[test]
fn a_failed_chunk_loses_nothing() {
    let mock = MockBackend::shared_with(MockConfig::default().host_backed().capacity(1 << 30));
    let a = arena(
        mock.clone(),
        ArenaConfig::default().chunk_size(MIB).growth(1),
    );
    let mut live: Vec<(Block, u8)> = Vec::new();
    // Fill the first chunk, then make the next chunk fail.
    while a.detail().chunks < 2 || live.len() < 8 {
        let b = a.alloc(100_000).unwrap();
        let tag = (live.len() % 250) as u8 + 1;
        fill(&*mock, &b, tag);
        live.push((b, tag));
    }
    let chunks = a.detail().chunks;
    let before = a.stats();
    let held = mock.counters().bytes_in_use.current;
    mock.fail_all(true);
    let mut errors = 0;
    for _ in 0..20 {
        match a.alloc(100_000) {
            Ok(b) => {
                // Room left in the current chunk is still served.
                let tag = 251;
                fill(&*mock, &b, tag);
                live.push((b, tag));
            }
            Err(e) => {
                assert!(
                    matches!(e, Error::Backend(BackendError::Injected { .. })),
                    "{e}"
                );
                errors += 1;
            }
        }
    }
    assert!(errors > 0, "a new chunk was needed and could not be had");
    assert_eq!(a.detail().chunks, chunks, "no chunk half-taken");
    assert_eq!(mock.counters().bytes_in_use.current, held);
    let after = a.stats();
    assert_eq!(after.failures, before.failures + errors);
    assert_eq!(
        after.live_blocks.current,
        live.len() as u64,
        "every block handed out is live, nothing else"
    );
    mock.fail_all(false);
    for (b, tag) in &live {
        assert_tag(&*mock, b, *tag, "live");
    }
    // The arena goes on: the next chunk comes, blocks stay distinct.
    let more: Vec<Block> = (0..20).map(|_| a.alloc(100_000).unwrap()).collect();
    let mut all: Vec<Block> = live.iter().map(|(b, _)| *b).collect();
    all.extend(&more);
    check_blocks(&all);
    for b in all {
        a.free(b).unwrap();
    }
    a.trim().unwrap();
    assert_eq!(mock.counters().bytes_in_use.current, 0);
}

#[test]
fn random_faults_across_frames() {
    let mock = MockBackend::shared_with(MockConfig::default().host_backed().capacity(512 << 20));
    let a = arena(
        mock.clone(),
        ArenaConfig::default()
            .chunk_size(MIB)
            .max_chunk_size(16 * MIB)
            .keep_chunks(2),
    );
    let mut rng = Rng::new(11);
    let mut refused = 0u64;
    for frame in 0..30u32 {
        mock.fail_nth(FaultOn::Region, 1 + rng.below(4));
        let mut live: Vec<(Block, u8)> = Vec::new();
        for i in 0..40u32 {
            match a.alloc(rng.log_uniform(1, 2 << 20)) {
                Ok(b) => {
                    let tag = ((frame * 41 + i) % 250) as u8 + 1;
                    fill(&*mock, &b, tag);
                    live.push((b, tag));
                }
                Err(e) => {
                    assert!(e.is_oom() || matches!(e, Error::Backend(_)), "{e}");
                    refused += 1;
                }
            }
        }
        let blocks: Vec<Block> = live.iter().map(|(b, _)| *b).collect();
        check_blocks(&blocks);
        assert_eq!(a.stats().live_blocks.current, blocks.len() as u64);
        for (b, tag) in &live {
            assert_tag(&*mock, b, *tag, "live");
        }
        a.reset().unwrap();
    }
    // Every frame armed a fault; the case means something only if they fired and
    // reached the caller.
    let injected = mock.injected_faults();
    assert!(injected > 0, "no fault fired");
    assert!(
        refused > 0,
        "{injected} faults fired, none refused an allocation"
    );
    mock.clear_faults();
    a.trim().unwrap();
    assert_eq!(mock.counters().bytes_in_use.current, 0);
}
