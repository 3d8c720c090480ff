//! Predicates as the report shows them: a structured form (kind, function,
//! role, instance, the other call, the values the runs showed) next to
//! the prose, and a headline that says what failing and passing runs
//! actually did ("returns 4 in every failing run, 3 in every passing run")
//! instead of only the rule that separates them.
//!
//! A kind this file does not know yet falls back to the catalog's
//! description, so new predicate kinds show up in words at once; adding
//! their values is one arm in [`measure`] and one in [`headline`].

use std::{
    cell::{OnceCell, RefCell},
    collections::{BTreeMap, BTreeSet, HashMap},
    path::PathBuf,
};

use serde::Serialize;

use crate::{
    model::{
        FuncId, Label, Role, Session, Site, ValueKind,
        identity::{MAIN, RoleNames},
    },
    predicates::{self, Calls, Catalog, Condition, Kind, PredId, Predicate},
    symbols::enclosure::Enclosure,
    util::human::{count, duration},
};

/// One call site in the structured form.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct SiteView {
    pub function: String,
    /// The thread role's display name ("main", "committer").
    pub role: String,
    pub role_id: Role,
    /// The k-th call of the function on that role (from 1).
    pub instance: u32,
}

/// What one label's runs showed for a predicate's measure.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct Seen {
    /// Runs of this label the measure was taken in.
    pub runs: u32,
    /// Distinct values, most frequent first, with how many runs showed
    /// each (return values or call counts); empty for durations.
    pub values: Vec<(i64, u32)>,
    /// Smallest and largest value (durations in ns; counts; returns).
    pub min: Option<i64>,
    pub max: Option<i64>,
    /// Runs of this label that never returned from the call (it was still
    /// running when the run ended).
    pub unfinished: u32,
}

/// The values behind a predicate: what it measures and what each label's
/// runs showed.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Values {
    /// `return_value`, `duration_ns` or `calls`.
    pub measure: &'static str,
    /// Return values are addresses: show them in hex.
    #[serde(skip)]
    pub pointer: bool,
    pub failing: Seen,
    pub passing: Seen,
}

/// A predicate in structured form, with its prose.
#[derive(Clone, Debug, Serialize)]
pub struct PredicateView {
    pub id: PredId,
    /// As in `analyze --json` (`ret_differs`, `too_slow`, `order`, ...).
    pub kind: Kind,
    /// The catalog's description.
    pub text: String,
    /// What the runs showed, in words (the terminal report's line).
    pub headline: String,
    pub function: Option<String>,
    /// The thread role's display name, and its number.
    pub role: Option<String>,
    pub role_id: Option<Role>,
    /// The k-th call (None for per-function kinds such as call counts).
    pub instance: Option<u32>,
    /// The second call of pairwise kinds (order, overlap).
    pub other: Option<SiteView>,
    /// Every function the predicate is about, in key order and without
    /// repeats: its own, the other call's, the callee both calls went on
    /// to (overlaps for the same key), the members of an "any of several
    /// pairs" predicate. A tool asks this, not the prose, which functions
    /// a root cause names.
    pub functions: Vec<String>,
    /// Where the calls the predicate names are made: for each of its
    /// functions whose calls in the failing runs all have the same
    /// innermost traced caller on their thread, that caller ("readV is
    /// called from Push"). A cause stated on helpers (a lock, an
    /// accessor) names the functions that use them this way; the callers
    /// are also in `functions`.
    pub callers: Vec<CallerView>,
    pub values: Option<Values>,
}

/// A function a predicate names and the traced functions its calls are
/// made within in every failing run where it is called: the caller, its
/// caller, and so on, innermost first. Where the outermost of them (or the
/// function itself) has no traced caller on its thread, the chain ends
/// with the untraced function that thread runs, `main` or its start
/// routine, when the executable runs none of its own code outside it
/// ([`Enclosure`]).
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct CallerView {
    pub function: String,
    pub callers: Vec<String>,
}

