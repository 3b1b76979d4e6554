//! The subset of the zip container that `.npz` files use: reading the central
//! directory (zip64 included), stored and deflated members, CRC-32 checks; writing
//! stored members.
//!
//! Every count and offset read from the archive is checked against the archive's size
//! before it is used; no allocation is sized by such a number. Inflating is bounded by
//! the member's declared size, which must itself be reachable from its compressed size
//! (deflate expands at most 1032×).
#![forbid(unsafe_code)]

use std::io::Write;

use crate::error::{Error, Result};

const FORMAT: &str = "npz";
const EOCD_SIG: u32 = 0x0605_4b50;
const ZIP64_LOCATOR_SIG: u32 = 0x0706_4b50;
const ZIP64_EOCD_SIG: u32 = 0x0606_4b50;
const CENTRAL_SIG: u32 = 0x0201_4b50;
const LOCAL_SIG: u32 = 0x0403_4b50;
/// Deflate's largest possible expansion ratio is about 1032:1.
const MAX_DEFLATE_RATIO: u64 = 1032;

fn err(field: impl Into<String>, what: impl Into<String>) -> Error {
    Error::format(FORMAT, field, what)
}

/// How a member's bytes are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// Stored as is (`np.savez`).
    Stored,
    /// Raw deflate (`np.savez_compressed`).
    Deflated,
}

/// One member of the archive, located and checked against the archive's size.
#[derive(Clone, Debug)]
pub struct Entry {
    /// The member's file name.
    pub name: String,
    /// Storage method.
    pub method: Method,
    /// CRC-32 of the uncompressed bytes.
    pub crc32: u32,
    /// Bytes stored in the archive.
    pub compressed_size: usize,
    /// Bytes after decompression.
    pub size: usize,
    /// Offset of the stored bytes in the archive.
    pub data_start: usize,
}

impl Entry {
    pub(crate) fn field(&self, part: &str) -> String {
        if part.is_empty() {
            format!("member {:?}", self.name)
        } else {
            format!("member {:?}.{part}", self.name)
        }
    }
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(
        b.get(at..at.checked_add(2)?)?.try_into().ok()?,
    ))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        b.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        b.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}

fn to_usize(v: u64, field: &str, what: &str, limit: usize) -> Result<usize> {
    match usize::try_from(v) {
        Ok(v) if v <= limit => Ok(v),
        _ => Err(err(
            field,
            format!("{what} {v} is past the end of the {limit}-byte archive"),
        )),
    }
}

