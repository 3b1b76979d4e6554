//! NumPy `.npy` arrays and `.npz` archives: readers (mmap, zero-copy for
//! little-endian data) and writers (byte-identical headers to `np.save`).
//!
//! Accepted: format versions 1.0, 2.0 and 3.0; dtypes `f2 f4 f8 i1 i2 i4 i8 u1 b1`;
//! little-endian (`<`, `|`, `=`) data read in place, big-endian (`>`) data converted
//! to little-endian in a heap copy; C and Fortran order (a Fortran-order array is a
//! zero-copy view with column-major strides); up to [`rml_core::MAX_RANK`] axes. The
//! header must be the dict `np.save` writes — exactly the keys `descr`,
//! `fortran_order` and `shape` — and the file must end exactly where the data ends.
//! Rejected, with an [`Error::Format`] naming the field (`magic`, `version`,
//! `header_length`, `header`, `descr`, `fortran_order`, `shape`, `data`): other
//! dtypes (complex, unsigned wider than a byte, strings, objects, structured), bad
//! magic, truncation, trailing bytes.
//!
//! `.npz`: a zip archive of `NAME.npy` members, stored (`np.savez`, read in place) or
//! deflated (`np.savez_compressed`, inflated with `miniz_oxide` into the heap). Each
//! member's CRC-32 is checked when it is read. The writer stores members
//! uncompressed.
#![forbid(unsafe_code)]

use std::io::Write;
use std::path::Path;

use rml_core::{DType, MAX_RANK};

use crate::buffer::Buffer;
use crate::error::{Error, Result};
use crate::formats::zip;
use crate::tensor::Tensor;

/// The first six bytes of every `.npy` file.
pub const MAGIC: &[u8] = b"\x93NUMPY";

const FORMAT: &str = "npy";

fn err(field: impl Into<String>, what: impl Into<String>) -> Error {
    Error::format(FORMAT, field, what)
}

/// A validated `.npy` header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NpyHeader {
    /// Format version `(major, minor)`.
    pub version: (u8, u8),
    /// Element type.
    pub dtype: DType,
    /// True when the data is big-endian (it is converted on read).
    pub big_endian: bool,
    /// True when the data is in Fortran (column-major) order.
    pub fortran_order: bool,
    /// Axis sizes.
    pub shape: Vec<usize>,
    /// Byte offset of the data in the file.
    pub data_offset: usize,
    /// Bytes of data.
    pub data_len: usize,
}

/// A value in the header dict.
#[derive(Debug, PartialEq)]
enum Lit {
    Str(String),
    Bool(bool),
    Int(u64),
    Tuple(Vec<u64>),
}

