//! Aggregations as partial + merge + finish, so they run at every level of the tree.
//!
//! A leaf turns each member's result into a *partial*; every relay *merges* the partials of
//! its local members and of its children into one; the client *finishes* the last partial
//! into the group result. Merging is associative and commutative, so any tree shape gives
//! exactly the result a flat client gets.
//!
//! Status aggregations ([`StatusAggr`]) summarize the non-negative results of the members
//! that succeeded (errors are kept apart, see [`crate::message::Reply`], so a failed
//! member never corrupts a sum). Data aggregations ([`DataAggr`]) combine what members
//! return: concatenate (indexed by member), line equivalence classes, members grouped by
//! identical block signatures (`psync`), statistics of numeric fields (custom aggregations
//! described by a regular expression), or the classes of the members' last statuses (what
//! `gstatus` collects).

use crate::codec::{DecodeError, Decoder, Encoder};
use crate::fields::{FieldSpec, FieldStats};
use crate::lines::{self, LineClasses, LineSpec};
use crate::ranges::IndexSet;
use std::collections::BTreeMap;

/// A status aggregation: how the members' results summarize into one number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatusAggr {
    /// 0 (every member succeeded).
    Zero,
    /// The total (bytes read or written).
    Sum,
    /// The smallest result.
    Min,
    /// The largest result.
    Max,
    /// The mean, carried as total and count.
    Average,
    /// The common result, or none when members differ (offsets after lseek).
    Equal,
}

/// A status aggregation's partial result over some members.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatusPartial {
    Zero,
    Sum(i64),
    Min(Option<i64>),
    Max(Option<i64>),
    Average {
        total: i64,
        count: u64,
    },
    /// `None` before any member; `Some(Some(v))` while all equal `v`; `Some(None)` once two
    /// members differ.
    Equal(Option<Option<i64>>),
}

/// Two partials of different aggregations cannot merge (a peer bound another aggregation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mismatch;

impl StatusAggr {
    pub const ALL: [StatusAggr; 6] = [
        StatusAggr::Zero,
        StatusAggr::Sum,
        StatusAggr::Min,
        StatusAggr::Max,
        StatusAggr::Average,
        StatusAggr::Equal,
    ];

    pub fn name(self) -> &'static str {
        match self {
            StatusAggr::Zero => "zero",
            StatusAggr::Sum => "sum",
            StatusAggr::Min => "min",
            StatusAggr::Max => "max",
            StatusAggr::Average => "average",
            StatusAggr::Equal => "equal",
        }
    }

    pub fn parse(name: &str) -> Option<StatusAggr> {
        StatusAggr::ALL.into_iter().find(|a| a.name() == name)
    }

    /// The partial over no members.
    pub fn empty(self) -> StatusPartial {
        match self {
            StatusAggr::Zero => StatusPartial::Zero,
            StatusAggr::Sum => StatusPartial::Sum(0),
            StatusAggr::Min => StatusPartial::Min(None),
            StatusAggr::Max => StatusPartial::Max(None),
            StatusAggr::Average => StatusPartial::Average { total: 0, count: 0 },
            StatusAggr::Equal => StatusPartial::Equal(None),
        }
    }

    /// The partial of one member's successful result.
    pub fn leaf(self, value: i64) -> StatusPartial {
        match self {
            StatusAggr::Zero => StatusPartial::Zero,
            StatusAggr::Sum => StatusPartial::Sum(value),
            StatusAggr::Min => StatusPartial::Min(Some(value)),
            StatusAggr::Max => StatusPartial::Max(Some(value)),
            StatusAggr::Average => StatusPartial::Average {
                total: value,
                count: 1,
            },
            StatusAggr::Equal => StatusPartial::Equal(Some(Some(value))),
        }
    }
}

fn pick(a: Option<i64>, b: Option<i64>, f: fn(i64, i64) -> i64) -> Option<i64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(f(x, y)),
        (x, None) => x,
        (None, y) => y,
    }
}

