//! Element types: [`DType`] (what rml computes with) and [`GgmlType`] (every type id
//! a GGUF file can name, including those rml rejects).
//!
//! Scalar dtypes have a block size of 1; the GGML block-quantized dtypes pack
//! `block_size()` elements into `type_size()` bytes. Names parse from the spellings
//! that safetensors (`"BF16"`) and GGUF (`Q4_K`) use.

use crate::error::{Error, Result};

/// An element type rml can store and compute with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum DType {
    /// IEEE 754 binary64.
    F64,
    /// IEEE 754 binary32.
    F32,
    /// IEEE 754 binary16.
    F16,
    /// bfloat16: the top 16 bits of an f32.
    BF16,
    /// Signed 64-bit integer.
    I64,
    /// Signed 32-bit integer.
    I32,
    /// Signed 16-bit integer.
    I16,
    /// Signed 8-bit integer.
    I8,
    /// Unsigned 8-bit integer.
    U8,
    /// Boolean stored as one byte (0 or 1).
    Bool,
    /// GGML Q4_0: 32 weights, f16 scale, 4-bit quants.
    Q4_0,
    /// GGML Q4_1: 32 weights, f16 scale and min, 4-bit quants.
    Q4_1,
    /// GGML Q5_0: 32 weights, f16 scale, 5-bit quants.
    Q5_0,
    /// GGML Q5_1: 32 weights, f16 scale and min, 5-bit quants.
    Q5_1,
    /// GGML Q8_0: 32 weights, f16 scale, 8-bit quants.
    Q8_0,
    /// GGML Q8_1: 32 weights, f16 scale and scaled sum, 8-bit quants (activations).
    Q8_1,
    /// GGML Q2_K: 256-weight super-block, 2-bit quants.
    Q2K,
    /// GGML Q3_K: 256-weight super-block, 3-bit quants.
    Q3K,
    /// GGML Q4_K: 256-weight super-block, 4-bit quants.
    Q4K,
    /// GGML Q5_K: 256-weight super-block, 5-bit quants.
    Q5K,
    /// GGML Q6_K: 256-weight super-block, 6-bit quants.
    Q6K,
    /// GGML Q8_K: 256-weight super-block, f32 scale, 8-bit quants (activations).
    Q8K,
}

/// Every dtype, in declaration order (useful for tests and listings).
pub const ALL_DTYPES: [DType; 22] = [
    DType::F64,
    DType::F32,
    DType::F16,
    DType::BF16,
    DType::I64,
    DType::I32,
    DType::I16,
    DType::I8,
    DType::U8,
    DType::Bool,
    DType::Q4_0,
    DType::Q4_1,
    DType::Q5_0,
    DType::Q5_1,
    DType::Q8_0,
    DType::Q8_1,
    DType::Q2K,
    DType::Q3K,
    DType::Q4K,
    DType::Q5K,
    DType::Q6K,
    DType::Q8K,
];

/// safetensors dtype names that exist in the format but that rml does not support.
const UNSUPPORTED_SAFETENSORS_NAMES: [&str; 12] = [
    "F4",
    "F6_E2M3",
    "F6_E3M2",
    "F8_E5M2",
    "F8_E4M3",
    "F8_E8M0",
    "F8_E4M3FNUZ",
    "F8_E5M2FNUZ",
    "U16",
    "U32",
    "U64",
    "C64",
];

