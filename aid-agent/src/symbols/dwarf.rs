//! What DWARF tells about a function: where it is in the source (via
//! addr2line), the types of its return value and first integer
//! parameters (so a 32-bit `int` returned in `eax` reads as -1, not
//! 4294967295), and which argument points to something worth reading at
//! entry (a string, or a small record of scalar members and character
//! arrays: [`Pointee`]).

use std::{
    borrow::Cow,
    collections::{HashMap, HashSet},
    rc::Rc,
};

use gimli::{AttributeValue, EndianRcSlice, Reader as _, RunTimeEndian};
use object::{Object as _, ObjectSection as _};

use crate::model::{Pointee, PointeeField, SourceLoc, ValueKind, ValueType};

type Reader = EndianRcSlice<RunTimeEndian>;

pub struct DebugInfo {
    lines: addr2line::Context<Reader>,
    signatures: HashMap<u64, (ValueType, Vec<ValueType>)>,
    /// `DW_AT_name` of generic instances (names with `<`): Rust symbols
    /// in the legacy mangling lose their generic arguments, DWARF keeps
    /// them (`__rust_begin_short_backtrace<app::main::{closure_env#0}, ()>`).
    generic_names: HashMap<u64, String>,
    /// Entry addresses of functions marked `DW_AT_noreturn`.
    noreturn: HashSet<u64>,
    pointees: HashMap<u64, Pointee>,
    /// Entry address of a function → entry addresses of the functions
    /// whose code calls it directly (`DW_TAG_call_site`, which optimising
    /// compilers emit).
    callers: HashMap<u64, Vec<u64>>,
    /// Entry address of a function with code → how many copies of it the
    /// compiler inlined into other functions (`DW_TAG_inlined_subroutine`):
    /// calls there never reach its entry, so its probe does not see them.
    inlined: HashMap<u64, u32>,
}

impl DebugInfo {
    /// None when the file has no usable `.debug_info`.
    pub fn load(file: &object::File<'_>) -> Option<DebugInfo> {
        let dwarf = load_dwarf(file)?;
        let Collected { signatures, generic_names, noreturn, pointees, callers, inlined } =
            collect_signatures(&dwarf).unwrap_or_default();
        let lines = addr2line::Context::from_dwarf(dwarf).ok()?;
        Some(DebugInfo { lines, signatures, generic_names, noreturn, pointees, callers, inlined })
    }

    /// How many inlined copies of the function at `address` DWARF lists
    /// (0 without DWARF or when the compiler inlined none).
    pub fn inlined(&self, address: u64) -> u32 {
        self.inlined.get(&address).copied().unwrap_or(0)
    }

    /// The functions whose code calls the one at `address` directly, by
    /// entry address, as DWARF's call-site entries say (none without
    /// them: unoptimised builds and most Rust builds have none).
    pub fn callers(&self, address: u64) -> &[u64] {
        self.callers.get(&address).map_or(&[], Vec::as_slice)
    }

    pub fn source(&self, address: u64) -> Option<SourceLoc> {
        let loc = self.lines.find_location(address).ok()??;
        Some(SourceLoc { file: loc.file?.to_owned(), line: loc.line? })
    }

    /// Where a new source line begins in `[low, high)` after `low`: the
    /// first address of each run of rows of one line, in address order.
    pub fn statements(&self, low: u64, high: u64) -> Vec<(u64, SourceLoc)> {
        let mut out: Vec<(u64, SourceLoc)> = Vec::new();
        let Ok(rows) = self.lines.find_location_range(low, high) else { return out };
        let mut last: Option<(String, u32)> = None;
        for (addr, _, loc) in rows {
            let (Some(file), Some(line)) = (loc.file, loc.line) else { continue };
            let here = (file.to_owned(), line);
            if last.as_ref() == Some(&here) {
                continue;
            }
            last = Some(here.clone());
            if addr > low && addr < high {
                out.push((addr, SourceLoc { file: here.0, line }));
            }
        }
        out
    }