impl StatusPartial {
    pub fn merge(self, other: StatusPartial) -> Result<StatusPartial, Mismatch> {
        use StatusPartial as S;
        Ok(match (self, other) {
            (S::Zero, S::Zero) => S::Zero,
            (S::Sum(a), S::Sum(b)) => S::Sum(a.saturating_add(b)),
            (S::Min(a), S::Min(b)) => S::Min(pick(a, b, i64::min)),
            (S::Max(a), S::Max(b)) => S::Max(pick(a, b, i64::max)),
            (
                S::Average {
                    total: t1,
                    count: c1,
                },
                S::Average {
                    total: t2,
                    count: c2,
                },
            ) => S::Average {
                total: t1.saturating_add(t2),
                count: c1 + c2,
            },
            (S::Equal(None), other @ S::Equal(_)) | (other @ S::Equal(_), S::Equal(None)) => other,
            (S::Equal(Some(a)), S::Equal(Some(b))) => S::Equal(Some(if a == b { a } else { None })),
            _ => return Err(Mismatch),
        })
    }

    pub fn aggregation(self) -> StatusAggr {
        match self {
            StatusPartial::Zero => StatusAggr::Zero,
            StatusPartial::Sum(_) => StatusAggr::Sum,
            StatusPartial::Min(_) => StatusAggr::Min,
            StatusPartial::Max(_) => StatusAggr::Max,
            StatusPartial::Average { .. } => StatusAggr::Average,
            StatusPartial::Equal(_) => StatusAggr::Equal,
        }
    }

    /// The group status: `None` when there is no value (min, max, equal or average over
    /// no member; equal over members that differ). The average rounds to the nearest
    /// integer; [`StatusPartial::mean`] gives it exactly.
    pub fn finish(self) -> Option<i64> {
        match self {
            StatusPartial::Zero => Some(0),
            StatusPartial::Sum(s) => Some(s),
            StatusPartial::Min(v) | StatusPartial::Max(v) => v,
            StatusPartial::Average { .. } => self.mean().map(|m| m.round() as i64),
            StatusPartial::Equal(v) => v.flatten(),
        }
    }

    /// The exact mean of an average (`None` for other aggregations or no members).
    pub fn mean(self) -> Option<f64> {
        match self {
            StatusPartial::Average { total, count } if count > 0 => {
                Some(total as f64 / count as f64)
            }
            _ => None,
        }
    }

    pub fn encode(self, e: &mut Encoder) {
        fn opt(e: &mut Encoder, v: Option<i64>) {
            match v {
                Some(v) => e.uint(1).int(v),
                None => e.uint(0),
            };
        }
        e.text(self.aggregation().name());
        match self {
            StatusPartial::Zero => {}
            StatusPartial::Sum(s) => {
                e.int(s);
            }
            StatusPartial::Min(v) | StatusPartial::Max(v) => {
                opt(e, v);
            }
            StatusPartial::Average { total, count } => {
                e.int(total).uint(count);
            }
            StatusPartial::Equal(None) => {
                e.uint(0);
            }
            StatusPartial::Equal(Some(v)) => {
                e.uint(1);
                opt(e, v);
            }
        }
    }

    pub fn decode(d: &mut Decoder<'_>) -> Result<StatusPartial, DecodeError> {
        fn opt(d: &mut Decoder<'_>) -> Result<Option<i64>, DecodeError> {
            match d.uint()? {
                0 => Ok(None),
                1 => Ok(Some(d.int()?)),
                _ => Err(DecodeError("bad option")),
            }
        }
        let aggr = StatusAggr::parse(&d.text()?).ok_or(DecodeError("unknown aggregation"))?;
        Ok(match aggr {
            StatusAggr::Zero => StatusPartial::Zero,
            StatusAggr::Sum => StatusPartial::Sum(d.int()?),
            StatusAggr::Min => StatusPartial::Min(opt(d)?),
            StatusAggr::Max => StatusPartial::Max(opt(d)?),
            StatusAggr::Average => StatusPartial::Average {
                total: d.int()?,
                count: d.uint()?,
            },
            StatusAggr::Equal => StatusPartial::Equal(match d.uint()? {
                0 => None,
                1 => Some(opt(d)?),
                _ => return Err(DecodeError("bad option")),
            }),
        })
    }
}