/// Reads and checks the central directory of the archive `file`.
pub fn read_entries(file: &[u8]) -> Result<Vec<Entry>> {
    let len = file.len();
    // The end-of-central-directory record is 22 bytes plus a comment of up to 65535.
    let lowest = len.saturating_sub(22 + 0xffff);
    let eocd = (lowest..len.saturating_sub(21))
        .rev()
        .find(|&p| {
            u32_at(file, p) == Some(EOCD_SIG)
                && u16_at(file, p + 20).is_some_and(|c| p + 22 + usize::from(c) == len)
        })
        .ok_or_else(|| {
            err(
                "end_of_central_directory",
                "not found: not a zip archive, or truncated",
            )
        })?;
    let field = "end_of_central_directory";
    let rd16 = |at| u16_at(file, eocd + at).unwrap_or(0);
    let rd32 = |at| u32_at(file, eocd + at).unwrap_or(0);
    if rd16(4) != 0 || rd16(6) != 0 {
        return Err(err(field, "multi-disk archives are not supported"));
    }
    let mut count = u64::from(rd16(10));
    let mut cd_size = u64::from(rd32(12));
    let mut cd_offset = u64::from(rd32(16));
    let mut cd_limit = eocd;
    if count == 0xffff || cd_size == 0xffff_ffff || cd_offset == 0xffff_ffff {
        let field = "zip64_end_of_central_directory";
        let loc = eocd
            .checked_sub(20)
            .filter(|&p| u32_at(file, p) == Some(ZIP64_LOCATOR_SIG))
            .ok_or_else(|| err(field, "locator missing"))?;
        let at = to_usize(
            u64_at(file, loc + 8).unwrap_or(u64::MAX),
            field,
            "offset",
            loc,
        )?;
        if u32_at(file, at) != Some(ZIP64_EOCD_SIG) || at + 56 > loc {
            return Err(err(field, "record missing or truncated"));
        }
        count = u64_at(file, at + 32).unwrap_or(u64::MAX);
        cd_size = u64_at(file, at + 40).unwrap_or(u64::MAX);
        cd_offset = u64_at(file, at + 48).unwrap_or(u64::MAX);
        cd_limit = at;
    }
    let cd_offset = to_usize(cd_offset, "central_directory", "offset", cd_limit)?;
    let cd_size = to_usize(cd_size, "central_directory", "size", cd_limit - cd_offset)?;
    // Each central entry is at least 46 bytes: a count that cannot fit is an error
    // before anything is allocated for it.
    if count > (cd_size / 46) as u64 {
        return Err(err(
            "central_directory",
            format!("{count} entries cannot fit in {cd_size} bytes"),
        ));
    }
    let cd = &file[cd_offset..cd_offset + cd_size];
    let mut entries: Vec<Entry> = Vec::with_capacity(count as usize);
    let mut p = 0usize;
    for i in 0..count {
        let field = format!("central_directory.entry[{i}]");
        if u32_at(cd, p) != Some(CENTRAL_SIG) || p + 46 > cd.len() {
            return Err(err(field, "bad signature or truncated"));
        }
        let flags = u16_at(cd, p + 8).unwrap_or(0);
        let method = u16_at(cd, p + 10).unwrap_or(0);
        let crc32 = u32_at(cd, p + 16).unwrap_or(0);
        let mut csize = u64::from(u32_at(cd, p + 20).unwrap_or(0));
        let mut usize_ = u64::from(u32_at(cd, p + 24).unwrap_or(0));
        let nlen = usize::from(u16_at(cd, p + 28).unwrap_or(0));
        let xlen = usize::from(u16_at(cd, p + 30).unwrap_or(0));
        let clen = usize::from(u16_at(cd, p + 32).unwrap_or(0));
        let mut local = u64::from(u32_at(cd, p + 42).unwrap_or(0));
        let end = p + 46 + nlen + xlen + clen;
        if end > cd.len() {
            return Err(err(
                field,
                "name, extra field or comment runs past the directory",
            ));
        }
        let name = std::str::from_utf8(&cd[p + 46..p + 46 + nlen])
            .map_err(|_| err(&field, "member name is not UTF-8"))?
            .to_string();
        let entry_field = format!("member {name:?}");
        // zip64 extended information: the 64-bit values of the fields set to 0xffffffff.
        let extra = &cd[p + 46 + nlen..p + 46 + nlen + xlen];
        let mut x = 0usize;
        while x + 4 <= extra.len() {
            let id = u16_at(extra, x).unwrap_or(0);
            let size = usize::from(u16_at(extra, x + 2).unwrap_or(0));
            let body = extra
                .get(x + 4..x + 4 + size)
                .ok_or_else(|| err(format!("{entry_field}.extra"), "extra field truncated"))?;
            if id == 1 {
                let mut q = 0usize;
                let mut take = |v: &mut u64| -> Result<()> {
                    if *v == 0xffff_ffff {
                        *v = u64_at(body, q)
                            .ok_or_else(|| err(format!("{entry_field}.zip64"), "value missing"))?;
                        q += 8;
                    }
                    Ok(())
                };
                take(&mut usize_)?;
                take(&mut csize)?;
                take(&mut local)?;
            }
            x += 4 + size;
        }
        if flags & 1 != 0 {
            return Err(err(entry_field, "encrypted members are not supported"));
        }
        let method = match method {
            0 => Method::Stored,
            8 => Method::Deflated,
            m => {
                return Err(err(
                    format!("{entry_field}.compression"),
                    format!("compression method {m} is not supported (only stored and deflate)"),
                ));
            }
        };
        let local = to_usize(
            local,
            &format!("{entry_field}.local_header"),
            "offset",
            cd_offset,
        )?;
        if u32_at(file, local) != Some(LOCAL_SIG) || local + 30 > cd_offset {
            return Err(err(
                format!("{entry_field}.local_header"),
                "bad signature or truncated",
            ));
        }
        let lnlen = usize::from(u16_at(file, local + 26).unwrap_or(0));
        let lxlen = usize::from(u16_at(file, local + 28).unwrap_or(0));
        let data_start = local + 30 + lnlen + lxlen;
        if data_start > cd_offset || file[local + 30..local + 30 + lnlen] != *name.as_bytes() {
            return Err(err(
                format!("{entry_field}.local_header"),
                "name does not match the central directory or runs past it",
            ));
        }
        let compressed_size = to_usize(
            csize,
            &format!("{entry_field}.compressed_size"),
            "size",
            cd_offset - data_start,
        )?;
        let size = match method {
            Method::Stored if usize_ != csize => {
                return Err(err(
                    format!("{entry_field}.size"),
                    format!("stored member: size {usize_} differs from stored bytes {csize}"),
                ));
            }
            Method::Deflated if usize_ > csize.saturating_mul(MAX_DEFLATE_RATIO) + 64 => {
                return Err(err(
                    format!("{entry_field}.size"),
                    format!("{usize_} bytes cannot come from {csize} deflated bytes"),
                ));
            }
            _ => usize::try_from(usize_)
                .map_err(|_| err(format!("{entry_field}.size"), "size overflows"))?,
        };
        if entries.iter().any(|e| e.name == name) {
            return Err(err(entry_field, "appears twice in the archive"));
        }
        entries.push(Entry {
            name,
            method,
            crc32,
            compressed_size,
            size,
            data_start,
        });
        p = end;
    }
    Ok(entries)
}