impl PredicateView {
    /// Where its calls are made, in words ("readV from Push, from worker;
    /// lock from pop"): what the text and HTML reports print as "called".
    /// None when no chain is known.
    pub fn called(&self) -> Option<String> {
        let each = |c: &CallerView| format!("{} from {}", c.function, c.callers.join(", from "));
        (!self.callers.is_empty())
            .then(|| self.callers.iter().map(each).collect::<Vec<_>>().join("; "))
    }
}

/// How many callers a chain names at most.
const CALLER_DEPTH: usize = 8;

/// Builds [`PredicateView`]s from the analysed runs.
pub struct Facts<'a> {
    session: &'a Session,
    catalog: &'a Catalog,
    roles: RoleNames,
    /// Where the failing runs' calls are made, indexed on first use.
    callers: OnceCell<CallerIndex>,
    /// What each executable lets run outside its threads' functions, read
    /// on first use.
    enclosures: RefCell<HashMap<PathBuf, Option<Enclosure>>>,
}

impl<'a> Facts<'a> {
    pub fn new(session: &'a Session, catalog: &'a Catalog) -> Facts<'a> {
        let roles = RoleNames::of_runs(&session.runs);
        Facts {
            session,
            catalog,
            roles,
            callers: OnceCell::new(),
            enclosures: RefCell::new(HashMap::new()),
        }
    }

    fn function(&self, f: u32) -> String {
        self.session.function(f).map_or_else(|| format!("function#{f}"), |f| f.name.clone())
    }

    pub fn role(&self, r: Role) -> String {
        self.roles.label(r)
    }

    fn site(&self, s: Site) -> SiteView {
        SiteView {
            function: self.function(s.func),
            role: self.role(s.role),
            role_id: s.role,
            instance: s.instance,
        }
    }

    /// The functions a predicate names (see [`PredicateView::functions`]).
    fn functions(&self, p: &Predicate) -> Vec<String> {
        let mut ids = named(p);
        let chains = self.callers(p);
        ids.extend(chains.iter().flat_map(|c| c.up.iter().copied()));
        let mut seen = BTreeSet::new();
        let mut names: Vec<String> =
            ids.into_iter().filter(|f| seen.insert(*f)).map(|f| self.function(f)).collect();
        for body in chains.into_iter().filter_map(|c| c.body) {
            if !names.contains(&body) {
                names.push(body);
            }
        }
        names
    }

    /// For each function the predicate names (at its call site when it
    /// has one, on its class's threads when it is a group's), once per
    /// calls of it the key names, the chain of traced callers its calls
    /// are made within in every failing run, innermost first; functions
    /// without one are left out. A function the key names on both sides
    /// (main's call 3 of `readV` against the stealers' calls of it) has a
    /// chain for each: their callers differ.
    fn callers(&self, p: &Predicate) -> Vec<Chain> {
        let k = p.key;
        let own = [(k.func, k.calls)].into_iter().chain(k.other.map(|o| (o.func, o.calls)));
        let mut scopes: Vec<(FuncId, Option<Calls>)> = Vec::new();
        for (f, c) in own {
            if !scopes.contains(&(f, Some(c))) {
                scopes.push((f, Some(c)));
            }
        }
        // Any other function named: its calls wherever they are.
        for f in named(p) {
            if !scopes.iter().any(|(g, _)| *g == f) {
                scopes.push((f, None));
            }
        }
        let mut out: Vec<Chain> = Vec::new();
        for (f, calls) in scopes {
            let scope = match calls {
                Some(Calls::Site { role, instance }) => {
                    Scope::Site(Site { func: f, role, instance })
                }
                Some(Calls::Group { class, within }) => {
                    Scope::Roles(self.catalog.classes.roles(class), within)
                }
                None => Scope::All,
            };
            let (up, outermost) = self.caller_chain(f, scope);
            let body = match scope {
                Scope::Site(s) if outermost => {
                    self.enclosing(up.last().copied().unwrap_or(f), s.role)
                }
                Scope::Roles(roles, _) if outermost => {
                    // The one function every thread that made such calls runs.
                    let outer = up.last().copied().unwrap_or(f);
                    let index = self.callers.get_or_init(|| CallerIndex::of(self.session));
                    let made = roles.iter().filter(|&&r| index.by_role.contains_key(&(outer, r)));
                    let mut bodies = made.map(|&r| self.enclosing(outer, r));
                    let first = bodies.next().flatten();
                    first.filter(|b| bodies.all(|o| o.as_ref() == Some(b)))
                }
                _ => None,
            };
            if !up.is_empty() || body.is_some() {
                out.push(Chain { func: f, up, body });
            }
        }
        out
    }

    /// The untraced function every call of `outer` on thread `role` is
    /// made within, when `outer`'s calls there have no traced caller:
    /// `main` on the main thread, the start routine on another. None
    /// unless `outer`'s executable runs none of its own code on a thread
    /// outside that function and does not export `outer`
    /// ([`Enclosure`]), and unless that function is untraced (traced, it
    /// would be the caller).
    fn enclosing(&self, outer: FuncId, role: Role) -> Option<String> {
        let f = self.session.function(outer)?;
        let mut names = self
            .session
            .runs
            .iter()
            .filter(|r| r.complete && r.label == Label::Fail)
            .flat_map(|r| r.threads.iter().filter(|t| t.role == role))
            .map(|t| (t.name.as_str(), t.parent.is_none()));
        let first = names.next()?;
        if names.any(|n| n != first) {
            return None;
        }
        let (name, main) = first;
        // aid's own entry probes on thread bodies do not count: they
        // enclose nothing ([`predicates::callers`]).
        let traced = (self.session.functions.iter())
            .any(|g| !g.internal && (g.name == name || g.symbol == name));
        let mut cache = self.enclosures.borrow_mut();
        let e =
            cache.entry(f.module.clone()).or_insert_with(|| Enclosure::of(&f.module)).as_ref()?;
        if traced || e.exported(&f.symbol) {
            return None;
        }
        let body = if main && name == MAIN {
            e.main.then_some(MAIN)
        } else {
            // "thread": a thread whose start routine is not known.
            (e.threads && name != "thread" && e.defines(name)).then_some(name)
        };
        body.map(str::to_owned)
    }

    /// The traced callers of `f`'s calls (only the call at a site, or
    /// those on a class's threads, when the scope says so), innermost
    /// first: each the one caller every such call has in the failing runs
    /// (on the scope's threads when it has some). It stops where some call
    /// has no traced caller or two have different ones, and at
    /// [`CALLER_DEPTH`]; with whether it stopped because no call of its
    /// last function (of `f` when it is empty) had a traced caller.
    fn caller_chain(&self, f: FuncId, scope: Scope<'_>) -> (Vec<FuncId>, bool) {
        let index = self.callers.get_or_init(|| CallerIndex::of(self.session));
        // A function's calls on a class's threads: one caller for all of
        // them over the roles that made any.
        let on_roles = |g: FuncId, roles: &[Role]| {
            let mut found = roles.iter().filter_map(|&r| index.by_role.get(&(g, r)).copied());
            let first = found.next()?;
            Some(found.fold(first, Caller::with))
        };
        let mut next = match scope {
            Scope::Site(s) => index.by_site.get(&(s.func, s.role, s.instance)).copied(),
            // Calls made within a given function: that function is their
            // caller by the key's own terms.
            Scope::Roles(_, Some(w)) => Some(Caller::Sole(w)),
            Scope::Roles(roles, None) => on_roles(f, roles),
            Scope::All => index.by_function.get(&f).copied(),
        };
        let mut chain: Vec<FuncId> = Vec::new();
        while let Some(Caller::Sole(g)) = next {
            // Recursion: a function is named once.
            if g == f || chain.contains(&g) || chain.len() == CALLER_DEPTH {
                return (chain, false);
            }
            chain.push(g);
            next = match scope {
                Scope::Site(s) => index.by_role.get(&(g, s.role)).copied(),
                Scope::Roles(roles, _) => on_roles(g, roles),
                Scope::All => index.by_function.get(&g).copied(),
            };
        }
        (chain, next == Some(Caller::Outermost))
    }

    fn caller_views(&self, p: &Predicate) -> Vec<CallerView> {
        let view = |c: Chain| CallerView {
            function: self.function(c.func),
            callers: c.up.into_iter().map(|g| self.function(g)).chain(c.body).collect(),
        };
        self.callers(p).into_iter().map(view).collect()
    }

    /// The predicate's structured form; None for an unknown id.
    pub fn view(&self, id: PredId) -> Option<PredicateView> {
        let p = self.catalog.get(id)?;
        let k = p.key;
        let whole_run = k.kind == Kind::Failure;
        // Group keys (every call on a class of threads) name no single
        // role or call: their prose says which threads.
        let site = k.site().filter(|_| !whole_run);
        let values = measure(self.session, p);
        let mut view = PredicateView {
            id,
            kind: k.kind,
            text: p.description.clone(),
            headline: String::new(),
            function: (!whole_run).then(|| self.function(k.func)),
            role: site.map(|s| self.role(s.role)),
            role_id: site.map(|s| s.role),
            instance: site.map(|s| s.instance).filter(|i| *i > 0),
            other: k.other_site().map(|o| self.site(o)),
            functions: if whole_run { Vec::new() } else { self.functions(p) },
            callers: if whole_run { Vec::new() } else { self.caller_views(p) },
            values,
        };
        view.headline = headline(&view, p);
        Some(view)
    }
}

