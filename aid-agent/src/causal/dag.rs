//! The approximate causal DAG (AC-DAG, AID Sec. 4): one node per candidate
//! predicate plus the failure predicate F, and an edge P→Q when P's anchor
//! precedes Q's in every failing run where both hold. Temporal precedence is
//! necessary for causation, so the DAG over-approximates the true causal
//! graph; interventions then prune it (Sec. 5).
//!
//! The DAG is kept as its transitive closure ("P may cause Q, directly or
//! through others"), which is what the algorithms query; the transitive
//! reduction is only for display, as in Fig. 4(a).

use std::{
    collections::{BTreeSet, HashMap},
    fmt::Write as _,
};

use super::CausalError;
use crate::{bitset::BitSet, predicates::PredId};

/// Anchor times of the predicates that held in one run, as produced by
/// [`crate::predicates::Catalog::evaluate`] (`RunTruth::held`).
pub type RunAnchors<'a> = &'a [(PredId, u64)];

#[derive(Clone, Debug)]
/// Node indices are a topological order (F last); every map below is by
/// index.
pub struct AcDag {
    ids: Vec<PredId>,
    index: HashMap<PredId, usize>,
    f: usize,
    /// `reach[i]`: every node `i` precedes (strict descendants).
    reach: Vec<BitSet>,
    /// `back[i]`: every node that precedes `i` (strict ancestors).
    back: Vec<BitSet>,
    /// Longest edge count from a source of the reduction to the node; sorting
    /// by it gives a topological order.
    depth: Vec<usize>,
    /// `tied[i]`: nodes anchored at exactly the same time as `i` in every
    /// failing run where both held (two facets of one instant: the overlap
    /// that begins at a call's entry and "that call starts before ...").
    /// Unordered with `i`, but not independent of it: an intervention at
    /// that instant changes both (the engine's confounding guard).
    tied: Vec<BitSet>,
    /// Nodes that hold in every failing run but also in some passing runs
    /// (necessary, not sufficient: docs/causal.md, "Necessary
    /// candidates"). Holding without the failure is normal for them, so
    /// it neither prunes them nor witnesses that the failure was under way.
    necessary: BitSet,
    /// Nodes that hold in no passing run but not in every failing run
    /// (sufficient, not necessary: docs/causal.md, "Sufficient
    /// candidates"). A failing run without one failed another way, so
    /// its absence from a failing run is no evidence against it.
    sufficient: BitSet,
    /// `says[i]`: how much node `i` says about how the failure comes
    /// about ([`crate::predicates::Kind::says`], lowest first): among
    /// unordered nodes of equal depth, the order rounds try them in
    /// ([`AcDag::says`]).
    says: Vec<u8>,
    /// `implied[i]`: nodes the intervention of `i` makes impossible (two
    /// calls it keeps apart said to run at the same time,
    /// [`AcDag::with_implied`]): like tied nodes, they change with it
    /// whatever the cause.
    implied: Vec<BitSet>,
}

