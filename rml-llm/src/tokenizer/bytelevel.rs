//! The GPT-2 byte-level alphabet: every byte maps to one printable character.
//!
//! Bytes 0x21–0x7E, 0xA1–0xAC and 0xAE–0xFF map to the code point of the same value; the
//! other 68 bytes map, in increasing byte order, to U+0100, U+0101, …

use std::sync::OnceLock;

fn tables() -> &'static ([char; 256], std::collections::HashMap<char, u8>) {
    static T: OnceLock<([char; 256], std::collections::HashMap<char, u8>)> = OnceLock::new();
    T.get_or_init(|| {
        let mut fwd = ['\0'; 256];
        let mut next = 0x100u32;
        for b in 0..=255u8 {
            let keeps = matches!(b, 0x21..=0x7E | 0xA1..=0xAC | 0xAE..=0xFF);
            let cp = if keeps {
                u32::from(b)
            } else {
                next += 1;
                next - 1
            };
            fwd[usize::from(b)] = char::from_u32(cp).unwrap_or('\u{fffd}');
        }
        let back = fwd.iter().enumerate().map(|(b, &c)| (c, b as u8)).collect();
        (fwd, back)
    })
}

/// The character byte `b` maps to.
pub fn byte_to_char(b: u8) -> char {
    tables().0[usize::from(b)]
}

/// The byte character `c` stands for, if it is in the alphabet.
pub fn char_to_byte(c: char) -> Option<u8> {
    tables().1.get(&c).copied()
}

/// Maps every byte of `bytes` to its character.
pub fn encode_bytes(bytes: &[u8]) -> String {
    bytes.iter().map(|&b| byte_to_char(b)).collect()
}

/// Maps byte-level text back to bytes; characters outside the alphabet keep their UTF-8.
pub fn decode_chars(s: &str, out: &mut Vec<u8>) {
    for c in s.chars() {
        match char_to_byte(c) {
            Some(b) => out.push(b),
            None => {
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alphabet() {
        assert_eq!(byte_to_char(b' '), 'Ġ');
        assert_eq!(byte_to_char(b'\n'), 'Ċ');
        assert_eq!(byte_to_char(b'a'), 'a');
        for b in 0..=255u8 {
            assert_eq!(char_to_byte(byte_to_char(b)), Some(b));
        }
    }
}
