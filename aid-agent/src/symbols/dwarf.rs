//! What DWARF tells about a function: where it is in the source (via
//! addr2line) and the types of its return value and first integer
//! parameters (so a 32-bit `int` returned in `eax` reads as -1, not
//! 4294967295).

use std::{
    borrow::Cow,
    collections::{HashMap, HashSet},
    rc::Rc,
};

use gimli::{AttributeValue, EndianRcSlice, Reader as _, RunTimeEndian};
use object::{Object as _, ObjectSection as _};

use crate::model::{SourceLoc, ValueKind, ValueType};

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
}

impl DebugInfo {
    /// None when the file has no usable `.debug_info`.
    pub fn load(file: &object::File<'_>) -> Option<DebugInfo> {
        file.section_by_name(".debug_info")?;
        let endian =
            if file.is_little_endian() { RunTimeEndian::Little } else { RunTimeEndian::Big };
        let load = |id: gimli::SectionId| -> Result<Reader, gimli::Error> {
            let data = file
                .section_by_name(id.name())
                .and_then(|s| s.uncompressed_data().ok())
                .unwrap_or(Cow::Borrowed(&[]));
            Ok(EndianRcSlice::new(Rc::from(&*data), endian))
        };
        let dwarf = gimli::Dwarf::load(load).ok()?;
        let Collected { signatures, generic_names, noreturn } =
            collect_signatures(&dwarf).unwrap_or_default();
        let lines = addr2line::Context::from_dwarf(dwarf).ok()?;
        Some(DebugInfo { lines, signatures, generic_names, noreturn })
    }

    pub fn source(&self, address: u64) -> Option<SourceLoc> {
        let loc = self.lines.find_location(address).ok()??;
        Some(SourceLoc { file: loc.file?.to_owned(), line: loc.line? })
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
}

/// What one walk over the subprograms collects.
#[derive(Default)]
struct Collected {
    signatures: HashMap<u64, (ValueType, Vec<ValueType>)>,
    generic_names: HashMap<u64, String>,
    noreturn: HashSet<u64>,
}

/// Walks every `DW_TAG_subprogram` with a `DW_AT_low_pc` and records its
/// return type and integer parameter types, keyed by entry address; the
/// names of generic instances; and which never return.
fn collect_signatures(dwarf: &gimli::Dwarf<Reader>) -> gimli::Result<Collected> {
    let mut out = Collected::default();
    let mut units = dwarf.units();
    while let Some(header) = units.next()? {
        let unit = dwarf.unit(header)?;
        let mut entries = unit.entries();
        while let Some((_, entry)) = entries.next_dfs()? {
            if entry.tag() != gimli::DW_TAG_subprogram {
                continue;
            }
            let Some(AttributeValue::Addr(low_pc)) = entry.attr_value(gimli::DW_AT_low_pc)? else {
                continue;
            };
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
            let params = subprogram_params(dwarf, &unit, offset)?;
            out.signatures.insert(low_pc, (ret, params));
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
/// (floating-point parameters travel in xmm registers and are skipped).
fn subprogram_params(
    dwarf: &gimli::Dwarf<Reader>,
    unit: &gimli::Unit<Reader>,
    offset: gimli::UnitOffset,
) -> gimli::Result<Vec<ValueType>> {
    let mut params = Vec::new();
    let mut tree = unit.entries_tree(Some(offset))?;
    let root = tree.root()?;
    let mut children = root.children();
    while let Some(child) = children.next()? {
        let entry = child.entry();
        if entry.tag() != gimli::DW_TAG_formal_parameter {
            continue;
        }
        let ty = match find_attr(unit, entry.offset(), gimli::DW_AT_type)? {
            Some(AttributeValue::UnitRef(t)) => resolve_type(dwarf, unit, t)?,
            _ => ValueType::UNKNOWN,
        };
        if ty.kind == ValueKind::Float {
            continue;
        }
        params.push(ty);
        if params.len() == 3 {
            break;
        }
    }
    Ok(params)
}

/// Follows typedefs and qualifiers down to something with a size.
fn resolve_type(
    _dwarf: &gimli::Dwarf<Reader>,
    unit: &gimli::Unit<Reader>,
    offset: gimli::UnitOffset,
) -> gimli::Result<ValueType> {
    let mut offset = offset;
    for _ in 0..16 {
        let entry = unit.entry(offset)?;
        let size = match entry.attr_value(gimli::DW_AT_byte_size)? {
            Some(AttributeValue::Udata(n)) => n.min(255) as u8,
            Some(AttributeValue::Data1(n)) => n,
            Some(AttributeValue::Data2(n)) => n.min(255) as u8,
            _ => 0,
        };
        match entry.tag() {
            gimli::DW_TAG_pointer_type
            | gimli::DW_TAG_reference_type
            | gimli::DW_TAG_rvalue_reference_type
            | gimli::DW_TAG_ptr_to_member_type => {
                return Ok(ValueType::POINTER);
            }
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
                return Ok(ValueType { kind, size });
            }
            gimli::DW_TAG_enumeration_type => {
                // The underlying type decides signedness; C enums are int.
                let kind = match entry.attr_value(gimli::DW_AT_type)? {
                    Some(AttributeValue::UnitRef(t)) => resolve_type(_dwarf, unit, t)?.kind,
                    _ => ValueKind::Signed,
                };
                return Ok(ValueType { kind, size });
            }
            gimli::DW_TAG_typedef
            | gimli::DW_TAG_const_type
            | gimli::DW_TAG_volatile_type
            | gimli::DW_TAG_restrict_type
            | gimli::DW_TAG_atomic_type => match entry.attr_value(gimli::DW_AT_type)? {
                Some(AttributeValue::UnitRef(t)) => offset = t,
                // `typedef void T` or `const void`.
                _ => return Ok(ValueType { kind: ValueKind::Void, size: 0 }),
            },
            // Structs, unions, arrays: passed in memory or split across
            // registers; we can't read them from one register.
            _ => return Ok(ValueType { kind: ValueKind::Unknown, size }),
        }
    }
    Ok(ValueType::UNKNOWN)
}