/// Where one predicate's function is called from: its traced callers,
/// innermost first, and the untraced function its thread runs them in.
struct Chain {
    func: FuncId,
    up: Vec<FuncId>,
    body: Option<String>,
}

/// Which calls of a function a caller chain is about.
#[derive(Clone, Copy)]
enum Scope<'r> {
    /// One call.
    Site(Site),
    /// Every call on a class's threads (made within a function, if given).
    Roles(&'r [Role], Option<FuncId>),
    /// Every call.
    All,
}

/// The innermost traced caller of calls in the failing runs: one
/// function for all of them, none for all of them, or neither.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Caller {
    Sole(FuncId),
    /// No call had a traced caller: each is its thread's outermost.
    Outermost,
    /// Some call had one and another none, or two had different ones.
    Not,
}

impl Caller {
    /// What two sets of calls have as one.
    fn with(self, other: Caller) -> Caller {
        if self == other { self } else { Caller::Not }
    }

    fn and(self, next: Option<FuncId>) -> Caller {
        match (self, next) {
            (Caller::Sole(a), Some(b)) if a == b => self,
            (Caller::Outermost, None) => self,
            _ => Caller::Not,
        }
    }
}

/// [`Caller`] of every function's calls and of every call site, over the
/// failing runs: one pass, so a report that views hundreds of predicates
/// reads each run once.
struct CallerIndex {
    by_function: HashMap<FuncId, Caller>,
    /// A function's calls on one thread.
    by_role: HashMap<(FuncId, Role), Caller>,
    by_site: HashMap<(FuncId, Role, u32), Caller>,
}