impl AcDag {
    /// Builds the AC-DAG from the anchors of `candidates` in the failing
    /// runs. An edge P→Q needs P's anchor strictly before Q's in every run
    /// where both hold, and at least one such run. F is added as a sink: it
    /// is observed when the run ends, after every predicate.
    ///
    /// Acyclic by construction: an edge is also required to agree with a
    /// reference order (mean anchor, then id). For fully-discriminative
    /// candidates every pair co-occurs in every failing run, precedence in
    /// all runs implies a smaller mean, and that extra condition removes
    /// nothing; it only matters for candidate sets that hold in different
    /// runs, where "before in every co-occurring run" alone could form a
    /// cycle through three runs.
    pub fn build<'a>(
        candidates: &[PredId],
        f: PredId,
        runs: impl IntoIterator<Item = RunAnchors<'a>>,
    ) -> Result<AcDag, CausalError> {
        let mut ids: Vec<PredId> = candidates.iter().copied().filter(|&p| p != f).collect();
        ids.sort_unstable();
        ids.dedup();
        let n = ids.len();
        let index: HashMap<PredId, usize> = ids.iter().enumerate().map(|(i, &p)| (p, i)).collect();
        // before[i]: nodes j with anchor_i < anchor_j in every run seen so
        // far where both held; together[i]: nodes seen in a run with i.
        let mut before: Vec<BitSet> = vec![BitSet::full(n); n];
        let mut together: Vec<BitSet> = vec![BitSet::new(n); n];
        // same[i]: nodes with exactly i's anchor in every run where both held.
        let mut same: Vec<BitSet> = vec![BitSet::full(n); n];
        let mut tie = BitSet::new(n);
        let mut sum = vec![0f64; n];
        let mut seen = vec![0u32; n];
        let mut nruns = 0usize;
        let mut present = BitSet::new(n);
        let mut later = BitSet::new(n);
        let mut order: Vec<(u64, usize)> = Vec::with_capacity(n);
        for run in runs {
            nruns += 1;
            order.clear();
            present.clear();
            for &(p, t) in run {
                if let Some(&i) = index.get(&p)
                    && present.insert(i)
                {
                    order.push((t, i));
                    sum[i] += t as f64;
                    seen[i] += 1;
                }
            }
            order.sort_unstable();
            // Walk from the latest anchor back, keeping `later` = nodes with
            // a strictly larger anchor than the current group of ties.
            later.clear();
            let absent = complement(&present);
            let mut k = order.len();
            while k > 0 {
                let t = order[k - 1].0;
                let mut start = k;
                while start > 0 && order[start - 1].0 == t {
                    start -= 1;
                }
                // Absent nodes are no evidence either way; present ones must
                // come strictly later than this group of ties.
                let mut allowed = later.clone();
                allowed.union_with(&absent);
                tie.clear();
                for &(_, i) in &order[start..k] {
                    tie.insert(i);
                }
                tie.union_with(&absent);
                for &(_, i) in &order[start..k] {
                    before[i].intersect_with(&allowed);
                    together[i].union_with(&present);
                    same[i].intersect_with(&tie);
                }
                for &(_, i) in &order[start..k] {
                    later.insert(i);
                }
                k = start;
            }
        }
        if nruns == 0 && n > 0 {
            return Err(CausalError::NoFailingRuns);
        }
        let mean: Vec<f64> = (0..n)
            .map(|i| if seen[i] == 0 { f64::MAX } else { sum[i] / f64::from(seen[i]) })
            .collect();
        // Number the nodes in reference order; kept edges then always go
        // from a smaller to a larger index, which is a topological order.
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&a, &b| mean[a].total_cmp(&mean[b]).then(ids[a].cmp(&ids[b])));
        let mut rank = vec![0usize; n];
        for (k, &i) in order.iter().enumerate() {
            rank[i] = k;
        }
        let mut rows = vec![BitSet::new(n + 1); n + 1];
        for i in 0..n {
            let mut e = std::mem::take(&mut before[i]);
            e.intersect_with(&together[i]);
            let row = &mut rows[rank[i]];
            for j in e.iter() {
                if rank[j] > rank[i] {
                    row.insert(rank[j]);
                }
            }
        }
        let ids: Vec<PredId> = order.iter().map(|&i| ids[i]).collect();
        let mut dag = Self::from_rows(ids, f, rows);
        for i in 0..n {
            let mut s = std::mem::take(&mut same[i]);
            s.intersect_with(&together[i]);
            s.remove(i);
            for j in s.iter() {
                dag.tied[rank[i]].insert(rank[j]);
            }
        }
        Ok(dag)
    }

    /// Builds the DAG from explicit edges among `nodes` (tests, the synthetic
    /// study, the paper's example). Every predicate also precedes F. The
    /// transitive closure is taken; a cycle is an error.
    pub fn from_edges(
        nodes: &[PredId],
        f: PredId,
        edges: &[(PredId, PredId)],
    ) -> Result<AcDag, CausalError> {
        let mut ids: Vec<PredId> = nodes.iter().copied().filter(|&p| p != f).collect();
        ids.sort_unstable();
        ids.dedup();
        let n = ids.len();
        let index: HashMap<PredId, usize> = ids.iter().enumerate().map(|(i, &p)| (p, i)).collect();
        let mut succ: Vec<Vec<usize>> = vec![Vec::new(); n];
        let mut indeg = vec![0usize; n];
        for &(a, b) in edges {
            if b == f {
                continue;
            }
            let ia = *index.get(&a).ok_or(CausalError::UnknownPredicate(a))?;
            let ib = *index.get(&b).ok_or(CausalError::UnknownPredicate(b))?;
            if ia == ib {
                return Err(CausalError::Cycle(a));
            }
            succ[ia].push(ib);
            indeg[ib] += 1;
        }
        // Kahn's algorithm (smallest id first among the ready) gives a
        // topological order or finds a cycle.
        let mut ready: BTreeSet<usize> = (0..n).filter(|&i| indeg[i] == 0).collect();
        let mut topo = Vec::with_capacity(n);
        while let Some(i) = ready.pop_first() {
            topo.push(i);
            for &j in &succ[i] {
                indeg[j] -= 1;
                if indeg[j] == 0 {
                    ready.insert(j);
                }
            }
        }
        if topo.len() != n {
            let stuck = (0..n).find(|&i| indeg[i] > 0).unwrap_or(0);
            return Err(CausalError::Cycle(ids[stuck]));
        }
        let mut rank = vec![0usize; n];
        for (k, &i) in topo.iter().enumerate() {
            rank[i] = k;
        }
        let mut rows = vec![BitSet::new(n + 1); n + 1];
        for (i, s) in succ.iter().enumerate() {
            for &j in s {
                rows[rank[i]].insert(rank[j]);
            }
        }
        let ids: Vec<PredId> = topo.iter().map(|&i| ids[i]).collect();
        Ok(Self::from_rows(ids, f, rows))
    }

    /// `ids` in a topological order; `rows[i]` holds only indices > i (F,
    /// index n, is added to every row).
    fn from_rows(mut ids: Vec<PredId>, f: PredId, mut rows: Vec<BitSet>) -> AcDag {
        let n = ids.len();
        let fi = n;
        ids.push(f);
        let total = n + 1;
        for row in rows.iter_mut().take(n) {
            row.insert(fi);
        }
        // Closure from the last node back. Successors come in index (so
        // topological) order; one already reached has its closure inside
        // the union already, so only the Hasse successors cost a union.
        let mut reach: Vec<BitSet> = vec![BitSet::new(total); total];
        for i in (0..total).rev() {
            let mut r = BitSet::new(total);
            for j in rows[i].iter() {
                if r.insert(j) {
                    r.union_with(&reach[j]);
                }
            }
            reach[i] = r;
        }
        drop(rows);
        let mut back = vec![BitSet::new(total); total];
        for (i, r) in reach.iter().enumerate() {
            for j in r.iter() {
                back[j].insert(i);
            }
        }
        // Depth in the reduction = longest chain of strict ancestors.
        let mut depth = vec![0usize; total];
        for i in 0..total {
            depth[i] = back[i].iter().map(|a| depth[a] + 1).max().unwrap_or(0);
        }
        let index = ids.iter().enumerate().map(|(i, &p)| (p, i)).collect();
        let tied = vec![BitSet::new(total); total];
        let necessary = BitSet::new(total);
        let sufficient = BitSet::new(total);
        let says = vec![crate::predicates::Kind::Order.says(); total];
        let implied = vec![BitSet::new(total); total];
        AcDag { ids, index, f: fi, reach, back, depth, tied, necessary, sufficient, says, implied }
    }

    /// Marks these candidates necessary-only (see [`AcDag::necessary`]);
    /// ids that are not nodes are ignored.
    pub fn with_necessary(mut self, ids: &[PredId]) -> AcDag {
        for i in self.nodes_of(ids.iter().copied()) {
            self.necessary.insert(i);
        }
        self
    }

    /// Marks these candidates sufficient-only (see
    /// [`AcDag::sufficient`]); ids that are not nodes are ignored.
    pub fn with_sufficient(mut self, ids: &[PredId]) -> AcDag {
        for i in self.nodes_of(ids.iter().copied()) {
            self.sufficient.insert(i);
        }
        self
    }

    /// Marks these candidates as naming a mechanism (rank 0 of
    /// [`AcDag::says`]); ids that are not nodes are ignored.
    pub fn with_mechanisms(self, ids: impl IntoIterator<Item = PredId>) -> AcDag {
        self.with_says(ids.into_iter().map(|p| (p, 0)))
    }

    /// Sets how much each of these candidates says ([`AcDag::says`]);
    /// ids that are not nodes are ignored.
    pub fn with_says(mut self, ranks: impl IntoIterator<Item = (PredId, u8)>) -> AcDag {
        for (p, rank) in ranks {
            if let Some(i) = self.index_of(p).filter(|&i| i != self.f) {
                self.says[i] = rank;
            }
        }
        self
    }

    /// Records that the intervention of the first of each pair makes the
    /// second impossible (`analysis/implied.rs`); ids that are not nodes
    /// are ignored.
    pub fn with_implied(mut self, pairs: &[(PredId, PredId)]) -> AcDag {
        for &(p, q) in pairs {
            if let (Some(i), Some(j)) = (self.index_of(p), self.index_of(q))
                && i != self.f
                && j != self.f
            {
                self.implied[i].insert(j);
            }
        }
        self
    }

    /// Nodes the intervention of node `i` makes impossible.
    pub fn implied(&self, i: usize) -> &BitSet {
        &self.implied[i]
    }

    /// The node indices of these ids, F and ids that are not nodes left
    /// out.
    pub(super) fn nodes_of(&self, ids: impl IntoIterator<Item = PredId>) -> Vec<usize> {
        ids.into_iter()
            .filter_map(|p| self.index.get(&p).copied())
            .filter(|&i| i != self.f)
            .collect()
    }

    /// How much node `i` says about how the failure comes about, lowest
    /// first ([`crate::predicates::Kind::says`]). The order of unordered
    /// nodes is free (AID Sec. 5.4 breaks such ties at random); of two
    /// facets of one instant, the one tried first is the one a round
    /// confirms, and the other, pruned as unordered with a cause, is not
    /// the one the report names. So a lock-order cycle goes before the
    /// overlap of the same two calls, anchored at the same entry;
    /// counter-atomicity's race of `increment` with `load_counter` on one
    /// object before "load_counter ends before store_counter starts"; and
    /// rare.c's "consume starts before publish starts" before "consume
    /// starts while prepare runs", two calls that share nothing, which
    /// names only what the writer was doing when the reader started.
    pub fn says(&self, i: usize) -> u8 {
        self.says[i]
    }

    /// Nodes that are necessary but not sufficient for the failure: they
    /// held in passing runs too.
    pub fn necessary(&self) -> &BitSet {
        &self.necessary
    }

    /// Nodes that are sufficient but not necessary for the failure: some
    /// failing runs failed without them.
    pub fn sufficient(&self) -> &BitSet {
        &self.sufficient
    }

    /// Nodes anchored at exactly the same time as node `i` in every failing
    /// run where both held (none for DAGs built from explicit edges).
    pub fn tied(&self, i: usize) -> &BitSet {
        &self.tied[i]
    }

    /// The failure predicate F.
    pub fn failure(&self) -> PredId {
        self.ids[self.f]
    }

    /// Number of candidate predicates (F not counted).
    pub fn len(&self) -> usize {
        self.ids.len() - 1
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn contains(&self, p: PredId) -> bool {
        self.index.contains_key(&p)
    }

    /// The candidate predicates (F excluded) in topological order, ties by id.
    pub fn topological(&self) -> Vec<PredId> {
        let mut v: Vec<usize> = (0..self.f).collect();
        v.sort_by_key(|&i| (self.depth[i], self.ids[i]));
        v.into_iter().map(|i| self.ids[i]).collect()
    }

    /// True when `a` precedes `b` (a path a ↝ b exists).
    pub fn precedes(&self, a: PredId, b: PredId) -> bool {
        match (self.index.get(&a), self.index.get(&b)) {
            (Some(&i), Some(&j)) => self.reach[i].contains(j),
            _ => false,
        }
    }

    /// Edges of the transitive reduction (the Hasse diagram), for display:
    /// P→Q when P precedes Q and no R sits between them.
    pub fn reduction(&self) -> Vec<(PredId, PredId)> {
        let mut out = Vec::new();
        for i in 0..self.ids.len() {
            // Descendants in topological order: one not yet covered by an
            // earlier direct successor's closure is itself direct.
            // Indices are a topological order.
            let mut covered = BitSet::new(self.ids.len());
            for j in self.reach[i].iter() {
                if !covered.contains(j) {
                    out.push((self.ids[i], self.ids[j]));
                    covered.union_with(&self.reach[j]);
                }
            }
        }
        out.sort_unstable();
        out
    }

    /// Graphviz DOT of the transitive reduction. `label` names a node;
    /// `highlight` (e.g. the causal path) is drawn dashed red, as in Fig. 4.
    pub fn to_dot(&self, label: impl Fn(PredId) -> String, highlight: &BTreeSet<PredId>) -> String {
        let mut s = String::from(
            "digraph acdag {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\"];\n",
        );
        for (i, &p) in self.ids.iter().enumerate() {
            let mut attrs = format!("label=\"{}\"", escape(&label(p)));
            if i == self.f {
                attrs.push_str(", shape=doubleoctagon");
            }
            if highlight.contains(&p) {
                attrs.push_str(", color=red, style=dashed, penwidth=2");
            }
            let _ = writeln!(s, "  n{} [{}];", p.0, attrs);
        }
        for (a, b) in self.reduction() {
            let _ = writeln!(s, "  n{} -> n{};", a.0, b.0);
        }
        s.push_str("}\n");
        s
    }

    // Index-level access for the algorithms in this module tree.

    pub(crate) fn index_of(&self, p: PredId) -> Option<usize> {
        self.index.get(&p).copied()
    }

    pub(crate) fn id(&self, i: usize) -> PredId {
        self.ids[i]
    }

    /// Node count including F; indices are `0..nodes()`, F is `f_index()`.
    pub(crate) fn nodes(&self) -> usize {
        self.ids.len()
    }

    pub(crate) fn f_index(&self) -> usize {
        self.f
    }

    pub(crate) fn reach(&self, i: usize) -> &BitSet {
        &self.reach[i]
    }

    pub(crate) fn ancestors(&self, i: usize) -> &BitSet {
        &self.back[i]
    }

    pub(crate) fn depth(&self, i: usize) -> usize {
        self.depth[i]
    }

    /// `a` and `b` are ordered one way or the other.
    pub(crate) fn comparable(&self, a: usize, b: usize) -> bool {
        a == b || self.reach[a].contains(b) || self.reach[b].contains(a)
    }
}

