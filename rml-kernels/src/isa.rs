//! Instruction-set dispatch: which kernel family (scalar, AVX2+FMA, AVX-512, NEON)
//! runs.
//!
//! The best ISA the CPU supports is detected once: at run time with the `std`
//! feature (`is_x86_feature_detected!`), at compile time from `cfg(target_feature)`
//! without it. [`force`] overrides the choice so tests and benchmarks can run each
//! path; the host maps its `RML_ISA` environment variable onto it. The scalar path is
//! always available.

use core::sync::atomic::{AtomicU8, Ordering};

use rml_core::{Error, Result};

/// A kernel family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isa {
    /// Portable Rust, no intrinsics.
    Scalar = 1,
    /// x86_64 AVX2 with FMA and F16C.
    Avx2 = 2,
    /// aarch64 Advanced SIMD (baseline on aarch64).
    Neon = 3,
    /// x86_64 AVX2 level plus AVX-512F and AVX-512VL: the f32 GEMM micro-kernel keeps
    /// its tile in zmm registers, the vector kernels run on zmm, and the f32 GEMV
    /// loops and the quantized small-M GEMM run the AVX2 code on 32 ymm registers;
    /// every other kernel is the AVX2 one.
    Avx512 = 4,
}

/// Every ISA, best last (of those a machine supports).
pub const ALL_ISAS: [Isa; 4] = [Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Neon];

impl Isa {
    /// Lower-case name, as accepted by [`Isa::parse`] and `RML_ISA`.
    pub const fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            Isa::Avx2 => "avx2",
            Isa::Neon => "neon",
            Isa::Avx512 => "avx512",
        }
    }

    /// Parses `scalar`, `avx2`, `avx512` or `neon`.
    pub fn parse(name: &str) -> Result<Isa> {
        ALL_ISAS
            .into_iter()
            .find(|isa| isa.name().eq_ignore_ascii_case(name))
            .ok_or(Error::InvalidArgument(
                "ISA must be one of scalar, avx2, avx512, neon",
            ))
    }

    /// True when this machine can run the ISA's kernels.
    pub fn is_supported(self) -> bool {
        match self {
            Isa::Scalar => true,
            Isa::Avx2 => avx2_supported(),
            Isa::Neon => cfg!(all(target_arch = "aarch64", target_feature = "neon")),
            Isa::Avx512 => avx2_supported() && avx512_supported(),
        }
    }

    /// True for the ISAs that run the AVX2 kernels (AVX2 itself, and AVX-512 for
    /// everything but its own GEMM micro-kernel and the 16-lane vector kernels).
    pub const fn has_avx2(self) -> bool {
        matches!(self, Isa::Avx2 | Isa::Avx512)
    }

    fn from_u8(v: u8) -> Option<Isa> {
        ALL_ISAS.into_iter().find(|isa| *isa as u8 == v)
    }
}

#[cfg(all(target_arch = "x86_64", feature = "std"))]
fn avx2_supported() -> bool {
    // Miri implements no F16C intrinsics (and `half` uses them when F16C is
    // enabled at compile time), so under Miri the AVX2 path runs without F16C and
    // its f16 conversions fall back to `half` (see `simd::avx2`).
    std::is_x86_feature_detected!("avx2")
        && std::is_x86_feature_detected!("fma")
        && (cfg!(miri) || std::is_x86_feature_detected!("f16c"))
}

#[cfg(not(all(target_arch = "x86_64", feature = "std")))]
fn avx2_supported() -> bool {
    cfg!(all(
        target_arch = "x86_64",
        target_feature = "avx2",
        target_feature = "fma",
        target_feature = "f16c"
    ))
}

#[cfg(all(target_arch = "x86_64", feature = "std"))]
fn avx512_supported() -> bool {
    std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512vl")
}

#[cfg(not(all(target_arch = "x86_64", feature = "std")))]
fn avx512_supported() -> bool {
    cfg!(all(
        target_arch = "x86_64",
        target_feature = "avx512f",
        target_feature = "avx512vl"
    ))
}

/// The CPU family of an AMD processor as `cpuid` reports it (0x17: Zen 2, 0x19: Zen 3
/// and Zen 4, 0x1A: Zen 5); `None` on other vendors, and under Miri, which runs no
/// `cpuid`. For tuning that differs between cores of one ISA (the GEMV prefetch
/// distance). Read once and cached: a virtual machine's `cpuid` traps to the
/// hypervisor.
#[cfg(target_arch = "x86_64")]
pub(crate) fn amd_family() -> Option<u32> {
    use core::sync::atomic::AtomicU32;
    /// `UNREAD` until the first call; then the family, or 0 for none.
    const UNREAD: u32 = u32::MAX;
    static FAMILY: AtomicU32 = AtomicU32::new(UNREAD);
    let family = match FAMILY.load(Ordering::Relaxed) {
        UNREAD => {
            let family = read_amd_family().unwrap_or(0);
            FAMILY.store(family, Ordering::Relaxed);
            family
        }
        family => family,
    };
    (family != 0).then_some(family)
}

