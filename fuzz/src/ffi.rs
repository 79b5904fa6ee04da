//! The `ffi` target: a script of C ABI calls decoded from fuzz input, run against
//! the mock backend, with a model of which pointers are live on which device.
//!
//! The library's settings are process-wide and fixed once the first device's
//! allocator exists, so the strategy is chosen per process: the environment
//! variable [`STRATEGY_ENV`] names it (default `hybrid`). The first input configures
//! `backend=mock` with that strategy and makes device 0, so every later
//! `devpool_configure` of the script must be refused; the configuration strings are
//! also parsed by [`Config::apply`] directly, whose output must read back.
//!
//! Checks, besides "never crash, never panic" (a caught panic counts too: the
//! statistics' `panics` must stay 0):
//!
//! - every pointer `devpool_malloc` returns is 256-byte aligned, from a device in
//!   range, and overlaps no live block of its device;
//! - `devpool_record_stream` and `devpool_configure` return the documented codes;
//! - the statistics' `live_pointers` match the model, and the backend's bytes in use
//!   match the allocator's reserved bytes;
//! - once the script's blocks are freed, nothing is live on any device.

use crate::size::Size;
use arbitrary::{Arbitrary, Unstructured};
use devpool_ffi::{
    devpool_configure, devpool_cupy_free, devpool_cupy_malloc, devpool_free, devpool_last_error,
    devpool_malloc, devpool_record_stream, devpool_stats_json, devpool_string_free, devpool_trim,
    Config, DEVPOOL_ERR_INVALID, DEVPOOL_ERR_NOT_FOUND, DEVPOOL_ERR_TOO_LATE, DEVPOOL_OK,
    MAX_DEVICES,
};
use serde_json::Value;
use std::collections::BTreeSet;
use std::ffi::{c_int, c_void, CStr, CString};
use std::ptr;
use std::sync::{Mutex, Once};

/// The environment variable naming the strategy of this process (default `hybrid`).
pub const STRATEGY_ENV: &str = "DEVPOOL_FUZZ_STRATEGY";

/// Devices a script names (`0..SCRIPT_DEVICES`), besides ordinals out of range.
pub const SCRIPT_DEVICES: c_int = 10;

/// Most calls run from one input.
pub const MAX_CALLS: usize = 200;

/// A device ordinal: mostly `0..SCRIPT_DEVICES`, sometimes one out of range (-1,
/// 64, `i32::MAX`, `i32::MIN`).
#[derive(Arbitrary, Clone, Copy, Debug)]
pub struct Device(pub i8);

impl Device {
    /// The ordinal passed to C.
    pub fn ordinal(self) -> c_int {
        match self.0 {
            v if v >= 0 => v as c_int % SCRIPT_DEVICES,
            v => [i32::MIN, -1, 64, i32::MAX][(v % 4).unsigned_abs() as usize],
        }
    }
}

/// Which device a free or `record_stream` names.
#[derive(Arbitrary, Clone, Copy, Debug)]
pub enum DevicePick {
    /// The device the pointer came from (device 0 for other pointers).
    Own,
    /// The next device: a wrong-device call.
    Next,
    /// Any ordinal.
    Any(Device),
}

/// Which pointer a free or `record_stream` names.
#[derive(Arbitrary, Clone, Copy, Debug)]
pub enum PtrPick {
    /// A live block of the script (by index, modulo the count).
    Live(u8),
    /// A block the script freed already: a double free.
    Freed(u8),
    /// Inside a live block, past its start.
    Interior(u8, u16),
    /// Any address: a foreign pointer.
    Foreign(u64),
    /// Null.
    Null,
}

/// The size a free says.
#[derive(Arbitrary, Clone, Copy, Debug)]
pub enum SizeHint {
    /// 0: not known.
    Unknown,
    /// The size allocated.
    Exact,
    /// Another size.
    Wrong(Size),
}