impl CallerIndex {
    fn of(session: &Session) -> CallerIndex {
        let functions = &session.functions;
        let keep = |g: FuncId| functions.get(g as usize).is_some_and(|h| !h.internal);
        let mut index = CallerIndex {
            by_function: HashMap::new(),
            by_role: HashMap::new(),
            by_site: HashMap::new(),
        };
        for run in session.runs.iter().filter(|r| r.complete && r.label == Label::Fail) {
            let up = predicates::callers(run, keep);
            for (c, caller) in run.calls.iter().zip(up) {
                let first = caller.map_or(Caller::Outermost, Caller::Sole);
                let add = |e: &mut Caller| *e = e.and(caller);
                index.by_function.entry(c.func).and_modify(add).or_insert(first);
                index.by_role.entry((c.func, c.role)).and_modify(add).or_insert(first);
                let site = (c.func, c.role, c.instance);
                index.by_site.entry(site).and_modify(add).or_insert(first);
            }
        }
        index
    }
}

/// The functions a predicate is about, in key order, with repeats: its
/// own, the other call's, the function its group's calls are made within,
/// the callee both calls went on to, the members of a predicate over
/// several pairs.
fn named(p: &Predicate) -> Vec<FuncId> {
    let k = p.key;
    let mut ids = vec![k.func];
    let within = |c: Calls| match c {
        Calls::Group { within, .. } => within,
        Calls::Site { .. } => None,
    };
    ids.extend(within(k.calls));
    ids.extend(k.other.map(|o| o.func));
    ids.extend(k.other.and_then(|o| within(o.calls)));
    ids.extend(k.callee);
    if let Condition::AnyPair { pairs, .. } | Condition::AfterAll { pairs, .. } = &p.condition {
        ids.extend(pairs.iter().flat_map(|m| [m.a.func, m.b.func]));
    }
    ids
}