    pub fn signature(&self, address: u64) -> Option<(ValueType, Vec<ValueType>)> {
        self.signatures.get(&address).cloned()
    }

    /// The DWARF name of the generic instance starting at `address`, with
    /// its generic arguments.
    pub fn generic_name(&self, address: u64) -> Option<&str> {
        self.generic_names.get(&address).map(String::as_str)
    }

    /// Whether the function at `address` is declared never to return.
    pub fn noreturn(&self, address: u64) -> bool {
        self.noreturn.contains(&address)
    }

    /// What the entry probe of the function at `address` should read.
    pub fn pointee(&self, address: u64) -> Option<Pointee> {
        self.pointees.get(&address).cloned()
    }
}

/// The file's DWARF sections; None when it has no `.debug_info`.
fn load_dwarf(file: &object::File<'_>) -> Option<gimli::Dwarf<Reader>> {
    file.section_by_name(".debug_info")?;
    let endian = if file.is_little_endian() { RunTimeEndian::Little } else { RunTimeEndian::Big };
    let load = |id: gimli::SectionId| -> Result<Reader, gimli::Error> {
        let data = file
            .section_by_name(id.name())
            .and_then(|s| s.uncompressed_data().ok())
            .unwrap_or(Cow::Borrowed(&[]));
        Ok(EndianRcSlice::new(Rc::from(&*data), endian))
    };
    gimli::Dwarf::load(load).ok()
}

/// Where a member of a global variable lies, from the variable's type in
/// DWARF: `path` names a member of its record, then a member of that
/// member, and so on (`["balance"]` for `savings.balance`). The member's
/// offset from the variable's start and its size, or why there is none,
/// in words for the user.
pub fn member_of(
    file: &object::File<'_>,
    variable: &str,
    path: &[&str],
) -> Result<(u64, u64), String> {
    let dwarf = load_dwarf(file)
        .ok_or_else(|| "the executable has no debug information (build it with -g)".to_owned())?;
    let found = find_member(&dwarf, variable, path).map_err(|e| format!("its DWARF: {e}"))?;
    found.unwrap_or_else(|| Err(format!("no global variable {variable} in the debug information")))
}

/// [`member_of`] over the units: `None` when no unit has the variable.
fn find_member(
    dwarf: &gimli::Dwarf<Reader>,
    variable: &str,
    path: &[&str],
) -> gimli::Result<Option<Result<(u64, u64), String>>> {
    let mut units = dwarf.units();
    while let Some(header) = units.next()? {
        let unit = dwarf.unit(header)?;
        let Some(mut ty) = variable_type(dwarf, &unit, variable)? else { continue };
        let (mut offset, mut named) = (0u64, variable.to_owned());
        for member in path {
            let all = members(dwarf, &unit, ty)?;
            let Some((at, t)) = all.iter().find(|(n, _)| n == member).and_then(|m| m.1) else {
                let names: Vec<&str> = all.iter().map(|(n, _)| n.as_str()).collect();
                let has = if names.is_empty() { "none".to_owned() } else { names.join(", ") };
                return Ok(Some(Err(format!(
                    "{named} has no member {member} (its members: {has})"
                ))));
            };
            (offset, ty, named) = (offset + at, t, format!("{named}.{member}"));
        }
        return Ok(Some(match byte_size(&unit, ty)? {
            Some(size) => Ok((offset, size)),
            None => Err(format!("the size of {named} is not in the debug information")),
        }));
    }
    Ok(None)
}

/// The member of global `variable` that holds bytes `offset` to
/// `offset + len` (the reverse of [`member_of`]): its path as C writes it
/// (`balance`, `stats.count`), down to the smallest member that holds all
/// of them. `None` without debug information, when no member does (the
/// bytes span two members, or padding), or when the variable is no
/// record.
pub fn member_at(file: &object::File<'_>, variable: &str, offset: u64, len: u64) -> Option<String> {
    let dwarf = load_dwarf(file)?;
    find_member_at(&dwarf, variable, offset, len).ok().flatten()
}

