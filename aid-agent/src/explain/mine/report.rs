//! What `mine` prints: ranked groups, each with its dependence edges and
//! its macro patterns as `role:function(object)`, macros separated by `|`,
//! and the failing runs they occur in; or the same as JSON.

use std::fmt::Write as _;

use serde::Serialize;

use super::{Dataset, DepEdge, Found, Level, Mined, Stats};
use crate::explain::{access::Access, id_list};

impl Dataset {
    fn call_text(&self, e: u32) -> String {
        let k = &self.keys[e as usize];
        format!("{}({})", self.function_text(e), self.object_names[k.object as usize])
    }

    /// The function, with its caller when the function is called from
    /// several traced places (`account_fee>account_get`).
    fn function_text(&self, e: u32) -> String {
        let k = &self.keys[e as usize];
        let f = &self.func_names[k.func as usize];
        match k.caller {
            Some(c) if self.ambiguous.contains(&k.func) => {
                format!("{}>{f}", self.func_names[c as usize])
            }
            None if self.ambiguous.contains(&k.func) => format!("(top)>{f}"),
            _ => f.clone(),
        }
    }

    /// One event with its type and role: `R T2:get(A)`.
    pub fn event_text(&self, e: u32) -> String {
        let k = &self.keys[e as usize];
        let access = if k.access == Access::R { "R" } else { "W" };
        format!("{access} {}:{}", self.role_names[k.role as usize], self.call_text(e))
    }

    /// A macro: the role once, then its calls. A read-write call's entry
    /// read and exit write, when adjacent, print as one call; apart, as
    /// `f(o)[R]` and `f(o)[W]`.
    pub fn macro_text(&self, events: &[u32]) -> String {
        let Some(&first) = events.first() else { return String::new() };
        let mut items = Vec::new();
        let mut i = 0;
        while i < events.len() {
            let k = &self.keys[events[i] as usize];
            let rw = self.read_write.get(k.func as usize).copied().unwrap_or(false);
            let pair = events.get(i + 1).map(|&n| &self.keys[n as usize]).is_some_and(|n| {
                n.func == k.func
                    && n.object == k.object
                    && k.access == Access::R
                    && n.access == Access::W
            });
            if rw && pair {
                items.push(self.call_text(events[i]));
                i += 2;
                continue;
            }
            let half = match (rw, k.access) {
                (false, _) => "",
                (true, Access::R) => "[R]",
                (true, Access::W) => "[W]",
            };
            items.push(format!("{}{half}", self.call_text(events[i])));
            i += 1;
        }
        let role = &self.role_names[self.keys[first as usize].role as usize];
        format!("{role}:{}", items.join(", "))
    }

    /// `⟨T2:get(A) | T1:set(A)⟩`.
    pub fn pattern_text(&self, p: &Found) -> String {
        let macros: Vec<String> = p.macros.iter().map(|m| self.macro_text(m)).collect();
        format!("⟨{}⟩", macros.join(" | "))
    }

    /// `R T2:get(A) → W T1:set(A) (anti)`.
    pub fn dep_text(&self, d: &DepEdge) -> String {
        format!("{} → {} ({})", self.event_text(d.from), self.event_text(d.to), d.kind.as_str())
    }
}