/// A recursive-descent parser for the Python dict literal of a `.npy` header.
struct Parser<'a> {
    s: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn skip_ws(&mut self) {
        while self.at < self.s.len() && matches!(self.s[self.at], b' ' | b'\t' | b'\n' | b'\r') {
            self.at += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        self.skip_ws();
        if self.s.get(self.at) == Some(&c) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn fail(&self, what: &str) -> Error {
        err("header", format!("{what} at header byte {}", self.at))
    }

    fn string(&mut self) -> Result<String> {
        self.skip_ws();
        let quote = match self.s.get(self.at) {
            Some(&q @ (b'\'' | b'"')) => q,
            _ => return Err(self.fail("expected a quoted string")),
        };
        let start = self.at + 1;
        let len = self.s[start..]
            .iter()
            .position(|&c| c == quote || c == b'\\')
            .ok_or_else(|| self.fail("unterminated string"))?;
        if self.s[start + len] == b'\\' {
            return Err(self.fail("escapes in header strings are not supported"));
        }
        self.at = start + len + 1;
        std::str::from_utf8(&self.s[start..start + len])
            .map(str::to_string)
            .map_err(|_| self.fail("string is not UTF-8"))
    }

    fn integer(&mut self) -> Result<u64> {
        self.skip_ws();
        let start = self.at;
        while self.at < self.s.len() && self.s[self.at].is_ascii_digit() {
            self.at += 1;
        }
        if start == self.at {
            return Err(err(
                "shape",
                format!("expected a non-negative integer at header byte {start}"),
            ));
        }
        let digits = std::str::from_utf8(&self.s[start..self.at]).unwrap_or("");
        // Python 2 wrote longs as `3L`.
        if self.s.get(self.at) == Some(&b'L') {
            self.at += 1;
        }
        digits
            .parse::<u64>()
            .map_err(|_| err("shape", format!("dimension {digits} is too large")))
    }

    fn value(&mut self) -> Result<Lit> {
        self.skip_ws();
        match self.s.get(self.at) {
            Some(b'\'' | b'"') => Ok(Lit::Str(self.string()?)),
            Some(b'T') if self.s[self.at..].starts_with(b"True") => {
                self.at += 4;
                Ok(Lit::Bool(true))
            }
            Some(b'F') if self.s[self.at..].starts_with(b"False") => {
                self.at += 5;
                Ok(Lit::Bool(false))
            }
            Some(b'0'..=b'9') => Ok(Lit::Int(self.integer()?)),
            Some(b'(') => {
                self.at += 1;
                let mut items = Vec::new();
                loop {
                    if self.eat(b')') {
                        break;
                    }
                    if items.len() == MAX_RANK {
                        return Err(err(
                            "shape",
                            format!("more than rml's maximum rank {MAX_RANK} axes"),
                        ));
                    }
                    items.push(self.integer()?);
                    if !self.eat(b',') {
                        if self.eat(b')') {
                            break;
                        }
                        return Err(err("shape", "expected ',' or ')' in the shape tuple"));
                    }
                }
                Ok(Lit::Tuple(items))
            }
            _ => Err(self.fail("expected a string, True, False or a tuple")),
        }
    }

    fn dict(&mut self) -> Result<Vec<(String, Lit)>> {
        if !self.eat(b'{') {
            return Err(self.fail("expected '{'"));
        }
        let mut items: Vec<(String, Lit)> = Vec::new();
        loop {
            if self.eat(b'}') {
                break;
            }
            let key = self.string()?;
            if !self.eat(b':') {
                return Err(self.fail("expected ':'"));
            }
            let value = self.value()?;
            if items.iter().any(|(k, _)| *k == key) {
                return Err(err("header", format!("key {key:?} appears twice")));
            }
            if items.len() == 3 {
                return Err(err("header", format!("unexpected key {key:?}")));
            }
            items.push((key, value));
            if !self.eat(b',') {
                if self.eat(b'}') {
                    break;
                }
                return Err(self.fail("expected ',' or '}'"));
            }
        }
        self.skip_ws();
        if self.at != self.s.len() {
            return Err(self.fail("unexpected bytes after the header dict"));
        }
        Ok(items)
    }
}

/// Parses a NumPy type string (`'<f4'`) into a dtype and its byte order.
fn parse_descr(descr: &str) -> Result<(DType, bool)> {
    let bad = || err("descr", format!("dtype {descr:?} is not supported"));
    let (order, code) = descr.split_at_checked(1).ok_or_else(bad)?;
    let dtype = match code {
        "f2" => DType::F16,
        "f4" => DType::F32,
        "f8" => DType::F64,
        "i1" => DType::I8,
        "i2" => DType::I16,
        "i4" => DType::I32,
        "i8" => DType::I64,
        "u1" => DType::U8,
        "b1" => DType::Bool,
        _ => return Err(bad()),
    };
    let big_endian = match order {
        "<" | "|" => false,
        "=" => cfg!(target_endian = "big"),
        ">" => true,
        _ => return Err(bad()),
    };
    Ok((dtype, big_endian && dtype.type_size() > 1))
}

/// Parses and validates the `.npy` image `file` (header and data length).
pub fn parse_header(file: &[u8]) -> Result<NpyHeader> {
    if file.len() < MAGIC.len() || &file[..MAGIC.len()] != MAGIC {
        return Err(err("magic", "file does not start with \\x93NUMPY"));
    }
    let (Some(&major), Some(&minor)) = (file.get(6), file.get(7)) else {
        return Err(err("version", "truncated before the version bytes"));
    };
    let len_size = match (major, minor) {
        (1, 0) => 2,
        (2, 0) | (3, 0) => 4,
        _ => {
            return Err(err(
                "version",
                format!("format version {major}.{minor} is not supported (1.0, 2.0, 3.0 are)"),
            ));
        }
    };
    let Some(len_bytes) = file.get(8..8 + len_size) else {
        return Err(err("header_length", "truncated before the header length"));
    };
    let header_len = if len_size == 2 {
        usize::from(u16::from_le_bytes([len_bytes[0], len_bytes[1]]))
    } else {
        u32::from_le_bytes([len_bytes[0], len_bytes[1], len_bytes[2], len_bytes[3]]) as usize
    };
    let header_start = 8 + len_size;
    let data_offset = header_start
        .checked_add(header_len)
        .filter(|&end| end <= file.len())
        .ok_or_else(|| {
            err(
                "header_length",
                format!(
                    "a {header_len}-byte header runs past the end of the {}-byte file",
                    file.len()
                ),
            )
        })?;
    let text = &file[header_start..data_offset];
    if major < 3 && !text.is_ascii() {
        return Err(err("header", "version 1.0/2.0 headers must be ASCII"));
    }
    let items = Parser { s: text, at: 0 }.dict()?;
    let get = |key: &str| items.iter().find(|(k, _)| k == key).map(|(_, v)| v);
    let (dtype, big_endian) = match get("descr") {
        Some(Lit::Str(d)) => parse_descr(d)?,
        Some(_) => {
            return Err(err(
                "descr",
                "structured or non-string dtypes are not supported",
            ));
        }
        None => return Err(err("descr", "missing")),
    };
    let fortran_order = match get("fortran_order") {
        Some(Lit::Bool(b)) => *b,
        Some(_) => return Err(err("fortran_order", "not True or False")),
        None => return Err(err("fortran_order", "missing")),
    };
    let shape = match get("shape") {
        Some(Lit::Tuple(dims)) => dims
            .iter()
            .map(|&d| usize::try_from(d).map_err(|_| err("shape", "dimension too large")))
            .collect::<Result<Vec<usize>>>()?,
        Some(_) => return Err(err("shape", "not a tuple")),
        None => return Err(err("shape", "missing")),
    };
    let numel = shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| err("shape", "element count overflows"))?;
    let data_len = numel
        .checked_mul(dtype.type_size())
        .ok_or_else(|| err("shape", "byte size overflows"))?;
    let have = file.len() - data_offset;
    if have != data_len {
        return Err(err(
            "data",
            format!("{have} bytes of data, but shape {shape:?} of {dtype} needs {data_len}"),
        ));
    }
    Ok(NpyHeader {
        version: (major, minor),
        dtype,
        big_endian,
        fortran_order,
        shape,
        data_offset,
        data_len,
    })
}

