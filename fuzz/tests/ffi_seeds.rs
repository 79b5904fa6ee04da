//! The `ffi` target's seeds and hand-written scripts, in a process of their own (the
//! C ABI's settings are process-wide).

use devpool_fuzz::ffi::{
    script, stats, Call, ConfigText, Device, DevicePick, PtrPick, SizeHint, SCRIPT_DEVICES,
};
use devpool_fuzz::size::Size;
use std::path::Path;

#[test]
fn seeds_run() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds/ffi");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).expect("seeds/ffi") {
        let bytes = std::fs::read(entry.expect("entry").path()).expect("seed");
        devpool_fuzz::ffi::run(&bytes);
        n += 1;
    }
    assert!(n > 0);
}

fn malloc(size: Size, device: i8) -> Call {
    Call::Malloc {
        size,
        device: Device(device),
        stream: 1,
    }
}

fn free(ptr: PtrPick, device: DevicePick) -> Call {
    Call::Free {
        ptr,
        size: SizeHint::Exact,
        device,
        stream: 2,
    }
}

/// A count of bad calls, summed over the devices a script names.
fn bad_calls(kind: &str) -> u64 {
    (0..SCRIPT_DEVICES)
        .filter_map(stats)
        .map(|v| v["bad_calls"][kind].as_u64().unwrap_or(0))
        .sum()
}

/// Every kind of bad call, then counts that must have moved.
#[test]
fn misuse_is_counted_and_survived() {
    devpool_fuzz::ffi::init();
    let unknown = bad_calls("unknown_pointer");
    let mismatch = bad_calls("size_mismatch");
    let wrong_device = bad_calls("wrong_device");
    script(&[
        malloc(Size::Small(1000), 0),
        malloc(Size::Tiny(0), 1),
        malloc(
            Size::Pow {
                shift: 21,
                delta: 3,
            },
            0,
        ),
        Call::RecordStream {
            ptr: PtrPick::Live(0),
            device: DevicePick::Own,
            stream: 3,
        },
        free(PtrPick::Live(0), DevicePick::Own), // the 1000 B block; the list is now [2 MiB + 3, 0]
        free(PtrPick::Freed(0), DevicePick::Own), // double free
        free(PtrPick::Foreign(0xdead_b000), DevicePick::Own),
        free(PtrPick::Interior(0, 256), DevicePick::Own),
        free(PtrPick::Live(0), DevicePick::Next), // wrong device: device 1
        free(PtrPick::Live(0), DevicePick::Any(Device(-2))), // ordinal 64
        Call::Free {
            ptr: PtrPick::Live(1),
            size: SizeHint::Wrong(Size::Tiny(1)),
            device: DevicePick::Own,
            stream: 0,
        },
        malloc(Size::Raw(u64::MAX), 0), // out of memory
        malloc(Size::Small(64), 9),
        malloc(Size::Small(64), -3), // ordinal 64, out of range
        Call::CupyMalloc {
            size: Size::Small(4096),
            device: Device(2),
            stream: 0,
        },
        Call::CupyFree {
            ptr: PtrPick::Live(1),
            device: DevicePick::Own,
            stream: 0,
        },
        Call::Trim(Device(0)),
        Call::Trim(Device(-1)),
        Call::StatsJson(Device(0)),
        Call::StatsJson(Device(-4)),
        Call::LastError,
        Call::Configure(ConfigText::Null),
        Call::Configure(ConfigText::Raw(vec![0xff, b'=', 0xfe])),
        Call::Configure(ConfigText::Raw(b"strategy=slab;backend=mock".to_vec())),
    ]);
    assert!(bad_calls("unknown_pointer") >= unknown + 3);
    assert!(bad_calls("size_mismatch") > mismatch);
    assert!(bad_calls("wrong_device") > wrong_device);
    assert_eq!(stats(0).expect("device 0")["panics"], 0);
}
