//! The Philox4x32-10 and Philox4x64-10 counter-based generators and their streams.
//!
//! Philox (J. K. Salmon, M. A. Moraes, R. O. Dror, D. E. Shaw, "Parallel Random Numbers:
//! As Easy as 1, 2, 3", SC11, 2011) maps a counter of four words and a key of two words
//! to four output words through ten rounds of a Feistel-like network. Each round
//! multiplies words 0 and 2 by fixed odd constants, keeps the high and low halves of the
//! double-width products, and mixes the high halves with words 1 and 3 and the key:
//!
//! ```text
//! (hi0, lo0) = M0 * c0          (hi1, lo1) = M1 * c2
//! c' = [hi1 ^ c1 ^ k0,  lo1,  hi0 ^ c3 ^ k1,  lo0]
//! ```
//!
//! Between rounds the key is bumped by the Weyl constants `W0`, `W1` (the golden ratio and
//! `sqrt(3) - 1` in fixed point). Counter word 0 is the least significant: a stream
//! increments it first and carries into words 1, 2, 3 (Random123's and NumPy's order).
//!
//! Both generators are checked against the known-answer vectors that ship with the
//! Random123 library (`tests/kat_vectors`), and Philox4x64-10 additionally against
//! `numpy.random.Philox` (see [`Philox4x64Stream::numpy`]).

use super::Rng;

/// Philox4x32 multipliers (Random123's `PHILOX_M4x32_0`, `PHILOX_M4x32_1`).
const M4X32: [u32; 2] = [0xD251_1F53, 0xCD9E_8D57];
/// Philox4x32 key bumps: the golden ratio and `sqrt(3) - 1` as 32-bit fractions.
const W32: [u32; 2] = [0x9E37_79B9, 0xBB67_AE85];
/// Philox4x64 multipliers (Random123's `PHILOX_M4x64_0`, `PHILOX_M4x64_1`).
const M4X64: [u64; 2] = [0xD2E7_470E_E14C_6C93, 0xCA5A_8263_9512_1157];
/// Philox4x64 key bumps: the golden ratio and `sqrt(3) - 1` as 64-bit fractions.
const W64: [u64; 2] = [0x9E37_79B9_7F4A_7C15, 0xBB67_AE85_84CA_A73B];
/// Rounds of the standard Philox variants.
const ROUNDS: usize = 10;

/// High and low halves of the 64-bit product of two 32-bit words.
#[inline]
fn mulhilo32(a: u32, b: u32) -> (u32, u32) {
    let p = u64::from(a) * u64::from(b);
    ((p >> 32) as u32, p as u32)
}

/// High and low halves of the 128-bit product of two 64-bit words.
#[inline]
fn mulhilo64(a: u64, b: u64) -> (u64, u64) {
    let p = u128::from(a) * u128::from(b);
    ((p >> 64) as u64, p as u64)
}

/// The Philox4x32-10 bijection under one 64-bit key (two 32-bit words).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Philox4x32 {
    key: [u32; 2],
}

impl Philox4x32 {
    /// The generator keyed by `key`.
    pub const fn new(key: [u32; 2]) -> Self {
        Philox4x32 { key }
    }

    /// The key.
    pub const fn key(&self) -> [u32; 2] {
        self.key
    }

    /// The four output words for `counter` (word 0 least significant).
    pub fn block(&self, counter: [u32; 4]) -> [u32; 4] {
        let mut c = counter;
        let mut k = self.key;
        for round in 0..ROUNDS {
            if round > 0 {
                k = [k[0].wrapping_add(W32[0]), k[1].wrapping_add(W32[1])];
            }
            let (hi0, lo0) = mulhilo32(M4X32[0], c[0]);
            let (hi1, lo1) = mulhilo32(M4X32[1], c[2]);
            c = [hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0];
        }
        c
    }
}

/// The Philox4x64-10 bijection under one 128-bit key (two 64-bit words). This is the
/// generator behind NumPy's `numpy.random.Philox`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Philox4x64 {
    key: [u64; 2],
}