/// Keys of a configuration string.
#[derive(Arbitrary, Clone, Debug)]
pub enum Key {
    /// `strategy`
    Strategy,
    /// `backend`
    Backend,
    /// `small_max`
    SmallMax,
    /// `huge_min`
    HugeMin,
    /// `mock_capacity`
    MockCapacity,
    /// `log`
    Log,
    /// Anything.
    Text(String),
}

/// Words that configuration values are made of.
const WORDS: &[&str] = &[
    "hybrid",
    "hybrid-inference",
    "hybrid-coarse",
    "hybrid-buddy",
    "slab",
    "buddy-region",
    "buddy-virtual",
    "tlsf-region",
    "tlsf-virtual",
    "arena",
    "direct",
    "cuda",
    "mock",
    "off",
    "once",
    "all",
    "",
];

/// Suffixes of byte counts.
const SUFFIXES: &[&str] = &["", "K", "M", "G", "T", "KiB", "mib", "gb", "b", "X", " "];

/// Values of a configuration string.
#[derive(Arbitrary, Clone, Debug)]
pub enum ConfigValue {
    /// A word that some key takes.
    Word(u8),
    /// A byte count with a suffix.
    Bytes(u64, u8),
    /// Anything.
    Text(String),
}

/// A configuration string.
#[derive(Arbitrary, Clone, Debug)]
pub enum ConfigText {
    /// `key=value` pairs joined by `;` (up to the first NUL).
    Pairs(Vec<(Key, ConfigValue)>),
    /// Any bytes (up to the first NUL).
    Raw(Vec<u8>),
    /// A null pointer.
    Null,
}

impl ConfigText {
    /// The string, or `None` for a null pointer.
    pub fn render(&self) -> Option<Vec<u8>> {
        match self {
            ConfigText::Pairs(pairs) => {
                let items: Vec<String> = pairs
                    .iter()
                    .map(|(k, v)| {
                        let key = match k {
                            Key::Strategy => "strategy",
                            Key::Backend => "backend",
                            Key::SmallMax => "small_max",
                            Key::HugeMin => "huge_min",
                            Key::MockCapacity => "mock_capacity",
                            Key::Log => "log",
                            Key::Text(t) => t,
                        };
                        let value = match v {
                            ConfigValue::Word(w) => WORDS[*w as usize % WORDS.len()].to_string(),
                            ConfigValue::Bytes(n, s) => {
                                format!("{n}{}", SUFFIXES[*s as usize % SUFFIXES.len()])
                            }
                            ConfigValue::Text(t) => t.clone(),
                        };
                        format!("{key}={value}")
                    })
                    .collect();
                let text = items.join(";");
                Some(text.bytes().take_while(|&c| c != 0).collect())
            }
            ConfigText::Raw(b) => Some(b.iter().copied().take_while(|&c| c != 0).collect()),
            ConfigText::Null => None,
        }
    }
}

/// One C ABI call.
#[derive(Arbitrary, Clone, Debug)]
pub enum Call {
    /// `devpool_configure`.
    Configure(ConfigText),
    /// `devpool_malloc(size, device, stream)`.
    Malloc {
        /// Bytes.
        size: Size,
        /// Ordinal.
        device: Device,
        /// Stream handle (modulo 6; 0 is null).
        stream: u8,
    },
    /// `devpool_cupy_malloc(stream, size, device)`.
    CupyMalloc {
        /// Bytes.
        size: Size,
        /// Ordinal.
        device: Device,
        /// Stream handle.
        stream: u8,
    },
    /// `devpool_free(ptr, size, device, stream)`.
    Free {
        /// Which pointer.
        ptr: PtrPick,
        /// The size said.
        size: SizeHint,
        /// Which device.
        device: DevicePick,
        /// Stream handle.
        stream: u8,
    },
    /// `devpool_cupy_free(stream, ptr, device)`.
    CupyFree {
        /// Which pointer.
        ptr: PtrPick,
        /// Which device.
        device: DevicePick,
        /// Stream handle.
        stream: u8,
    },
    /// `devpool_record_stream(ptr, device, stream)`.
    RecordStream {
        /// Which pointer.
        ptr: PtrPick,
        /// Which device.
        device: DevicePick,
        /// Stream handle.
        stream: u8,
    },
    /// `devpool_trim(device)`.
    Trim(Device),
    /// `devpool_stats_json(device)`, parsed and checked, then freed.
    StatsJson(Device),
    /// `devpool_last_error()`, read.
    LastError,
}

