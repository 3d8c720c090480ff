//! The default set of a program debugged with no `--trace`: its own
//! functions that are candidates, measured and chosen by what tracing them
//! costs (`record/census.rs`), said in words; and whether the C library's
//! lock events fit in what the set left of the budget.

use std::{collections::BTreeMap, sync::atomic::AtomicBool};

use anyhow::bail;

use crate::{
    model::{FuncId, Function},
    record::{
        census,
        fail::RunPolicy,
        progress::Progress,
        start::{self},
        tracer::Tracer,
    },
    symbols::{
        self, Resolver,
        own::{self, Skipped},
    },
    sys::spawn::Target,
};

/// The program's own functions that are candidates for the default set,
/// and those left out by rule.
pub struct Candidates {
    pub functions: Vec<Function>,
    pub skipped: Vec<(String, Skipped)>,
}

/// The program's own functions in address order, without `main`, sleep
/// and clock helpers and stubs ([`own::skipped`]).
pub fn default_candidates(resolver: &Resolver) -> anyhow::Result<Candidates> {
    let own = start::own_by_address(resolver)?;
    let mut skipped = Vec::new();
    let mut functions = Vec::new();
    for sym in own {
        match own::skipped(resolver.executable(), sym) {
            Some(why) => skipped.push((sym.name.clone(), why)),
            None => functions.push(symbols::function(
                resolver.executable(),
                sym,
                functions.len() as FuncId,
                false,
            )),
        }
    }
    if functions.is_empty() {
        bail!(
            "{} has no functions of its own worth tracing by default (left out: {}): pass --trace PATTERN",
            resolver.executable().path.display(),
            skipped.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(", ")
        );
    }
    Ok(Candidates { functions, skipped })
}

/// Measures the candidates' call rates and makes the tracer's user
/// functions those cheap enough to trace (`record/census.rs`), saying which
/// were left out, why, and how to trace them anyway. Every `safe` pattern
/// must name a chosen function. Returns the census, what the set left of
/// the budget, and the shares of the functions it left out, for the
/// sessions after it.
pub fn choose_by_cost(
    tracer: &mut Tracer,
    target: &Target,
    policy: &RunPolicy,
    safe: &[String],
    found: Candidates,
    cancel: &AtomicBool,
    ui: &mut dyn Progress,
) -> anyhow::Result<(census::Census, f64, LeftOutNames)> {
    let Candidates { functions, skipped } = found;
    let mut why: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (name, reason) in &skipped {
        why.entry(reason.reason()).or_default().push(name);
    }
    let left: Vec<String> =
        why.iter().map(|(reason, names)| format!("{}: {reason}", names.join(", "))).collect();
    ui.say(&format!(
        "no --trace given: measuring how often the program's {} own functions are called{}",
        functions.len(),
        if left.is_empty() {
            String::new()
        } else {
            format!("; not candidates: {}", left.join("; "))
        }
    ));
    let census = census::measure(tracer, target, policy, &functions, cancel)?;
    let addresses: Vec<u64> = functions.iter().map(|f| f.address).collect();
    let choice = census::choose(&census, &addresses);
    let ms = |ns: f64| ns / 1e6;
    ui.say(&measured(&census));
    if !choice.hot.is_empty() {
        let hot: Vec<String> = choice
            .hot
            .iter()
            .map(|&(i, calls, cost)| {
                let at_least = if census.cut[i] { "at least " } else { "" };
                format!(
                    "{} ({at_least}{calls} calls, ~{:.1} ms per run)",
                    functions[i].name,
                    ms(cost)
                )
            })
            .collect();
        let within = if choice.widened {
            format!(
                "within the budget, nor within the untraced run's own time (at least 5 ms: {:.1} ms)",
                ms(census.widened_ns())
            )
        } else {
            "within the budget".to_string()
        };
        ui.say(&format!(
            "left out {} function(s) called too often to trace {within}: {}; to trace one anyway, name every function to trace with --trace (it replaces the default set), e.g. --trace '{}'",
            hot.len(),
            hot.join(", "),
            functions[choice.hot[0].0].name
        ));
    }
    if !choice.over_cap.is_empty() {
        let names: Vec<&str> =
            choice.over_cap.iter().map(|&i| functions[i].name.as_str()).collect();
        ui.say(&format!(
            "left out {} function(s) beyond the default set's {} (the most called first): {}; name them with --trace to trace them",
            names.len(),
            census::MAX_FUNCTIONS,
            names.join(", ")
        ));
    }
    let chosen: Vec<Function> = choice.traced.iter().map(|&i| functions[i].clone()).collect();
    if chosen.is_empty() {
        // Observing runs with no probe at all could only restate the
        // failure: say what it would cost and how to trace anyway.
        let cheapest = choice.hot.iter().min_by(|a, b| a.2.total_cmp(&b.2));
        let hint = match cheapest {
            Some(&(i, _, cost)) => format!(
                "the cheapest, {}, costs ~{:.1} ms per run: trace it anyway with --trace '{}'",
                functions[i].name,
                ms(cost),
                functions[i].name
            ),
            None => "name the functions to trace with --trace".to_string(),
        };
        bail!(
            "none of the program's own functions fits the tracing budget ({:.1} ms per run), nor the untraced run's own time (at least 5 ms: {:.1} ms); {hint}",
            ms(census.budget_ns()),
            ms(census.widened_ns())
        );
    }
    start::check_safe(safe, &chosen)?;
    let widened = if choice.widened {
        format!(
            ", more than the budget: nothing called fitted it, so the set was chosen within the untraced run's own time (at least 5 ms: {:.1} ms), and a traced run takes about {:.1}× as long",
            ms(census.widened_ns()),
            1.0 + choice.cost_ns / census.untraced_ns.max(1) as f64
        )
    } else {
        String::new()
    };
    ui.say(&format!(
        "tracing {} of them (~{:.2} ms per run{widened}): {}",
        chosen.len(),
        ms(choice.cost_ns),
        chosen.iter().map(|f| f.name.as_str()).collect::<Vec<_>>().join(", ")
    ));
    tracer.set_user_functions(chosen)?;
    let left = census.budget_ns() - choice.cost_ns;
    let later = census::left_out_sessions(&census, &addresses, &choice);
    let names = |set: &[usize]| set.iter().map(|&i| functions[i].name.clone()).collect();
    let later = LeftOutNames {
        carried: names(&later.carried),
        sessions: later.sessions.iter().map(|s| names(s)).collect(),
        beyond: names(&later.beyond),
        chosen: choice
            .traced
            .iter()
            .map(|&i| (functions[i].name.clone(), census.calls[i]))
            .collect(),
    };
    Ok((census, left, later))
}