impl Philox4x64 {
    /// The generator keyed by `key`.
    pub const fn new(key: [u64; 2]) -> Self {
        Philox4x64 { key }
    }

    /// The key.
    pub const fn key(&self) -> [u64; 2] {
        self.key
    }

    /// The four output words for `counter` (word 0 least significant).
    pub fn block(&self, counter: [u64; 4]) -> [u64; 4] {
        let mut c = counter;
        let mut k = self.key;
        for round in 0..ROUNDS {
            if round > 0 {
                k = [k[0].wrapping_add(W64[0]), k[1].wrapping_add(W64[1])];
            }
            let (hi0, lo0) = mulhilo64(M4X64[0], c[0]);
            let (hi1, lo1) = mulhilo64(M4X64[1], c[2]);
            c = [hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0];
        }
        c
    }
}

/// A 128-bit counter as one integer (word 0 least significant).
fn counter_to_u128(c: [u32; 4]) -> u128 {
    c.iter()
        .rev()
        .fold(0u128, |acc, &w| (acc << 32) | u128::from(w))
}

/// The four 32-bit words of a 128-bit counter (word 0 least significant).
fn u128_to_counter(x: u128) -> [u32; 4] {
    core::array::from_fn(|i| (x >> (32 * i)) as u32)
}

/// `c + delta` modulo `2^256`, for a 256-bit counter with word 0 least significant.
fn add_256(c: [u64; 4], delta: u128) -> [u64; 4] {
    let add = [delta as u64, (delta >> 64) as u64, 0, 0];
    let mut out = [0u64; 4];
    let mut carry = false;
    for i in 0..4 {
        let (s, c1) = c[i].overflowing_add(add[i]);
        let (s, c2) = s.overflowing_add(u64::from(carry));
        out[i] = s;
        carry = c1 || c2;
    }
    out
}

/// `c - 1` modulo `2^256`.
fn dec_256(c: [u64; 4]) -> [u64; 4] {
    let mut out = c;
    for word in &mut out {
        let (value, borrow) = word.overflowing_sub(1);
        *word = value;
        if !borrow {
            break;
        }
    }
    out
}

/// A sequence of 32-bit words from [`Philox4x32`]: the words of `block(c)`,
/// `block(c + 1)`, … in order, starting at the counter it was created with (word 0 of
/// each block first). The counter wraps around modulo `2^128`.
///
/// [`Rng::next_u64`] joins two consecutive words, the first as the low half.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Philox4x32Stream {
    philox: Philox4x32,
    /// Counter of the next block to compute when `buffer` is used up.
    next: u128,
    /// Words of block `next - 1` (valid when `used < 4`).
    buffer: [u32; 4],
    /// Words of `buffer` already handed out; 4 means empty.
    used: usize,
}

impl Philox4x32Stream {
    /// The stream under `key` whose first word is word 0 of `block(counter)`.
    pub fn new(key: [u32; 2], counter: [u32; 4]) -> Self {
        Philox4x32Stream {
            philox: Philox4x32::new(key),
            next: counter_to_u128(counter),
            buffer: [0; 4],
            used: 4,
        }
    }

    /// The stream keyed by a 64-bit seed (low word first) starting at counter 0.
    pub fn from_seed(seed: u64) -> Self {
        Self::new([seed as u32, (seed >> 32) as u32], [0; 4])
    }

    /// Stream number `id` of `seed`, split *by key*: the key is `[seed, id]` and the
    /// counter starts at 0. Distinct `(seed, id)` pairs give unrelated streams, each
    /// `2^128` blocks long. (This is `from_seed(seed | id << 32)`: callers that split
    /// by key should not also use the high seed word.)
    pub fn for_stream(seed: u32, id: u32) -> Self {
        Self::new([seed, id], [0; 4])
    }

    /// Substream `id` of this stream's key, split *by counter*: the same key, starting
    /// at counter `[0, 0, 0, id]`. Substreams never overlap as long as each draws fewer
    /// than `2^96` blocks.
    pub fn split(&self, id: u32) -> Self {
        Self::new(self.philox.key(), [0, 0, 0, id])
    }