/// The human-readable result.
pub fn render_text(data: &Dataset, mined: &Mined) -> String {
    let s = &mined.stats;
    let mut out = String::new();
    let level = mined.levels.last();
    let _ = writeln!(
        out,
        "mined {} failing and {} passing run(s): {:.1} access events per failing run, {:.1} after abstraction ({} macros in {} classes); min-supp {:.0}% ({} of {} failing runs)",
        s.failing_runs,
        s.passing_runs,
        s.mean_len,
        s.mean_abstract_len,
        s.macros,
        s.classes,
        mined.min_supp * 100.0,
        level.map_or(0, |l| l.min_count),
        s.failing_runs,
    );
    if mined.groups.is_empty() {
        let _ = writeln!(
            out,
            "no pattern explains the failure (tried min-supp {}): the failing runs share no cross-thread access sequence with dependences that is rarer in passing runs",
            mined
                .levels
                .iter()
                .map(|l| format!("{:.0}%", l.min_supp * 100.0))
                .collect::<Vec<_>>()
                .join(", ")
        );
        return out;
    }
    let _ =
        writeln!(out, "{} group(s) explain the failure, most likely first:", mined.groups.len());
    for (i, g) in mined.groups.iter().enumerate() {
        let _ = writeln!(
            out,
            "\n#{}  rel_supp {:.3}  (in {:.0}% of failing runs, {:.0}% of passing runs)",
            i + 1,
            g.rel_supp,
            g.s_fail * 100.0,
            g.s_pass * 100.0
        );
        for d in &g.deps {
            let _ = writeln!(out, "    {}", data.dep_text(d));
        }
        for p in &g.patterns {
            let _ = writeln!(out, "    {}", data.pattern_text(p));
            let _ = writeln!(
                out,
                "        failing runs {}; dependences seen in {}",
                id_list(p.failing.iter().copied()),
                id_list(p.witnessed.iter().copied())
            );
        }
    }
    if s.capped {
        let _ = writeln!(
            out,
            "\nnote: some patterns had too many concretisations or instances to examine all; raise --min-supp or trace fewer functions"
        );
    }
    out
}

#[derive(Serialize)]
pub struct EventJson {
    pub role: String,
    pub function: String,
    /// The enclosing traced function, if any.
    pub caller: Option<String>,
    pub access: Access,
    pub object: String,
}

#[derive(Serialize)]
pub struct DepJson {
    pub from: EventJson,
    pub to: EventJson,
    pub kind: &'static str,
    pub text: String,
}

#[derive(Serialize)]
pub struct PatternJson {
    pub text: String,
    pub macros: Vec<Vec<EventJson>>,
    pub failing_runs: Vec<u32>,
    pub passing_runs: Vec<u32>,
    pub witnessed_runs: Vec<u32>,
}

#[derive(Serialize)]
pub struct GroupJson {
    pub rank: usize,
    pub rel_supp: f64,
    pub s_fail: f64,
    pub s_pass: f64,
    pub deps: Vec<DepJson>,
    pub patterns: Vec<PatternJson>,
}

#[derive(Serialize)]
pub struct ReportJson<'a> {
    pub min_supp: f64,
    pub levels: &'a [Level],
    pub stats: &'a Stats,
    pub groups: Vec<GroupJson>,
}

impl Dataset {
    pub fn event_json(&self, e: u32) -> EventJson {
        let k = &self.keys[e as usize];
        EventJson {
            role: self.role_names[k.role as usize].clone(),
            function: self.func_names[k.func as usize].clone(),
            caller: k.caller.map(|c| self.func_names[c as usize].clone()),
            access: k.access,
            object: self.object_names[k.object as usize].clone(),
        }
    }
}

pub fn report<'a>(data: &Dataset, mined: &'a Mined) -> ReportJson<'a> {
    ReportJson {
        min_supp: mined.min_supp,
        levels: &mined.levels,
        stats: &mined.stats,
        groups: mined
            .groups
            .iter()
            .enumerate()
            .map(|(i, g)| GroupJson {
                rank: i + 1,
                rel_supp: g.rel_supp,
                s_fail: g.s_fail,
                s_pass: g.s_pass,
                deps: g
                    .deps
                    .iter()
                    .map(|d| DepJson {
                        from: data.event_json(d.from),
                        to: data.event_json(d.to),
                        kind: d.kind.as_str(),
                        text: data.dep_text(d),
                    })
                    .collect(),
                patterns: g
                    .patterns
                    .iter()
                    .map(|p| PatternJson {
                        text: data.pattern_text(p),
                        macros: p
                            .macros
                            .iter()
                            .map(|m| m.iter().map(|&e| data.event_json(e)).collect())
                            .collect(),
                        failing_runs: p.failing.clone(),
                        passing_runs: p.passing.clone(),
                        witnessed_runs: p.witnessed.clone(),
                    })
                    .collect(),
            })
            .collect(),
    }
}
