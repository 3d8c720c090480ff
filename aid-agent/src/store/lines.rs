//! The CSV rows of a run: `events.csv` and `threads.csv` lines, and how
//! each cell is written and read.

use serde::{Deserialize, Serialize};

use crate::model::{EventRow, FuncId, Function, Point, Role, Thread, ValueKind, ValueType};

/// One line of `events.csv`: arguments on entries, the return value on
/// exits (empty when an exception unwound the call), the other cells
/// empty. Values of pointer type are written in hex
/// (`0x7ffd1234`), the others in decimal; both are read back.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
pub(super) struct EventLine {
    /// The run's id (version 2; version 1 files have no such column).
    #[serde(default)]
    pub(super) run: Option<u32>,
    pub(super) t_ns: u64,
    pub(super) tid: u32,
    pub(super) role: Role,
    pub(super) func: FuncId,
    /// The function's name, for people reading the file.
    pub(super) function: String,
    pub(super) point: Point,
    pub(super) instance: u32,
    pub(super) arg0: Option<String>,
    pub(super) arg1: Option<String>,
    pub(super) arg2: Option<String>,
    pub(super) ret: Option<String>,
    /// Entries of functions with a pointee: the bytes read, in hex,
    /// trailing zero bytes left out (version 3).
    #[serde(default)]
    pub(super) content: Option<String>,
}

pub(super) const EVENT_COLUMNS: &[&str] = &[
    "run", "t_ns", "tid", "role", "func", "function", "point", "instance", "arg0", "arg1", "arg2",
    "ret", "content",
];

/// The columns of events.csv in a session of `version`.
pub(super) fn event_columns(version: u32) -> &'static [&'static str] {
    match version {
        ..=1 => &EVENT_COLUMNS[1..12],
        2 => &EVENT_COLUMNS[..12],
        _ => EVENT_COLUMNS,
    }
}

/// Writes pointee bytes as hex, without trailing zero bytes (at least one
/// byte, so that nothing read stays apart from zeros read).
pub(super) fn content_cell(c: &crate::model::Content) -> String {
    let n = c.iter().rposition(|&b| b != 0).map_or(1, |i| i + 1);
    hex(&c[..n])
}

/// Reads a cell written by [`content_cell`].
pub(super) fn parse_content(text: &str) -> Result<crate::model::Content, String> {
    let bad = || format!("`{text}` is not pointee content");
    let mut out = crate::model::Content::default();
    if !text.len().is_multiple_of(2) || text.len() / 2 > out.len() {
        return Err(bad());
    }
    for (i, b) in out.iter_mut().enumerate().take(text.len() / 2) {
        *b = u8::from_str_radix(text.get(2 * i..2 * i + 2).ok_or_else(bad)?, 16)
            .map_err(|_| bad())?;
    }
    Ok(out)
}

/// Writes a value as its type wants it read: pointers in hex.
pub(super) fn cell(value: i64, ty: Option<&ValueType>) -> String {
    match ty.map(|t| t.kind) {
        Some(ValueKind::Pointer) => format!("{:#x}", value as u64),
        _ => value.to_string(),
    }
}

/// Reads a cell written by [`cell`] (or by version 1: always decimal).
pub(super) fn parse_cell(text: &str) -> Result<i64, String> {
    let parsed = match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).map(|v| v as i64),
        None => text.parse::<i64>(),
    };
    parsed.map_err(|_| format!("`{text}` is not a number"))
}

impl EventLine {
    pub(super) fn new(run: u32, r: &EventRow, functions: &[Function]) -> EventLine {
        let f = functions.get(r.func as usize);
        let entry = r.point == Point::Entry;
        let arg = |i: usize| entry.then(|| cell(r.args[i], f.and_then(|f| f.params.get(i))));
        EventLine {
            run: Some(run),
            t_ns: r.t_ns,
            tid: r.tid,
            role: r.role,
            func: r.func,
            function: f.map(|f| f.name.clone()).unwrap_or_default(),
            point: r.point,
            instance: r.instance,
            arg0: arg(0),
            arg1: arg(1),
            arg2: arg(2),
            ret: r.ret.filter(|_| !entry).map(|v| cell(v, f.map(|f| &f.ret))),
            content: r.content.as_ref().filter(|_| entry).map(content_cell),
        }
    }

    pub(super) fn row(self) -> Result<EventRow, String> {
        let num = |c: &str| parse_cell(c);
        let (args, ret) = match (self.point, &self.arg0, &self.arg1, &self.arg2, &self.ret) {
            (Point::Entry, Some(a0), Some(a1), Some(a2), None) => {
                ([num(a0)?, num(a1)?, num(a2)?], None)
            }
            (Point::Exit, None, None, None, ret) => ([0; 3], ret.as_deref().map(num).transpose()?),
            _ => {
                return Err(format!(
                    "the {} at {} ns has the wrong cells filled",
                    match self.point {
                        Point::Entry => "entry",
                        Point::Exit => "exit",
                    },
                    self.t_ns
                ));
            }
        };
        Ok(EventRow {
            t_ns: self.t_ns,
            tid: self.tid,
            role: self.role,
            func: self.func,
            point: self.point,
            instance: self.instance,
            args,
            ret,
            content: self.content.as_deref().map(parse_content).transpose()?,
        })
    }
}

/// One line of `threads.csv`.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
pub(super) struct ThreadLine {
    /// The run's id (version 2).
    #[serde(default)]
    run: Option<u32>,
    pub(super) role: Role,
    pub(super) tid: u32,
    pub(super) name: String,
    pub(super) parent_role: Option<Role>,
    pub(super) created_ns: u64,
}

pub(super) const THREAD_COLUMNS: &[&str] =
    &["run", "role", "tid", "name", "parent_role", "created_ns"];

/// The columns a session of `version` has (version 1: no `run` column).
pub(super) fn columns(all: &'static [&'static str], version: u32) -> &'static [&'static str] {
    if version < 2 { &all[1..] } else { all }
}

impl ThreadLine {
    pub(super) fn new(run: u32, t: &Thread) -> ThreadLine {
        ThreadLine {
            run: Some(run),
            role: t.role,
            tid: t.tid,
            name: t.name.clone(),
            parent_role: t.parent,
            created_ns: t.created_ns,
        }
    }
}

impl From<ThreadLine> for Thread {
    fn from(t: ThreadLine) -> Thread {
        Thread {
            role: t.role,
            tid: t.tid,
            name: t.name,
            parent: t.parent_role,
            created_ns: t.created_ns,
        }
    }
}

pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