/// The tensor of a `.npy` image that lies at `base..base + len` of `buffer`.
fn tensor_in(buffer: &Buffer, base: usize, len: usize) -> Result<(NpyHeader, Tensor)> {
    let image = &buffer.as_bytes()[base..base + len];
    let header = parse_header(image)?;
    let rank = header.shape.len();
    // Fortran order: the data is C order of the reversed shape; reverse the axes back.
    let stored_dims: Vec<usize> = if header.fortran_order {
        header.shape.iter().rev().copied().collect()
    } else {
        header.shape.clone()
    };
    let start = base + header.data_offset;
    let mut t = if header.big_endian {
        let size = header.dtype.type_size();
        let mut bytes = image[header.data_offset..].to_vec();
        for elem in bytes.chunks_exact_mut(size) {
            elem.reverse();
        }
        Tensor::from_raw(header.dtype, &stored_dims, &bytes)?
    } else {
        Tensor::from_buffer(
            buffer.clone(),
            start,
            header.data_len,
            header.dtype,
            &stored_dims,
        )?
    };
    if header.fortran_order && rank > 1 {
        let order: Vec<usize> = (0..rank).rev().collect();
        t = t.permute(&order)?;
    }
    Ok((header, t))
}

/// Reads the `.npy` file at `path` (mapped; little-endian data is not copied).
pub fn open(path: impl AsRef<Path>) -> Result<Tensor> {
    let path = path.as_ref();
    let buffer = Buffer::map_file(path)?;
    from_buffer(&buffer).map_err(|e| e.in_file(path))
}

/// Reads the `.npy` image held in `buffer` (zero-copy for little-endian data).
pub fn from_buffer(buffer: &Buffer) -> Result<Tensor> {
    tensor_in(buffer, 0, buffer.len()).map(|(_, t)| t)
}

/// Reads a copy of the `.npy` image `bytes`.
pub fn from_bytes(bytes: &[u8]) -> Result<Tensor> {
    from_buffer(&Buffer::from_bytes(bytes))
}

