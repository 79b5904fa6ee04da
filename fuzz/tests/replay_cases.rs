//! Hand-written traces through the `replay` target's checks, for every strategy.

use devpool_fuzz::replay::{check, Event, Input};
use devpool_fuzz::size::Size;

fn alloc(ptr: u8, size: Size, stream: u8) -> Event {
    Event::Allocate { ptr, size, stream }
}

fn free(ptr: u8, stream: u8) -> Event {
    Event::Free { ptr, stream }
}

/// Reuse of a live slot, unknown frees, cross-stream frees, zero and huge sizes,
/// failures and blocks left live at the end.
fn events() -> Vec<Event> {
    vec![
        alloc(0, Size::Small(1000), 0),
        alloc(1, Size::Tiny(0), 1),
        alloc(
            2,
            Size::Pow {
                shift: 20,
                delta: 1,
            },
            2,
        ),
        alloc(
            3,
            Size::Pow {
                shift: 23,
                delta: -5,
            },
            0,
        ),
        free(0, 1),
        free(9, 0),
        alloc(1, Size::Small(300), 1),
        alloc(4, Size::Raw(u64::MAX), 0),
        free(4, 0),
        Event::AllocateFailure {
            size: Size::Pow {
                shift: 40,
                delta: 0,
            },
        },
        alloc(
            5,
            Size::Pow {
                shift: 30,
                delta: 0,
            },
            3,
        ),
        free(2, 2),
        alloc(
            6,
            Size::Pow {
                shift: 12,
                delta: -1,
            },
            7,
        ),
    ]
}

#[test]
fn every_strategy_balances_its_books() {
    for strategy in 0..devpool::STRATEGIES.len() as u8 {
        for capacity in [0u8, 7, 63] {
            let input = Input {
                strategy,
                capacity,
                events: events(),
            };
            check(&input);
        }
    }
}

#[test]
fn inputs_decode_to_the_strategy_and_capacity_they_name() {
    let input = Input {
        strategy: devpool::STRATEGIES.len() as u8 + 1,
        capacity: 64,
        events: Vec::new(),
    };
    assert_eq!(input.strategy_name(), devpool::STRATEGIES[1].name);
    assert_eq!(input.capacity_bytes(), 16 << 20);
    assert!(input.trace().events.is_empty());
}
