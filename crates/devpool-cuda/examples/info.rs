//! Print what the CUDA driver says about each device, or why there is none.
//!
//! `cargo run -p devpool-cuda --example info`

fn main() {
    if !devpool_cuda::driver_available() {
        println!("no CUDA driver on this machine");
        return;
    }
    match devpool_cuda::driver_version() {
        Ok((major, minor)) => println!("CUDA driver {major}.{minor}"),
        Err(e) => println!("driver version: {e}"),
    }
    let n = match devpool_cuda::device_count() {
        Ok(n) => n,
        Err(e) => {
            println!("{e}");
            return;
        }
    };
    for ordinal in 0..n {
        match devpool_cuda::device_info(ordinal) {
            Ok(info) => println!("{info}"),
            Err(e) => println!("device {ordinal}: {e}"),
        }
    }
}
