//! How deeply a pickle nests its containers, found without building them: the
//! pickle reader and the deserializer recurse once per level (and so does dropping
//! what they built), so a file of a few hundred kilobytes nesting lists 150,000 deep
//! would overflow the stack. [`nesting`] runs the pickle machine over placeholders
//! (a node per container and the containers each one holds) and measures the
//! longest chain from the result, iteratively.

use std::collections::HashMap;

/// A stack item: a container node, or anything else (`None`).
type Item = Option<usize>;

/// The scan of one pickle.
#[derive(Default)]
struct Scan {
    /// Children of each container node.
    children: Vec<Vec<usize>>,
    stack: Vec<Item>,
    marks: Vec<usize>,
    memo: HashMap<u64, Item>,
}

impl Scan {
    fn node(&mut self, children: impl IntoIterator<Item = Item>) -> Item {
        self.children.push(children.into_iter().flatten().collect());
        Some(self.children.len() - 1)
    }
    fn pop(&mut self) -> Result<Item, String> {
        if self.marks.last() == Some(&self.stack.len()) {
            return Err("pop past a mark".into());
        }
        self.stack.pop().ok_or_else(|| "stack underflow".into())
    }
    fn pop_mark(&mut self) -> Result<Vec<Item>, String> {
        let at = self.marks.pop().ok_or("no mark")?;
        Ok(self.stack.split_off(at.min(self.stack.len())))
    }
    fn push(&mut self, item: Item) {
        self.stack.push(item);
    }
    /// Make the top item hold `items`.
    fn add_to_top(&mut self, items: Vec<Item>) -> Result<(), String> {
        let top = self.stack.last_mut().ok_or("stack underflow")?;
        let id = match *top {
            Some(id) => id,
            None => {
                // An object built from a non-container (a class): it becomes one.
                self.children.push(Vec::new());
                *top = Some(self.children.len() - 1);
                self.children.len() - 1
            }
        };
        self.children[id].extend(items.into_iter().flatten());
        Ok(())
    }
}

/// Reads the opcodes' arguments.
struct Bytes<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Bytes<'a> {
    fn take(&mut self, n: u64) -> Result<&'a [u8], String> {
        let n = usize::try_from(n).map_err(|_| "length past the address space")?;
        let end = self.at.checked_add(n).filter(|&e| e <= self.data.len());
        let end = end.ok_or("the pickle ends inside an opcode")?;
        let out = &self.data[self.at..end];
        self.at = end;
        Ok(out)
    }
    fn uint(&mut self, n: usize) -> Result<u64, String> {
        Ok(self
            .take(n as u64)?
            .iter()
            .rev()
            .fold(0u64, |v, &b| (v << 8) | b as u64))
    }
    fn line(&mut self) -> Result<&'a [u8], String> {
        let rest = &self.data[self.at..];
        let n = rest
            .iter()
            .position(|&b| b == b'\n')
            .ok_or("the pickle ends inside a line")?;
        self.at += n + 1;
        Ok(&rest[..n])
    }
}

fn line_id(line: &[u8]) -> Result<u64, String> {
    std::str::from_utf8(line)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .ok_or_else(|| "a memo key that is not a number".into())
}