/// [`member_at`] over the units.
fn find_member_at(
    dwarf: &gimli::Dwarf<Reader>,
    variable: &str,
    offset: u64,
    len: u64,
) -> gimli::Result<Option<String>> {
    let mut units = dwarf.units();
    while let Some(header) = units.next()? {
        let unit = dwarf.unit(header)?;
        let Some(mut ty) = variable_type(dwarf, &unit, variable)? else { continue };
        let (mut from, mut path) = (offset, Vec::new());
        loop {
            let mut inside = None;
            for (name, placed) in members(dwarf, &unit, ty)? {
                let Some((at, t)) = placed else { continue };
                let size = byte_size(&unit, t)?.unwrap_or(0);
                if at <= from && from + len <= at + size {
                    inside = Some((name, at, t));
                    break;
                }
            }
            let Some((name, at, t)) = inside else { break };
            (from, ty) = (from - at, t);
            path.push(name);
        }
        return Ok((!path.is_empty()).then(|| path.join(".")));
    }
    Ok(None)
}

/// The type of global `variable` in `unit`, when the unit declares it.
fn variable_type(
    dwarf: &gimli::Dwarf<Reader>,
    unit: &gimli::Unit<Reader>,
    variable: &str,
) -> gimli::Result<Option<gimli::UnitOffset>> {
    let mut ty = None;
    let root = unit.entries_tree(None)?.root()?.entry().offset();
    children(unit, root, gimli::DW_TAG_variable, |v| {
        let named = v.attr_value(gimli::DW_AT_name)?.and_then(|n| string(dwarf, unit, n));
        if named.as_deref() == Some(variable) {
            ty = match find_attr(unit, v.offset(), gimli::DW_AT_type)? {
                Some(AttributeValue::UnitRef(t)) => Some(t),
                _ => None,
            };
        }
        Ok(ty.is_none())
    })?;
    Ok(ty)
}

/// A member's name, with its offset and type when DWARF gives both (a
/// bit-field has no byte offset).
type Member = (String, Option<(u64, gimli::UnitOffset)>);

/// The named members of record type `ty` (a struct or union, through
/// typedefs and qualifiers), in order. A union's members have no
/// location: they all start at 0.
fn members(
    dwarf: &gimli::Dwarf<Reader>,
    unit: &gimli::Unit<Reader>,
    ty: gimli::UnitOffset,
) -> gimli::Result<Vec<Member>> {
    let record = strip(unit, ty)?;
    let union = unit.entry(record)?.tag() == gimli::DW_TAG_union_type;
    let mut out = Vec::new();
    children(unit, record, gimli::DW_TAG_member, |m| {
        let name = m.attr_value(gimli::DW_AT_name)?.and_then(|n| string(dwarf, unit, n));
        let at = m.attr_value(gimli::DW_AT_data_member_location)?.and_then(|v| v.udata_value());
        let ty = match m.attr_value(gimli::DW_AT_type)? {
            Some(AttributeValue::UnitRef(t)) => Some(t),
            _ => None,
        };
        if let Some(n) = name {
            out.push((n, at.or(union.then_some(0)).zip(ty)));
        }
        Ok(true)
    })?;
    Ok(out)
}