impl DType {
    /// The canonical name: safetensors spelling for scalars (`F32`, `BOOL`), GGML
    /// spelling for block types (`Q4_0`, `Q4_K`).
    pub const fn name(self) -> &'static str {
        match self {
            DType::F64 => "F64",
            DType::F32 => "F32",
            DType::F16 => "F16",
            DType::BF16 => "BF16",
            DType::I64 => "I64",
            DType::I32 => "I32",
            DType::I16 => "I16",
            DType::I8 => "I8",
            DType::U8 => "U8",
            DType::Bool => "BOOL",
            DType::Q4_0 => "Q4_0",
            DType::Q4_1 => "Q4_1",
            DType::Q5_0 => "Q5_0",
            DType::Q5_1 => "Q5_1",
            DType::Q8_0 => "Q8_0",
            DType::Q8_1 => "Q8_1",
            DType::Q2K => "Q2_K",
            DType::Q3K => "Q3_K",
            DType::Q4K => "Q4_K",
            DType::Q5K => "Q5_K",
            DType::Q6K => "Q6_K",
            DType::Q8K => "Q8_K",
        }
    }

    /// Elements per block: 1 for scalar types, 32 or 256 for GGML block types.
    pub const fn block_size(self) -> usize {
        match self {
            DType::Q4_0 | DType::Q4_1 | DType::Q5_0 | DType::Q5_1 | DType::Q8_0 | DType::Q8_1 => 32,
            DType::Q2K | DType::Q3K | DType::Q4K | DType::Q5K | DType::Q6K | DType::Q8K => 256,
            _ => 1,
        }
    }

    /// Bytes per block (for scalar types, bytes per element).
    pub const fn type_size(self) -> usize {
        match self {
            DType::F64 | DType::I64 => 8,
            DType::F32 | DType::I32 => 4,
            DType::F16 | DType::BF16 | DType::I16 => 2,
            DType::I8 | DType::U8 | DType::Bool => 1,
            DType::Q4_0 => 18,
            DType::Q4_1 => 20,
            DType::Q5_0 => 22,
            DType::Q5_1 => 24,
            DType::Q8_0 => 34,
            DType::Q8_1 => 36,
            DType::Q2K => 84,
            DType::Q3K => 110,
            DType::Q4K => 144,
            DType::Q5K => 176,
            DType::Q6K => 210,
            DType::Q8K => 292,
        }
    }

    /// True for the GGML block-quantized types.
    pub const fn is_quantized(self) -> bool {
        self.block_size() > 1
    }

    /// True for the floating-point scalar types.
    pub const fn is_float(self) -> bool {
        matches!(self, DType::F64 | DType::F32 | DType::F16 | DType::BF16)
    }

    /// True for the integer scalar types (not `Bool`).
    pub const fn is_int(self) -> bool {
        matches!(
            self,
            DType::I64 | DType::I32 | DType::I16 | DType::I8 | DType::U8
        )
    }

    /// Bytes needed to store `n_elements` of this dtype, or an error when `n_elements`
    /// is not a whole number of blocks or the size overflows.
    pub fn storage_bytes(self, n_elements: usize) -> Result<usize> {
        let block = self.block_size();
        if !n_elements.is_multiple_of(block) {
            return Err(Error::InvalidArgument(
                "element count is not a multiple of the block size",
            ));
        }
        (n_elements / block)
            .checked_mul(self.type_size())
            .ok_or(Error::Overflow)
    }

    /// Parses a safetensors dtype string (`"F32"`, `"BF16"`, `"BOOL"`, …). Names the
    /// format defines but rml does not support (the F8/F6/F4 family, unsigned wide
    /// integers, complex) fail with [`Error::UnsupportedDTypeName`].
    pub fn from_safetensors_name(name: &str) -> Result<DType> {
        let dtype = match name {
            "F64" => DType::F64,
            "F32" => DType::F32,
            "F16" => DType::F16,
            "BF16" => DType::BF16,
            "I64" => DType::I64,
            "I32" => DType::I32,
            "I16" => DType::I16,
            "I8" => DType::I8,
            "U8" => DType::U8,
            "BOOL" => DType::Bool,
            _ => {
                return Err(UNSUPPORTED_SAFETENSORS_NAMES
                    .iter()
                    .find(|known| **known == name)
                    .map_or(Error::UnknownDType, |known| {
                        Error::UnsupportedDTypeName(known)
                    }));
            }
        };
        Ok(dtype)
    }

    /// Parses any canonical name, case-insensitively (`f32`, `bf16`, `q4_k`, `bool`).
    pub fn parse(name: &str) -> Result<DType> {
        ALL_DTYPES
            .iter()
            .copied()
            .find(|d| d.name().eq_ignore_ascii_case(name))
            .ok_or(Error::UnknownDType)
    }

    /// The GGML type id that stores this dtype, if GGUF can hold it (`Bool` cannot).
    pub const fn ggml_type(self) -> Option<GgmlType> {
        Some(match self {
            DType::F64 => GgmlType::F64,
            DType::F32 => GgmlType::F32,
            DType::F16 => GgmlType::F16,
            DType::BF16 => GgmlType::BF16,
            DType::I64 => GgmlType::I64,
            DType::I32 => GgmlType::I32,
            DType::I16 => GgmlType::I16,
            DType::I8 => GgmlType::I8,
            DType::U8 | DType::Bool => return None,
            DType::Q4_0 => GgmlType::Q4_0,
            DType::Q4_1 => GgmlType::Q4_1,
            DType::Q5_0 => GgmlType::Q5_0,
            DType::Q5_1 => GgmlType::Q5_1,
            DType::Q8_0 => GgmlType::Q8_0,
            DType::Q8_1 => GgmlType::Q8_1,
            DType::Q2K => GgmlType::Q2K,
            DType::Q3K => GgmlType::Q3K,
            DType::Q4K => GgmlType::Q4K,
            DType::Q5K => GgmlType::Q5K,
            DType::Q6K => GgmlType::Q6K,
            DType::Q8K => GgmlType::Q8K,
        })
    }
}