/// A data aggregation: how the members' output data combine.
#[derive(Clone, Debug, PartialEq)]
pub enum DataAggr {
    /// No data result (writes, closes).
    None,
    /// Each member's data, indexed by member.
    Concat,
    /// Line equivalence classes.
    Lines(LineSpec),
    /// Members grouped by identical content: rsync block signatures (`psync`).
    Blocks { block_size: u32 },
    /// Count, sum, min and max of numeric fields ([`crate::fields`]).
    Fields(FieldSpec),
    /// Process tables grouped by command, and by user if asked ([`crate::procs`]).
    Procs { by_user: bool },
}

/// A data aggregation's partial result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DataPartial {
    None,
    Concat(BTreeMap<u32, Vec<u8>>),
    Lines(LineClasses),
    /// Members grouped by their last status (non-negative result or negative Chirp code):
    /// what `gstatus` collects.
    Statuses(BTreeMap<i64, IndexSet>),
    /// Members grouped by the encoding of their block signature ([`crate::blocks`]).
    Signatures(BTreeMap<Vec<u8>, IndexSet>),
    /// Statistics per field.
    Fields(Vec<FieldStats>),
    /// Processes grouped by command (and user).
    Procs(crate::procs::ProcTable),
}

impl DataAggr {
    /// The partial over no members.
    pub fn empty(&self) -> DataPartial {
        match self {
            DataAggr::None => DataPartial::None,
            DataAggr::Concat => DataPartial::Concat(BTreeMap::new()),
            DataAggr::Lines(_) => DataPartial::Lines(LineClasses::new()),
            DataAggr::Blocks { .. } => DataPartial::Signatures(BTreeMap::new()),
            DataAggr::Procs { .. } => DataPartial::Procs(Default::default()),
            DataAggr::Fields(spec) => {
                DataPartial::Fields(vec![
                    FieldStats::default();
                    spec.pattern.captures_len().saturating_sub(1)
                ])
            }
        }
    }

    /// The partial of one member's data (for lines: data starting at line 1).
    pub fn leaf(&self, member: u32, data: &[u8]) -> DataPartial {
        self.leaf_at(member, data, 0)
    }

    /// The partial of one member's data, which follows `lines_before` lines of its file
    /// (only line numbers depend on it).
    pub fn leaf_at(&self, member: u32, data: &[u8], lines_before: u64) -> DataPartial {
        match self {
            DataAggr::None => DataPartial::None,
            DataAggr::Concat => DataPartial::Concat(BTreeMap::from([(member, data.to_vec())])),
            DataAggr::Lines(spec) => DataPartial::Lines(spec.classify(member, data, lines_before)),
            DataAggr::Blocks { block_size } => {
                let signature = crate::blocks::Signature::of(data, *block_size).encode();
                DataPartial::Signatures(BTreeMap::from([(signature, IndexSet::single(member))]))
            }
            DataAggr::Fields(spec) => {
                DataPartial::Fields(crate::fields::extract(&spec.pattern, data))
            }
            // Process tables come from scanning a directory (see the node), not from data.
            DataAggr::Procs { .. } => DataPartial::Procs(Default::default()),
        }
    }

    pub fn encode(&self, e: &mut Encoder) {
        match self {
            DataAggr::None => {
                e.text("none");
            }
            DataAggr::Concat => {
                e.text("concat");
            }
            DataAggr::Lines(spec) => {
                e.text("lines");
                spec.encode(e);
            }
            DataAggr::Blocks { block_size } => {
                e.text("blocks").uint((*block_size).into());
            }
            DataAggr::Fields(spec) => {
                e.text("fields");
                spec.encode(e);
            }
            DataAggr::Procs { by_user } => {
                e.text("procs").uint((*by_user).into());
            }
        }
    }