/// A type's size in bytes: its `DW_AT_byte_size`, or an array's element
/// size times its length.
fn byte_size(unit: &gimli::Unit<Reader>, ty: gimli::UnitOffset) -> gimli::Result<Option<u64>> {
    let ty = strip(unit, ty)?;
    let entry = unit.entry(ty)?;
    if let Some(n) = entry.attr_value(gimli::DW_AT_byte_size)?.and_then(|v| v.udata_value()) {
        return Ok(Some(n));
    }
    if entry.tag() != gimli::DW_TAG_array_type {
        return Ok(None);
    }
    let Some(AttributeValue::UnitRef(element)) = entry.attr_value(gimli::DW_AT_type)? else {
        return Ok(None);
    };
    let Some(each) = byte_size(unit, element)? else { return Ok(None) };
    let mut len = Some(1u64);
    children(unit, ty, gimli::DW_TAG_subrange_type, |r| {
        let n = match r.attr_value(gimli::DW_AT_count)?.and_then(|v| v.udata_value()) {
            Some(n) => Some(n),
            None => {
                r.attr_value(gimli::DW_AT_upper_bound)?.and_then(|v| v.udata_value()).map(|u| u + 1)
            }
        };
        len = len.zip(n).map(|(a, b)| a * b);
        Ok(true)
    })?;
    Ok(len.map(|n| n * each))
}

/// What one walk over the subprograms collects.
#[derive(Default)]
struct Collected {
    signatures: HashMap<u64, (ValueType, Vec<ValueType>)>,
    generic_names: HashMap<u64, String>,
    noreturn: HashSet<u64>,
    pointees: HashMap<u64, Pointee>,
    callers: HashMap<u64, Vec<u64>>,
    inlined: HashMap<u64, u32>,
}

/// Walks every `DW_TAG_subprogram` with a `DW_AT_low_pc` and records its
/// return type and integer parameter types, keyed by entry address; the
/// names of generic instances; which never return; from the call sites
/// in their code, which calls which; and how many inlined copies each has.
fn collect_signatures(dwarf: &gimli::Dwarf<Reader>) -> gimli::Result<Collected> {
    let mut out = Collected::default();
    // Inlined copies name their abstract origin, possibly in another unit
    // (LTO): both sides by .debug_info offset, matched after every unit.
    let mut entry_at: HashMap<gimli::DebugInfoOffset, u64> = HashMap::new();
    let mut inlined_from: Vec<gimli::DebugInfoOffset> = Vec::new();
    let mut units = dwarf.units();
    while let Some(header) = units.next()? {
        let unit = dwarf.unit(header)?;
        let global = |o: gimli::UnitOffset| o.to_debug_info_offset(&unit.header);
        let mut entries = unit.entries();
        // Per unit: the entry address of each subprogram DIE with code and
        // of the DIEs it completes; call sites as (caller's entry address,
        // callee DIE); the enclosing subprograms with code, (depth, entry).
        let mut entry_of: HashMap<gimli::UnitOffset, u64> = HashMap::new();
        let mut calls: Vec<(u64, gimli::UnitOffset)> = Vec::new();
        let mut inside: Vec<(isize, u64)> = Vec::new();
        let mut depth = 0isize;
        while let Some((delta, entry)) = entries.next_dfs()? {
            depth += delta;
            while inside.last().is_some_and(|&(d, _)| d >= depth) {
                inside.pop();
            }
            if matches!(entry.tag(), gimli::DW_TAG_call_site | gimli::DW_TAG_GNU_call_site) {
                let origin = match entry.attr_value(gimli::DW_AT_call_origin)? {
                    Some(v) => Some(v),
                    None => entry.attr_value(gimli::DW_AT_abstract_origin)?,
                };
                if let (Some(&(_, caller)), Some(AttributeValue::UnitRef(callee))) =
                    (inside.last(), origin)
                {
                    calls.push((caller, callee));
                }
                continue;
            }
            if entry.tag() == gimli::DW_TAG_inlined_subroutine {
                match entry.attr_value(gimli::DW_AT_abstract_origin)? {
                    Some(AttributeValue::UnitRef(o)) => inlined_from.extend(global(o)),
                    Some(AttributeValue::DebugInfoRef(o)) => inlined_from.push(o),
                    _ => {}
                }
                continue;
            }
            if entry.tag() != gimli::DW_TAG_subprogram {
                continue;
            }
            let Some(AttributeValue::Addr(low_pc)) = entry.attr_value(gimli::DW_AT_low_pc)? else {
                continue;
            };
            inside.push((depth, low_pc));
            entry_of.insert(entry.offset(), low_pc);
            entry_at.extend(global(entry.offset()).map(|g| (g, low_pc)));
            for at in [gimli::DW_AT_specification, gimli::DW_AT_abstract_origin] {
                match entry.attr_value(at)? {
                    Some(AttributeValue::UnitRef(o)) => {
                        entry_of.insert(o, low_pc);
                        entry_at.extend(global(o).map(|g| (g, low_pc)));
                    }
                    Some(AttributeValue::DebugInfoRef(o)) => {
                        entry_at.insert(o, low_pc);
                    }
                    _ => {}
                }
            }
            let offset = entry.offset();
            if let Some(name) = find_attr(&unit, offset, gimli::DW_AT_name)?
                && let Ok(name) = dwarf.attr_string(&unit, name)
                && let Ok(name) = name.to_string_lossy()
                && name.contains('<')
            {
                out.generic_names.insert(low_pc, name.into_owned());
            }
            if let Some(AttributeValue::Flag(true)) =
                find_attr(&unit, offset, gimli::DW_AT_noreturn)?
            {
                out.noreturn.insert(low_pc);
            }
            let ret = subprogram_return(dwarf, &unit, offset)?;
            let (params, pointee) = subprogram_params(dwarf, &unit, offset, ret)?;
            out.signatures.insert(low_pc, (ret, params));
            if let Some(p) = pointee {
                out.pointees.insert(low_pc, p);
            }
        }
        for (caller, callee) in calls {
            if let Some(&callee) = entry_of.get(&callee) {
                let list = out.callers.entry(callee).or_default();
                if caller != callee && !list.contains(&caller) {
                    list.push(caller);
                }
            }
        }
    }
    for origin in inlined_from {
        if let Some(&low_pc) = entry_at.get(&origin) {
            *out.inlined.entry(low_pc).or_default() += 1;
        }
    }
    Ok(out)
}

