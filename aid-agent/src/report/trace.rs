//! `aid-agent export`: recorded runs as a trace for Perfetto
//! (ui.perfetto.dev, trace processor) or chrome://tracing, as uftrace's
//! `dump --chrome` does for its recordings. Each run is a process, each
//! thread role a thread track; each call a slice with its arguments and
//! return value as args; interventions and noise at traced calls are instants.
//! Times are the runs' own `CLOCK_MONOTONIC` times, so runs appear in the
//! order they were made.
//!
//! Two encodings: Chrome's JSON trace event format, and Perfetto's
//! protobuf `Trace` (TrackDescriptor and TrackEvent packets), written
//! with the few lines of protobuf wire format it needs.

use std::{collections::BTreeSet, path::Path};

use anyhow::{Context as _, bail};
use serde_json::{Value, json};

use crate::{
    model::{Call, Function, Label, Point, Run, ValueKind, ValueType, identity::RoleNames},
    store::{self, Loaded},
};

/// The trace encodings `export` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Chrome's JSON trace event format (also read by Perfetto).
    Chrome,
    /// Perfetto's protobuf trace.
    Perfetto,
}

/// What was exported.
pub struct Exported {
    pub runs: usize,
    pub slices: usize,
    pub instants: usize,
}

/// Exports `runs` (every run when empty) of the session in `dir` to `out`.
pub fn export(dir: &Path, runs: &[u32], format: Format, out: &Path) -> anyhow::Result<Exported> {
    let (bytes, counts) = trace_of(dir, runs, format)?;
    std::fs::write(out, &bytes).with_context(|| format!("writing {}", out.display()))?;
    Ok(counts)
}

/// The trace [`export`] writes, as bytes (for standard output).
pub fn trace_of(dir: &Path, runs: &[u32], format: Format) -> anyhow::Result<(Vec<u8>, Exported)> {
    let loaded = store::load_full(dir)?;
    encode(&loaded, runs, format)
}

/// One thing on the timeline of a thread track.
enum Item<'a> {
    Slice { call: &'a Call, end_ns: u64 },
    Instant { t_ns: u64, name: String, args: Vec<(String, Value)> },
}

struct Track<'a> {
    /// Synthetic ids: the run is the process, the role + 1 its thread.
    pid: u32,
    tid: u32,
    name: String,
    items: Vec<Item<'a>>,
}

struct Process<'a> {
    pid: u32,
    name: String,
    /// `CLOCK_MONOTONIC` ns of the run's time zero.
    base_ns: u64,
    tracks: Vec<Track<'a>>,
}

/// A value for people and tools: pointers in hex, the rest as numbers.
fn value(v: i64, ty: Option<&ValueType>) -> Value {
    match ty.map(|t| t.kind) {
        Some(ValueKind::Pointer) => Value::String(format!("{:#x}", v as u64)),
        _ => Value::from(v),
    }
}

/// Arguments at entry and the return value, as slice args.
fn call_args(call: &Call, f: Option<&Function>) -> Vec<(String, Value)> {
    let mut args = vec![("instance".to_owned(), Value::from(call.instance))];
    let params = f.map_or(3, |f| if f.params.is_empty() { 3 } else { f.params.len().min(3) });
    for i in 0..params {
        args.push((format!("arg{i}"), value(call.args[i], f.and_then(|f| f.params.get(i)))));
    }
    let void = f.is_some_and(|f| f.ret.kind == ValueKind::Void);
    match call.ret {
        Some(r) if !void => args.push(("ret".into(), value(r, f.map(|f| &f.ret)))),
        Some(_) => {}
        None => args.push(("returned".into(), Value::Bool(false))),
    }
    args
}

