//! Inference-shaped workloads, made up from the shapes of real models, for tuning
//! the page policy before real inference traces are at hand: long-lived weights,
//! KV caches that grow by one token per step (reallocated and copied, as
//! `torch.cat` does), varying batches, and many short-lived activations.

use devpool_core::Rng;
use devpool_trace::{Trace, TraceEvent};

struct Gen {
    events: Vec<TraceEvent>,
    next: u64,
    rng: Rng,
}

impl Gen {
    fn new(seed: u64) -> Self {
        Gen {
            events: Vec::new(),
            next: 0x1000,
            rng: Rng::new(seed),
        }
    }
    fn alloc(&mut self, size: usize) -> (u64, usize) {
        let p = self.next;
        self.next += 0x1000;
        self.events.push(TraceEvent::allocate(p, size));
        (p, size)
    }
    fn free(&mut self, (p, size): (u64, usize)) {
        self.events.push(TraceEvent::free(p, size));
    }
    fn pick(&mut self, v: &[usize]) -> usize {
        v[self.rng.below(v.len() as u64) as usize]
    }
}

/// The bytes of one transformer layer's weights at width `h` in bf16: the QKV and
/// output projections, the two MLP matrices, and `norms` vectors.
fn layer_weights(h: usize, norms: usize) -> impl Iterator<Item = usize> {
    [3 * h * h * 2, h * h * 2, 4 * h * h * 2, 4 * h * h * 2]
        .into_iter()
        .chain(std::iter::repeat_n(h * 2, norms))
}

/// A decoder serving generation requests one batch at a time: fp16, hidden 2048,
/// 16 layers, vocabulary 32000; batch 1 to 32, prompts of 32 to 1024 tokens, 16 to
/// 192 new tokens, the KV cache of each layer reallocated one token longer at every
/// step.
pub fn decoder(requests: usize, seed: u64) -> Trace {
    let (h, layers, heads, vocab) = (2048usize, 16usize, 16usize, 32000usize);
    let mut g = Gen::new(seed);
    let mut weights = vec![g.alloc(vocab * h * 2)];
    for _ in 0..layers {
        for size in layer_weights(h, 2) {
            weights.push(g.alloc(size));
        }
    }
    weights.push(g.alloc(vocab * h * 2));
    for _ in 0..requests {
        let b = g.pick(&[1, 2, 4, 8, 12, 16, 24, 32]);
        let l0 = g.rng.log_uniform(32, 1024);
        let steps = g.rng.log_uniform(16, 192);
        // Prefill: the whole prompt through every layer.
        let mut x = g.alloc(b * l0 * h * 2);
        let mut kv = Vec::with_capacity(layers);
        for _ in 0..layers {
            let qkv = g.alloc(3 * b * l0 * h * 2);
            let k = g.alloc(b * l0 * h * 2);
            let v = g.alloc(b * l0 * h * 2);
            let scores = g.alloc(b * heads * l0 * l0 * 2);
            let ctx = g.alloc(b * l0 * h * 2);
            g.free(scores);
            g.free(qkv);
            let o = g.alloc(b * l0 * h * 2);
            g.free(ctx);
            let up = g.alloc(4 * b * l0 * h * 2);
            let down = g.alloc(b * l0 * h * 2);
            g.free(up);
            g.free(o);
            g.free(x);
            x = down;
            kv.push((k, v));
        }
        let logits = g.alloc(b * vocab * 4);
        g.free(logits);
        g.free(x);
        // Decode: one token per step.
        for t in 1..=steps {
            let len = l0 + t;
            let mut x = g.alloc(b * h * 2);
            for slot in kv.iter_mut() {
                let qkv = g.alloc(3 * b * h * 2);
                let k = g.alloc(b * len * h * 2);
                g.free(slot.0);
                let v = g.alloc(b * len * h * 2);
                g.free(slot.1);
                *slot = (k, v);
                let scores = g.alloc(b * heads * len * 2);
                let ctx = g.alloc(b * h * 2);
                g.free(scores);
                g.free(qkv);
                let up = g.alloc(4 * b * h * 2);
                let down = g.alloc(b * h * 2);
                g.free(up);
                g.free(ctx);
                g.free(x);
                x = down;
            }
            let logits = g.alloc(b * vocab * 4);
            let token = g.alloc(b * 8);
            g.free(logits);
            g.free(x);
            g.free(token);
        }
        for (k, v) in kv {
            g.free(k);
            g.free(v);
        }
    }
    for w in weights {
        g.free(w);
    }
    Trace::new("synth_decoder", g.events)
}

/// An encoder serving variable-length batches: fp16, hidden 1024, 24 layers, 16
/// heads (BERT-large); batch 1 to 64, sequences of 16 to 512 tokens.
pub fn encoder(batches: usize, seed: u64) -> Trace {
    let (h, layers, heads, vocab) = (1024usize, 24usize, 16usize, 30522usize);
    let mut g = Gen::new(seed);
    let mut weights = vec![g.alloc(vocab * h * 2), g.alloc(512 * h * 2)];
    for _ in 0..layers {
        for size in layer_weights(h, 3) {
            weights.push(g.alloc(size));
        }
    }
    for _ in 0..batches {
        let b = g.rng.log_uniform(1, 64);
        let l = g.rng.log_uniform(16, 512);
        let ids = g.alloc(b * l * 8);
        let mask = g.alloc(b * l * 4);
        let mut x = g.alloc(b * l * h * 2);
        g.free(ids);
        for _ in 0..layers {
            let qkv = g.alloc(3 * b * l * h * 2);
            let scores = g.alloc(b * heads * l * l * 2);
            let probs = g.alloc(b * heads * l * l * 2);
            g.free(scores);
            let ctx = g.alloc(b * l * h * 2);
            g.free(probs);
            g.free(qkv);
            let o = g.alloc(b * l * h * 2);
            g.free(ctx);
            let ln = g.alloc(b * l * h * 2);
            g.free(o);
            g.free(x);
            let up = g.alloc(4 * b * l * h * 2);
            let act = g.alloc(4 * b * l * h * 2);
            g.free(up);
            let down = g.alloc(b * l * h * 2);
            g.free(act);
            let out = g.alloc(b * l * h * 2);
            g.free(down);
            g.free(ln);
            x = out;
        }
        let pooled = g.alloc(b * h * 2);
        let logits = g.alloc(b * 2 * 4);
        g.free(x);
        g.free(mask);
        g.free(pooled);
        g.free(logits);
    }
    for w in weights {
        g.free(w);
    }
    Trace::new("synth_encoder", g.events)
}