/// The DIE itself, or the declaration it completes (`DW_AT_specification`,
/// `DW_AT_abstract_origin`) when the attribute lives there.
fn find_attr(
    unit: &gimli::Unit<Reader>,
    offset: gimli::UnitOffset,
    attr: gimli::DwAt,
) -> gimli::Result<Option<AttributeValue<Reader>>> {
    let mut offset = offset;
    for _ in 0..4 {
        let entry = unit.entry(offset)?;
        if let Some(v) = entry.attr_value(attr)? {
            return Ok(Some(v));
        }
        let next = match entry.attr_value(gimli::DW_AT_specification)? {
            Some(v) => Some(v),
            None => entry.attr_value(gimli::DW_AT_abstract_origin)?,
        };
        match next {
            Some(AttributeValue::UnitRef(o)) => offset = o,
            _ => return Ok(None),
        }
    }
    Ok(None)
}

fn subprogram_return(
    dwarf: &gimli::Dwarf<Reader>,
    unit: &gimli::Unit<Reader>,
    offset: gimli::UnitOffset,
) -> gimli::Result<ValueType> {
    match find_attr(unit, offset, gimli::DW_AT_type)? {
        Some(AttributeValue::UnitRef(t)) => resolve_type(dwarf, unit, t),
        Some(_) => Ok(ValueType::UNKNOWN),
        None => Ok(ValueType { kind: ValueKind::Void, size: 0 }),
    }
}

