//! Host-backed mock: data written in a frame reads back until the frame ends, and the
//! next frame reuses the same memory without disturbing its own blocks.
use devpool_arena::{arena, ArenaConfig, MIB};
use devpool_core::{Allocator, Backend, Block, Request};
use devpool_testing::conformance::{assert_tag, check_blocks, fill, Rng};
use devpool_testing::{MockBackend, MockConfig};

#[test]
fn data_survives_within_frames_and_memory_is_reused_across_them() {
    let mock = MockBackend::shared_with(MockConfig::default().host_backed().capacity(1 << 30));
    let a = arena(
        mock.clone(),
        ArenaConfig::default()
            .chunk_size(MIB)
            .max_chunk_size(8 * MIB),
    );
    let mut rng = Rng::new(5);
    let mut last_frame: Vec<Block> = Vec::new();
    for frame in 0..12u32 {
        let mut live: Vec<(Block, u8)> = Vec::new();
        for i in 0..150u32 {
            let align = 256usize << rng.below(6);
            let req = Request::new(rng.log_uniform(1, 512 << 10)).with_align(align);
            let b = a.allocate(req).unwrap();
            let tag = ((frame * 151 + i) % 251) as u8 + 1;
            fill(&*mock, &b, tag);
            live.push((b, tag));
            // Free some blocks as the frame goes; the others must keep their data.
            if rng.below(4) == 0 {
                let (old, t) = live.swap_remove(rng.below(live.len() as u64) as usize);
                assert_tag(&*mock, &old, t, "live");
                a.free(old).unwrap();
            }
        }
        let blocks: Vec<Block> = live.iter().map(|(b, _)| *b).collect();
        check_blocks(&blocks);
        for (b, tag) in &live {
            assert_tag(&*mock, b, *tag, "live");
        }
        if frame > 0 {
            let reused = blocks.iter().any(|b| {
                last_frame
                    .iter()
                    .any(|o| b.ptr.0 < o.ptr.0 + o.size as u64 && o.ptr.0 < b.ptr.0 + b.size as u64)
            });
            assert!(reused, "frame {frame} reuses the memory of the last one");
        }
        last_frame = blocks;
        a.reset().unwrap();
    }
    a.trim().unwrap();
    assert_eq!(mock.counters().bytes_in_use.current, 0);
}

#[test]
fn blocks_on_two_streams_never_share_memory() {
    let mock = MockBackend::shared_with(MockConfig::default().host_backed().capacity(1 << 30));
    let a = arena(mock.clone(), ArenaConfig::default().chunk_size(MIB));
    let streams = [
        devpool_testing::MockBackend::stream(1),
        devpool_testing::MockBackend::stream(2),
    ];
    for frame in 0..4u8 {
        let mut live = Vec::new();
        for i in 0..100usize {
            let s = streams[i % 2];
            let b = a
                .allocate(Request::new(1000 + 37 * i).on_stream(s))
                .unwrap();
            let tag = frame * 50 + (i % 50) as u8 + 1;
            fill(&*mock, &b, tag);
            live.push((b, tag));
        }
        let blocks: Vec<Block> = live.iter().map(|(b, _)| *b).collect();
        check_blocks(&blocks);
        for (b, tag) in &live {
            assert_tag(&*mock, b, *tag, "live");
        }
        a.reset_stream(streams[(frame % 2) as usize]).unwrap();
        a.reset_stream(streams[1 - (frame % 2) as usize]).unwrap();
    }
}