fn processes<'a>(loaded: &'a Loaded, wanted: &[u32]) -> anyhow::Result<Vec<Process<'a>>> {
    let ids: BTreeSet<u32> = loaded.session.runs.iter().map(|r| r.id).collect();
    if let Some(missing) = wanted.iter().find(|id| !ids.contains(id)) {
        bail!(
            "the session has no run {missing} (runs {}-{}): pick ids from runs.jsonl",
            ids.first().copied().unwrap_or(0),
            ids.last().copied().unwrap_or(0)
        );
    }
    let functions = &loaded.session.functions;
    let names = RoleNames::of_runs(&loaded.session.runs);
    let mut out = Vec::new();
    for (run, rec) in loaded.session.runs.iter().zip(&loaded.records) {
        if !wanted.is_empty() && !wanted.contains(&run.id) {
            continue;
        }
        out.push(process(run, rec.start_monotonic_ns, functions, &names));
    }
    Ok(out)
}

fn process<'a>(
    run: &'a Run,
    base_ns: u64,
    functions: &'a [Function],
    names: &RoleNames,
) -> Process<'a> {
    let label = match run.label {
        Label::Pass => "pass",
        Label::Fail => "fail",
    };
    let mut roles: Vec<u32> = run.threads.iter().map(|t| t.role).collect();
    roles.extend(run.calls.iter().map(|c| c.role));
    roles.sort_unstable();
    roles.dedup();
    let mut tracks: Vec<Track<'a>> = roles
        .iter()
        .map(|&r| Track { pid: run.id, tid: r + 1, name: names.label(r), items: Vec::new() })
        .collect();
    let track = |tracks: &mut Vec<Track<'a>>, role: u32| {
        let i = roles.binary_search(&role).unwrap_or(0);
        i.min(tracks.len().saturating_sub(1))
    };
    for c in &run.calls {
        if functions.get(c.func as usize).is_some_and(|f| f.internal) {
            continue;
        }
        let i = track(&mut tracks, c.role);
        tracks[i].items.push(Item::Slice { call: c, end_ns: c.exit_ns.unwrap_or(run.end_ns) });
    }
    let at = |site: crate::model::Site, point: Point| {
        run.call(site).map(|c| match point {
            Point::Entry => c.entry_ns,
            Point::Exit => c.exit_ns.unwrap_or(run.end_ns),
        })
    };
    for a in &run.interventions {
        let point = match a.intervention {
            crate::model::Intervention::DelayExit { .. } => Point::Exit,
            _ => Point::Entry,
        };
        for site in a.intervention.acting_sites() {
            let Some(t) = at(site, point) else { continue };
            let i = track(&mut tracks, site.role);
            let mut args = vec![
                ("applied".to_owned(), Value::Bool(a.applied)),
                ("timed_out".to_owned(), Value::Bool(a.timed_out)),
            ];
            if let Ok(Value::Object(m)) = serde_json::to_value(&a.intervention) {
                args.extend(m.into_iter().map(|(k, v)| match v {
                    Value::String(_) | Value::Number(_) | Value::Bool(_) => (k, v),
                    other => (k, Value::String(other.to_string())),
                }));
            }
            tracks[i].items.push(Item::Instant { t_ns: t, name: "intervention".into(), args });
        }
    }
    for n in &run.noise {
        let crate::model::NoiseAt::Call { site } = n.at else { continue };
        let Some(t) = at(site, Point::Entry) else { continue };
        let i = track(&mut tracks, site.role);
        let (name, args) = match n.action {
            crate::model::NoiseAction::Delay { us } => {
                ("random delay", vec![("delay_us".into(), Value::from(us))])
            }
            crate::model::NoiseAction::Demote { priority, max_us } => (
                "priority change point",
                vec![
                    ("priority".into(), Value::from(priority)),
                    ("max_us".into(), Value::from(max_us)),
                ],
            ),
            // Left off this run: nothing happened there; the process's
            // noise has no call to mark.
            crate::model::NoiseAction::Skip | crate::model::NoiseAction::OneCpu { .. } => continue,
        };
        tracks[i].items.push(Item::Instant { t_ns: t, name: name.into(), args });
    }
    Process {
        pid: run.id,
        name: format!("{} {}: {label} ({})", run.phase().name(), run.id, run.outcome.reason),
        base_ns,
        tracks,
    }
}