/// Types of the parameters passed in the first three integer registers
/// (floating-point parameters travel in xmm registers and are skipped),
/// and the [`Pointee`] of the last of them that points to a string or a
/// small record (the thing asked about, after the object asked: `(stock,
/// sku)`, `(venue, request)`).
///
/// A return value larger than 16 bytes is returned through memory the
/// caller passes in `rdi` (System V ABI): that hidden pointer comes first,
/// so the declared parameters start at `rsi`.
fn subprogram_params(
    dwarf: &gimli::Dwarf<Reader>,
    unit: &gimli::Unit<Reader>,
    offset: gimli::UnitOffset,
    ret: ValueType,
) -> gimli::Result<(Vec<ValueType>, Option<Pointee>)> {
    let mut params = Vec::new();
    if ret.kind == ValueKind::Unknown && ret.size > 16 {
        params.push(ValueType::POINTER);
    }
    let mut pointee = None;
    children(unit, offset, gimli::DW_TAG_formal_parameter, |entry| {
        let type_at = match find_attr(unit, entry.offset(), gimli::DW_AT_type)? {
            Some(AttributeValue::UnitRef(t)) => Some(t),
            _ => None,
        };
        let ty = match type_at {
            Some(t) => resolve_type(dwarf, unit, t)?,
            None => ValueType::UNKNOWN,
        };
        if ty.kind == ValueKind::Float {
            return Ok(true);
        }
        if ty.kind == ValueKind::Pointer
            && let Some(t) = type_at
        {
            let name = find_attr(unit, entry.offset(), gimli::DW_AT_name)?
                .and_then(|n| string(dwarf, unit, n))
                .unwrap_or_else(|| format!("arg{}", params.len() + 1));
            if let Some(p) = pointee_of(dwarf, unit, t, &name, params.len() as u8)? {
                pointee = Some(p);
            }
        }
        params.push(ty);
        Ok(params.len() < 3)
    })?;
    Ok((params, pointee))
}

/// Calls `f` on each child of the DIE at `offset` whose tag is `tag`, in
/// order, while it returns true.
fn children(
    unit: &gimli::Unit<Reader>,
    offset: gimli::UnitOffset,
    tag: gimli::DwTag,
    mut f: impl FnMut(&gimli::DebuggingInformationEntry<'_, '_, Reader>) -> gimli::Result<bool>,
) -> gimli::Result<()> {
    let mut tree = unit.entries_tree(Some(offset))?;
    let root = tree.root()?;
    let mut children = root.children();
    while let Some(child) = children.next()? {
        let entry = child.entry();
        if entry.tag() == tag && !f(entry)? {
            break;
        }
    }
    Ok(())
}

/// A string attribute's text.
fn string(
    dwarf: &gimli::Dwarf<Reader>,
    unit: &gimli::Unit<Reader>,
    value: AttributeValue<Reader>,
) -> Option<String> {
    let s = dwarf.attr_string(unit, value).ok()?;
    s.to_string_lossy().ok().map(Cow::into_owned)
}

/// Follows typedefs and qualifiers; the DIE they lead to.
fn strip(
    unit: &gimli::Unit<Reader>,
    offset: gimli::UnitOffset,
) -> gimli::Result<gimli::UnitOffset> {
    let mut offset = offset;
    for _ in 0..16 {
        let entry = unit.entry(offset)?;
        match entry.tag() {
            gimli::DW_TAG_typedef
            | gimli::DW_TAG_const_type
            | gimli::DW_TAG_volatile_type
            | gimli::DW_TAG_restrict_type
            | gimli::DW_TAG_atomic_type => match entry.attr_value(gimli::DW_AT_type)? {
                Some(AttributeValue::UnitRef(t)) => offset = t,
                _ => return Ok(offset),
            },
            _ => return Ok(offset),
        }
    }
    Ok(offset)
}