fn descr_of(dtype: DType) -> Result<&'static str> {
    Ok(match dtype {
        DType::F16 => "<f2",
        DType::F32 => "<f4",
        DType::F64 => "<f8",
        DType::I8 => "|i1",
        DType::I16 => "<i2",
        DType::I32 => "<i4",
        DType::I64 => "<i8",
        DType::U8 => "|u1",
        DType::Bool => "|b1",
        other => {
            return Err(Error::InvalidArgument(format!(
                ".npy cannot store dtype {other} (NumPy has no such type)"
            )));
        }
    })
}

/// The header `np.save` writes for a C-order array of `dtype` and `dims`
/// (version 1.0, or 2.0 when the header does not fit in 65535 bytes).
pub fn header_bytes(dtype: DType, dims: &[usize]) -> Result<Vec<u8>> {
    let shape = match dims {
        [] => "()".to_string(),
        [d] => format!("({d},)"),
        _ => {
            let parts: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
            format!("({})", parts.join(", "))
        }
    };
    let mut dict = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {shape}, }}",
        descr_of(dtype)?
    );
    // NumPy leaves room for the first axis to grow to 21 digits.
    if let Some(first) = dims.first() {
        dict.extend(std::iter::repeat_n(
            ' ',
            21usize.saturating_sub(first.to_string().len()),
        ));
    }
    let hlen = dict.len() + 1;
    let mut out = Vec::with_capacity(hlen + 80);
    let (len_size, version) = if hlen + (64 - (10 + hlen) % 64) <= 0xffff {
        (2usize, 1u8)
    } else {
        (4, 2)
    };
    let pad = 64 - (8 + len_size + hlen) % 64;
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[version, 0]);
    let total = hlen + pad;
    if len_size == 2 {
        let total = u16::try_from(total)
            .map_err(|_| Error::InvalidArgument("npy header too long".into()))?;
        out.extend_from_slice(&total.to_le_bytes());
    } else {
        let total = u32::try_from(total)
            .map_err(|_| Error::InvalidArgument("npy header too long".into()))?;
        out.extend_from_slice(&total.to_le_bytes());
    }
    out.extend_from_slice(dict.as_bytes());
    out.extend(std::iter::repeat_n(b' ', pad));
    out.push(b'\n');
    Ok(out)
}

/// Writes `t` as a `.npy` image (C order, little-endian) to `w`.
pub fn write<W: Write>(mut w: W, t: &Tensor) -> Result<()> {
    let io = |e: std::io::Error| Error::InvalidArgument(format!("write failed: {e}"));
    w.write_all(&header_bytes(t.dtype(), t.dims())?)
        .map_err(io)?;
    match t.contiguous_bytes() {
        Ok(bytes) => w.write_all(bytes).map_err(io),
        Err(_) => w.write_all(&t.to_bytes()).map_err(io),
    }
}

/// `t` as a `.npy` image.
pub fn to_bytes(t: &Tensor) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    write(&mut out, t)?;
    Ok(out)
}

/// Writes `t` to a `.npy` file at `path`.
pub fn save(path: impl AsRef<Path>, t: &Tensor) -> Result<()> {
    crate::formats::write_atomically(path.as_ref(), |w| write(w, t))
}

/// One array of an `.npz` archive, as listed by [`Npz::members`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NpzMember {
    /// The array's name (the member name without `.npy`).
    pub name: String,
    /// True when the member is deflated (`np.savez_compressed`).
    pub compressed: bool,
    /// Bytes of the member in the archive.
    pub compressed_size: usize,
    /// Bytes of the `.npy` image.
    pub size: usize,
}

/// A validated `.npz` archive.
#[derive(Clone, Debug)]
pub struct Npz {
    buffer: Buffer,
    entries: Vec<zip::Entry>,
    path: Option<std::path::PathBuf>,
}

fn member_error(e: Error, entry: &zip::Entry) -> Error {
    match e {
        Error::Format {
            format: FORMAT,
            file,
            field,
            what,
        } => Error::Format {
            format: "npz",
            file,
            field: entry.field(&field),
            what,
        },
        other => other,
    }
}

impl Npz {
    /// Maps and validates the archive at `path` (its directory; each member is
    /// validated when read).
    pub fn open(path: impl AsRef<Path>) -> Result<Npz> {
        let path = path.as_ref();
        let mut npz = Npz::from_buffer(Buffer::map_file(path)?).map_err(|e| e.in_file(path))?;
        npz.path = Some(path.to_path_buf());
        Ok(npz)
    }