fn complement(s: &BitSet) -> BitSet {
    let mut c = BitSet::full(s.capacity());
    c.difference_with(s);
    c
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(i: u32) -> PredId {
        PredId(i)
    }

    #[test]
    fn edges_need_precedence_in_every_run_where_both_hold() {
        // P1 always first; P2 and P3 swap between runs; P4 only in run 2.
        let r1 = [(p(1), 10), (p(2), 20), (p(3), 30)];
        let r2 = [(p(1), 10), (p(3), 20), (p(2), 30), (p(4), 40)];
        let dag = AcDag::build(&[p(1), p(2), p(3), p(4)], p(0), [&r1[..], &r2[..]]).unwrap();
        assert!(dag.precedes(p(1), p(2)));
        assert!(dag.precedes(p(1), p(3)));
        assert!(!dag.precedes(p(2), p(3)));
        assert!(!dag.precedes(p(3), p(2)));
        assert!(dag.precedes(p(2), p(4)) && dag.precedes(p(3), p(4)));
        assert!(dag.precedes(p(4), p(0)), "every predicate precedes F");
        assert_eq!(
            dag.reduction(),
            vec![(p(1), p(2)), (p(1), p(3)), (p(2), p(4)), (p(3), p(4)), (p(4), p(0))]
        );
    }

    #[test]
    fn ties_give_no_edge() {
        let r1 = [(p(1), 10), (p(2), 10)];
        let dag = AcDag::build(&[p(1), p(2)], p(9), [&r1[..]]).unwrap();
        assert!(!dag.precedes(p(1), p(2)) && !dag.precedes(p(2), p(1)));
    }

    #[test]
    fn predicates_at_the_same_instant_in_every_run_are_tied() {
        // 1 and 2 share their anchor in both runs; 3 ties with 1 in one
        // run only; 4 never co-occurs with 1.
        let r1 = [(p(1), 10), (p(2), 10), (p(3), 10)];
        let r2 = [(p(1), 20), (p(2), 20), (p(3), 25)];
        let r3 = [(p(4), 10)];
        let dag =
            AcDag::build(&[p(1), p(2), p(3), p(4)], p(9), [&r1[..], &r2[..], &r3[..]]).unwrap();
        let tied = |a, b| dag.tied(dag.index_of(a).unwrap()).contains(dag.index_of(b).unwrap());
        assert!(tied(p(1), p(2)) && tied(p(2), p(1)));
        assert!(!tied(p(1), p(3)) && !tied(p(1), p(4)) && !tied(p(1), p(1)));
        assert!(!dag.precedes(p(1), p(2)) && !dag.precedes(p(2), p(1)));
        let edges = AcDag::from_edges(&[p(1), p(2)], p(9), &[]).unwrap();
        assert!(edges.tied(0).is_empty());
    }

    #[test]
    fn never_co_occurring_predicates_are_unordered() {
        let r1 = [(p(1), 10)];
        let r2 = [(p(2), 5)];
        let dag = AcDag::build(&[p(1), p(2)], p(9), [&r1[..], &r2[..]]).unwrap();
        assert!(!dag.precedes(p(1), p(2)) && !dag.precedes(p(2), p(1)));
    }

    #[test]
    fn three_run_cycle_is_broken_by_the_reference_order() {
        // Pairwise "always before" in the runs where each pair co-occurs
        // forms a cycle 1→2→3→1; the reference order (equal means, then id)
        // keeps 1→2 and 2→3 and drops 3→1.
        let r1 = [(p(1), 1), (p(2), 2)];
        let r2 = [(p(2), 1), (p(3), 2)];
        let r3 = [(p(3), 1), (p(1), 2)];
        let dag = AcDag::build(&[p(1), p(2), p(3)], p(9), [&r1[..], &r2[..], &r3[..]]).unwrap();
        assert!(dag.precedes(p(1), p(2)) && dag.precedes(p(2), p(3)));
        assert!(!dag.precedes(p(3), p(1)));
    }

    #[test]
    fn from_edges_rejects_cycles() {
        let err =
            AcDag::from_edges(&[p(1), p(2)], p(0), &[(p(1), p(2)), (p(2), p(1))]).unwrap_err();
        assert!(matches!(err, CausalError::Cycle(_)));
    }

    #[test]
    fn dot_draws_the_reduction_and_highlights() {
        let dag = AcDag::from_edges(
            &[p(1), p(2), p(3)],
            p(0),
            &[(p(1), p(2)), (p(2), p(3)), (p(1), p(3))],
        )
        .unwrap();
        let dot = dag.to_dot(|x| format!("P{}", x.0), &BTreeSet::from([p(2)]));
        assert!(
            dot.contains("n1 -> n2;") && dot.contains("n2 -> n3;") && dot.contains("n3 -> n0;")
        );
        assert!(!dot.contains("n1 -> n3;"), "implied edges are omitted");
        assert!(dot.contains("n2 [label=\"P2\", color=red"));
    }
}