    /// The underlying generator.
    pub fn generator(&self) -> Philox4x32 {
        self.philox
    }

    /// Where the next word comes from: the block counter and the word index (0..4)
    /// within that block.
    pub fn position(&self) -> ([u32; 4], usize) {
        if self.used == 4 {
            (u128_to_counter(self.next), 0)
        } else {
            (u128_to_counter(self.next.wrapping_sub(1)), self.used)
        }
    }

    /// Moves to the start of block `counter` (its word 0 comes next).
    pub fn seek(&mut self, counter: [u32; 4]) {
        self.next = counter_to_u128(counter);
        self.used = 4;
    }

    /// Skips `n` words as if they had been drawn, in constant time.
    pub fn skip(&mut self, n: u128) {
        let (counter, word) = self.position();
        let word = word as u128 + n % 4;
        let blocks = (n / 4).wrapping_add(word / 4);
        self.next = counter_to_u128(counter).wrapping_add(blocks);
        self.used = 4;
        if !word.is_multiple_of(4) {
            self.refill();
            self.used = (word % 4) as usize;
        }
    }

    /// Computes the block at `next` into the buffer and advances `next`.
    fn refill(&mut self) {
        self.buffer = self.philox.block(u128_to_counter(self.next));
        self.next = self.next.wrapping_add(1);
        self.used = 0;
    }
}

impl Rng for Philox4x32Stream {
    fn next_u32(&mut self) -> u32 {
        if self.used == 4 {
            self.refill();
        }
        let word = self.buffer[self.used];
        self.used += 1;
        word
    }

    fn next_u64(&mut self) -> u64 {
        let lo = self.next_u32();
        let hi = self.next_u32();
        u64::from(lo) | (u64::from(hi) << 32)
    }
}

/// A sequence of 64-bit words from [`Philox4x64`]: the words of `block(c)`,
/// `block(c + 1)`, … in order, starting at the counter it was created with (word 0 of
/// each block first). The counter wraps around modulo `2^256`.
///
/// [`Rng::next_u32`] follows NumPy: it splits one 64-bit word into two 32-bit draws,
/// low half first, and keeps the high half for the next call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Philox4x64Stream {
    philox: Philox4x64,
    /// Counter of the next block to compute when `buffer` is used up.
    next: [u64; 4],
    /// Words of block `next - 1` (valid when `used < 4`).
    buffer: [u64; 4],
    /// Words of `buffer` already handed out; 4 means empty.
    used: usize,
    /// The high half of the last word split by `next_u32`, not yet handed out.
    half: Option<u32>,
}

impl Philox4x64Stream {
    /// The stream under `key` whose first word is word 0 of `block(counter)`.
    pub fn new(key: [u64; 2], counter: [u64; 4]) -> Self {
        Philox4x64Stream {
            philox: Philox4x64::new(key),
            next: counter,
            buffer: [0; 4],
            used: 4,
            half: None,
        }
    }

    /// The stream equal to NumPy's `numpy.random.Philox(key=k, counter=c)` with
    /// `k = key[0] + key[1] * 2^64` and `c = counter[0] + counter[1] * 2^64 + …`.
    ///
    /// NumPy increments its counter *before* computing a block, so its first raw output
    /// is word 0 of `block(c + 1)`: this stream starts at `c + 1` (modulo `2^256`).
    /// Then `next_u64` equals `random_raw()`, `next_u32` equals the bit generator's
    /// 32-bit draw, and `next_f64` / `next_f32` equal `Generator.random()` for `float64`
    /// / `float32`. NumPy's `advance(d)` corresponds to `seek` to `c + 1 + d`.
    pub fn numpy(key: [u64; 2], counter: [u64; 4]) -> Self {
        Self::new(key, add_256(counter, 1))
    }

    /// The stream keyed by `[seed, 0]` starting at counter 0.
    pub fn from_seed(seed: u64) -> Self {
        Self::new([seed, 0], [0; 4])
    }