/// A block the script holds.
#[derive(Clone, Copy, Debug)]
struct Live {
    device: c_int,
    addr: u64,
    size: usize,
    stream: u8,
}

/// What the script expects the library to hold.
#[derive(Default)]
struct Model {
    live: Vec<Live>,
    /// Addresses freed, with their device (the most recent 64).
    freed: Vec<(c_int, u64)>,
    /// Devices the script allocated on (whose allocator it may have made).
    touched: BTreeSet<c_int>,
}

impl Model {
    /// The pointer, and the device it came from, that `pick` names.
    fn pick(&self, pick: PtrPick) -> (u64, c_int, Option<usize>) {
        let nth = |i: u8| self.live.get(i as usize % self.live.len().max(1));
        match pick {
            PtrPick::Live(i) => nth(i).map_or((0, 0, None), |l| (l.addr, l.device, Some(l.size))),
            PtrPick::Freed(i) => self
                .freed
                .get(i as usize % self.freed.len().max(1))
                .map_or((0, 0, None), |&(d, a)| (a, d, None)),
            PtrPick::Interior(i, off) => nth(i).map_or((0, 0, None), |l| {
                (l.addr + off.max(1) as u64, l.device, None)
            }),
            PtrPick::Foreign(a) => (a, 0, None),
            PtrPick::Null => (0, 0, None),
        }
    }

    /// The library frees `addr` on `device` exactly when it is live there.
    fn freed(&mut self, addr: u64, device: c_int) {
        if let Some(i) = self
            .live
            .iter()
            .position(|l| l.addr == addr && l.device == device && addr != 0)
        {
            self.live.swap_remove(i);
            if self.freed.len() == 64 {
                self.freed.remove(0);
            }
            self.freed.push((device, addr));
        }
    }

    fn allocated(&mut self, addr: u64, size: usize, device: c_int, stream: u8) {
        assert!(
            (0..MAX_DEVICES as c_int).contains(&device),
            "a pointer {addr:#x} from device {device}, out of range"
        );
        assert_eq!(addr % 256, 0, "{addr:#x} is not 256-byte aligned");
        let end = addr + size.max(1) as u64;
        for l in self.live.iter().filter(|l| l.device == device) {
            let l_end = l.addr + l.size.max(1) as u64;
            assert!(
                end <= l.addr || l_end <= addr,
                "device {device}: new block {addr:#x}+{size} overlaps live {:#x}+{}",
                l.addr,
                l.size
            );
        }
        self.touched.insert(device);
        self.live.push(Live {
            device,
            addr,
            size,
            stream,
        });
    }

    fn count_on(&self, device: c_int) -> usize {
        self.live.iter().filter(|l| l.device == device).count()
    }
}

fn device_of(pick: DevicePick, own: c_int) -> c_int {
    match pick {
        DevicePick::Own => own,
        DevicePick::Next => (own + 1).rem_euclid(SCRIPT_DEVICES),
        DevicePick::Any(d) => d.ordinal(),
    }
}

fn stream(s: u8) -> *mut c_void {
    ptr::without_provenance_mut((s % 6) as usize)
}

fn to_ptr(addr: u64) -> *mut c_void {
    ptr::without_provenance_mut(addr as usize)
}