/// A character type: what a C string is made of.
fn is_char(unit: &gimli::Unit<Reader>, offset: gimli::UnitOffset) -> gimli::Result<bool> {
    let entry = unit.entry(offset)?;
    Ok(entry.tag() == gimli::DW_TAG_base_type
        && matches!(entry.attr_value(gimli::DW_AT_byte_size)?, Some(AttributeValue::Udata(1)))
        && matches!(
            entry.attr_value(gimli::DW_AT_encoding)?,
            Some(AttributeValue::Encoding(gimli::DW_ATE_signed_char | gimli::DW_ATE_unsigned_char))
        ))
}

/// What a parameter of pointer type `ptr` (register `arg`) points to, if
/// it is worth reading at entry: characters (a C string, read up to its
/// NUL), or a record with scalar members or character arrays in its
/// first [`aid_common::POINTEE_BYTES`] bytes (each such member one field).
fn pointee_of(
    dwarf: &gimli::Dwarf<Reader>,
    unit: &gimli::Unit<Reader>,
    ptr: gimli::UnitOffset,
    param: &str,
    arg: u8,
) -> gimli::Result<Option<Pointee>> {
    const MAX: u64 = aid_common::POINTEE_BYTES as u64;
    let ptr = unit.entry(strip(unit, ptr)?)?;
    if !matches!(
        ptr.tag(),
        gimli::DW_TAG_pointer_type
            | gimli::DW_TAG_reference_type
            | gimli::DW_TAG_rvalue_reference_type
    ) {
        return Ok(None);
    }
    let Some(AttributeValue::UnitRef(target)) = ptr.attr_value(gimli::DW_AT_type)? else {
        return Ok(None);
    };
    let target = strip(unit, target)?;
    if is_char(unit, target)? {
        let field =
            PointeeField { name: param.to_owned(), offset: 0, size: MAX as u8, text: false };
        return Ok(Some(Pointee { arg, text: true, len: MAX as u8, fields: vec![field] }));
    }
    let record = unit.entry(target)?;
    if !matches!(record.tag(), gimli::DW_TAG_structure_type | gimli::DW_TAG_class_type)
        || record.attr_value(gimli::DW_AT_declaration)?.is_some()
    {
        return Ok(None);
    }
    let Some(size) = record.attr_value(gimli::DW_AT_byte_size)?.and_then(|v| v.udata_value())
    else {
        return Ok(None);
    };
    let mut fields = Vec::new();
    children(unit, target, gimli::DW_TAG_member, |member| {
        let Some(at) =
            member.attr_value(gimli::DW_AT_data_member_location)?.and_then(|v| v.udata_value())
        else {
            return Ok(true);
        };
        let Some(AttributeValue::UnitRef(t)) = member.attr_value(gimli::DW_AT_type)? else {
            return Ok(true);
        };
        // A scalar member, or a character array (a name, a key), that lies
        // within the bytes read: a key cut short would call different
        // keys the same.
        let ty = resolve_type(dwarf, unit, t)?;
        let scalar = matches!(ty.kind, ValueKind::Signed | ValueKind::Unsigned | ValueKind::Bool);
        let (size, text) = if scalar && ty.size > 0 && at + u64::from(ty.size) <= MAX {
            (u64::from(ty.size), false)
        } else {
            match char_array_len(unit, t)? {
                Some(n) if at + n <= MAX => (n, true),
                _ => return Ok(true),
            }
        };
        let Some(name) = member.attr_value(gimli::DW_AT_name)?.and_then(|n| string(dwarf, unit, n))
        else {
            return Ok(true);
        };
        fields.push(PointeeField {
            name: format!("{param}.{name}"),
            offset: at as u8,
            size: size as u8,
            text,
        });
        Ok(true)
    })?;
    if fields.is_empty() {
        return Ok(None);
    }
    let len = size.min(MAX) as u8;
    Ok(Some(Pointee { arg, text: false, len, fields }))
}

