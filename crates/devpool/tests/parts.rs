//! What an allocator tells through the trait, whichever strategy it is: its parts,
//! when freed memory is reused, and a reset where it has one.
use devpool::{Allocator, MockBackend, StrategySpec};
use devpool_core::{Parts, Reuse};

fn build(name: &str) -> Box<dyn Allocator> {
    name.parse::<StrategySpec>()
        .unwrap()
        .build(MockBackend::shared())
}

#[test]
fn parts_count_what_the_caller_holds() {
    // The slab's classes: one live slot per block this test holds, in its class.
    let slab = build("slab");
    let blocks: Vec<_> = [300usize, 300, 5000, 1 << 20]
        .iter()
        .map(|&n| slab.alloc(n).unwrap())
        .collect();
    let Parts::Classes(classes) = slab.parts() else {
        panic!("the slab reports its classes")
    };
    assert_eq!(classes.iter().map(|c| c.live_slots).sum::<u64>(), 4);
    for b in &blocks {
        let class = classes.iter().find(|c| c.size == b.size).unwrap();
        let same = blocks.iter().filter(|o| o.size == b.size).count() as u64;
        assert_eq!(class.live_slots, same, "class of {} B", b.size);
    }
    for b in blocks {
        slab.free(b).unwrap();
    }

    // The hybrid's routes, by name, through a box of the trait.
    let hybrid = build("hybrid-inference");
    let small = hybrid.alloc(4096).unwrap();
    let huge = hybrid.alloc(1 << 30).unwrap();
    let parts = hybrid.parts();
    let live = |route| parts.route(route).unwrap().live_blocks.current;
    assert_eq!((live("small"), live("large"), live("huge")), (1, 0, 1));
    hybrid.free(small).unwrap();
    hybrid.free(huge).unwrap();

    assert_eq!(build("tlsf-virtual").parts(), Parts::Whole);
}

#[test]
fn reuse_and_reset_through_the_trait() {
    for s in devpool::STRATEGIES {
        let a = s.spec().build(MockBackend::shared());
        let b = a.alloc(4096).unwrap();
        if a.reuse() == Reuse::WhenEmpty {
            // The arena: a reset frees every block at once.
            a.reset().unwrap();
            assert_eq!(a.stats().live_blocks.current, 0, "{}", s.name);
        } else {
            assert!(a.reset().is_err(), "{}: no reset hook", s.name);
            a.free(b).unwrap();
        }
    }
    assert_eq!(build("arena").reuse(), Reuse::WhenEmpty);
    assert_eq!(build("ring").reuse(), Reuse::OnFree);
}