fn encode(loaded: &Loaded, runs: &[u32], format: Format) -> anyhow::Result<(Vec<u8>, Exported)> {
    let procs = processes(loaded, runs)?;
    let mut counts = Exported { runs: procs.len(), slices: 0, instants: 0 };
    for p in &procs {
        for t in &p.tracks {
            for i in &t.items {
                match i {
                    Item::Slice { .. } => counts.slices += 1,
                    Item::Instant { .. } => counts.instants += 1,
                }
            }
        }
    }
    let functions = &loaded.session.functions;
    let bytes = match format {
        Format::Chrome => chrome(&procs, functions),
        Format::Perfetto => perfetto(&procs, functions),
    };
    Ok((bytes, counts))
}

fn name_of(functions: &[Function], c: &Call) -> String {
    functions
        .get(c.func as usize)
        .map_or_else(|| format!("function#{}", c.func), |f| f.name.clone())
}

/// Chrome's JSON trace event format: `X` slices and `i` instants in µs.
fn chrome(procs: &[Process<'_>], functions: &[Function]) -> Vec<u8> {
    let us = |base: u64, t: u64| (base + t) as f64 / 1000.0;
    let mut events = Vec::new();
    for p in procs {
        events.push(
            json!({"ph": "M", "name": "process_name", "pid": p.pid, "args": {"name": p.name}}),
        );
        events.push(json!({"ph": "M", "name": "process_sort_index", "pid": p.pid, "args": {"sort_index": p.pid}}));
        for t in &p.tracks {
            events.push(json!({"ph": "M", "name": "thread_name", "pid": t.pid, "tid": t.tid, "args": {"name": t.name}}));
            for item in &t.items {
                events.push(match item {
                    Item::Slice { call, end_ns } => {
                        let args: serde_json::Map<String, Value> =
                            call_args(call, functions.get(call.func as usize))
                                .into_iter()
                                .collect();
                        json!({
                            "ph": "X", "cat": "call", "name": name_of(functions, call),
                            "pid": t.pid, "tid": t.tid,
                            "ts": us(p.base_ns, call.entry_ns),
                            "dur": end_ns.saturating_sub(call.entry_ns) as f64 / 1000.0,
                            "args": args,
                        })
                    }
                    Item::Instant { t_ns, name, args } => {
                        let args: serde_json::Map<String, Value> = args.iter().cloned().collect();
                        json!({
                            "ph": "i", "s": "t", "cat": "aid", "name": name,
                            "pid": t.pid, "tid": t.tid, "ts": us(p.base_ns, *t_ns), "args": args,
                        })
                    }
                });
            }
        }
    }
    let doc = json!({"displayTimeUnit": "ns", "traceEvents": events});
    let mut bytes = serde_json::to_vec(&doc).expect("trace serializes");
    bytes.push(b'\n');
    bytes
}

/// Protobuf wire format: just what the Perfetto trace needs.
#[derive(Default)]
struct Pb(Vec<u8>);

impl Pb {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    fn uint(&mut self, field: u32, v: u64) {
        self.varint(u64::from(field) << 3);
        self.varint(v);
    }

    fn int(&mut self, field: u32, v: i64) {
        self.uint(field, v as u64);
    }

    fn bytes(&mut self, field: u32, b: &[u8]) {
        self.varint((u64::from(field) << 3) | 2);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
    }

    fn msg(&mut self, field: u32, m: Pb) {
        self.bytes(field, &m.0);
    }
}

/// TracePacket fields.
const PACKET: u32 = 1;
const TIMESTAMP: u32 = 8;
const SEQUENCE_ID: u32 = 10;
const TRACK_EVENT: u32 = 11;
const SEQUENCE_FLAGS: u32 = 13;
const TIMESTAMP_CLOCK_ID: u32 = 58;
const TRACK_DESCRIPTOR: u32 = 60;
/// BUILTIN_CLOCK_MONOTONIC.
const CLOCK_MONOTONIC: u64 = 3;
/// SEQ_INCREMENTAL_STATE_CLEARED.
const SEQ_CLEARED: u64 = 1;

fn annotation(name: &str, v: &Value) -> Pb {
    let mut a = Pb::default();
    a.bytes(10, name.as_bytes());
    match v {
        Value::Bool(b) => a.uint(2, u64::from(*b)),
        Value::Number(n) if n.is_i64() => a.int(4, n.as_i64().unwrap_or(0)),
        Value::Number(n) => a.uint(3, n.as_u64().unwrap_or(0)),
        Value::String(s) => {
            match s.strip_prefix("0x").and_then(|h| u64::from_str_radix(h, 16).ok()) {
                Some(p) => a.uint(7, p),
                None => a.bytes(6, s.as_bytes()),
            }
        }
        other => a.bytes(6, other.to_string().as_bytes()),
    }
    a
}

/// Perfetto's protobuf trace: a track per process and per thread, then
/// begin/end and instant track events on the thread tracks.
fn perfetto(procs: &[Process<'_>], functions: &[Function]) -> Vec<u8> {
    const SEQ: u64 = 1;
    let mut trace = Pb::default();
    let mut first = true;
    let mut packet = |trace: &mut Pb, mut p: Pb| {
        p.uint(SEQUENCE_ID, SEQ);
        if first {
            p.uint(SEQUENCE_FLAGS, SEQ_CLEARED);
            first = false;
        }
        trace.msg(PACKET, p);
    };
    for p in procs {
        let puuid = u64::from(p.pid) << 32;
        let mut desc = Pb::default();
        desc.uint(1, puuid);
        let mut process = Pb::default();
        process.int(1, i64::from(p.pid));
        process.bytes(6, p.name.as_bytes());
        desc.msg(3, process);
        let mut pk = Pb::default();
        pk.msg(TRACK_DESCRIPTOR, desc);
        packet(&mut trace, pk);
        for t in &p.tracks {
            let tuuid = puuid | u64::from(t.tid);
            let mut desc = Pb::default();
            desc.uint(1, tuuid);
            desc.uint(5, puuid);
            let mut thread = Pb::default();
            thread.int(1, i64::from(t.pid));
            thread.int(2, i64::from(t.pid) * 1000 + i64::from(t.tid));
            thread.bytes(5, t.name.as_bytes());
            desc.msg(4, thread);
            let mut pk = Pb::default();
            pk.msg(TRACK_DESCRIPTOR, desc);
            packet(&mut trace, pk);
            // Begin and end events sorted by time; an end sorts before a
            // begin at the same time, and of two ends at the same time the
            // inner call's (entered later) comes first.
            let mut events: Vec<(u64, u8, u64, Pb)> = Vec::new();
            for item in &t.items {
                match item {
                    Item::Slice { call, end_ns } => {
                        let mut begin = Pb::default();
                        begin.uint(9, 1);
                        begin.uint(11, tuuid);
                        begin.bytes(23, name_of(functions, call).as_bytes());
                        for (n, v) in call_args(call, functions.get(call.func as usize)) {
                            begin.msg(4, annotation(&n, &v));
                        }
                        events.push((call.entry_ns, 1, call.entry_ns, begin));
                        let mut end = Pb::default();
                        end.uint(9, 2);
                        end.uint(11, tuuid);
                        events.push((*end_ns, 0, u64::MAX - call.entry_ns, end));
                    }
                    Item::Instant { t_ns, name, args } => {
                        let mut ev = Pb::default();
                        ev.uint(9, 3);
                        ev.uint(11, tuuid);
                        ev.bytes(23, name.as_bytes());
                        for (n, v) in args {
                            ev.msg(4, annotation(n, v));
                        }
                        events.push((*t_ns, 2, 0, ev));
                    }
                }
            }
            events.sort_by_key(|(t, order, then, _)| (*t, *order, *then));
            for (t_ns, _, _, ev) in events {
                let mut pk = Pb::default();
                pk.uint(TIMESTAMP, p.base_ns + t_ns);
                pk.uint(TIMESTAMP_CLOCK_ID, CLOCK_MONOTONIC);
                pk.msg(TRACK_EVENT, ev);
                packet(&mut trace, pk);
            }
        }
    }
    trace.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_are_protobuf_varints() {
        let mut p = Pb::default();
        p.varint(1);
        p.varint(300);
        p.uint(8, 150);
        assert_eq!(p.0, [0x01, 0xac, 0x02, 0x40, 0x96, 0x01]);
    }
}