impl core::fmt::Display for DType {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// Declares [`GgmlType`] from one table of `(variant, id, name, block, bytes)` rows so
/// the id, name and size of each type are written exactly once.
macro_rules! ggml_types {
    ($( $(#[$doc:meta])* $variant:ident = $id:literal, $name:literal, $block:literal, $bytes:literal; )*) => {
        /// Every tensor type id defined by ggml (`enum ggml_type`), including the ones
        /// rml cannot compute with and the ids ggml has since removed. Knowing them all
        /// lets a reader say *which* unsupported type a file uses instead of misreading it.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[cfg_attr(feature = "defmt", derive(defmt::Format))]
        #[allow(non_camel_case_types)]
        pub enum GgmlType {
            $( $(#[$doc])* $variant = $id, )*
        }

        impl GgmlType {
            /// Looks up a type id as stored in a GGUF tensor info.
            pub const fn from_id(id: u32) -> Result<GgmlType> {
                match id {
                    $( $id => Ok(GgmlType::$variant), )*
                    _ => Err(Error::UnknownGgmlType(id)),
                }
            }

            /// ggml's name for the type (`"Q4_K"`, `"IQ2_XXS"`).
            pub const fn name(self) -> &'static str {
                match self { $( GgmlType::$variant => $name, )* }
            }

            /// Elements per block; 0 for ids ggml has removed.
            pub const fn block_size(self) -> usize {
                match self { $( GgmlType::$variant => $block, )* }
            }

            /// Bytes per block; 0 for ids ggml has removed.
            pub const fn type_size(self) -> usize {
                match self { $( GgmlType::$variant => $bytes, )* }
            }
        }
    };
}

ggml_types! {
    /// f32.
    F32 = 0, "F32", 1, 4;
    /// f16.
    F16 = 1, "F16", 1, 2;
    /// Q4_0 blocks.
    Q4_0 = 2, "Q4_0", 32, 18;
    /// Q4_1 blocks.
    Q4_1 = 3, "Q4_1", 32, 20;
    /// Removed from ggml.
    Q4_2 = 4, "Q4_2", 0, 0;
    /// Removed from ggml.
    Q4_3 = 5, "Q4_3", 0, 0;
    /// Q5_0 blocks.
    Q5_0 = 6, "Q5_0", 32, 22;
    /// Q5_1 blocks.
    Q5_1 = 7, "Q5_1", 32, 24;
    /// Q8_0 blocks.
    Q8_0 = 8, "Q8_0", 32, 34;
    /// Q8_1 blocks.
    Q8_1 = 9, "Q8_1", 32, 36;
    /// Q2_K super-blocks.
    Q2K = 10, "Q2_K", 256, 84;
    /// Q3_K super-blocks.
    Q3K = 11, "Q3_K", 256, 110;
    /// Q4_K super-blocks.
    Q4K = 12, "Q4_K", 256, 144;
    /// Q5_K super-blocks.
    Q5K = 13, "Q5_K", 256, 176;
    /// Q6_K super-blocks.
    Q6K = 14, "Q6_K", 256, 210;
    /// Q8_K super-blocks.
    Q8K = 15, "Q8_K", 256, 292;
    /// Importance-matrix 2-bit.
    IQ2_XXS = 16, "IQ2_XXS", 256, 66;
    /// Importance-matrix 2-bit.
    IQ2_XS = 17, "IQ2_XS", 256, 74;
    /// Importance-matrix 3-bit.
    IQ3_XXS = 18, "IQ3_XXS", 256, 98;
    /// Importance-matrix 1-bit.
    IQ1_S = 19, "IQ1_S", 256, 50;
    /// Non-linear 4-bit.
    IQ4_NL = 20, "IQ4_NL", 32, 18;
    /// Importance-matrix 3-bit.
    IQ3_S = 21, "IQ3_S", 256, 110;
    /// Importance-matrix 2-bit.
    IQ2_S = 22, "IQ2_S", 256, 82;
    /// Non-linear 4-bit, super-blocks.
    IQ4_XS = 23, "IQ4_XS", 256, 136;
    /// i8.
    I8 = 24, "I8", 1, 1;
    /// i16.
    I16 = 25, "I16", 1, 2;
    /// i32.
    I32 = 26, "I32", 1, 4;
    /// i64.
    I64 = 27, "I64", 1, 8;
    /// f64.
    F64 = 28, "F64", 1, 8;
    /// Importance-matrix 1-bit.
    IQ1_M = 29, "IQ1_M", 256, 56;
    /// bf16.
    BF16 = 30, "BF16", 1, 2;
    /// Removed (runtime repacking only).
    Q4_0_4_4 = 31, "Q4_0_4_4", 0, 0;
    /// Removed (runtime repacking only).
    Q4_0_4_8 = 32, "Q4_0_4_8", 0, 0;
    /// Removed (runtime repacking only).
    Q4_0_8_8 = 33, "Q4_0_8_8", 0, 0;
    /// Ternary 1.69-bit.
    TQ1_0 = 34, "TQ1_0", 256, 54;
    /// Ternary 2-bit.
    TQ2_0 = 35, "TQ2_0", 256, 66;
    /// Removed (runtime repacking only).
    IQ4_NL_4_4 = 36, "IQ4_NL_4_4", 0, 0;
    /// Removed (runtime repacking only).
    IQ4_NL_4_8 = 37, "IQ4_NL_4_8", 0, 0;
    /// Removed (runtime repacking only).
    IQ4_NL_8_8 = 38, "IQ4_NL_8_8", 0, 0;
    /// Microscaling FP4.
    MXFP4 = 39, "MXFP4", 32, 17;
    /// NVIDIA FP4.
    NVFP4 = 40, "NVFP4", 64, 36;
    /// 1-bit.
    Q1_0 = 41, "Q1_0", 128, 18;
    /// 2-bit.
    Q2_0 = 42, "Q2_0", 64, 18;
}

impl GgmlType {
    /// The ggml type id.
    pub const fn id(self) -> u32 {
        self as u32
    }

    /// The rml dtype for this GGML type, or [`Error::UnsupportedQuantization`] naming
    /// it when rml cannot compute with it (IQ*, TQ*, MXFP4, NVFP4, removed ids, …).
    pub const fn to_dtype(self) -> Result<DType> {
        Ok(match self {
            GgmlType::F32 => DType::F32,
            GgmlType::F16 => DType::F16,
            GgmlType::BF16 => DType::BF16,
            GgmlType::F64 => DType::F64,
            GgmlType::I8 => DType::I8,
            GgmlType::I16 => DType::I16,
            GgmlType::I32 => DType::I32,
            GgmlType::I64 => DType::I64,
            GgmlType::Q4_0 => DType::Q4_0,
            GgmlType::Q4_1 => DType::Q4_1,
            GgmlType::Q5_0 => DType::Q5_0,
            GgmlType::Q5_1 => DType::Q5_1,
            GgmlType::Q8_0 => DType::Q8_0,
            GgmlType::Q8_1 => DType::Q8_1,
            GgmlType::Q2K => DType::Q2K,
            GgmlType::Q3K => DType::Q3K,
            GgmlType::Q4K => DType::Q4K,
            GgmlType::Q5K => DType::Q5K,
            GgmlType::Q6K => DType::Q6K,
            GgmlType::Q8K => DType::Q8K,
            other => return Err(Error::UnsupportedQuantization(other)),
        })
    }
}

/// Rust element types that have a [`DType`]; views are typed by these.
pub trait Element: bytemuck::Pod + PartialEq + core::fmt::Debug + 'static {
    /// The dtype this Rust type stores.
    const DTYPE: DType;
}

macro_rules! element {
    ($($t:ty => $d:ident),* $(,)?) => {
        $(impl Element for $t { const DTYPE: DType = DType::$d; })*
    };
}

element! {
    f64 => F64, f32 => F32, half::f16 => F16, half::bf16 => BF16,
    i64 => I64, i32 => I32, i16 => I16, i8 => I8, u8 => U8,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_dtype_round_trips_through_its_name() {
        for d in ALL_DTYPES {
            assert_eq!(DType::parse(d.name()), Ok(d));
            if let Some(g) = d.ggml_type() {
                assert_eq!(g.to_dtype(), Ok(d));
                assert_eq!(g.block_size(), d.block_size());
                assert_eq!(g.type_size(), d.type_size());
                assert_eq!(GgmlType::from_id(g.id()), Ok(g));
            }
        }
    }

    #[test]
    fn safetensors_names_parse_and_f8_is_rejected_by_name() {
        assert_eq!(DType::from_safetensors_name("BF16"), Ok(DType::BF16));
        assert_eq!(DType::from_safetensors_name("BOOL"), Ok(DType::Bool));
        assert_eq!(
            DType::from_safetensors_name("F8_E4M3"),
            Err(Error::UnsupportedDTypeName("F8_E4M3"))
        );
        assert_eq!(
            DType::from_safetensors_name("f32"),
            Err(Error::UnknownDType)
        );
        assert_eq!(
            DType::from_safetensors_name("Q4_0"),
            Err(Error::UnknownDType)
        );
    }

    #[test]
    fn unsupported_ggml_types_are_named() {
        let t = GgmlType::from_id(39).unwrap();
        assert_eq!(
            t.to_dtype(),
            Err(Error::UnsupportedQuantization(GgmlType::MXFP4))
        );
        let mut s = heapless::String::<64>::new();
        core::fmt::write(&mut s, format_args!("{}", t.to_dtype().unwrap_err())).unwrap();
        assert_eq!(s.as_str(), "unsupported quantization type MXFP4");
        assert_eq!(GgmlType::from_id(43), Err(Error::UnknownGgmlType(43)));
        assert_eq!(
            GgmlType::Q4_2.to_dtype(),
            Err(Error::UnsupportedQuantization(GgmlType::Q4_2))
        );
    }

    #[test]
    fn storage_bytes_counts_whole_blocks() {
        assert_eq!(DType::Q4_0.storage_bytes(64), Ok(36));
        assert_eq!(DType::F16.storage_bytes(3), Ok(6));
        assert!(DType::Q4K.storage_bytes(100).is_err());
        assert_eq!(DType::F64.storage_bytes(usize::MAX), Err(Error::Overflow));
    }
}
