//! Macros and abstraction (seed 002 §3, Defs. 5–7). A macro is a run of
//! events of one thread that occurs as a substring of some trace; traces
//! become sequences of macros, and macros that share events fall into one
//! abstract event (α, the classes of R⁺), which keeps mining short without
//! losing any concrete pattern (Lemma 1). γ turns an abstract pattern back
//! into macro patterns, one macro per class.
//!
//! Derivation (§3.3): split every trace at its context switches, then
//! repeatedly take the shortest macro and split every macro containing it
//! as a substring, until nothing changes; finally drop the macro prefix and
//! suffix common to all traces (initialisation and finalisation).

use std::collections::{BTreeSet, HashMap};

/// The macro view of a set of traces.
#[derive(Clone, Debug, Default)]
pub struct Macros {
    /// Macro id → its events.
    pub macros: Vec<Vec<u32>>,
    /// Each trace as macro ids (after pruning, if asked for).
    pub traces: Vec<Vec<usize>>,
    /// Each trace: the event positions `[start, end)` of the original trace
    /// each of its macros covers.
    pub spans: Vec<Vec<(usize, usize)>>,
    /// Macro → abstract event (class).
    pub class_of: Vec<usize>,
    /// Class → its macros, in id order.
    pub classes: Vec<Vec<usize>>,
    /// Macros dropped from the front and the back of every trace.
    pub pruned: (usize, usize),
}

impl Macros {
    /// α of trace `t`: its macros as classes.
    pub fn abstract_trace(&self, t: usize) -> Vec<u32> {
        self.traces[t].iter().map(|&m| self.class_of[m] as u32).collect()
    }
}

/// Splits `m` at every (non-overlapping, leftmost) occurrence of `sub`.
fn split(m: &[u32], sub: &[u32]) -> Vec<Vec<u32>> {
    let mut pieces = Vec::new();
    let mut rest = 0;
    let mut i = 0;
    while i + sub.len() <= m.len() {
        if &m[i..i + sub.len()] == sub {
            if rest < i {
                pieces.push(m[rest..i].to_vec());
            }
            pieces.push(sub.to_vec());
            i += sub.len();
            rest = i;
        } else {
            i += 1;
        }
    }
    if rest < m.len() {
        pieces.push(m[rest..].to_vec());
    }
    pieces
}

fn contains(m: &[u32], sub: &[u32]) -> bool {
    sub.len() < m.len() && m.windows(sub.len()).any(|w| w == sub)
}