    pub fn decode(d: &mut Decoder<'_>) -> Result<DataAggr, DecodeError> {
        match d.text()?.as_str() {
            "none" => Ok(DataAggr::None),
            "concat" => Ok(DataAggr::Concat),
            "lines" => Ok(DataAggr::Lines(LineSpec::decode(d)?)),
            "fields" => Ok(DataAggr::Fields(FieldSpec::decode(d)?)),
            "procs" => match d.uint()? {
                0 => Ok(DataAggr::Procs { by_user: false }),
                1 => Ok(DataAggr::Procs { by_user: true }),
                _ => Err(DecodeError("bad flag")),
            },
            "blocks" => match d.u32()? {
                0 => Err(DecodeError("block size 0")),
                block_size => Ok(DataAggr::Blocks { block_size }),
            },
            _ => Err(DecodeError("unknown data aggregation")),
        }
    }
}

/// Groups `index` under `status`.
pub fn status_classes(entries: impl IntoIterator<Item = (u32, i64)>) -> DataPartial {
    let mut by_status: BTreeMap<i64, Vec<u32>> = BTreeMap::new();
    for (index, status) in entries {
        by_status.entry(status).or_default().push(index);
    }
    DataPartial::Statuses(
        by_status
            .into_iter()
            .map(|(s, v)| (s, IndexSet::from_indices(v)))
            .collect(),
    )
}

fn merge_sets<K: Ord>(into: &mut BTreeMap<K, IndexSet>, other: BTreeMap<K, IndexSet>) {
    for (key, members) in other {
        into.entry(key)
            .and_modify(|m| m.extend(&members))
            .or_insert(members);
    }
}

impl DataPartial {
    pub fn merge(self, other: DataPartial) -> Result<DataPartial, Mismatch> {
        use DataPartial as D;
        Ok(match (self, other) {
            (D::None, D::None) => D::None,
            (D::Concat(mut a), D::Concat(b)) => {
                a.extend(b);
                D::Concat(a)
            }
            (D::Lines(mut a), D::Lines(b)) => {
                lines::merge(&mut a, b);
                D::Lines(a)
            }
            (D::Statuses(mut a), D::Statuses(b)) => {
                merge_sets(&mut a, b);
                D::Statuses(a)
            }
            (D::Signatures(mut a), D::Signatures(b)) => {
                merge_sets(&mut a, b);
                D::Signatures(a)
            }
            (D::Fields(mut a), D::Fields(b)) => {
                crate::fields::merge(&mut a, &b);
                D::Fields(a)
            }
            (D::Procs(mut a), D::Procs(b)) => {
                crate::procs::merge(&mut a, b);
                D::Procs(a)
            }
            _ => return Err(Mismatch),
        })
    }

    pub fn encode(&self, e: &mut Encoder) {
        match self {
            DataPartial::None => {
                e.text("none");
            }
            DataPartial::Concat(map) => {
                e.text("concat").uint(map.len() as u64);
                for (member, data) in map {
                    e.uint((*member).into()).blob(data);
                }
            }
            DataPartial::Lines(classes) => {
                e.text("lines").uint(classes.len() as u64);
                for ((number, text), members) in classes {
                    e.uint(*number).blob(text).set(members);
                }
            }
            DataPartial::Statuses(classes) => {
                e.text("statuses").uint(classes.len() as u64);
                for (status, members) in classes {
                    e.int(*status).set(members);
                }
            }
            DataPartial::Signatures(classes) => {
                e.text("signatures").uint(classes.len() as u64);
                for (signature, members) in classes {
                    e.blob(signature).set(members);
                }
            }
            DataPartial::Fields(stats) => {
                e.text("fields");
                crate::fields::encode(e, stats);
            }
            DataPartial::Procs(table) => {
                e.text("procs");
                crate::procs::encode(e, table);
            }
        }
    }