/// [`amd_family`] read from `cpuid`, uncached.
#[cfg(target_arch = "x86_64")]
fn read_amd_family() -> Option<u32> {
    use core::arch::x86_64::__cpuid;
    if cfg!(miri) {
        return None;
    }
    let vendor = __cpuid(0);
    // "AuthenticAMD", four bytes in each register, little-endian.
    let is_amd = [vendor.ebx, vendor.edx, vendor.ecx] == [0x6874_7541, 0x6974_6e65, 0x444d_4163];
    if !is_amd {
        return None;
    }
    let eax = __cpuid(1).eax;
    let base = (eax >> 8) & 0xF;
    let extended = (eax >> 20) & 0xFF;
    Some(if base == 0xF { base + extended } else { base })
}

/// 0 = not chosen yet; otherwise an `Isa` discriminant.
static ACTIVE: AtomicU8 = AtomicU8::new(0);

/// The best ISA this machine supports.
pub fn detect() -> Isa {
    ALL_ISAS
        .into_iter()
        .rev()
        .find(|isa| isa.is_supported())
        .unwrap_or(Isa::Scalar)
}

/// The ISA kernels dispatch to: the forced one, else the detected one (cached).
/// Inlined into every kernel's dispatch: after the first call, one load.
#[inline]
pub fn active() -> Isa {
    match Isa::from_u8(ACTIVE.load(Ordering::Relaxed)) {
        Some(isa) => isa,
        None => detect_once(),
    }
}

/// [`active`]'s first call: detects the ISA and caches it.
#[cold]
#[inline(never)]
fn detect_once() -> Isa {
    let isa = detect();
    ACTIVE.store(isa as u8, Ordering::Relaxed);
    isa
}

/// Makes every kernel use `isa` from now on; an error if this machine cannot run it.
pub fn force(isa: Isa) -> Result<()> {
    if !isa.is_supported() {
        return Err(Error::InvalidArgument("ISA not supported on this CPU"));
    }
    ACTIVE.store(isa as u8, Ordering::Relaxed);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalar_is_always_supported_and_names_parse() {
        assert!(Isa::Scalar.is_supported());
        for isa in ALL_ISAS {
            assert_eq!(Isa::parse(isa.name()), Ok(isa));
        }
        assert!(Isa::parse("sse9").is_err());
        assert!(detect().is_supported());
    }

    /// The first `name : value` line of `/proc/cpuinfo`'s text, trimmed.
    #[cfg(all(target_os = "linux", target_arch = "x86_64", not(miri)))]
    fn cpuinfo_field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
        info.lines()
            .find(|line| line.split(':').next().map(str::trim) == Some(name))
            .and_then(|line| line.split(':').nth(1))
            .map(str::trim)
    }

    /// `amd_family` against the kernel's reading of the same `cpuid` leaves in
    /// `/proc/cpuinfo` (`vendor_id`, `cpu family`, decimal).
    #[cfg(all(target_os = "linux", target_arch = "x86_64", not(miri)))]
    #[test]
    fn amd_family_agrees_with_proc_cpuinfo() {
        let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") else {
            return;
        };
        let expected = match cpuinfo_field(&info, "vendor_id") {
            Some("AuthenticAMD") => {
                cpuinfo_field(&info, "cpu family").map(|f| f.parse::<u32>().unwrap())
            }
            _ => None,
        };
        assert_eq!(amd_family(), expected);
    }

    /// Which x86 ISAs count as supported, against the kernel's `flags` line: AVX2 needs
    /// `avx2`, `fma` and `f16c`; AVX-512 needs those and `avx512f` and `avx512vl` (the
    /// GEMV loops run on its 32 ymm registers).
    #[cfg(all(
        target_os = "linux",
        target_arch = "x86_64",
        feature = "std",
        not(miri)
    ))]
    #[test]
    fn x86_isas_agree_with_proc_cpuinfo_flags() {
        let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") else {
            return;
        };
        let flags: Vec<&str> = cpuinfo_field(&info, "flags")
            .unwrap_or_default()
            .split_whitespace()
            .collect();
        let has = |all: &[&str]| all.iter().all(|f| flags.contains(f));
        let avx2 = has(&["avx2", "fma", "f16c"]);
        assert_eq!(Isa::Avx2.is_supported(), avx2);
        assert_eq!(
            Isa::Avx512.is_supported(),
            avx2 && has(&["avx512f", "avx512vl"])
        );
    }

    /// Under qemu-aarch64 (`ci/test kernels_aarch64`) every ISA-looping test must
    /// reach the NEON kernels, not fall back to scalar only.
    #[cfg(target_arch = "aarch64")]
    #[test]
    fn neon_is_detected_on_aarch64() {
        assert!(Isa::Neon.is_supported());
        assert_eq!(detect(), Isa::Neon);
    }
}
