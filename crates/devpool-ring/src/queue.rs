//! [`Queue`]: a double-ended queue of small `Copy` records whose common operations
//! inline (the standard one's `push_back` does not, which costs a call per block on
//! the allocation path).

/// A ring of `T` in a power-of-two buffer that doubles when full.
#[derive(Clone, Debug)]
pub(crate) struct Queue<T: Copy> {
    buf: Vec<T>,
    head: usize,
    len: usize,
}

impl<T: Copy> Default for Queue<T> {
    fn default() -> Self {
        Queue {
            buf: Vec::new(),
            head: 0,
            len: 0,
        }
    }
}

impl<T: Copy> Queue<T> {
    #[inline]
    fn slot(&self, i: usize) -> usize {
        (self.head + i) & (self.buf.len() - 1)
    }

    #[cold]
    fn grow(&mut self, fill: T) {
        let n = (self.buf.len() * 2).max(8);
        let mut buf = Vec::with_capacity(n);
        buf.extend(self.iter());
        buf.resize(n, fill);
        self.buf = buf;
        self.head = 0;
    }

    /// Records held.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether none is held.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Add at the back.
    #[inline]
    pub fn push_back(&mut self, v: T) {
        if self.len == self.buf.len() {
            self.grow(v);
        }
        let s = self.slot(self.len);
        self.buf[s] = v;
        self.len += 1;
    }

    /// Take from the front.
    #[inline]
    pub fn pop_front(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        let v = self.buf[self.head];
        self.head = self.slot(1);
        self.len -= 1;
        Some(v)
    }

    /// Take from the back.
    #[inline]
    pub fn pop_back(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        self.len -= 1;
        Some(self.buf[self.slot(self.len)])
    }

    /// The `i`th from the front.
    #[inline]
    pub fn get(&self, i: usize) -> Option<&T> {
        (i < self.len).then(|| &self.buf[self.slot(i)])
    }

    /// The `i`th from the front, to change.
    #[inline]
    pub fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        if i < self.len {
            let s = self.slot(i);
            Some(&mut self.buf[s])
        } else {
            None
        }
    }

    /// The front.
    #[inline]
    pub fn front(&self) -> Option<&T> {
        self.get(0)
    }

    /// The front, to change.
    #[inline]
    pub fn front_mut(&mut self) -> Option<&mut T> {
        self.get_mut(0)
    }

    /// The back.
    #[inline]
    pub fn back(&self) -> Option<&T> {
        self.len.checked_sub(1).and_then(|i| self.get(i))
    }

    /// The back, to change.
    #[inline]
    pub fn back_mut(&mut self) -> Option<&mut T> {
        match self.len.checked_sub(1) {
            Some(i) => self.get_mut(i),
            None => None,
        }
    }

    /// Front to back.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = T> + '_ {
        self.range(0, self.len)
    }

    /// The records from index `from` up to `to` (clamped to the length).
    pub fn range(&self, from: usize, to: usize) -> impl DoubleEndedIterator<Item = T> + '_ {
        (from..to.min(self.len)).map(move |i| self.buf[self.slot(i)])
    }
}

impl<T: Copy> std::ops::Index<usize> for Queue<T> {
    type Output = T;
    #[inline]
    fn index(&self, i: usize) -> &T {
        self.get(i).expect("index within the queue")
    }
}

impl<T: Copy> std::ops::IndexMut<usize> for Queue<T> {
    #[inline]
    fn index_mut(&mut self, i: usize) -> &mut T {
        self.get_mut(i).expect("index within the queue")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    #[test]
    fn behaves_as_a_vecdeque() {
        let mut q: Queue<u32> = Queue::default();
        let mut v: VecDeque<u32> = VecDeque::new();
        let mut x = 1u32;
        for step in 0..20_000u32 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            match (x >> 16) % 5 {
                0 | 1 => {
                    q.push_back(step);
                    v.push_back(step);
                }
                2 => assert_eq!(q.pop_front(), v.pop_front()),
                3 => assert_eq!(q.pop_back(), v.pop_back()),
                _ => {
                    if let Some(b) = q.back_mut() {
                        *b += 1;
                    }
                    if let Some(b) = v.back_mut() {
                        *b += 1;
                    }
                }
            }
            assert_eq!(q.len(), v.len());
            assert_eq!(q.front(), v.front());
            assert_eq!(q.back(), v.back());
            if step % 97 == 0 {
                assert!(q.iter().eq(v.iter().copied()));
                let n = v.len();
                assert!(q.range(n / 3, n / 2).eq(v.range(n / 3..n / 2).copied()));
            }
        }
    }
}
