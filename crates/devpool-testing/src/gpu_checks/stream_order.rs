//! Stream order: memory freed while a stream still has work queued on it is not
//! handed to another stream before that work completes.

use devpool_core::{
    Allocator, Backend, Block, DevicePtr, Error, EventId, Request, Result, StreamId,
};

/// Settings of the stream-order check; [`Default`] gives 1 MiB blocks and 64 busy
/// memsets of 1 GiB (tens of milliseconds on a current GPU).
///
/// Two streams `A` and `B` are made. Twice, a block `x` is freed while the stream
/// of its last use still has long work queued (`busy_reps` memsets of a
/// `busy_bytes` block, then a memset of `x` itself), and at once a block `y` of the
/// same size is allocated on the other stream and filled with another byte:
///
/// 1. `x` allocated on `A`, last used on `A`, freed on `A`; `y` allocated on `B`;
/// 2. `x` allocated on `A`, last used on `B`, freed on `B`; `y` allocated on `A`.
///
/// When both streams are done, `y` must hold its own byte: the late write to `x`
/// must not have landed in it. Then, if `y` shares memory with `x` although the event
/// recorded after `x`'s last use had not completed when `y` was handed out, the
/// allocator gave away memory still in use: an error too (an allocator that makes
/// the new stream wait, as the driver's own pools may, passes the first test and
/// fails this one). After case 2 completes, one more block is allocated on `A` to see
/// whether `x` is reused then, which is allowed.
#[derive(Clone, Debug)]
pub struct StreamOrderCheck {
    /// Size of the blocks handed from stream to stream.
    pub block_size: usize,
    /// Size of the scratch region (taken from the backend, not the allocator) that
    /// the busy work writes.
    pub busy_bytes: usize,
    /// Memsets of the busy block queued before the last use of `x`.
    pub busy_reps: usize,
}

impl Default for StreamOrderCheck {
    fn default() -> Self {
        StreamOrderCheck {
            block_size: 1 << 20,
            busy_bytes: 1 << 30,
            busy_reps: 64,
        }
    }
}

/// What happened when a block freed on a busy stream was followed by an allocation
/// on the other stream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HandOff {
    /// The new block shares memory with the freed one.
    pub aliased: bool,
    /// The freed block's last use had not completed when the new block was handed
    /// out (the check only proves something when this is true, or when the
    /// allocator itself waited, as `cuMemFree` does).
    pub busy_at_alloc: bool,
}

/// What a stream-order check saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamOrderReport {
    /// Case 1: freed on its own stream `A`, then an allocation on `B`.
    pub freed_on_own_stream: HandOff,
    /// Case 2: allocated on `A`, freed on `B`, then an allocation on `A`.
    pub freed_on_other_stream: HandOff,
    /// After case 2 completed, a block allocated on `A` reused the freed memory.
    pub reused_after_completion: bool,
}

/// Run [`StreamOrderCheck::default`] on `alloc`.
pub fn check_stream_order(alloc: &dyn Allocator) -> Result<StreamOrderReport> {
    StreamOrderCheck::default().run(alloc)
}

fn overlaps(x: &Block, y: &Block) -> bool {
    x.ptr.0 < y.ptr.0 + y.size as u64 && y.ptr.0 < x.ptr.0 + x.size as u64
}

struct Ctx<'a> {
    alloc: &'a dyn Allocator,
    be: &'a dyn Backend,
    busy: DevicePtr,
    event: EventId,
    a: StreamId,
    b: StreamId,
}

impl StreamOrderCheck {
    /// Run the check on `alloc`. Everything it allocated is freed before it returns.
    ///
    /// Errors: [`Error::Corrupted`] when memory still in use was handed to another
    /// stream, or a block lost its data; any allocator or backend error.
    pub fn run(&self, alloc: &dyn Allocator) -> Result<StreamOrderReport> {
        let be = alloc.backend().clone();
        let (a, b) = (be.create_stream()?, be.create_stream()?);
        // The busy work writes a scratch region of the backend, so the allocator
        // only ever sees requests of `block_size`.
        let busy_bytes = self.busy_bytes.max(1);
        let busy = be.alloc_region(busy_bytes)?;
        let event = match be.create_event() {
            Ok(e) => e,
            Err(e) => {
                let _ = be.free_region(busy, busy_bytes);
                return Err(e.into());
            }
        };
        let cx = Ctx {
            alloc,
            be: &*be,
            busy,
            event,
            a,
            b,
        };
        let result = self.cases(&cx);
        let _ = be.synchronize(a);
        let _ = be.synchronize(b);
        let freed = be.free_region(busy, busy_bytes);
        let _ = be.destroy_event(event);
        let report = result?;
        freed?;
        Ok(report)
    }

