//! The scaling workload of `devpool bench --live` with a fixed number of steps, for
//! counting what one operation costs in instructions and cache misses rather than
//! in time:
//!
//! ```sh
//! cargo build --release -p devpool-ffi --example live_count
//! valgrind --tool=callgrind --cache-sim=yes target/release/examples/live_count hybrid 1000000 20000
//! ```
//!
//! Arguments: a strategy name (`caller` for an allocator that does no work, `cabi`
//! for the default strategy through `devpool_malloc` / `devpool_free`, a name
//! followed by `+stats` for that strategy behind the counting adaptor the C ABI
//! uses), the number
//! N of live blocks, and the number of timed steps. The program fills N blocks of
//! 256 B to 256 KiB (log-uniform), then each step frees a random live block and
//! allocates one of a random size in its place, on the mock backend. It prints
//! nothing and leaves the blocks live at exit: run it with S and with 2S steps and
//! the difference of the two counts, over 2S operations, is the cost of one
//! operation with N blocks live, the filling cancelled out.

use devpool::StrategySpec;
use devpool_core::{Allocator, Block, DevicePtr, Request, Rng};
use devpool_ffi::{devpool_configure, devpool_free, devpool_malloc, DEVPOOL_OK};
use devpool_testing::MockBackend;
use std::ffi::{c_void, CString};

/// What the steps call: an allocator, or the C ABI.
enum Target {
    Alloc(Box<dyn Allocator>),
    CAbi,
    Caller(u64),
}

impl Target {
    fn alloc(&mut self, size: usize) -> Block {
        match self {
            Target::Alloc(a) => a.alloc(size).expect("allocate"),
            Target::CAbi => {
                let p = devpool_malloc(size, 0, std::ptr::null_mut());
                assert!(!p.is_null(), "devpool_malloc failed");
                Request::new(size).granted(
                    DevicePtr(p.addr() as u64),
                    size,
                    devpool_core::DeviceId(0),
                    0,
                )
            }
            Target::Caller(next) => {
                *next += 256;
                Request::new(size).granted(DevicePtr(*next), size, devpool_core::DeviceId(0), 0)
            }
        }
    }

    fn free(&mut self, b: Block) {
        match self {
            Target::Alloc(a) => a.free(b).expect("free"),
            Target::CAbi => devpool_free(
                std::ptr::without_provenance_mut::<c_void>(b.ptr.0 as usize),
                b.requested,
                0,
                std::ptr::null_mut(),
            ),
            Target::Caller(_) => {
                std::hint::black_box(b);
            }
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [name, n, steps] = &args[..] else {
        eprintln!("usage: live_count <strategy|caller|cabi> <live blocks> <steps>");
        std::process::exit(2);
    };
    let n: usize = n.parse().expect("a live-block count");
    let steps: usize = steps.parse().expect("a step count");
    let mut target = match name.as_str() {
        "caller" => Target::Caller(1 << 40),
        "cabi" => {
            let cfg = CString::new("backend=mock;log=off").expect("no NUL");
            // SAFETY: `cfg` is a NUL-terminated string that lives across the call.
            assert_eq!(unsafe { devpool_configure(cfg.as_ptr()) }, DEVPOOL_OK);
            Target::CAbi
        }
        s => match s.strip_suffix("+stats") {
            Some(base) => {
                let spec: StrategySpec = base.parse().expect("a strategy name");
                let inner = spec.build(MockBackend::shared());
                Target::Alloc(Box::new(devpool_adaptors::Statistics::new(inner)))
            }
            None => {
                let spec: StrategySpec = s.parse().expect("a strategy name");
                Target::Alloc(spec.build(MockBackend::shared()))
            }
        },
    };
    // The same sizes and choices as `devpool bench --live`.
    let mut rng = Rng::new(0x11FE ^ n as u64);
    let sizes: Vec<usize> = (0..4096).map(|_| rng.log_uniform(256, 256 << 10)).collect();
    let mut live: Vec<Block> = (0..n)
        .map(|_| target.alloc(sizes[rng.next_u64() as usize & 4095]))
        .collect();
    for _ in 0..steps {
        let r = rng.next_u64();
        let i = (((r >> 32) * live.len() as u64) >> 32) as usize;
        target.free(live[i]);
        live[i] = target.alloc(sizes[r as usize & 4095]);
    }
    std::hint::black_box(&live);
    std::process::exit(0);
}
