//! [`Isolated`]: a read-mostly slice that shares no cache line with other data.
//!
//! Every thread reads some tables on every operation (the classes and their
//! lookup tables). If such a table shared a cache line with data that one thread writes
//! all the time, every other thread's read would wait for that line to move:
//! false sharing. Padding both ends by two cache lines rules that out.

use std::ops::Deref;

const PAD_BYTES: usize = 128;

/// A boxed slice with at least 128 bytes of unused room on either side.
#[derive(Debug)]
pub(crate) struct Isolated<T> {
    buf: Box<[T]>,
    len: usize,
}

impl<T> Isolated<T> {
    /// Items of padding on each side: a constant, so a lookup adds no load for it.
    const PAD: usize = PAD_BYTES.div_ceil(if std::mem::size_of::<T>() == 0 {
        1
    } else {
        std::mem::size_of::<T>()
    });
}

impl<T: Copy + Default> Isolated<T> {
    /// The items, padded.
    pub fn new(items: Vec<T>) -> Self {
        let pad = Self::PAD;
        let mut buf = Vec::with_capacity(items.len() + 2 * pad);
        let len = items.len();
        buf.resize(pad, T::default());
        buf.extend(items);
        buf.resize(buf.len() + pad, T::default());
        Isolated {
            buf: buf.into_boxed_slice(),
            len,
        }
    }
}

impl<T> Deref for Isolated<T> {
    type Target = [T];
    #[inline]
    fn deref(&self) -> &[T] {
        // SAFETY: `buf` holds `PAD` items, the `len` items, then `PAD` more, and never
        // changes after `new`: the range lies inside it.
        unsafe { self.buf.get_unchecked(Self::PAD..Self::PAD + self.len) }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn holds_the_items_with_room_on_both_sides() {
        let v = super::Isolated::new(vec![1u32, 2, 3]);
        assert_eq!(&v[..], &[1, 2, 3]);
        let inner = v.as_ptr() as usize;
        let outer = v.buf.as_ptr() as usize;
        assert!(inner - outer >= 128);
        assert!(outer + v.buf.len() * 4 - (inner + 3 * 4) >= 128);
    }
}