    fn located(&self, e: Error) -> Error {
        match &self.path {
            Some(path) => e.in_file(path),
            None => e,
        }
    }

    /// Validates an archive image held in `buffer`.
    pub fn from_buffer(buffer: Buffer) -> Result<Npz> {
        let entries = zip::read_entries(buffer.as_bytes())?;
        Ok(Npz {
            buffer,
            entries,
            path: None,
        })
    }

    /// Validates a copy of the archive image `bytes`.
    pub fn from_bytes(bytes: &[u8]) -> Result<Npz> {
        Npz::from_buffer(Buffer::from_bytes(bytes))
    }

    /// The arrays, in archive order.
    pub fn members(&self) -> Vec<NpzMember> {
        self.entries
            .iter()
            .map(|e| NpzMember {
                name: e.name.strip_suffix(".npy").unwrap_or(&e.name).to_string(),
                compressed: e.method == zip::Method::Deflated,
                compressed_size: e.compressed_size,
                size: e.size,
            })
            .collect()
    }

    /// Array names, in archive order.
    pub fn names(&self) -> Vec<String> {
        self.members().into_iter().map(|m| m.name).collect()
    }

    /// Number of arrays.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when the archive holds no arrays.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn entry(&self, name: &str) -> Result<&zip::Entry> {
        self.entries
            .iter()
            .find(|e| e.name.strip_suffix(".npy") == Some(name))
            .or_else(|| self.entries.iter().find(|e| e.name == name))
            .ok_or_else(|| Error::NotFound {
                kind: "npz member",
                name: name.to_string(),
            })
    }

    /// The header of array `name` (inflating a compressed member to read it).
    pub fn header(&self, name: &str) -> Result<NpyHeader> {
        let entry = self.entry(name)?;
        let bytes =
            zip::member_bytes(self.buffer.as_bytes(), entry).map_err(|e| self.located(e))?;
        parse_header(&bytes).map_err(|e| self.located(member_error(e, entry)))
    }

    /// Array `name`: a zero-copy window of the archive for stored little-endian
    /// members (possibly unaligned: see [`Tensor::aligned`]), a heap tensor for
    /// compressed ones. The member's CRC-32 is checked first.
    pub fn get(&self, name: &str) -> Result<Tensor> {
        let entry = self.entry(name)?;
        let bytes =
            zip::member_bytes(self.buffer.as_bytes(), entry).map_err(|e| self.located(e))?;
        let result = match bytes {
            std::borrow::Cow::Borrowed(_) => {
                tensor_in(&self.buffer, entry.data_start, entry.compressed_size)
            }
            std::borrow::Cow::Owned(inflated) => {
                let buffer = Buffer::from_bytes(&inflated);
                tensor_in(&buffer, 0, buffer.len())
            }
        };
        result
            .map(|(_, t)| t)
            .map_err(|e| self.located(member_error(e, entry)))
    }
}

/// Writes named arrays as an `.npz` archive (stored members, `NAME.npy`) to `w`.
pub fn write_npz<N: AsRef<str>, W: Write>(w: W, arrays: &[(N, &Tensor)]) -> Result<()> {
    let mut members = Vec::with_capacity(arrays.len());
    for (name, t) in arrays {
        members.push((format!("{}.npy", name.as_ref()), to_bytes(t)?));
    }
    zip::write_stored(w, &members)
}

