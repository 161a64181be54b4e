//! Sets of member indices folded into strided ranges `start:stride:count`.
//!
//! Aggregations that group members (identical lines, identical statuses, failures) name the
//! members of each group with an [`IndexSet`]. Homogeneous groups of any size fold into a few
//! ranges (`0:1:1024` is every member of a 1,024-member group), so results travelling up the
//! tree stay small. The folding is a function of the set alone, so a set built in a tree and
//! the same set built flat are equal, range for range.

use std::collections::BTreeSet;
use std::fmt;

/// `count` indices `start, start + stride, ...`; a single index has stride 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Range {
    pub start: u32,
    pub stride: u32,
    pub count: u32,
}

impl Range {
    /// The indices of the range, in increasing order.
    pub fn iter(self) -> impl Iterator<Item = u32> {
        (0..self.count).map(move |i| self.start + i * self.stride)
    }

    /// The largest index in the range.
    pub fn last(self) -> u32 {
        self.start + (self.count - 1) * self.stride
    }
}

impl fmt::Display for Range {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.start, self.stride, self.count)
    }
}

/// A set of member indices, kept as canonical strided ranges in increasing order.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct IndexSet {
    ranges: Vec<Range>,
}

impl IndexSet {
    /// The empty set.
    pub fn new() -> IndexSet {
        IndexSet::default()
    }

    /// The set holding `index` alone.
    pub fn single(index: u32) -> IndexSet {
        IndexSet {
            ranges: vec![Range {
                start: index,
                stride: 1,
                count: 1,
            }],
        }
    }

    /// The set of the given indices (any order, duplicates allowed).
    pub fn from_indices(indices: impl IntoIterator<Item = u32>) -> IndexSet {
        let sorted: BTreeSet<u32> = indices.into_iter().collect();
        IndexSet {
            ranges: fold(&sorted.into_iter().collect::<Vec<_>>()),
        }
    }

    /// Builds a set from ranges as received from a peer, refolding them so that any valid
    /// description of a set gives the canonical one. `None` if a range is empty, has stride
    /// 0 with more than one index, overflows, or the ranges name more than
    /// [`crate::MAX_MEMBERS`] indices.
    pub fn from_ranges(ranges: &[Range]) -> Option<IndexSet> {
        let mut all = Vec::new();
        for r in ranges {
            if r.count == 0 || (r.stride == 0 && r.count > 1) {
                return None;
            }
            if all.len() + r.count as usize > crate::MAX_MEMBERS {
                return None;
            }
            r.start.checked_add((r.count - 1).checked_mul(r.stride)?)?;
            all.extend(r.iter());
        }
        Some(IndexSet::from_indices(all))
    }

    /// The canonical ranges.
    pub fn ranges(&self) -> &[Range] {
        &self.ranges
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// How many indices the set holds.
    pub fn len(&self) -> usize {
        self.ranges.iter().map(|r| r.count as usize).sum()
    }

    /// Every index, in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.ranges.iter().flat_map(|r| r.iter())
    }

    pub fn contains(&self, index: u32) -> bool {
        self.ranges.iter().any(|r| {
            index >= r.start
                && index <= r.last()
                && (r.count == 1 || (index - r.start) % r.stride == 0)
        })
    }

    /// The union of two sets.
    pub fn union(&self, other: &IndexSet) -> IndexSet {
        let mut union = self.clone();
        union.extend(other);
        union
    }

    /// Adds every index of `other` to this set, in time linear in the two sets' sizes — and
    /// in `other`'s alone when it lies wholly after this set, as when members' results are
    /// merged in member order (a flat group of 1,024 members then costs 1,024 small merges,
    /// not 1,024 refolds of a growing set).
    pub fn extend(&mut self, other: &IndexSet) {
        let (Some(last), Some(first)) = (self.ranges.last(), other.ranges.first()) else {
            if self.is_empty() {
                self.ranges = other.ranges.clone();
            }
            return;
        };
        if first.start > last.last() {
            // `fold` decides a range from its start and the next three indices (or the run
            // that follows), so every range that ends before this set's last four indices is
            // decided alike with `other` appended; only those last ranges are refolded.
            let mut kept = self.ranges.len();
            let mut reopened = 0;
            while kept > 0 && reopened < FOLD_LOOKAHEAD {
                kept -= 1;
                reopened += self.ranges[kept].count as usize;
            }
            let tail: Vec<u32> = self.ranges[kept..]
                .iter()
                .flat_map(|r| r.iter())
                .chain(other.iter())
                .collect();
            self.ranges.truncate(kept);
            self.ranges.extend(fold(&tail));
            return;
        }
        let mut merged = Vec::with_capacity(self.len() + other.len());
        let (mut a, mut b) = (self.iter().peekable(), other.iter().peekable());
        loop {
            let next = match (a.peek(), b.peek()) {
                (Some(&x), Some(&y)) if x < y => a.next(),
                (Some(&x), Some(&y)) if x > y => b.next(),
                (Some(_), Some(_)) => {
                    b.next();
                    a.next()
                }
                (Some(_), None) => a.next(),
                (None, _) => b.next(),
            };
            match next {
                Some(i) => merged.push(i),
                None => break,
            }
        }
        drop((a, b));
        self.ranges = fold(&merged);
    }
}

