//! Every entry point answers with a value or an error, never a panic, whether or not
//! the machine has a CUDA driver. These tests run everywhere and pass either way;
//! without a driver they check that the error is `Unavailable`.

use devpool_core::{Backend, BackendError};
use devpool_cuda::{
    device_count, device_info, driver_available, driver_version, CudaBackend, CudaMallocAsync,
};

#[test]
fn new_gives_a_backend_or_an_error() {
    match CudaBackend::new(0) {
        Ok(b) => {
            assert_eq!(b.ordinal(), 0);
            assert!(b.granularity().is_power_of_two());
            assert!(!b.device_name().is_empty());
        }
        Err(e) => {
            assert!(
                matches!(
                    e,
                    BackendError::Unavailable(_) | BackendError::Driver { .. }
                ),
                "{e}"
            );
            assert!(!e.to_string().is_empty());
        }
    }
}

#[test]
fn no_device_has_the_largest_ordinal() {
    assert!(CudaBackend::new(u32::MAX).is_err());
    assert!(CudaBackend::get(u32::MAX).is_err());
    assert!(device_info(u32::MAX).is_err());
}

#[test]
fn without_a_driver_every_entry_point_is_unavailable() {
    if driver_available() {
        return;
    }
    let errors = [
        CudaBackend::new(0).err(),
        CudaBackend::new(1).err(),
        CudaBackend::get(0).err(),
        device_info(0).err(),
        device_count().err(),
        driver_version().err(),
    ];
    for e in errors {
        assert!(matches!(e, Some(BackendError::Unavailable(_))), "{e:?}");
    }
    // Asking twice gives the same answer (the first failure is remembered, not
    // turned into a panic later).
    assert!(matches!(
        CudaBackend::new(0),
        Err(BackendError::Unavailable(_))
    ));
}

#[test]
fn with_a_driver_the_answers_agree() {
    let Ok(info) = device_info(0) else { return };
    let b = CudaBackend::get(0).expect("device_info worked, so the backend does");
    assert_eq!(info.name, b.device_name());
    assert_eq!(info.granularity, b.granularity());
    assert!(info.free_bytes <= info.total_bytes);
    assert!(device_count().unwrap() >= 1);
    assert_eq!(info.driver_version, driver_version().unwrap());
    assert!(!info.to_string().is_empty());
    // The baselines construct or say why not.
    if let Err(e) = CudaMallocAsync::new(b) {
        assert!(matches!(e, BackendError::Unsupported(_)), "{e}");
    }
}
