//! Writing a trace in RMM's CSV format and reading it back gives the same trace.
use devpool_trace::{read_rmm_csv, write_rmm_csv, Action, Trace, TraceEvent};
use proptest::prelude::*;

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        Just(Action::Allocate),
        Just(Action::Free),
        Just(Action::AllocateFailure)
    ]
}

/// Events with times that never go backwards (as a recorder writes them), with
/// steps of up to a day so that some traces run past midnight.
fn events() -> impl Strategy<Value = Vec<TraceEvent>> {
    let step = prop_oneof![0u64..1000, 0u64..86_400_000_000];
    (
        0u64..86_400_000_000,
        prop::collection::vec(
            (
                any::<u32>(),
                step,
                action(),
                any::<u64>(),
                any::<usize>(),
                any::<u64>(),
            ),
            0..60,
        ),
    )
        .prop_map(|(start, rows)| {
            let mut t = start;
            rows.into_iter()
                .map(|(thread, step, action, ptr, size, stream)| {
                    t += step;
                    TraceEvent {
                        thread,
                        time_us: t,
                        action,
                        ptr,
                        size,
                        stream,
                    }
                })
                .collect()
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn write_then_read_is_identity(events in events()) {
        let trace = Trace::new("roundtrip", events);
        let mut out = Vec::new();
        write_rmm_csv(&trace, &mut out).unwrap();
        let back = read_rmm_csv(&out[..], "roundtrip").unwrap();
        prop_assert_eq!(&back, &trace);
        // Every written line has the six columns of the header.
        let text = String::from_utf8(out).unwrap();
        prop_assert!(text.lines().all(|l| l.split(',').count() == 6));
        prop_assert_eq!(text.lines().count(), trace.events.len() + 1);
    }
}

#[test]
fn bundled_trace_survives_a_round_trip() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../traces/resnet50_train.csv.gz");
    let trace = devpool_trace::read_trace(&path).unwrap();
    let mut out = Vec::new();
    write_rmm_csv(&trace, &mut out).unwrap();
    assert_eq!(read_rmm_csv(&out[..], &trace.name).unwrap(), trace);
}