/// The length of a one-dimensional array of characters (`char sku[16]`),
/// if `offset` is one (through typedefs and qualifiers).
fn char_array_len(
    unit: &gimli::Unit<Reader>,
    offset: gimli::UnitOffset,
) -> gimli::Result<Option<u64>> {
    let offset = strip(unit, offset)?;
    let array = unit.entry(offset)?;
    if array.tag() != gimli::DW_TAG_array_type {
        return Ok(None);
    }
    let Some(AttributeValue::UnitRef(element)) = array.attr_value(gimli::DW_AT_type)? else {
        return Ok(None);
    };
    if !is_char(unit, strip(unit, element)?)? {
        return Ok(None);
    }
    let mut len = None;
    let mut dims = 0;
    children(unit, offset, gimli::DW_TAG_subrange_type, |range| {
        dims += 1;
        len = match (
            range.attr_value(gimli::DW_AT_count)?,
            range.attr_value(gimli::DW_AT_upper_bound)?,
        ) {
            (Some(n), _) => n.udata_value(),
            (None, Some(upper)) => upper.udata_value().map(|u| u + 1),
            _ => None,
        };
        Ok(true)
    })?;
    Ok(if dims == 1 { len.filter(|&n| n > 0) } else { None })
}

/// Follows typedefs and qualifiers down to something with a size.
fn resolve_type(
    _dwarf: &gimli::Dwarf<Reader>,
    unit: &gimli::Unit<Reader>,
    offset: gimli::UnitOffset,
) -> gimli::Result<ValueType> {
    let entry = unit.entry(strip(unit, offset)?)?;
    let size = match entry.attr_value(gimli::DW_AT_byte_size)? {
        Some(AttributeValue::Udata(n)) => n.min(255) as u8,
        Some(AttributeValue::Data1(n)) => n,
        Some(AttributeValue::Data2(n)) => n.min(255) as u8,
        _ => 0,
    };
    Ok(match entry.tag() {
        gimli::DW_TAG_pointer_type
        | gimli::DW_TAG_reference_type
        | gimli::DW_TAG_rvalue_reference_type
        | gimli::DW_TAG_ptr_to_member_type => ValueType::POINTER,
        gimli::DW_TAG_base_type => {
            let kind = match entry.attr_value(gimli::DW_AT_encoding)? {
                Some(AttributeValue::Encoding(
                    gimli::DW_ATE_signed | gimli::DW_ATE_signed_char,
                )) => ValueKind::Signed,
                Some(AttributeValue::Encoding(
                    gimli::DW_ATE_unsigned | gimli::DW_ATE_unsigned_char | gimli::DW_ATE_UTF,
                )) => ValueKind::Unsigned,
                Some(AttributeValue::Encoding(gimli::DW_ATE_boolean)) => ValueKind::Bool,
                Some(AttributeValue::Encoding(gimli::DW_ATE_float)) => ValueKind::Float,
                _ => ValueKind::Unknown,
            };
            ValueType { kind, size }
        }
        gimli::DW_TAG_enumeration_type => {
            // The underlying type decides signedness; C enums are int.
            let kind = match entry.attr_value(gimli::DW_AT_type)? {
                Some(AttributeValue::UnitRef(t)) => resolve_type(_dwarf, unit, t)?.kind,
                _ => ValueKind::Signed,
            };
            ValueType { kind, size }
        }
        // Where `strip` stopped on a typedef or qualifier: `typedef void
        // T` or `const void` (no type), or a chain too long to follow.
        gimli::DW_TAG_typedef
        | gimli::DW_TAG_const_type
        | gimli::DW_TAG_volatile_type
        | gimli::DW_TAG_restrict_type
        | gimli::DW_TAG_atomic_type => match entry.attr_value(gimli::DW_AT_type)? {
            Some(AttributeValue::UnitRef(_)) => ValueType::UNKNOWN,
            _ => ValueType { kind: ValueKind::Void, size: 0 },
        },
        // Structs, unions, arrays: passed in memory or split across
        // registers; we can't read them from one register.
        _ => ValueType { kind: ValueKind::Unknown, size },
    })
}
