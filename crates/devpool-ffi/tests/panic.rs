//! A panic inside the library never unwinds into the caller (which would abort the
//! process): the planned panic of the test hook becomes an error value, and the
//! allocator keeps working.

mod common;
use common::*;
use devpool_ffi::hooks::panic_on_size;
use devpool_ffi::*;

#[test]
fn panics_become_error_values() {
    setup("");
    let dev = 0;
    let keep = malloc(4096, dev, 0);
    assert_ne!(keep, 0);

    panic_on_size(Some(12345));
    assert_eq!(malloc(12345, dev, 0), 0);
    assert!(last_error().contains("panic"), "{}", last_error());
    assert!(devpool_cupy_malloc(stream(0), 12345, dev).is_null());
    // A free told the planned size panics before it touches anything.
    free(keep, 12345, dev, 0);
    let v = stats(dev);
    assert_eq!(num(&v, &["panics"]), 3, "{v}");
    assert_consistent(&v, 1, 4096);

    // Other sizes are served meanwhile, from other threads too.
    let others: Vec<u64> = (0..4)
        .map(|i| std::thread::spawn(move || malloc(1000 + i, dev, 0)))
        .map(|t| t.join().unwrap())
        .collect();
    assert!(others.iter().all(|&p| p != 0));
    for (i, p) in others.into_iter().enumerate() {
        free(p, 1000 + i, dev, 0);
    }

    panic_on_size(None);
    let p = malloc(12345, dev, 0);
    assert_ne!(p, 0, "{}", last_error());
    free(p, 12345, dev, 0);
    free(keep, 4096, dev, 0);
    let v = stats(dev);
    assert_consistent(&v, 0, 0);
    assert_eq!(num(&v, &["panics"]), 3);
}