/// Derives macros for `traces` (sequences of event ids; `thread` gives an
/// event's thread) and builds the abstraction.
pub fn derive(traces: &[Vec<u32>], thread: impl Fn(u32) -> u32, prune: bool) -> Macros {
    // Maximal macros: the traces cut at context switches.
    let segments: Vec<Vec<Vec<u32>>> = traces
        .iter()
        .map(|t| {
            let mut segs: Vec<Vec<u32>> = Vec::new();
            for &e in t {
                match segs.last_mut() {
                    Some(s) if thread(s[0]) == thread(e) => s.push(e),
                    _ => segs.push(vec![e]),
                }
            }
            segs
        })
        .collect();
    let mut set: BTreeSet<Vec<u32>> = segments.iter().flatten().cloned().collect();
    let mut parts: HashMap<Vec<u32>, Vec<Vec<u32>>> = HashMap::new();
    loop {
        let mut order: Vec<Vec<u32>> = set.iter().cloned().collect();
        order.sort_by(|a, b| a.len().cmp(&b.len()).then_with(|| a.cmp(b)));
        let mut changed = false;
        for m in &order {
            if !set.contains(m) {
                continue;
            }
            let containing: Vec<Vec<u32>> =
                set.iter().filter(|big| contains(big, m)).cloned().collect();
            for big in containing {
                let pieces = split(&big, m);
                set.remove(&big);
                set.extend(pieces.iter().cloned());
                parts.insert(big, pieces);
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    let macros: Vec<Vec<u32>> = set.into_iter().collect();
    let id: HashMap<&[u32], usize> =
        macros.iter().enumerate().map(|(i, m)| (m.as_slice(), i)).collect();
    // A macro that was split is replaced by its pieces, recursively; one
    // that survived to the fixed point stays (even if it was split once and
    // came back as a piece of another).
    fn expand(
        m: &[u32],
        parts: &HashMap<Vec<u32>, Vec<Vec<u32>>>,
        id: &HashMap<&[u32], usize>,
        out: &mut Vec<Vec<u32>>,
    ) {
        match parts.get(m) {
            Some(ps) if !id.contains_key(m) => ps.iter().for_each(|p| expand(p, parts, id, out)),
            _ => out.push(m.to_vec()),
        }
    }
    let mut traces_m: Vec<Vec<usize>> = Vec::new();
    let mut spans: Vec<Vec<(usize, usize)>> = Vec::new();
    for segs in &segments {
        let mut flat = Vec::new();
        for s in segs {
            expand(s, &parts, &id, &mut flat);
        }
        let mut pos = 0;
        let mut t = Vec::new();
        let mut sp = Vec::new();
        for m in flat {
            t.push(id[m.as_slice()]);
            sp.push((pos, pos + m.len()));
            pos += m.len();
        }
        traces_m.push(t);
        spans.push(sp);
    }
    let pruned = if prune { prune_common(&mut traces_m, &mut spans) } else { (0, 0) };
    let (class_of, classes) = abstraction(&macros, &traces_m);
    Macros { macros, traces: traces_m, spans, class_of, classes, pruned }
}

/// Drops the longest macro prefix and suffix every trace shares.
fn prune_common(traces: &mut [Vec<usize>], spans: &mut [Vec<(usize, usize)>]) -> (usize, usize) {
    if traces.len() < 2 {
        return (0, 0);
    }
    let shortest = traces.iter().map(Vec::len).min().unwrap_or(0);
    let prefix = (0..shortest).take_while(|&i| traces.iter().all(|t| t[i] == traces[0][i])).count();
    let suffix = (0..shortest - prefix)
        .take_while(|&i| {
            let last = |t: &Vec<usize>| t[t.len() - 1 - i];
            traces.iter().all(|t| last(t) == last(&traces[0]))
        })
        .count();
    for (t, s) in traces.iter_mut().zip(spans.iter_mut()) {
        t.truncate(t.len() - suffix);
        t.drain(..prefix);
        s.truncate(s.len() - suffix);
        s.drain(..prefix);
    }
    (prefix, suffix)
}

/// α: the classes of R⁺ (macros sharing an event) over the macros that
/// occur in the traces. Unused macros get no class (`usize::MAX`).
fn abstraction(macros: &[Vec<u32>], traces: &[Vec<usize>]) -> (Vec<usize>, Vec<Vec<usize>>) {
    let used: BTreeSet<usize> = traces.iter().flatten().copied().collect();
    let mut parent: Vec<usize> = (0..macros.len()).collect();
    fn find(p: &mut [usize], mut x: usize) -> usize {
        while p[x] != x {
            p[x] = p[p[x]];
            x = p[x];
        }
        x
    }
    let mut holder: HashMap<u32, usize> = HashMap::new();
    for &m in &used {
        for &e in &macros[m] {
            if let Some(&other) = holder.get(&e) {
                let (a, b) = (find(&mut parent, m), find(&mut parent, other));
                parent[a.max(b)] = a.min(b);
            } else {
                holder.insert(e, m);
            }
        }
    }
    let mut class_of = vec![usize::MAX; macros.len()];
    let mut classes: Vec<Vec<usize>> = Vec::new();
    let mut class_of_root: HashMap<usize, usize> = HashMap::new();
    for &m in &used {
        let root = find(&mut parent, m);
        let c = *class_of_root.entry(root).or_insert_with(|| {
            classes.push(Vec::new());
            classes.len() - 1
        });
        class_of[m] = c;
        classes[c].push(m);
    }
    (class_of, classes)
}

/// γ: the macro patterns of an abstract pattern, at most `cap` of them
/// (the product of the class sizes can be large). The flag says whether
/// the cap cut the list short.
pub fn concretize(m: &Macros, pattern: &[u32], cap: usize) -> (Vec<Vec<usize>>, bool) {
    let mut out: Vec<Vec<usize>> = vec![Vec::new()];
    let mut capped = false;
    for &c in pattern {
        let mut next = Vec::new();
        'outer: for prefix in &out {
            for &macro_id in &m.classes[c as usize] {
                if next.len() >= cap {
                    capped = true;
                    break 'outer;
                }
                let mut p = prefix.clone();
                p.push(macro_id);
                next.push(p);
            }
        }
        out = next;
    }
    (out, capped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explain::mine::prefixspan::{closed, frequent, is_subsequence};

    /// The example of seed 002 §3.1/§3.3 (reconstructed in the spec): T1 =
    /// {e0,e1,e2,e3,e8,e9}, T2 = {e4..e7}.
    fn example() -> Macros {
        let traces = vec![vec![0, 2, 3, 4, 5, 6, 8, 9], vec![1, 2, 5, 6, 7, 3, 8, 9]];
        derive(&traces, |e| if (4..=7).contains(&e) { 2 } else { 1 }, false)
    }

    fn show(m: &Macros, ids: &[usize]) -> Vec<String> {
        ids.iter()
            .map(|&i| m.macros[i].iter().map(|e| format!("e{e}")).collect::<String>())
            .collect()
    }

    #[test]
    fn macro_traces_of_the_paper_example() {
        let m = example();
        assert_eq!(show(&m, &m.traces[0]), ["e0e2", "e3", "e4e5e6", "e8e9"]);
        assert_eq!(show(&m, &m.traces[1]), ["e1e2", "e5e6e7", "e3", "e8e9"]);
        assert_eq!(m.spans[1], vec![(0, 2), (2, 5), (5, 6), (6, 8)]);
    }

    #[test]
    fn classes_closed_patterns_and_concretisation_of_the_paper_example() {
        let m = example();
        let mut classes: Vec<Vec<String>> = m.classes.iter().map(|c| show(&m, c)).collect();
        classes.sort();
        assert_eq!(
            classes,
            vec![
                vec!["e0e2".to_owned(), "e1e2".to_owned()],
                vec!["e3".to_owned()],
                vec!["e4e5e6".to_owned(), "e5e6e7".to_owned()],
                vec!["e8e9".to_owned()],
            ]
        );
        // Name the classes A..D as the spec does.
        let name = |c: u32| {
            let first = show(&m, &m.classes[c as usize][..1])[0].clone();
            match first.as_str() {
                "e0e2" | "e1e2" => 'A',
                "e3" => 'B',
                "e8e9" => 'D',
                _ => 'C',
            }
        };
        let abs: Vec<String> =
            (0..2).map(|t| m.abstract_trace(t).into_iter().map(name).collect()).collect();
        assert_eq!(abs, ["ABCD", "ACBD"]);
        let db: Vec<Vec<u32>> = (0..2).map(|t| m.abstract_trace(t)).collect();
        let cs: Vec<String> = closed(&frequent(&db, 2, 4))
            .iter()
            .map(|p| p.items.iter().map(|&c| name(c)).collect())
            .collect();
        assert_eq!(cs, ["ABD", "ACD"]);
        let acd = closed(&frequent(&db, 2, 4))
            .into_iter()
            .find(|p| p.items.iter().map(|&c| name(c)).collect::<String>() == "ACD")
            .unwrap();
        let (all, capped) = concretize(&m, &acd.items, 100);
        assert!(!capped);
        assert_eq!(all.len(), 4);
        let kept: Vec<Vec<String>> = all
            .iter()
            .filter(|p| m.traces.iter().any(|t| is_subsequence(p, t)))
            .map(|p| show(&m, p))
            .collect();
        assert_eq!(kept, vec![vec!["e0e2", "e4e5e6", "e8e9"], vec!["e1e2", "e5e6e7", "e8e9"]]);
    }

    #[test]
    fn common_prefix_and_suffix_are_pruned() {
        let traces = vec![vec![1, 2, 5, 9], vec![1, 5, 2, 9]];
        let m = derive(&traces, |e| e, true);
        assert_eq!(m.pruned, (1, 1));
        assert_eq!(m.traces[0].len(), 2);
        assert_eq!(m.spans[0], vec![(1, 2), (2, 3)]);
    }
}