/// The bytes of a member, inflated if needed, after checking the size and CRC-32.
/// Stored members are returned as a borrowed slice of `file`.
pub fn member_bytes<'a>(file: &'a [u8], entry: &Entry) -> Result<std::borrow::Cow<'a, [u8]>> {
    let raw = &file[entry.data_start..entry.data_start + entry.compressed_size];
    let bytes = match entry.method {
        Method::Stored => std::borrow::Cow::Borrowed(raw),
        Method::Deflated => {
            let out = miniz_oxide::inflate::decompress_to_vec_with_limit(raw, entry.size).map_err(
                |e| {
                    err(
                        entry.field("data"),
                        format!(
                            "deflate stream is invalid or longer than declared: {:?}",
                            e.status
                        ),
                    )
                },
            )?;
            if out.len() != entry.size {
                return Err(err(
                    entry.field("size"),
                    format!("inflates to {} bytes, declared {}", out.len(), entry.size),
                ));
            }
            std::borrow::Cow::Owned(out)
        }
    };
    let crc = crc32(&bytes);
    if crc != entry.crc32 {
        return Err(err(
            entry.field("crc32"),
            format!(
                "data has CRC-32 {crc:08x}, archive says {:08x}",
                entry.crc32
            ),
        ));
    }
    Ok(bytes)
}

const fn crc_table() -> [u32; 256] {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0xedb8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
}

static CRC_TABLE: [u32; 256] = crc_table();

/// CRC-32 (IEEE 802.3, as zip uses it).
pub fn crc32(bytes: &[u8]) -> u32 {
    let mut c = 0xffff_ffffu32;
    for &b in bytes {
        c = CRC_TABLE[((c ^ u32::from(b)) & 0xff) as usize] ^ (c >> 8);
    }
    !c
}