/// The census in one line: the untraced runs (and how many failed), the
/// counting run, a traced call's cost, the budget.
fn measured(census: &census::Census) -> String {
    let ms = |ns: f64| ns / 1e6;
    let cut = census.cut.iter().filter(|c| **c).count();
    format!(
        "untraced run {:.1} ms (fastest of {}{}); counting run {:.1} ms{}; a traced call costs ~{:.1} µs here; budget {:.1} ms per run",
        ms(census.untraced_ns as f64),
        census.untraced_runs,
        match census.untraced_failed {
            0 => String::new(),
            n => format!(", {n} of which failed"),
        },
        ms(census.counted_ns as f64),
        if cut > 0 {
            format!(
                " (the last of {}: the ones before were cut short, and {cut} function(s) too hot by then were left out of the next)",
                census.counting_runs
            )
        } else {
            String::new()
        },
        census.call_ns / 1e3,
        ms(census.budget_ns()),
    )
}

/// After the default set was chosen: records the C library's
/// synchronisation points (whose events the lock predicates read) in every
/// run if what they cost, measured with one run, fits in what the set
/// left of the budget; otherwise only runs that amplify a rare failure
/// record them.
pub(super) fn record_sync_if_cheap(
    tracer: &mut Tracer,
    target: &Target,
    policy: &RunPolicy,
    census: &census::Census,
    left_ns: f64,
    cancel: &AtomicBool,
    ui: &mut dyn Progress,
) -> anyhow::Result<()> {
    let cost = census::measure_sync(tracer, target, policy, census, cancel)?;
    let ms = |ns: f64| ns / 1e6;
    let fits = cost.fits(left_ns);
    tracer.set_sync_in_every_run(fits);
    let measured = if cost.complete {
        format!("{} per run, ~{:.2} ms", cost.entries, ms(cost.cost_ns))
    } else {
        format!("at least {} per run (the measuring run was cut short)", cost.entries)
    };
    ui.say(&if fits {
        format!(
            "recording the C library's lock, unlock and wait calls in every run ({measured}; {:.2} ms of the budget left)",
            ms(left_ns.max(0.0))
        )
    } else {
        format!(
            "recording the C library's lock, unlock and wait calls only in runs that amplify a rare failure: {measured} is more than the {:.2} ms of the budget left",
            ms(left_ns.max(0.0))
        )
    });
    Ok(())
}

/// [`census::LeftOut`] by name.
#[derive(Clone, Debug, Default)]
pub struct LeftOutNames {
    pub carried: Vec<String>,
    pub sessions: Vec<Vec<String>>,
    pub beyond: Vec<String>,
    /// The default set itself, each function with its calls in the
    /// counting run (what fewer probes leave out first when they hide
    /// the failure).
    pub chosen: Vec<(String, u64)>,
}
