//! Split GGUF sets (`name-00001-of-00003.gguf`, …) presented as one tensor map.
//!
//! llama.cpp's `gguf-split` and gguf-py's writer store `split.no` (0-based u16),
//! `split.count` (u16) and `split.tensors.count` (i32) in every part; the model's
//! metadata lives in the first part. Keys are read with the lenient integer getter,
//! so other integer widths are accepted too.

#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::error::{GgufError, Result};
use super::file::MappedFile;
use super::reader::{Gguf, ReadOptions, TensorRef};

/// Key: 0-based index of this part.
pub const KEY_SPLIT_NO: &str = "split.no";
/// Key: number of parts in the set.
pub const KEY_SPLIT_COUNT: &str = "split.count";
/// Key: number of tensors across all parts.
pub const KEY_SPLIT_TENSORS_COUNT: &str = "split.tensors.count";

/// Parses a split file name `PREFIX-NNNNN-of-MMMMM.gguf` into its prefix (with any
/// directory), 1-based part number and part count.
pub fn parse_split_name(path: &Path) -> Option<(PathBuf, u32, u32)> {
    let name = path.file_name()?.to_str()?;
    let stem = name.strip_suffix(".gguf")?;
    // "-NNNNN-of-MMMMM" is 15 bytes of ASCII.
    let split_at = stem.len().checked_sub(15)?;
    let (prefix, tail) = (stem.get(..split_at)?, stem.get(split_at..)?);
    let tail = tail.as_bytes();
    let digits = |s: &[u8]| -> Option<u32> {
        if s.len() == 5 && s.iter().all(u8::is_ascii_digit) {
            std::str::from_utf8(s).ok()?.parse().ok()
        } else {
            None
        }
    };
    if tail[0] != b'-' || &tail[6..10] != b"-of-" {
        return None;
    }
    let (no, count) = (digits(&tail[1..6])?, digits(&tail[10..15])?);
    if no == 0 || no > count || prefix.is_empty() {
        return None;
    }
    Some((path.with_file_name(prefix), no, count))
}

/// The path of part `no` (1-based) of `count` for `prefix` (as from
/// [`parse_split_name`]).
pub fn split_path(prefix: &Path, no: u32, count: u32) -> PathBuf {
    let name = prefix
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    prefix.with_file_name(format!("{name}-{no:05}-of-{count:05}.gguf"))
}

/// One model stored as one GGUF file or as a split set: metadata from the first
/// part, one map over every part's tensors.
#[derive(Debug)]
pub struct GgufSet<B: AsRef<[u8]> = MappedFile> {
    parts: Vec<Gguf<B>>,
    paths: Vec<PathBuf>,
    index: HashMap<String, (usize, usize)>,
    order: Vec<(usize, usize)>,
}

impl GgufSet<MappedFile> {
    /// Opens `path`: when its name follows the split pattern, every part of the set
    /// (whichever part was named); otherwise the single file.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(path, ReadOptions::default())
    }

    /// [`GgufSet::open`] with read options.
    pub fn open_with(path: impl AsRef<Path>, options: ReadOptions) -> Result<Self> {
        let path = path.as_ref();
        let paths: Vec<PathBuf> = match parse_split_name(path) {
            Some((prefix, _, count)) => (1..=count)
                .map(|no| split_path(&prefix, no, count))
                .collect(),
            None => vec![path.to_path_buf()],
        };
        let mut parts = Vec::with_capacity(paths.len());
        for p in &paths {
            parts.push((p.clone(), Gguf::open_with(p, options)?));
        }
        Self::from_parts(parts)
    }
}