/// Writes named arrays to an `.npz` file at `path` (stored members).
pub fn save_npz<N: AsRef<str>>(path: impl AsRef<Path>, arrays: &[(N, &Tensor)]) -> Result<()> {
    crate::formats::write_atomically(path.as_ref(), |w| write_npz(w, arrays))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replace(bytes: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
        let at = bytes.windows(from.len()).position(|w| w == from).unwrap();
        let mut out = bytes.to_vec();
        out[at..at + from.len()].copy_from_slice(to);
        out
    }

    #[test]
    fn headers_match_numpy() {
        // np.save of np.zeros((2, 3), np.float32): header bytes as NumPy 2.x writes them.
        let h = header_bytes(DType::F32, &[2, 3]).unwrap();
        assert_eq!(h.len(), 128);
        let text = std::str::from_utf8(&h[10..]).unwrap();
        assert!(text.starts_with("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"));
        assert!(text.ends_with(" \n"));
        assert_eq!(u16::from_le_bytes([h[8], h[9]]) as usize, h.len() - 10);
        let h = header_bytes(DType::Bool, &[]).unwrap();
        assert_eq!(h.len() % 64, 0);
    }

    #[test]
    fn round_trips_every_dtype_and_fortran_order() {
        let t = Tensor::from_vec(vec![1i16, -2, 3, -4, 5, -6], &[2, 3]).unwrap();
        let back = from_bytes(&to_bytes(&t).unwrap()).unwrap();
        assert_eq!(back.to_vec::<i16>().unwrap(), t.to_vec::<i16>().unwrap());
        let tt = t.transpose(0, 1).unwrap();
        let back = from_bytes(&to_bytes(&tt).unwrap()).unwrap();
        assert_eq!(back.dims(), &[3, 2]);
        assert_eq!(back.to_vec::<i16>().unwrap(), vec![1, -4, -2, 5, 3, -6]);
        // A Fortran-order file of the same logical array.
        let mut f = replace(
            &header_bytes(DType::I16, &[2, 3]).unwrap(),
            b"False",
            b"True ",
        );
        for v in [1i16, -4, -2, 5, 3, -6] {
            f.extend_from_slice(&v.to_le_bytes());
        }
        let ft = from_bytes(&f).unwrap();
        assert_eq!(ft.dims(), &[2, 3]);
        assert!(!ft.is_contiguous());
        assert_eq!(ft.to_vec::<i16>().unwrap(), vec![1, -2, 3, -4, 5, -6]);
        let b = Tensor::from_bools(&[true, false, true], &[3]).unwrap();
        assert_eq!(
            from_bytes(&to_bytes(&b).unwrap())
                .unwrap()
                .to_f64_vec()
                .unwrap(),
            vec![1.0, 0.0, 1.0]
        );
    }

    #[test]
    fn big_endian_is_converted() {
        let mut f = replace(&header_bytes(DType::F32, &[2]).unwrap(), b"<f4", b">f4");
        f.extend_from_slice(&1.5f32.to_be_bytes());
        f.extend_from_slice(&(-2.0f32).to_be_bytes());
        assert_eq!(
            from_bytes(&f).unwrap().to_vec::<f32>().unwrap(),
            vec![1.5, -2.0]
        );
    }

    #[test]
    fn npz_round_trips_and_prefixes_fail() {
        let a = Tensor::from_vec(vec![1.0f64, 2.0], &[2]).unwrap();
        let b = Tensor::from_vec(vec![7u8; 6], &[2, 3]).unwrap();
        let mut out = Vec::new();
        write_npz(&mut out, &[("a", &a), ("b", &b)]).unwrap();
        let npz = Npz::from_bytes(&out).unwrap();
        assert_eq!(npz.names(), vec!["a", "b"]);
        assert_eq!(
            npz.get("a").unwrap().to_vec::<f64>().unwrap(),
            vec![1.0, 2.0]
        );
        assert_eq!(npz.get("b").unwrap().dims(), &[2, 3]);
        assert!(npz.get("c").is_err());
        let one = to_bytes(&a).unwrap();
        for cut in 0..one.len() {
            assert!(from_bytes(&one[..cut]).is_err(), "npy prefix {cut}");
        }
        for cut in 0..out.len() {
            assert!(Npz::from_bytes(&out[..cut]).is_err(), "npz prefix {cut}");
        }
    }

    #[test]
    fn header_errors_name_fields() {
        let cases: &[(&str, &str)] = &[
            (
                "{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }",
                "descr",
            ),
            (
                "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }",
                "header",
            ),
            (
                "{'descr': '<f4', 'fortran_order': 0, 'shape': (2,), }",
                "fortran_order",
            ),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }",
                "shape",
            ),
            ("{'descr': '<f4', 'fortran_order': False, }", "shape"),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}",
                "header",
            ),
        ];
        for (dict, field) in cases {
            let mut f = MAGIC.to_vec();
            f.extend_from_slice(&[1, 0]);
            f.extend_from_slice(&(dict.len() as u16).to_le_bytes());
            f.extend_from_slice(dict.as_bytes());
            f.extend_from_slice(&[0; 8]);
            let e = from_bytes(&f).unwrap_err();
            assert!(e.field().is_some_and(|f| f.contains(field)), "{dict}: {e}");
        }
    }
}
