//! A payload's schema checked against the Arrow types weir writes, before arrow converts it.
//!
//! Arrow's schema conversion (`arrow_ipc::convert::fb_to_schema`) panics on flatbuffers that
//! verify but describe what it does not handle: an `Int` of bit width 0 or 127, a type tag with
//! no type table, a list without its child, the `NONE` type. A weir payload only ever holds the
//! types [`crate::batch::Batch`] and [`crate::batch::TensorColumn`] write — unsigned and signed
//! 8/16/32/64-bit integers, half-, single- and double-precision floats, UTF-8 strings, binary
//! (BYTES elements), lists, fixed-size lists and structs, none dictionary-encoded — so anything else is refused here with the field it was found in,
//! and the conversion never meets a type it would panic on.

use arrow_ipc::{Field, Precision, Schema, Type};

use super::WireError;

/// Characters of a field name quoted in an error.
const NAME_MAX_CHARS: usize = 64;

fn refuse(field: &Field<'_>, reason: &'static str) -> WireError {
    WireError::Schema {
        field: field
            .name()
            .unwrap_or_default()
            .chars()
            .take(NAME_MAX_CHARS)
            .collect(),
        reason,
    }
}

/// Checks every field of `schema`, children included. `max_values` is the most values a field
/// node of the payload may hold: a fixed-size list's size times it must not overflow, since
/// arrow's validation multiplies a list's length by its size with an `expect`.
///
/// # Errors
/// [`WireError::Schema`] naming the first field of a type weir never writes.
pub(super) fn check_schema(schema: &Schema<'_>, max_values: u64) -> Result<(), WireError> {
    let Some(fields) = schema.fields() else {
        return Err(WireError::Unexpected {
            message: 0,
            expected: "a schema with fields",
            found: "a schema without".into(),
        });
    };
    fields.iter().try_for_each(|f| check_field(&f, max_values))
}

/// The number of children a field of `field`'s type has, if weir writes that type.
fn children_wanted(field: &Field<'_>, max_values: u64) -> Result<Option<usize>, WireError> {
    let present = match field.type_type() {
        Type::Int => field
            .type_as_int()
            .filter(|i| matches!(i.bitWidth(), 8 | 16 | 32 | 64))
            .map(|_| Some(0)),
        Type::FloatingPoint => field
            .type_as_floating_point()
            .filter(|f| {
                matches!(
                    f.precision(),
                    Precision::HALF | Precision::SINGLE | Precision::DOUBLE
                )
            })
            .map(|_| Some(0)),
        Type::Utf8 => field.type_as_utf_8().map(|_| Some(0)),
        Type::Binary => field.type_as_binary().map(|_| Some(0)),
        Type::List => field.type_as_list().map(|_| Some(1)),
        Type::FixedSizeList => field
            .type_as_fixed_size_list()
            .filter(|l| {
                u64::try_from(l.listSize())
                    .ok()
                    .and_then(|size| size.checked_mul(max_values))
                    .and_then(|n| usize::try_from(n).ok())
                    .is_some()
            })
            .map(|_| Some(1)),
        Type::Struct_ => field.type_as_struct_().map(|_| None),
        _ => return Err(refuse(field, "a type weir never writes")),
    };
    present.ok_or_else(|| refuse(field, "a type table missing or out of range"))
}

fn check_field(field: &Field<'_>, max_values: u64) -> Result<(), WireError> {
    if field.dictionary().is_some() {
        return Err(refuse(
            field,
            "dictionary encoding, which weir never writes",
        ));
    }
    let children = field.children();
    let count = children.map_or(0, |c| c.len());
    match children_wanted(field, max_values)? {
        Some(wanted) if wanted != count => {
            return Err(refuse(field, "a child count its type does not have"));
        }
        _ => {}
    }
    children
        .iter()
        .flatten()
        .try_for_each(|child| check_field(&child, max_values))
}