impl<B: AsRef<[u8]>> GgufSet<B> {
    /// Joins parsed parts, in order, checking the split keys: every part's
    /// `split.count` equals the number of parts, part `i` has `split.no == i`, the
    /// first part's `split.tensors.count` (when present) equals the tensors found, and
    /// no tensor name repeats across parts. A single part without split keys is a
    /// plain file.
    pub fn from_parts(parts: Vec<(PathBuf, Gguf<B>)>) -> Result<Self> {
        let n = parts.len();
        if n == 0 {
            return Err(GgufError::BadSplit {
                reason: "no files".into(),
            });
        }
        let mut index = HashMap::new();
        let mut order = Vec::new();
        for (i, (path, g)) in parts.iter().enumerate() {
            let count: u64 = if g.contains_key(KEY_SPLIT_COUNT) {
                g.get_int(KEY_SPLIT_COUNT).map_err(|e| e.in_file(path))?
            } else if n == 1 {
                1
            } else {
                return Err(GgufError::MissingKey {
                    key: KEY_SPLIT_COUNT.into(),
                }
                .in_file(path));
            };
            if count != n as u64 {
                return Err(GgufError::BadSplit {
                    reason: format!(
                        "{} says split.count = {count}, but the set has {n} file(s)",
                        path.display()
                    ),
                });
            }
            if n > 1 || g.contains_key(KEY_SPLIT_NO) {
                let no: u64 = g.get_int(KEY_SPLIT_NO).map_err(|e| e.in_file(path))?;
                if no != i as u64 {
                    return Err(GgufError::BadSplit {
                        reason: format!(
                            "{} is file {} of the set but says split.no = {no}",
                            path.display(),
                            i + 1
                        ),
                    });
                }
            }
            for (j, info) in g.tensor_infos().iter().enumerate() {
                if index.insert(info.name().to_string(), (i, j)).is_some() {
                    return Err(GgufError::DuplicateTensor {
                        tensor: info.name().to_string(),
                    }
                    .in_file(path));
                }
                order.push((i, j));
            }
        }
        let (first_path, first) = &parts[0];
        if first.contains_key(KEY_SPLIT_TENSORS_COUNT) {
            let total: u64 = first
                .get_int(KEY_SPLIT_TENSORS_COUNT)
                .map_err(|e| e.in_file(first_path))?;
            if total != order.len() as u64 {
                return Err(GgufError::BadSplit {
                    reason: format!(
                        "split.tensors.count is {total}, but the files hold {} tensors",
                        order.len()
                    ),
                });
            }
        }
        let (paths, parts) = parts.into_iter().unzip();
        Ok(GgufSet {
            parts,
            paths,
            index,
            order,
        })
    }

    /// The first part, which holds the model's metadata.
    pub fn metadata(&self) -> &Gguf<B> {
        &self.parts[0]
    }

    /// The parts in order.
    pub fn parts(&self) -> &[Gguf<B>] {
        &self.parts
    }

    /// The parts' paths in order.
    pub fn paths(&self) -> &[PathBuf] {
        &self.paths
    }

    /// The number of tensors across all parts.
    pub fn tensor_count(&self) -> usize {
        self.order.len()
    }

    /// Tensor `name` with its data, from whichever part holds it.
    pub fn tensor(&self, name: &str) -> Option<TensorRef<'_>> {
        let &(p, t) = self.index.get(name)?;
        let g = &self.parts[p];
        let info = &g.tensor_infos()[t];
        Some(TensorRef {
            info,
            data: g.tensor_data(info),
        })
    }

    /// Tensor `name` or [`GgufError::MissingTensor`].
    pub fn require_tensor(&self, name: &str) -> Result<TensorRef<'_>> {
        self.tensor(name).ok_or_else(|| GgufError::MissingTensor {
            tensor: name.to_string(),
        })
    }

    /// Every tensor, part by part in file order.
    pub fn tensors(&self) -> impl Iterator<Item = TensorRef<'_>> + '_ {
        self.order.iter().map(move |&(p, t)| {
            let g = &self.parts[p];
            let info = &g.tensor_infos()[t];
            TensorRef {
                info,
                data: g.tensor_data(info),
            }
        })
    }
}