/// This thread's last error message.
pub fn last_error() -> String {
    let p = devpool_last_error();
    assert!(!p.is_null(), "devpool_last_error returned null");
    // SAFETY: devpool_last_error returns a NUL-terminated string that stays valid
    // until the next failing call on this thread; it is copied at once.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

fn configure(text: &[u8]) -> c_int {
    let c = CString::new(text).expect("no NUL inside");
    // SAFETY: a NUL-terminated string that outlives the call.
    unsafe { devpool_configure(c.as_ptr()) }
}

/// Set up the process once: the mock backend, the strategy of [`STRATEGY_ENV`], and
/// device 0 made, which fixes the settings.
pub fn init() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        let strategy = std::env::var(STRATEGY_ENV).unwrap_or_else(|_| "hybrid".to_string());
        let text = format!("backend=mock;log=off;mock_capacity=4G;strategy={strategy}");
        let rc = configure(text.as_bytes());
        assert_eq!(rc, DEVPOOL_OK, "{text}: {}", last_error());
        let p = devpool_malloc(0, 0, ptr::null_mut());
        assert!(!p.is_null(), "first allocation: {}", last_error());
        devpool_free(p, 0, 0, ptr::null_mut());
    });
}

/// The statistics of `device` as JSON.
pub fn stats(device: c_int) -> Option<Value> {
    let s = devpool_stats_json(device);
    if s.is_null() {
        return None;
    }
    // SAFETY: a NUL-terminated string from devpool_stats_json, copied then freed once.
    let text = unsafe { CStr::from_ptr(s) }.to_str().map(str::to_owned);
    // SAFETY: `s` came from devpool_stats_json and is freed once.
    unsafe { devpool_string_free(s) };
    let text = text.expect("statistics are UTF-8");
    Some(serde_json::from_str(&text).expect("statistics are JSON"))
}

/// Check the statistics of `device` against the model's count of live blocks.
fn check_stats(device: c_int, live: usize) {
    let in_range = (0..MAX_DEVICES as c_int).contains(&device);
    let Some(v) = stats(device) else {
        assert!(
            !in_range,
            "no statistics for device {device}: {}",
            last_error()
        );
        return;
    };
    assert!(in_range, "statistics for device {device}, out of range");
    assert_eq!(
        v["panics"].as_u64().unwrap_or(0),
        0,
        "a panic was caught: {v}"
    );
    if v["initialized"] != Value::Bool(true) {
        assert_eq!(live, 0, "device {device} holds blocks but has no allocator");
        return;
    }
    assert_eq!(
        v["live_pointers"].as_u64(),
        Some(live as u64),
        "device {device}: {v}"
    );
    assert_eq!(
        v["stats"]["live_blocks"]["current"].as_u64(),
        Some(live as u64),
        "device {device}: {v}"
    );
    assert_eq!(
        v["reserved_bytes"], v["stats"]["reserved_bytes"]["current"],
        "device {device}: the backend's bytes in use and the allocator's reserved bytes differ: {v}"
    );
}

/// A configuration string: parsed on its own by [`Config::apply`] (what it accepts
/// must read back through its `Display`), then offered to the library, which must
/// refuse it because the settings are fixed.
fn run_configure(text: &ConfigText) {
    let Some(bytes) = text.render() else {
        // SAFETY: a null pointer is allowed and refused.
        let rc = unsafe { devpool_configure(ptr::null()) };
        assert_eq!(rc, DEVPOOL_ERR_INVALID);
        return;
    };
    if let Ok(s) = std::str::from_utf8(&bytes) {
        let mut cfg = Config::default();
        if cfg.apply(s).is_ok() {
            let shown = cfg.to_string();
            let mut back = Config::default();
            back.apply(&shown)
                .unwrap_or_else(|e| panic!("`{s}` shows as `{shown}`, which is refused: {e}"));
            if cfg.backend == devpool_ffi::BackendKind::Cuda {
                // The mock's capacity is not shown for the CUDA backend, which has no use for it.
                back.mock_capacity = cfg.mock_capacity;
            }
            assert_eq!(
                back, cfg,
                "`{s}` shows as `{shown}`, which reads back otherwise"
            );
        }
    }
    let rc = configure(&bytes);
    let utf8 = std::str::from_utf8(&bytes).is_ok();
    let expected = if utf8 {
        DEVPOOL_ERR_TOO_LATE
    } else {
        DEVPOOL_ERR_INVALID
    };
    assert_eq!(
        rc,
        expected,
        "configure after the first allocation: {}",
        last_error()
    );
}