/// Writes a zip archive of stored members (`name`, `bytes`). Members and the archive
/// must stay below 4 GiB (no zip64 on the write side).
pub fn write_stored<W: Write>(mut w: W, members: &[(String, Vec<u8>)]) -> Result<()> {
    let io = |e: std::io::Error| Error::InvalidArgument(format!("write failed: {e}"));
    let too_big = || Error::InvalidArgument("npz archives over 4 GiB are not supported".into());
    let mut central = Vec::new();
    let mut offset = 0u64;
    // Fixed timestamp (1980-01-01 00:00) so archives are reproducible.
    let (time, date) = (0u16, 0x21u16);
    for (name, bytes) in members {
        let crc = crc32(bytes);
        let size = u32::try_from(bytes.len()).map_err(|_| too_big())?;
        let nlen = u16::try_from(name.len())
            .map_err(|_| Error::InvalidArgument("member name too long".into()))?;
        let flags: u16 = if name.is_ascii() { 0 } else { 1 << 11 };
        let mut local = Vec::with_capacity(30 + name.len());
        local.extend_from_slice(&LOCAL_SIG.to_le_bytes());
        for v in [20u16, flags, 0, time, date] {
            local.extend_from_slice(&v.to_le_bytes());
        }
        for v in [crc, size, size] {
            local.extend_from_slice(&v.to_le_bytes());
        }
        local.extend_from_slice(&nlen.to_le_bytes());
        local.extend_from_slice(&0u16.to_le_bytes());
        local.extend_from_slice(name.as_bytes());
        w.write_all(&local).map_err(io)?;
        w.write_all(bytes).map_err(io)?;

        central.extend_from_slice(&CENTRAL_SIG.to_le_bytes());
        for v in [(3u16 << 8) | 20, 20, flags, 0, time, date] {
            central.extend_from_slice(&v.to_le_bytes());
        }
        for v in [crc, size, size] {
            central.extend_from_slice(&v.to_le_bytes());
        }
        for v in [nlen, 0, 0, 0, 0] {
            central.extend_from_slice(&v.to_le_bytes());
        }
        central.extend_from_slice(&(0o100644u32 << 16).to_le_bytes());
        let off32 = u32::try_from(offset).map_err(|_| too_big())?;
        central.extend_from_slice(&off32.to_le_bytes());
        central.extend_from_slice(name.as_bytes());
        offset += (local.len() + bytes.len()) as u64;
    }
    let count = u16::try_from(members.len())
        .map_err(|_| Error::InvalidArgument("too many npz members".into()))?;
    let cd_size = u32::try_from(central.len()).map_err(|_| too_big())?;
    let cd_offset = u32::try_from(offset).map_err(|_| too_big())?;
    w.write_all(&central).map_err(io)?;
    let mut eocd = Vec::with_capacity(22);
    eocd.extend_from_slice(&EOCD_SIG.to_le_bytes());
    for v in [0u16, 0, count, count] {
        eocd.extend_from_slice(&v.to_le_bytes());
    }
    eocd.extend_from_slice(&cd_size.to_le_bytes());
    eocd.extend_from_slice(&cd_offset.to_le_bytes());
    eocd.extend_from_slice(&0u16.to_le_bytes());
    w.write_all(&eocd).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_matches_the_standard_check_value() {
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
        assert_eq!(crc32(b""), 0);
    }

    #[test]
    fn written_archives_read_back() {
        let members = vec![
            ("a.npy".to_string(), b"hello".to_vec()),
            ("b.npy".to_string(), Vec::new()),
        ];
        let mut out = Vec::new();
        write_stored(&mut out, &members).unwrap();
        let entries = read_entries(&out).unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(&*member_bytes(&out, &entries[0]).unwrap(), b"hello");
        assert!(member_bytes(&out, &entries[1]).unwrap().is_empty());
        for cut in 0..out.len() {
            assert!(read_entries(&out[..cut]).is_err(), "prefix {cut}");
        }
    }
}
