//! Farrar's striped Smith-Waterman (Bioinformatics 23(2), 2007), written once over
//! [`Lanes`], a vector of unsigned 8- or 16-bit lanes, and instantiated for SSE4.1 and AVX2
//! by `crate::x86`. As in SSW and parasail, a target is scored with 8-bit lanes first (twice
//! the lanes, and enough for most pairs) and again with 16-bit lanes only if that saturated.
//!
//! The query is laid out in `segments` vectors: lane `k` of segment `i` holds query position
//! `k * segments + i`, so the cells one vector updates at once never depend on each other.
//! Scores are biased to stay unsigned (`score + bias`, then `- bias` with saturation), which
//! also floors H, E and F at zero for free, as local alignment wants. The F (vertical gap)
//! dependency that crosses lanes is settled afterwards by the "lazy F" loop, which usually
//! stops after a segment or two. A score that could have saturated its lanes is reported as
//! `None`, and the caller tries wider lanes, and at last the 32-bit reference.

use crate::matrix::{Scoring, LETTERS};

/// A vector of unsigned 8- or 16-bit lanes and the few operations the kernel needs. Values
/// are passed as `u16` and must fit the lanes. Every method is `unsafe`: the CPU must have
/// the instruction set, which the caller checks once.
///
/// # Safety
/// Implementations may use any instruction of their set; callers must have checked that the
/// CPU has it before calling any method.
#[allow(clippy::missing_safety_doc)]
pub unsafe trait Lanes: Copy {
    /// How many lanes.
    const LANES: usize;
    /// The largest value a lane holds.
    const MAX: u16;
    /// Every lane `v`.
    unsafe fn splat(v: u16) -> Self;
    /// Lanes from `values` (exactly `LANES` of them).
    unsafe fn from_slice(values: &[u16]) -> Self;
    /// Lane-wise saturating add.
    unsafe fn adds(self, other: Self) -> Self;
    /// Lane-wise saturating subtract (floors at 0).
    unsafe fn subs(self, other: Self) -> Self;
    /// Lane-wise maximum.
    unsafe fn max(self, other: Self) -> Self;
    /// Every lane moved up by one (lane k gets lane k-1), lane 0 becoming 0.
    unsafe fn shift_in_zero(self) -> Self;
    /// True if any lane of `self` is greater than the same lane of `other`.
    unsafe fn any_gt(self, other: Self) -> bool;
    /// The largest lane.
    unsafe fn horizontal_max(self) -> u16;
}

/// One query prepared for a kernel: its striped score profile and the working columns.
pub struct Striped<V: Lanes> {
    /// `profile[letter * segments + i]`: segment `i` of the biased scores against `letter`.
    profile: Vec<V>,
    segments: usize,
    bias: u16,
    open: u16,
    extend: u16,
    /// Scores at or above this may have saturated (0 when the lanes are too narrow even for
    /// the scores of the matrix).
    ceiling: u16,
    h_load: Vec<V>,
    h_store: Vec<V>,
    e: Vec<V>,
}

impl<V: Lanes> Striped<V> {
    /// Prepares `query` (encoded).
    ///
    /// # Safety
    /// The CPU must support the instruction set of `V`.
    #[inline(always)]
    pub unsafe fn new(query: &[u8], scoring: &Scoring) -> Striped<V> {
        let segments = query.len().div_ceil(V::LANES).max(1);
        let bias = scoring.bias();
        let mut profile = Vec::with_capacity(LETTERS * segments);
        let mut lanes = vec![0u16; V::LANES];
        for letter in 0..LETTERS as u8 {
            for i in 0..segments {
                for (k, lane) in lanes.iter_mut().enumerate() {
                    // Past the query's end: the lowest score, which can raise nothing.
                    *lane = query
                        .get(k * segments + i)
                        .map_or(0, |&q| (scoring.score(q, letter) + i32::from(bias)) as u16);
                }
                profile.push(V::from_slice(&lanes));
            }
        }
        let best_cell = scoring.matrix.iter().flatten().copied().max().unwrap_or(0);
        let zero = V::splat(0);
        Striped {
            profile,
            segments,
            bias,
            open: scoring.open,
            extend: scoring.extend,
            ceiling: V::MAX.saturating_sub(bias + best_cell.max(0) as u16),
            h_load: vec![zero; segments],
            h_store: vec![zero; segments],
            e: vec![zero; segments],
        }
    }

    /// The best local score of the query against `target` (encoded), or `None` if it may
    /// have saturated the lanes.
    ///
    /// # Safety
    /// The CPU must support the instruction set of `V`.
    #[inline(always)]
    pub unsafe fn score(&mut self, target: &[u8]) -> Option<u16> {
        let segments = self.segments;
        let zero = V::splat(0);
        let bias = V::splat(self.bias);
        let open = V::splat(self.open);
        let extend = V::splat(self.extend);
        self.h_store.fill(zero);
        self.e.fill(zero);
        let mut best = zero;
        for &t in target {
            let column = &self.profile[usize::from(t) * segments..][..segments];
            std::mem::swap(&mut self.h_load, &mut self.h_store);
            let (h_load, h_store, e) = (&self.h_load, &mut self.h_store, &mut self.e);
            // The diagonal of the first segment is the last segment of the previous column,
            // one lane down.
            let mut h = h_load[segments - 1].shift_in_zero();
            let mut f = zero;
            for i in 0..segments {
                h = h.adds(column[i]).subs(bias);
                let e_here = e[i];
                h = h.max(e_here).max(f);
                best = best.max(h);
                h_store[i] = h;
                let h_open = h.subs(open);
                e[i] = e_here.subs(extend).max(h_open);
                f = f.subs(extend).max(h_open);
                h = h_load[i];
            }
            // Lazy F: carry F across the lanes until it can no longer change anything.
            'lazy: for _ in 0..V::LANES {
                f = f.shift_in_zero();
                for slot in h_store.iter_mut() {
                    let before = *slot;
                    let h = before.max(f);
                    *slot = h;
                    best = best.max(h);
                    // E is not raised from the new H: a vertical gap followed by a
                    // horizontal one never beats the same two gaps the other way round,
                    // which the next column finds anyway (open >= extend).
                    f = f.subs(extend);
                    if !f.any_gt(before.subs(open)) {
                        break 'lazy;
                    }
                }
            }
        }
        let top = best.horizontal_max();
        (top < self.ceiling).then_some(top)
    }
}

/// Scores `query` against each of `targets` (all encoded) with narrow lanes `N`, and again
/// with wide lanes `W` where `N` saturated; `None` where `W` saturated too. Meant to be
/// inlined into an entry point compiled for the lanes' instruction set.
///
/// # Safety
/// The CPU must support the instruction sets of `N` and `W`.
#[inline(always)]
pub unsafe fn scores_with<N: Lanes, W: Lanes>(
    query: &[u8],
    targets: &[&[u8]],
    scoring: &Scoring,
) -> Vec<Option<u16>> {
    let mut narrow = Striped::<N>::new(query, scoring);
    let mut wide = Striped::<W>::new(query, scoring);
    let mut scores = Vec::with_capacity(targets.len());
    for target in targets {
        let score = match narrow.score(target) {
            Some(s) => Some(s),
            None => wide.score(target),
        };
        scores.push(score);
    }
    scores
}