    pub fn decode(d: &mut Decoder<'_>) -> Result<DataPartial, DecodeError> {
        Ok(match d.text()?.as_str() {
            "none" => DataPartial::None,
            "concat" => {
                let mut map = BTreeMap::new();
                for _ in 0..d.count()? {
                    map.insert(d.u32()?, d.blob()?.to_vec());
                }
                DataPartial::Concat(map)
            }
            "lines" => {
                let mut classes = LineClasses::new();
                for _ in 0..d.count()? {
                    let key = (d.uint()?, d.blob()?.to_vec());
                    classes.insert(key, d.set()?);
                }
                DataPartial::Lines(classes)
            }
            "statuses" => {
                let mut classes = BTreeMap::new();
                for _ in 0..d.count()? {
                    classes.insert(d.int()?, d.set()?);
                }
                DataPartial::Statuses(classes)
            }
            "fields" => DataPartial::Fields(crate::fields::decode(d)?),
            "procs" => DataPartial::Procs(crate::procs::decode(d)?),
            "signatures" => {
                let mut classes = BTreeMap::new();
                for _ in 0..d.count()? {
                    classes.insert(d.blob()?.to_vec(), d.set()?);
                }
                DataPartial::Signatures(classes)
            }
            _ => return Err(DecodeError("unknown data partial")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lines::Pattern;

    /// A small deterministic generator, so failures reproduce.
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self, below: u64) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (self.0 >> 33) % below
        }
    }

    fn status_fold(aggr: StatusAggr, values: &[(u32, i64)]) -> StatusPartial {
        values
            .iter()
            .fold(aggr.empty(), |p, &(_, v)| p.merge(aggr.leaf(v)).unwrap())
    }

    /// Merges `values` through a random tree: split into random chunks, fold each, merge the
    /// chunks' partials in random groupings.
    fn status_tree(aggr: StatusAggr, values: &[(u32, i64)], rng: &mut Lcg) -> StatusPartial {
        if values.len() <= 2 {
            return status_fold(aggr, values);
        }
        let fanout = 2 + rng.next(5) as usize;
        let chunk = values.len().div_ceil(fanout);
        values
            .chunks(chunk)
            .map(|c| status_tree(aggr, c, rng))
            .fold(aggr.empty(), |a, b| a.merge(b).unwrap())
    }

    #[test]
    fn status_merge_is_associative_and_commutative() {
        let mut rng = Lcg(7);
        for aggr in StatusAggr::ALL {
            for _ in 0..200 {
                let mut vals = || {
                    let v = rng.next(4) as i64;
                    aggr.leaf(v)
                        .merge(aggr.leaf(v + rng.next(2) as i64))
                        .unwrap()
                };
                let (a, b, c) = (vals(), vals(), vals());
                let left = a.merge(b).unwrap().merge(c).unwrap();
                let right = a.merge(b.merge(c).unwrap()).unwrap();
                assert_eq!(left, right, "{aggr:?}");
                assert_eq!(a.merge(b).unwrap(), b.merge(a).unwrap(), "{aggr:?}");
                assert_eq!(a.merge(aggr.empty()).unwrap(), a, "{aggr:?}");
            }
        }
    }

    #[test]
    fn tree_merged_statuses_equal_flat_ones() {
        let mut rng = Lcg(11);
        for aggr in StatusAggr::ALL {
            for n in [1usize, 2, 5, 33, 200] {
                let values: Vec<(u32, i64)> = (0..n as u32)
                    .map(|i| (i, rng.next(3) as i64 * 10))
                    .collect();
                let flat = status_fold(aggr, &values);
                assert_eq!(status_tree(aggr, &values, &mut rng), flat, "{aggr:?} {n}");
            }
        }
    }

    #[test]
    fn statuses_finish_as_the_paper_defines_them() {
        let fold = |aggr, vals: &[i64]| {
            let pairs: Vec<(u32, i64)> = vals.iter().map(|&v| (0, v)).collect();
            status_fold(aggr, &pairs)
        };
        assert_eq!(fold(StatusAggr::Sum, &[4, 4, 2]).finish(), Some(10));
        assert_eq!(fold(StatusAggr::Zero, &[4, 4, 2]).finish(), Some(0));
        assert_eq!(fold(StatusAggr::Min, &[4, 4, 2]).finish(), Some(2));
        assert_eq!(fold(StatusAggr::Max, &[4, 4, 2]).finish(), Some(4));
        assert_eq!(
            fold(StatusAggr::Average, &[4, 4, 2]).mean(),
            Some(10.0 / 3.0)
        );
        assert_eq!(fold(StatusAggr::Average, &[4, 4, 2]).finish(), Some(3));
        assert_eq!(fold(StatusAggr::Equal, &[4, 4]).finish(), Some(4));
        assert_eq!(fold(StatusAggr::Equal, &[4, 4, 2]).finish(), None);
        assert_eq!(fold(StatusAggr::Min, &[]).finish(), None);
        assert_eq!(fold(StatusAggr::Equal, &[]).finish(), None);
    }

    #[test]
    fn partials_of_different_aggregations_do_not_merge() {
        assert_eq!(
            StatusPartial::Sum(1).merge(StatusPartial::Zero),
            Err(Mismatch)
        );
        assert_eq!(
            DataPartial::None.merge(DataAggr::Concat.empty()),
            Err(Mismatch)
        );
    }

    fn data_inputs(rng: &mut Lcg, n: u32) -> Vec<(u32, Vec<u8>)> {
        let texts = ["alpha\nbeta\n", "alpha\ngamma\n", "beta\n", ""];
        (0..n)
            .map(|i| {
                (
                    i,
                    texts[rng.next(texts.len() as u64) as usize]
                        .as_bytes()
                        .to_vec(),
                )
            })
            .collect()
    }

    fn data_tree(aggr: &DataAggr, inputs: &[(u32, Vec<u8>)], rng: &mut Lcg) -> DataPartial {
        if inputs.len() <= 2 {
            return inputs
                .iter()
                .fold(aggr.empty(), |p, (m, d)| p.merge(aggr.leaf(*m, d)).unwrap());
        }
        let chunk = inputs.len().div_ceil(2 + rng.next(4) as usize);
        inputs
            .chunks(chunk)
            .map(|c| data_tree(aggr, c, rng))
            .fold(aggr.empty(), |a, b| a.merge(b).unwrap())
    }

    #[test]
    fn tree_merged_data_equals_flat_data_and_survives_encoding() {
        let mut rng = Lcg(3);
        let aggrs = [
            DataAggr::Concat,
            DataAggr::Lines(LineSpec {
                pattern: Pattern::All,
                numbers: true,
                strip_syslog: false,
                complete_lines: false,
            }),
            DataAggr::Lines(LineSpec {
                pattern: Pattern::Fixed("a".into()),
                numbers: false,
                strip_syslog: false,
                complete_lines: false,
            }),
            DataAggr::Blocks { block_size: 4 },
            DataAggr::Fields(FieldSpec::new(r"(?m)^([a-z]+)|(\d+)").unwrap()),
        ];
        for aggr in &aggrs {
            for n in [1u32, 3, 40, 300] {
                let inputs = data_inputs(&mut rng, n);
                let flat = inputs
                    .iter()
                    .fold(aggr.empty(), |p, (m, d)| p.merge(aggr.leaf(*m, d)).unwrap());
                let tree = data_tree(aggr, &inputs, &mut rng);
                assert_eq!(tree, flat, "{aggr:?} {n}");
                let mut e = Encoder::new();
                tree.encode(&mut e);
                let bytes = e.finish();
                let mut d = Decoder::new(&bytes);
                assert_eq!(DataPartial::decode(&mut d).unwrap(), flat);
                d.end().unwrap();
            }
        }
    }

    #[test]
    fn status_classes_merge_like_sets() {
        let a = status_classes([(0, 5), (2, 5), (1, -3)]);
        let b = status_classes([(4, 5), (3, -3)]);
        let DataPartial::Statuses(m) = a.merge(b).unwrap() else {
            panic!()
        };
        assert_eq!(m[&5].to_string(), "0:2:3");
        assert_eq!(m[&-3].to_string(), "1:2:2");
    }

    #[test]
    fn status_partials_survive_encoding() {
        let samples = [
            StatusPartial::Zero,
            StatusPartial::Sum(-1),
            StatusPartial::Min(None),
            StatusPartial::Max(Some(9)),
            StatusPartial::Average { total: 7, count: 3 },
            StatusPartial::Equal(None),
            StatusPartial::Equal(Some(None)),
            StatusPartial::Equal(Some(Some(4))),
        ];
        for p in samples {
            let mut e = Encoder::new();
            p.encode(&mut e);
            let bytes = e.finish();
            assert_eq!(StatusPartial::decode(&mut Decoder::new(&bytes)).unwrap(), p);
        }
    }
}