/// The nesting depth of the object a pickle builds (0 for a scalar, 1 for a flat
/// list...), or an error for a pickle the scan cannot follow (the reader would
/// refuse it too). Containers shared through the memo count once per path; a cycle
/// is not followed twice.
pub(crate) fn nesting(pickle: &[u8]) -> Result<usize, String> {
    let mut s = Scan::default();
    let mut b = Bytes {
        data: pickle,
        at: 0,
    };
    let root = loop {
        let op = *b.take(1)?.first().ok_or("empty")?;
        match op {
            b'.' => break s.pop()?,              // STOP
            0x80 => drop(b.take(1)?),            // PROTO
            0x95 => drop(b.take(8)?),            // FRAME
            b'(' => s.marks.push(s.stack.len()), // MARK
            b'0' => {
                // POP: an item, or a mark with nothing above it.
                if s.marks.last() == Some(&s.stack.len()) {
                    s.marks.pop();
                } else {
                    s.pop()?;
                }
            }
            b'1' => drop(s.pop_mark()?), // POP_MARK
            b'2' => {
                let top = *s.stack.last().ok_or("stack underflow")?; // DUP
                s.push(top);
            }
            // Scalars with arguments.
            b'F' | b'I' | b'L' | b'S' | b'V' | b'P' => {
                b.line()?;
                s.push(None);
            }
            b'J' => drop_push(&mut s, b.take(4)?),
            b'K' | 0x82 => drop_push(&mut s, b.take(1)?),
            b'M' | 0x83 => drop_push(&mut s, b.take(2)?),
            0x84 => drop_push(&mut s, b.take(4)?),
            b'G' => drop_push(&mut s, b.take(8)?),
            b'T' | b'X' | b'B' | 0x8b => {
                let n = b.uint(4)?;
                drop_push(&mut s, b.take(n)?);
            }
            b'U' | b'C' | 0x8a | 0x8c => {
                let n = b.uint(1)?;
                drop_push(&mut s, b.take(n)?);
            }
            0x8d | 0x8e | 0x96 => {
                let n = b.uint(8)?;
                drop_push(&mut s, b.take(n)?);
            }
            b'N' | 0x88 | 0x89 | 0x97 => s.push(None),
            0x98 => {} // READONLY_BUFFER
            b'c' => {
                // GLOBAL: module and name lines.
                b.line()?;
                b.line()?;
                s.push(None);
            }
            b'i' => {
                // INST: module and name lines, arguments down to the mark.
                b.line()?;
                b.line()?;
                let items = s.pop_mark()?;
                let n = s.node(items);
                s.push(n);
            }
            // Empty containers.
            b']' | b'}' | b')' | 0x8f => {
                let n = s.node([]);
                s.push(n);
            }
            // Containers of the items down to the mark.
            b'l' | b't' | b'd' | 0x91 | b'o' => {
                let items = s.pop_mark()?;
                let n = s.node(items);
                s.push(n);
            }
            // Tuples of the top items, and objects built from them.
            0x85 | 0x86 | 0x87 | b'R' | 0x81 | 0x92 | 0x93 | b'Q' => {
                let k = match op {
                    0x85 | b'Q' => 1,
                    0x86 | b'R' | 0x81 | 0x93 => 2,
                    _ => 3,
                };
                let mut items = Vec::with_capacity(k);
                for _ in 0..k {
                    items.push(s.pop()?);
                }
                let n = s.node(items);
                s.push(n);
            }
            b'a' | b'b' => {
                // APPEND, BUILD: the top item goes into the one below.
                let v = s.pop()?;
                s.add_to_top(vec![v])?;
            }
            b's' => {
                // SETITEM
                let v = s.pop()?;
                let k = s.pop()?;
                s.add_to_top(vec![k, v])?;
            }
            b'e' | b'u' | 0x90 => {
                // APPENDS, SETITEMS, ADDITEMS
                let items = s.pop_mark()?;
                s.add_to_top(items)?;
            }
            b'p' => {
                let id = line_id(b.line()?)?;
                memo_put(&mut s, id)?;
            }
            b'q' => {
                let id = b.uint(1)?;
                memo_put(&mut s, id)?;
            }
            b'r' => {
                let id = b.uint(4)?;
                memo_put(&mut s, id)?;
            }
            0x94 => {
                let id = s.memo.len() as u64;
                memo_put(&mut s, id)?;
            }
            b'g' => {
                let id = line_id(b.line()?)?;
                memo_get(&mut s, id)?;
            }
            b'h' => {
                let id = b.uint(1)?;
                memo_get(&mut s, id)?;
            }
            b'j' => {
                let id = b.uint(4)?;
                memo_get(&mut s, id)?;
            }
            other => return Err(format!("unknown opcode {other:#04x}")),
        }
    };
    Ok(root.map_or(0, |r| longest(&s.children, r)))
}

fn drop_push(s: &mut Scan, _arg: &[u8]) {
    s.push(None);
}

fn memo_put(s: &mut Scan, id: u64) -> Result<(), String> {
    let top = *s.stack.last().ok_or("stack underflow")?;
    s.memo.insert(id, top);
    Ok(())
}

fn memo_get(s: &mut Scan, id: u64) -> Result<(), String> {
    let item = *s.memo.get(&id).ok_or("a memo key never stored")?;
    s.push(item);
    Ok(())
}

/// The number of nodes on the longest path down from `root`, found with an explicit
/// stack; an edge back to a node on the current path (a cycle) is not followed.
fn longest(children: &[Vec<usize>], root: usize) -> usize {
    const NEW: usize = 0;
    const OPEN: usize = usize::MAX;
    // depth[n]: NEW, OPEN while n is on the path, else 1 + the deepest child.
    let mut depth = vec![NEW; children.len()];
    let mut path: Vec<(usize, usize)> = vec![(root, 0)];
    depth[root] = OPEN;
    while let Some(&mut (node, ref mut next)) = path.last_mut() {
        if let Some(&child) = children[node].get(*next) {
            *next += 1;
            if depth[child] == NEW {
                depth[child] = OPEN;
                path.push((child, 0));
            }
            continue;
        }
        let deepest = children[node]
            .iter()
            .map(|&c| if depth[c] == OPEN { 0 } else { depth[c] })
            .max()
            .unwrap_or(0);
        depth[node] = deepest + 1;
        path.pop();
    }
    depth[root]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested_lists(n: usize) -> Vec<u8> {
        let mut p = vec![0x80, 2];
        p.extend(std::iter::repeat_n(b']', n));
        p.extend(std::iter::repeat_n(b'a', n - 1));
        p.push(b'.');
        p
    }

    #[test]
    fn depths() {
        assert_eq!(nesting(b"\x80\x02K\x05.").unwrap(), 0);
        assert_eq!(nesting(&nested_lists(1)).unwrap(), 1);
        assert_eq!(nesting(&nested_lists(3)).unwrap(), 3);
        assert_eq!(nesting(&nested_lists(150_000)).unwrap(), 150_000);
        // A chain made through the memo: each list holds the previous one, fetched
        // with BINGET, so the machine's stack never grows.
        let mut p = vec![0x80, 2, b']', b'q', 0];
        for i in 1..200u8 {
            p.extend([b']', b'h', i - 1, b'a', b'q', i]);
        }
        p.push(b'.');
        assert_eq!(nesting(&p).unwrap(), 200);
        // A list that holds itself: the cycle is not followed twice.
        assert_eq!(nesting(b"\x80\x02]q\x00h\x00a.").unwrap(), 1);
        assert!(nesting(b"\x80\x02]").is_err(), "no STOP");
        assert!(nesting(b"\x80\x02a.").is_err(), "underflow");
    }

    #[test]
    fn real_snapshots_are_shallow() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../traces/mlp_snapshot.pickle");
        let bytes = std::fs::read(path).unwrap();
        let d = nesting(&bytes).unwrap();
        assert!((2..=20).contains(&d), "{d}");
    }
}
