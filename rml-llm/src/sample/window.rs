//! The recent-token window the penalties look at: a ring buffer with per-token counts.

/// The last `capacity` accepted tokens, with how often each token occurs among them.
///
/// Memory is allocated once (`capacity` slots and one count per vocabulary entry);
/// [`TokenWindow::push`] is O(1) and [`TokenWindow::for_each_distinct`] visits each
/// distinct token of the window once in O(window).
#[derive(Clone, Debug)]
pub struct TokenWindow {
    ring: Vec<u32>,
    start: usize,
    len: usize,
    counts: Vec<u32>,
    visited: Vec<u32>,
    stamp: u32,
}

impl TokenWindow {
    /// An empty window of `capacity` tokens over a vocabulary of `vocab` entries.
    pub fn new(capacity: usize, vocab: usize) -> Self {
        Self {
            ring: vec![0; capacity],
            start: 0,
            len: 0,
            counts: vec![0; vocab],
            visited: vec![0; vocab],
            stamp: 0,
        }
    }

    /// How many tokens the window holds now.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the window holds no token.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Forgets every token.
    pub fn clear(&mut self) {
        for i in 0..self.len {
            let t = self.ring[(self.start + i) % self.ring.len()];
            self.counts[t as usize] = 0;
        }
        self.start = 0;
        self.len = 0;
    }

    /// Appends `token` (which must be below the vocabulary size), evicting the oldest
    /// token when full. With capacity 0 nothing is kept.
    pub fn push(&mut self, token: u32) {
        let cap = self.ring.len();
        if cap == 0 {
            return;
        }
        if self.len == cap {
            let old = self.ring[self.start];
            self.counts[old as usize] -= 1;
            self.ring[self.start] = token;
            self.start = (self.start + 1) % cap;
        } else {
            self.ring[(self.start + self.len) % cap] = token;
            self.len += 1;
        }
        self.counts[token as usize] += 1;
    }

    /// How often `token` occurs in the window.
    pub fn count(&self, token: u32) -> u32 {
        self.counts[token as usize]
    }

    /// Calls `f(token, count)` once for each distinct token in the window.
    pub fn for_each_distinct(&mut self, mut f: impl FnMut(u32, u32)) {
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            self.visited.fill(0);
            self.stamp = 1;
        }
        let cap = self.ring.len();
        for i in 0..self.len {
            let t = self.ring[(self.start + i) % cap];
            let seen = &mut self.visited[t as usize];
            if *seen != self.stamp {
                *seen = self.stamp;
                f(t, self.counts[t as usize]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_follow_the_ring() {
        let mut w = TokenWindow::new(3, 5);
        for t in [1, 2, 1, 4] {
            w.push(t);
        }
        // window is now [2, 1, 4]
        assert_eq!((w.count(1), w.count(2), w.count(4)), (1, 1, 1));
        let mut seen = Vec::new();
        w.for_each_distinct(|t, c| seen.push((t, c)));
        assert_eq!(seen, vec![(2, 1), (1, 1), (4, 1)]);
        w.push(4);
        let mut seen = Vec::new();
        w.for_each_distinct(|t, c| seen.push((t, c)));
        assert_eq!(seen, vec![(1, 1), (4, 2)]);
        w.clear();
        assert!(w.is_empty());
        assert_eq!(w.count(4), 0);
    }

    #[test]
    fn zero_capacity_keeps_nothing() {
        let mut w = TokenWindow::new(0, 2);
        w.push(1);
        assert_eq!(w.len(), 0);
        assert_eq!(w.count(1), 0);
    }
}