    /// Stream number `id` of `seed`, split *by key*: the key is `[seed, id]` and the
    /// counter starts at 0. Stream 0 is `from_seed(seed)`.
    pub fn for_stream(seed: u64, id: u64) -> Self {
        Self::new([seed, id], [0; 4])
    }

    /// Substream `id` of this stream's key, split *by counter*: the same key, starting
    /// at counter `[0, 0, 0, id]`. Substreams never overlap as long as each draws fewer
    /// than `2^192` blocks.
    pub fn split(&self, id: u64) -> Self {
        Self::new(self.philox.key(), [0, 0, 0, id])
    }

    /// The underlying generator.
    pub fn generator(&self) -> Philox4x64 {
        self.philox
    }

    /// Where the next 64-bit word comes from: the block counter and the word index
    /// (0..4) within that block. A pending high half from `next_u32` is not counted.
    pub fn position(&self) -> ([u64; 4], usize) {
        if self.used == 4 {
            (self.next, 0)
        } else {
            (dec_256(self.next), self.used)
        }
    }

    /// Moves to the start of block `counter` (its word 0 comes next) and drops any
    /// pending 32-bit half.
    pub fn seek(&mut self, counter: [u64; 4]) {
        self.next = counter;
        self.used = 4;
        self.half = None;
    }

    /// Skips `n` 64-bit words as if they had been drawn, in constant time, and drops
    /// any pending 32-bit half.
    pub fn skip(&mut self, n: u128) {
        let (counter, word) = self.position();
        let word = word as u128 + n % 4;
        let blocks = (n / 4).wrapping_add(word / 4);
        self.seek(add_256(counter, blocks));
        if !word.is_multiple_of(4) {
            self.refill();
            self.used = (word % 4) as usize;
        }
    }

    /// Computes the block at `next` into the buffer and advances `next`.
    fn refill(&mut self) {
        self.buffer = self.philox.block(self.next);
        self.next = add_256(self.next, 1);
        self.used = 0;
    }
}

impl Rng for Philox4x64Stream {
    fn next_u32(&mut self) -> u32 {
        if let Some(high) = self.half.take() {
            return high;
        }
        let word = self.next_u64();
        self.half = Some((word >> 32) as u32);
        word as u32
    }

    fn next_u64(&mut self) -> u64 {
        if self.used == 4 {
            self.refill();
        }
        let word = self.buffer[self.used];
        self.used += 1;
        word
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_words_round_trip() {
        let c = [1, 2, 3, 0xFFFF_FFFF];
        assert_eq!(u128_to_counter(counter_to_u128(c)), c);
        assert_eq!(counter_to_u128([1, 0, 0, 0]), 1);
        assert_eq!(counter_to_u128([0, 1, 0, 0]), 1 << 32);
    }

    #[test]
    fn add_256_carries_across_all_words() {
        assert_eq!(add_256([u64::MAX, 0, 0, 0], 1), [0, 1, 0, 0]);
        assert_eq!(add_256([u64::MAX; 4], 1), [0; 4]);
        assert_eq!(add_256([u64::MAX, u64::MAX, 5, 0], 1), [0, 0, 6, 0]);
        assert_eq!(add_256([1, 0, 0, 0], u128::MAX), [0, 0, 1, 0]);
        assert_eq!(dec_256([0; 4]), [u64::MAX; 4]);
        assert_eq!(dec_256([0, 1, 0, 0]), [u64::MAX, 0, 0, 0]);
    }

    #[test]
    fn position_tracks_words_and_blocks() {
        let mut s = Philox4x32Stream::new([1, 2], [u32::MAX, 0, 0, 0]);
        assert_eq!(s.position(), ([u32::MAX, 0, 0, 0], 0));
        s.next_u32();
        assert_eq!(s.position(), ([u32::MAX, 0, 0, 0], 1));
        s.skip(3);
        assert_eq!(s.position(), ([0, 1, 0, 0], 0));
        let mut t = Philox4x64Stream::new([1, 2], [0; 4]);
        t.next_u64();
        assert_eq!(t.position(), ([0; 4], 1));
        t.skip(7);
        assert_eq!(t.position(), ([2, 0, 0, 0], 0));
    }
}