/// The values a predicate is about, in every analysed run.
fn measure(session: &Session, p: &Predicate) -> Option<Values> {
    let k = p.key;
    let site = k.site()?;
    let ret_type = session.function(k.func).map(|f| f.ret);
    let runs = session.runs.iter().filter(|r| r.complete);
    let mut failing = Tally::default();
    let mut passing = Tally::default();
    let measure = match k.kind {
        Kind::RetDiffers | Kind::ErrorReturn => {
            for run in runs {
                let t = if run.label == Label::Fail { &mut failing } else { &mut passing };
                match run.call(site) {
                    Some(c) if c.ret.is_some() => t.add(c.ret.unwrap_or(0)),
                    Some(_) => t.unfinished += 1,
                    None => {}
                }
            }
            "return_value"
        }
        Kind::TooSlow | Kind::TooFast => {
            for run in runs {
                let t = if run.label == Label::Fail { &mut failing } else { &mut passing };
                if let Some(c) = run.call(site) {
                    match c.exit_ns {
                        Some(_) => t.add(c.duration_ns().unwrap_or(0) as i64),
                        None => {
                            t.unfinished += 1;
                            t.add(c.active_ns(run.end_ns) as i64);
                        }
                    }
                }
            }
            "duration_ns"
        }
        Kind::CountAbove | Kind::CountBelow | Kind::NeverCalled => {
            for run in runs {
                let t = if run.label == Label::Fail { &mut failing } else { &mut passing };
                let n =
                    run.calls.iter().filter(|c| c.func == k.func && c.role == site.role).count();
                t.add(n as i64);
            }
            "calls"
        }
        _ => return None,
    };
    let pointer =
        measure == "return_value" && ret_type.is_some_and(|t| t.kind == ValueKind::Pointer);
    Some(Values { measure, pointer, failing: failing.seen(), passing: passing.seen() })
}

#[derive(Default)]
struct Tally {
    values: BTreeMap<i64, u32>,
    runs: u32,
    unfinished: u32,
}

impl Tally {
    fn add(&mut self, v: i64) {
        *self.values.entry(v).or_default() += 1;
        self.runs += 1;
    }

    fn seen(self) -> Seen {
        let min = self.values.keys().next().copied();
        let max = self.values.keys().next_back().copied();
        let mut values: Vec<(i64, u32)> = self.values.into_iter().collect();
        values.sort_by_key(|&(v, n)| (std::cmp::Reverse(n), v));
        Seen { runs: self.runs, values, min, max, unfinished: self.unfinished }
    }
}