/// Run one call.
fn step(m: &mut Model, call: &Call) {
    match *call {
        Call::Configure(ref text) => run_configure(text),
        Call::Malloc {
            size,
            device,
            stream: s,
        } => {
            let (n, d) = (size.bytes(), device.ordinal());
            let p = devpool_malloc(n, d, stream(s));
            if !p.is_null() {
                m.allocated(p.addr() as u64, n, d, s);
            }
        }
        Call::CupyMalloc {
            size,
            device,
            stream: s,
        } => {
            let (n, d) = (size.bytes(), device.ordinal());
            let p = devpool_cupy_malloc(stream(s), n, d);
            if !p.is_null() {
                m.allocated(p.addr() as u64, n, d, s);
            }
        }
        Call::Free {
            ptr,
            size,
            device,
            stream: s,
        } => {
            let (addr, own, known) = m.pick(ptr);
            let d = device_of(device, own);
            let said = match size {
                SizeHint::Unknown => 0,
                SizeHint::Exact => known.unwrap_or(0),
                SizeHint::Wrong(w) => w.bytes(),
            };
            devpool_free(to_ptr(addr), said, d, stream(s));
            m.freed(addr, d);
        }
        Call::CupyFree {
            ptr,
            device,
            stream: s,
        } => {
            let (addr, own, _) = m.pick(ptr);
            let d = device_of(device, own);
            devpool_cupy_free(stream(s), to_ptr(addr), d);
            m.freed(addr, d);
        }
        Call::RecordStream {
            ptr,
            device,
            stream: s,
        } => {
            let (addr, own, _) = m.pick(ptr);
            let d = device_of(device, own);
            let rc = devpool_record_stream(to_ptr(addr), d, stream(s));
            let live = m.live.iter().any(|l| l.addr == addr && l.device == d);
            let expected = if !(0..MAX_DEVICES as c_int).contains(&d) {
                DEVPOOL_ERR_INVALID
            } else if live && addr != 0 {
                DEVPOOL_OK
            } else {
                DEVPOOL_ERR_NOT_FOUND
            };
            assert_eq!(
                rc,
                expected,
                "record_stream({addr:#x}, {d}): {}",
                last_error()
            );
        }
        Call::Trim(device) => {
            let _ = devpool_trim(device.ordinal());
        }
        Call::StatsJson(device) => {
            let d = device.ordinal();
            check_stats(d, m.count_on(d));
        }
        Call::LastError => {
            let _ = last_error();
        }
    }
}

/// Decode `data` into calls and run them.
pub fn run(data: &[u8]) {
    init();
    let mut u = Unstructured::new(data);
    let mut calls = Vec::new();
    while !u.is_empty() && calls.len() < MAX_CALLS {
        match Call::arbitrary(&mut u) {
            Ok(c) => calls.push(c),
            Err(_) => break,
        }
    }
    script(&calls);
}

/// Run `calls`, then free what they left and check that nothing is live on the
/// devices they allocated on (and device 0).
///
/// Scripts run one at a time (the model assumes that it alone uses the library).
pub fn script(calls: &[Call]) {
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    // A script that panicked leaves the library as it was: the lock stays usable.
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    init();
    let mut m = Model::default();
    for call in calls {
        step(&mut m, call);
    }
    m.touched.insert(0);
    for &d in &m.touched {
        check_stats(d, m.count_on(d));
    }
    for l in std::mem::take(&mut m.live) {
        devpool_free(to_ptr(l.addr), l.size, l.device, stream(l.stream));
    }
    for &d in &m.touched {
        check_stats(d, 0);
    }
}
