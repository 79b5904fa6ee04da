//! A synthetic streaming trace: an image pipeline that loads a batch, uploads it, runs
//! a model over it layer by layer, downloads the result and frees in order, step after
//! step, with the next batch uploaded while the current one is processed.

use devpool_trace::{Trace, TraceEvent};

/// Bytes of one 3×224×224 fp32 image.
const IMAGE: usize = 3 * 224 * 224 * 4;

/// Activation bytes per image after each layer (a ResNet-like shape: wide and large
/// first, then narrower as the resolution drops).
const LAYERS: &[usize] = &[
    64 * 112 * 112 * 4,
    64 * 56 * 56 * 4,
    256 * 56 * 56 * 4,
    256 * 56 * 56 * 4,
    512 * 28 * 28 * 4,
    512 * 28 * 28 * 4,
    1024 * 14 * 14 * 4,
    1024 * 14 * 14 * 4,
    1024 * 14 * 14 * 4,
    2048 * 7 * 7 * 4,
    2048 * 4,
];

/// The trace: `steps` batches of 24 to 40 images (a simple generator picks them).
pub fn image_pipeline(steps: usize) -> Trace {
    let mut ev = Vec::new();
    let mut next_ptr = 0x7000_0000_0000u64;
    let mut t = 0u64;
    let mut alloc = |ev: &mut Vec<TraceEvent>, size: usize| {
        next_ptr += 0x10_0000_0000;
        t += 5;
        ev.push(TraceEvent::allocate(next_ptr, size).at(t));
        (next_ptr, size)
    };
    let free = |ev: &mut Vec<TraceEvent>, (p, size): (u64, usize)| {
        let at = ev.last().map_or(0, |e| e.time_us) + 5;
        ev.push(TraceEvent::free(p, size).at(at));
    };
    // The model's weights: loaded once, live to the end.
    let mut x = 12345u64;
    let mut rand = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let weights: Vec<(u64, usize)> = (0..160)
        .map(|_| {
            let size = 4096usize << (rand() % 11);
            alloc(&mut ev, size)
        })
        .collect();
    let batch = |r: u64| 24 + (r % 5) as usize * 4;
    let mut next_input = alloc(&mut ev, batch(rand()) * IMAGE);
    for _ in 0..steps {
        let b = next_input.1 / IMAGE;
        let input = next_input;
        // The next batch is uploaded while this one runs.
        next_input = alloc(&mut ev, batch(rand()) * IMAGE);
        let mut prev: Option<(u64, usize)> = None;
        for &per_image in LAYERS {
            let workspace = alloc(&mut ev, (1 << 20) << (rand() % 5));
            let out = alloc(&mut ev, b * per_image);
            free(&mut ev, workspace);
            if let Some(p) = prev.take() {
                free(&mut ev, p);
            }
            prev = Some(out);
        }
        let logits = alloc(&mut ev, b * 1000 * 4);
        if let Some(p) = prev.take() {
            free(&mut ev, p);
        }
        // Downloaded, then freed in order.
        free(&mut ev, input);
        free(&mut ev, logits);
    }
    free(&mut ev, next_input);
    for w in weights {
        free(&mut ev, w);
    }
    Trace::new("synthetic_image_pipeline", ev)
}