/// How many of a set's last indices an appending merge refolds (see [`IndexSet::extend`]).
const FOLD_LOOKAHEAD: usize = 4;

impl fmt::Display for IndexSet {
    /// Ranges separated by commas: `0:1:4,9:3:5`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

/// Folds sorted, distinct indices into ranges, left to right: a range takes the gap between
/// its first two indices as its stride and runs while the gap repeats. A two-index range
/// gives way when its second index starts a longer run (`0,5,6,7` folds to `0` and `5:1:3`,
/// not `0:5:2` and `6:1:2`).
fn fold(sorted: &[u32]) -> Vec<Range> {
    let mut ranges = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        if i + 1 == sorted.len() {
            ranges.push(Range {
                start,
                stride: 1,
                count: 1,
            });
            break;
        }
        let stride = sorted[i + 1] - start;
        let mut count = 2;
        while i + count < sorted.len() && sorted[i + count] - sorted[i + count - 1] == stride {
            count += 1;
        }
        let next_runs_longer = count == 2
            && i + 3 < sorted.len()
            && sorted[i + 2] - sorted[i + 1] == sorted[i + 3] - sorted[i + 2];
        if next_runs_longer {
            ranges.push(Range {
                start,
                stride: 1,
                count: 1,
            });
            i += 1;
            continue;
        }
        ranges.push(Range {
            start,
            stride,
            count: count as u32,
        });
        i += count;
    }
    ranges
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(v: &[u32]) -> IndexSet {
        IndexSet::from_indices(v.iter().copied())
    }

    #[test]
    fn homogeneous_groups_fold_into_one_range() {
        let all = IndexSet::from_indices(0..1024);
        assert_eq!(all.to_string(), "0:1:1024");
        assert_eq!(all.len(), 1024);
        let every_third = IndexSet::from_indices((1..=64).step_by(3));
        assert_eq!(every_third.to_string(), "1:3:22");
    }

    #[test]
    fn a_pair_gives_way_to_a_longer_run() {
        assert_eq!(set(&[0, 5, 6, 7]).to_string(), "0:1:1,5:1:3");
        assert_eq!(set(&[0, 5]).to_string(), "0:5:2");
        assert_eq!(set(&[4]).to_string(), "4:1:1");
    }

    #[test]
    fn union_is_the_set_union_whatever_the_order() {
        let a = set(&[0, 2, 4, 9]);
        let b = set(&[1, 3, 5, 9, 30]);
        let u = a.union(&b);
        assert_eq!(u, set(&[0, 1, 2, 3, 4, 5, 9, 30]));
        assert_eq!(u, b.union(&a));
        assert!(u.contains(30) && u.contains(4) && !u.contains(6));
    }

    #[test]
    fn sets_built_piecewise_equal_sets_built_at_once() {
        // Members split among children in any way merge back to the same ranges.
        let all: Vec<u32> = (0..500).filter(|i| i % 7 != 3).collect();
        let whole = set(&all);
        for parts in [2usize, 3, 7, 32] {
            let mut merged = IndexSet::new();
            for chunk in all.chunks(all.len().div_ceil(parts)) {
                merged.extend(&set(chunk));
            }
            assert_eq!(merged, whole, "{parts} parts");
        }
    }

    #[test]
    fn merges_in_any_order_equal_folding_at_once() {
        // A small linear congruential generator: reproducible sets of every shape.
        let mut seed = 0x2545_f491_u64;
        let mut next = |n: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        for round in 0..2000 {
            let len = next(40) as usize;
            let step = 1 + next(4) as u32;
            let mut indices = Vec::new();
            for i in 0..len as u32 {
                let jitter = next(2) as u32;
                if next(5) != 0 {
                    indices.push(i * step + jitter);
                }
            }
            let whole = IndexSet::from_indices(indices.iter().copied());
            // In order, in chunks of random sizes (the appending path).
            let mut in_order = IndexSet::new();
            let mut rest = &indices[..];
            while !rest.is_empty() {
                let take = 1 + next(rest.len() as u64) as usize;
                in_order.extend(&IndexSet::from_indices(rest[..take].iter().copied()));
                rest = &rest[take..];
            }
            assert_eq!(in_order, whole, "round {round}: {indices:?}");
            // Scattered: every index on its own, last to first.
            let mut scattered = IndexSet::new();
            for &i in indices.iter().rev() {
                scattered.extend(&IndexSet::single(i));
            }
            assert_eq!(scattered, whole, "round {round}: {indices:?}");
        }
    }

    #[test]
    fn ranges_from_peers_are_checked_and_refolded() {
        let r = |start, stride, count| Range {
            start,
            stride,
            count,
        };
        let s = IndexSet::from_ranges(&[r(0, 1, 2), r(2, 1, 2)]).unwrap();
        assert_eq!(s.to_string(), "0:1:4");
        assert!(IndexSet::from_ranges(&[r(0, 0, 2)]).is_none());
        assert!(IndexSet::from_ranges(&[r(0, 1, 0)]).is_none());
        assert!(IndexSet::from_ranges(&[r(u32::MAX, 2, 2)]).is_none());
    }
}