/// A return value for people: NULL and hex for pointers.
fn value(v: i64, pointer: bool) -> String {
    match (pointer, v) {
        (true, 0) => "NULL".into(),
        (true, v) => format!("{:#x}", v as u64),
        (false, v) => v.to_string(),
    }
}

/// "4 in every failing run", "4 (7 runs) or -1 (3 runs) in failing runs".
fn values_in(seen: &Seen, label: &str, show: impl Fn(i64) -> String) -> String {
    const SHOWN: usize = 3;
    match seen.values.as_slice() {
        [] => format!("none in {label} runs"),
        [(v, _)] => format!("{} in every {label} run", show(*v)),
        many => {
            let mut parts: Vec<String> = many
                .iter()
                .take(SHOWN)
                .map(|&(v, n)| format!("{} ({})", show(v), count(n, "run")))
                .collect();
            if many.len() > SHOWN {
                parts.push(format!("{} other values", many.len() - SHOWN));
            }
            let last = parts.pop().unwrap_or_default();
            if parts.is_empty() {
                format!("{last} in {label} runs")
            } else {
                format!("{} or {last} in {label} runs", parts.join(", "))
            }
        }
    }
}

/// "15.6 ms in every failing run", "15.6 ms to 31.2 ms in failing runs".
fn range_in(seen: &Seen, label: &str) -> String {
    match (seen.min, seen.max) {
        (Some(a), Some(b)) if a == b => format!("{} in every {label} run", duration(a as u64)),
        (Some(a), Some(b)) => {
            format!("{} to {} in {label} runs", duration(a as u64), duration(b as u64))
        }
        _ => format!("never reached in {label} runs"),
    }
}

/// "call 2 of f on worker#1".
fn call(v: &PredicateView) -> String {
    format!(
        "call {} of {} on {}",
        v.instance.unwrap_or(0),
        v.function.as_deref().unwrap_or("?"),
        v.role.as_deref().unwrap_or("?")
    )
}

/// What the runs showed, in words, for the kinds whose values are known;
/// the catalog's description otherwise.
fn headline(v: &PredicateView, p: &Predicate) -> String {
    let Some(vals) = &v.values else { return p.description.clone() };
    let (f, s) = (&vals.failing, &vals.passing);
    let unfinished = |seen: &Seen, label: &str| match seen.unfinished {
        0 => String::new(),
        n => format!(" ({} still inside it when the {label} run ended)", count(n, "run")),
    };
    let show = |x: i64| value(x, vals.pointer);
    match v.kind {
        Kind::RetDiffers => format!(
            "{} returns {}, {}{}",
            call(v),
            values_in(f, "failing", show),
            values_in(s, "passing", show),
            unfinished(f, "failing")
        ),
        Kind::ErrorReturn => format!(
            "{} returns an error: {}; {}",
            call(v),
            values_in(f, "failing", show),
            values_in(s, "passing", show)
        ),
        Kind::TooSlow => format!(
            "{} runs too slow: {}{}, {}",
            call(v),
            range_in(f, "failing"),
            unfinished(f, "failing"),
            match s.max {
                Some(m) => format!("at most {} in passing runs", duration(m as u64)),
                None => "never reached in passing runs".into(),
            }
        ),
        Kind::TooFast => format!(
            "{} runs too fast: {}, {}",
            call(v),
            range_in(f, "failing"),
            match s.min {
                Some(m) => format!("at least {} in passing runs", duration(m as u64)),
                None => "never reached in passing runs".into(),
            }
        ),
        Kind::CountAbove | Kind::CountBelow | Kind::NeverCalled => {
            let times = |x: i64| match x {
                0 => "never".to_owned(),
                1 => "once".to_owned(),
                n => format!("{n} times"),
            };
            format!(
                "{} is called on {} {}, {}",
                v.function.as_deref().unwrap_or("?"),
                v.role.as_deref().unwrap_or("?"),
                values_in(f, "failing", times),
                values_in(s, "passing", times)
            )
        }
        _ => p.description.clone(),
    }
}
