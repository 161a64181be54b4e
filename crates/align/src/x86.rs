//! The x86-64 instantiations of the striped kernel: SSE4.1 (16 lanes of 8 bits, 8 of 16)
//! and AVX2 (32 lanes of 8 bits, 16 of 16). Each entry point is compiled with its
//! instruction set enabled, and the generic kernel and the [`Lanes`] methods are inlined
//! into it, so the loop is straight vector code. Callers check the CPU first
//! ([`crate::Kernel::available`]).

use crate::matrix::Scoring;
use crate::striped::{scores_with, Lanes};
use std::arch::x86_64::*;

/// SSE4.1, 16 lanes of 8 bits.
#[derive(Clone, Copy)]
pub struct U8x16(__m128i);
/// SSE4.1, 8 lanes of 16 bits.
#[derive(Clone, Copy)]
pub struct U16x8(__m128i);
/// AVX2, 32 lanes of 8 bits.
#[derive(Clone, Copy)]
pub struct U8x32(__m256i);
/// AVX2, 16 lanes of 16 bits.
#[derive(Clone, Copy)]
pub struct U16x16(__m256i);

/// The lane-wise operations, which differ only in the intrinsics' names.
macro_rules! lanes {
    ($t:ident, $elem:ty, $lanes:expr, $set1:ident, $loadu:ident, $adds:ident, $subs:ident,
     $max:ident, $testz:ident) => {
        // SAFETY: every method uses only the instructions of its set (see `Lanes`).
        unsafe impl Lanes for $t {
            const LANES: usize = $lanes;
            const MAX: u16 = <$elem>::MAX as u16;
            #[inline(always)]
            unsafe fn splat(v: u16) -> Self {
                $t($set1(v.min(Self::MAX) as $elem as _))
            }
            #[inline(always)]
            unsafe fn from_slice(values: &[u16]) -> Self {
                let mut lanes = [0 as $elem; $lanes];
                for (lane, &v) in lanes.iter_mut().zip(values) {
                    *lane = v.min(Self::MAX) as $elem;
                }
                $t($loadu(lanes.as_ptr().cast()))
            }
            #[inline(always)]
            unsafe fn adds(self, other: Self) -> Self {
                $t($adds(self.0, other.0))
            }
            #[inline(always)]
            unsafe fn subs(self, other: Self) -> Self {
                $t($subs(self.0, other.0))
            }
            #[inline(always)]
            unsafe fn max(self, other: Self) -> Self {
                $t($max(self.0, other.0))
            }
            #[inline(always)]
            unsafe fn shift_in_zero(self) -> Self {
                $t(self.0.shift(std::mem::size_of::<$elem>()))
            }
            #[inline(always)]
            unsafe fn any_gt(self, other: Self) -> bool {
                let over = $subs(self.0, other.0);
                $testz(over, over) == 0
            }
            #[inline(always)]
            unsafe fn horizontal_max(self) -> u16 {
                max_u16(self.0.widen(std::mem::size_of::<$elem>()))
            }
        }
    };
}

lanes!(
    U8x16,
    u8,
    16,
    _mm_set1_epi8,
    _mm_loadu_si128,
    _mm_adds_epu8,
    _mm_subs_epu8,
    _mm_max_epu8,
    _mm_testz_si128
);
lanes!(
    U16x8,
    u16,
    8,
    _mm_set1_epi16,
    _mm_loadu_si128,
    _mm_adds_epu16,
    _mm_subs_epu16,
    _mm_max_epu16,
    _mm_testz_si128
);
lanes!(
    U8x32,
    u8,
    32,
    _mm256_set1_epi8,
    _mm256_loadu_si256,
    _mm256_adds_epu8,
    _mm256_subs_epu8,
    _mm256_max_epu8,
    _mm256_testz_si256
);
lanes!(
    U16x16,
    u16,
    16,
    _mm256_set1_epi16,
    _mm256_loadu_si256,
    _mm256_adds_epu16,
    _mm256_subs_epu16,
    _mm256_max_epu16,
    _mm256_testz_si256
);

/// Moves every lane of `bytes`-byte lanes up by one, shifting in zero.
trait ShiftUp: Sized {
    unsafe fn shift(self, bytes: usize) -> Self;
}

impl ShiftUp for __m128i {
    #[inline(always)]
    unsafe fn shift(self, bytes: usize) -> Self {
        if bytes == 1 {
            _mm_slli_si128::<1>(self)
        } else {
            _mm_slli_si128::<2>(self)
        }
    }
}

impl ShiftUp for __m256i {
    #[inline(always)]
    unsafe fn shift(self, bytes: usize) -> Self {
        // Byte shifts stay within each 128-bit half: bring the low half up first, so the
        // top lane of the low half crosses into the high half.
        let low_up = _mm256_permute2x128_si256::<0x08>(self, self);
        if bytes == 1 {
            _mm256_alignr_epi8::<15>(self, low_up)
        } else {
            _mm256_alignr_epi8::<14>(self, low_up)
        }
    }
}

/// Folds a vector of `bytes`-byte lanes into 8 lanes of 16 bits holding the same maximum.
trait WidenMax {
    unsafe fn widen(self, bytes: usize) -> __m128i;
}

impl WidenMax for __m128i {
    #[inline(always)]
    unsafe fn widen(self, bytes: usize) -> __m128i {
        if bytes == 1 {
            // Each 16-bit lane holds two bytes: the larger of its low and high byte.
            _mm_max_epu16(
                _mm_and_si128(self, _mm_set1_epi16(0xff)),
                _mm_srli_epi16::<8>(self),
            )
        } else {
            self
        }
    }
}

impl WidenMax for __m256i {
    #[inline(always)]
    unsafe fn widen(self, bytes: usize) -> __m128i {
        let halves = if bytes == 1 {
            _mm256_max_epu8(self, _mm256_permute2x128_si256::<0x01>(self, self))
        } else {
            _mm256_max_epu16(self, _mm256_permute2x128_si256::<0x01>(self, self))
        };
        _mm256_castsi256_si128(halves).widen(bytes)
    }
}

/// The largest of 8 lanes of 16 bits: minpos finds the smallest, so ask it for the
/// smallest of the complement.
#[inline(always)]
unsafe fn max_u16(v: __m128i) -> u16 {
    let inverted = _mm_xor_si128(v, _mm_set1_epi16(-1));
    !(_mm_cvtsi128_si32(_mm_minpos_epu16(inverted)) as u16)
}

/// Scores `query` against each target with SSE4.1; `None` where 16 bits may have saturated.
///
/// # Safety
/// The CPU must have SSE4.1.
#[target_feature(enable = "sse4.1")]
pub unsafe fn scores_sse41(query: &[u8], targets: &[&[u8]], scoring: &Scoring) -> Vec<Option<u16>> {
    scores_with::<U8x16, U16x8>(query, targets, scoring)
}

/// Scores `query` against each target with AVX2; `None` where 16 bits may have saturated.
///
/// # Safety
/// The CPU must have AVX2.
#[target_feature(enable = "avx2")]
pub unsafe fn scores_avx2(query: &[u8], targets: &[&[u8]], scoring: &Scoring) -> Vec<Option<u16>> {
    scores_with::<U8x32, U16x16>(query, targets, scoring)
}
