//! Closed sequential pattern mining (seed 002 Alg. 1, "similar to
//! PrefixSpan"): grow frequent patterns one event at a time, projecting the
//! dataset onto the suffix after the first occurrence of the event just
//! added (Apriori: a super-sequence of an infrequent pattern is
//! infrequent), up to `max_len` events; then keep the closed ones, those
//! with no strict super-pattern of equal support (UpdateClosed).

use std::collections::HashMap;

/// A pattern and the number of sequences it is a subsequence of.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Pattern {
    pub items: Vec<u32>,
    pub support: usize,
}

/// `p ⊑ s`: `p` is a (gapped) subsequence of `s`.
pub fn is_subsequence<T: PartialEq>(p: &[T], s: &[T]) -> bool {
    let mut it = s.iter();
    p.iter().all(|x| it.any(|y| y == x))
}

/// Number of sequences of `db` that contain `p`.
pub fn support<T: PartialEq>(p: &[T], db: &[Vec<T>]) -> usize {
    db.iter().filter(|s| is_subsequence(p, s)).count()
}

/// Every pattern of at most `max_len` items contained in at least
/// `min_count` sequences of `db` (FS), in depth-first order.
pub fn frequent(db: &[Vec<u32>], min_count: usize, max_len: usize) -> Vec<Pattern> {
    let min_count = min_count.max(1);
    let mut out = Vec::new();
    let start: Vec<(usize, usize)> = (0..db.len()).map(|s| (s, 0)).collect();
    let mut prefix = Vec::new();
    grow(db, &start, min_count, max_len, &mut prefix, &mut out);
    out
}

/// MineRecursive: extend `prefix` by every event frequent in the
/// projected dataset `proj` (sequence, start of its suffix).
fn grow(
    db: &[Vec<u32>],
    proj: &[(usize, usize)],
    min_count: usize,
    max_len: usize,
    prefix: &mut Vec<u32>,
    out: &mut Vec<Pattern>,
) {
    if prefix.len() >= max_len {
        return;
    }
    // Support of each event in the projected suffixes, counted once per
    // sequence.
    let mut counts: HashMap<u32, (usize, usize)> = HashMap::new();
    for (n, &(s, start)) in proj.iter().enumerate() {
        for &e in &db[s][start..] {
            let c = counts.entry(e).or_insert((0, usize::MAX));
            if c.1 != n {
                c.0 += 1;
                c.1 = n;
            }
        }
    }
    let mut items: Vec<(u32, usize)> = counts
        .into_iter()
        .filter(|(_, (c, _))| *c >= min_count)
        .map(|(e, (c, _))| (e, c))
        .collect();
    items.sort_unstable();
    for (e, count) in items {
        let next: Vec<(usize, usize)> = proj
            .iter()
            .filter_map(|&(s, start)| {
                db[s][start..].iter().position(|&x| x == e).map(|p| (s, start + p + 1))
            })
            .collect();
        prefix.push(e);
        out.push(Pattern { items: prefix.clone(), support: count });
        grow(db, &next, min_count, max_len, prefix, out);
        prefix.pop();
    }
}

/// The closed patterns of a set of frequent patterns (CS ⊆ FS): those with
/// no strict super-pattern of equal support. Checking the super-patterns
/// one item longer is enough: support only drops as patterns grow, so a
/// longer one with equal support has a one-longer one with equal support
/// on the way. Sorted by support (highest first), then items.
pub fn closed(frequent: &[Pattern]) -> Vec<Pattern> {
    let support: HashMap<&[u32], usize> =
        frequent.iter().map(|p| (p.items.as_slice(), p.support)).collect();
    let mut covered: std::collections::HashSet<Vec<u32>> = std::collections::HashSet::new();
    for q in frequent.iter().filter(|q| q.items.len() >= 2) {
        for skip in 0..q.items.len() {
            let sub: Vec<u32> =
                q.items.iter().enumerate().filter(|(i, _)| *i != skip).map(|(_, &x)| x).collect();
            if support.get(sub.as_slice()) == Some(&q.support) {
                covered.insert(sub);
            }
        }
    }
    let mut out: Vec<Pattern> =
        frequent.iter().filter(|p| !covered.contains(&p.items)).cloned().collect();
    out.sort_by(|a, b| b.support.cmp(&a.support).then_with(|| a.items.cmp(&b.items)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sample of seed 002 §2.4 with R1=0, W1=1, R2=2, W2=3.
    fn sample() -> Vec<Vec<u32>> {
        vec![
            vec![0, 1, 2, 3, 0, 1],
            vec![0, 1, 0, 1, 2, 3],
            vec![0, 2, 1, 3, 0, 1],
            vec![2, 0, 3, 1, 0, 1],
        ]
    }

    #[test]
    fn the_paper_sample_has_15_frequent_and_3_closed_patterns_at_support_4() {
        let fs = frequent(&sample(), 4, 4);
        assert_eq!(fs.len(), 15);
        assert!(fs.contains(&Pattern { items: vec![2, 3], support: 4 })); // ⟨R2 W2⟩:4
        assert!(fs.contains(&Pattern { items: vec![0, 3], support: 4 })); // ⟨R1 W2⟩:4
        assert!(fs.iter().all(|p| p.support == 4));
        let cs = closed(&fs);
        assert_eq!(
            cs,
            vec![
                Pattern { items: vec![0, 1, 0, 1], support: 4 }, // ⟨R1 W1 R1 W1⟩
                Pattern { items: vec![0, 3], support: 4 },       // ⟨R1 W2⟩
                Pattern { items: vec![2, 3], support: 4 },       // ⟨R2 W2⟩
            ]
        );
    }

    #[test]
    fn supports_agree_with_a_direct_count_and_max_len_caps_growth() {
        let db = sample();
        for p in frequent(&db, 1, 3) {
            assert!(p.items.len() <= 3);
            assert_eq!(p.support, support(&p.items, &db), "{:?}", p.items);
        }
    }
}