    fn keep_busy(&self, cx: &Ctx, stream: StreamId) -> Result<()> {
        for i in 0..self.busy_reps {
            cx.be
                .memset(cx.busy, i as u8, self.busy_bytes.max(1), stream)?;
        }
        Ok(())
    }

    fn cases(&self, cx: &Ctx) -> Result<StreamOrderReport> {
        let freed_on_own_stream = self.hand_off(cx, cx.a, cx.a, cx.b, (0xA1, 0xB2), false)?.0;
        let (freed_on_other_stream, reused_after_completion) =
            self.hand_off(cx, cx.a, cx.b, cx.a, (0xC3, 0xE5), true)?;
        Ok(StreamOrderReport {
            freed_on_own_stream,
            freed_on_other_stream,
            reused_after_completion,
        })
    }

    /// `x` allocated on `home`, last used and freed on `last`, then `y` allocated on
    /// `next` at once. With `after`, one more allocation on `next` once all is done.
    fn hand_off(
        &self,
        cx: &Ctx,
        home: StreamId,
        last: StreamId,
        next: StreamId,
        (x_byte, y_byte): (u8, u8),
        after: bool,
    ) -> Result<(HandOff, bool)> {
        let x = cx
            .alloc
            .allocate(Request::new(self.block_size).on_stream(home))?;
        let queued = (|| {
            if home != last {
                // The home stream's own use comes first and is finished.
                cx.be.memset(x.ptr, x_byte ^ 0xFF, x.size, home)?;
                cx.be.synchronize(home)?;
            }
            self.keep_busy(cx, last)?;
            cx.be.memset(x.ptr, x_byte, x.size, last)?;
            cx.be.record_event(cx.event, last)?;
            Ok::<(), Error>(())
        })();
        if let Err(e) = queued {
            let _ = cx.be.synchronize(last);
            let _ = cx.alloc.free(x);
            return Err(e);
        }
        cx.alloc.deallocate(x, last)?;
        let y = cx
            .alloc
            .allocate(Request::new(self.block_size).on_stream(next))?;
        let outcome = (|| {
            let busy_at_alloc = !cx.be.event_done(cx.event)?;
            cx.be.memset(y.ptr, y_byte, y.size, next)?;
            let seen = HandOff {
                aliased: overlaps(&x, &y),
                busy_at_alloc,
            };
            cx.be.synchronize(last)?;
            cx.be.synchronize(next)?;
            let mut back = vec![0u8; y.size];
            cx.be.copy_to_host(&mut back, y.ptr, next)?;
            if let Some(off) = back.iter().position(|&v| v != y_byte) {
                return Err(Error::Corrupted {
                    ptr: y.ptr,
                    detail: format!(
                        "byte {off} of {y:?} reads {:#04x} where {y_byte:#04x} was written \
                         (the freed block's last write was {x_byte:#04x})",
                        back[off]
                    ),
                });
            }
            if seen.aliased && seen.busy_at_alloc {
                return Err(Error::Corrupted {
                    ptr: y.ptr,
                    detail: format!(
                        "{y:?} on {next:?} shares memory with {x:?}, freed on {last:?} while \
                         work queued there before the free had not completed"
                    ),
                });
            }
            let mut reused = false;
            if after {
                let z = cx
                    .alloc
                    .allocate(Request::new(self.block_size).on_stream(next))?;
                reused = overlaps(&x, &z);
                cx.alloc.free(z)?;
            }
            Ok((seen, reused))
        })();
        let freed = cx.alloc.free(y);
        let r = outcome?;
        freed?;
        Ok(r)
    }
}
