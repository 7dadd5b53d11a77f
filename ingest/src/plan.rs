//! Planning the columns: renames, the schema sidecar, kinds and compression applied to the
//! columns a source planned or the samples imply, and the checks an append makes against the
//! dataset's schema (the schema cannot change in an append).

use tessera::{Column, Compression, Dim, Kind, Schema, ShapeDisplay};

use crate::error::{IngestError, IngestResult};
use crate::input::columns::{self, ColumnEdits};
use crate::input::{self, InferOptions, Sample};

/// Checks that every folder class exists in the dataset's class names (appends map by name).
pub(crate) fn check_classes(schema: &Schema, label: &str, classes: &[String]) -> IngestResult<()> {
    let Some(col) = schema.column(label) else { return Ok(()) };
    if let Kind::ClassLabel { names } = &col.kind {
        let unknown: Vec<&String> = classes.iter().filter(|c| !names.contains(c)).collect();
        if !unknown.is_empty() {
            return Err(IngestError::usage(format!(
                "classes {unknown:?} are not in the dataset's {label:?} class names {names:?}; the schema cannot change in an append"
            )));
        }
    }
    Ok(())
}

/// Applies `--rename` to the columns a source planned (named after its input fields).
pub(crate) fn rename_planned(mut cols: Vec<Column>, edits: &ColumnEdits) -> IngestResult<Vec<Column>> {
    let fields: Vec<&str> = cols.iter().map(|c| c.name.as_str()).collect();
    edits.check_renames(&fields).map_err(IngestError::usage)?;
    for c in &mut cols {
        c.name = edits.name(&c.name).to_string();
    }
    Ok(cols)
}

/// Applies the sidecar, `--kind` and `--compress` to planned or inferred (renamed) columns.
pub(crate) fn finish_columns(
    cols: Vec<Column>,
    sidecar: Option<&[Column]>,
    compress: &[(String, Compression)],
    keep_encoded: bool,
    edits: &ColumnEdits,
) -> IngestResult<Vec<Column>> {
    let mut cols = match sidecar {
        Some(s) => input::apply_sidecar(cols, s),
        None => cols,
    };
    let names: Vec<&str> = cols.iter().map(|c| c.name.as_str()).collect();
    edits.check_kinds(&names).map_err(IngestError::usage)?;
    edits.apply_kinds(&mut cols).map_err(IngestError::usage)?;
    for (name, _) in compress {
        if name != "*" && !cols.iter().any(|c| c.name == *name) {
            let names: Vec<&str> = cols.iter().map(|c| c.name.as_str()).collect();
            return Err(IngestError::usage(format!("--compress names unknown column {name:?} (columns: {names:?})")));
        }
    }
    let default = compress.iter().find(|(n, _)| n == "*").map(|(_, c)| *c);
    for c in &mut cols {
        if let Some((_, z)) = compress.iter().find(|(n, _)| *n == c.name) {
            c.compression = *z;
        } else if keep_encoded && c.encodable() {
            c.compression = Compression::Encoded;
        } else if let Some(z) = default {
            c.compression = z;
        }
    }
    Ok(cols)
}

/// The columns the samples imply together: in order of first appearance, a dim that
/// differs among them ragged (unless `--ragged` gave it), a field that some lack or
/// leave null nullable. (The sidecar, kinds and compression are applied after.)
pub(crate) fn infer_columns(
    samples: &[Sample],
    infer: &InferOptions,
    edits: &ColumnEdits,
) -> IngestResult<Vec<Column>> {
    // Column, samples with a value, and whether a null was seen.
    let mut cols: Vec<(Column, usize)> = Vec::new();
    let mut nulls: Vec<(String, String)> = Vec::new();
    for s in samples {
        for (name, v) in &s.fields {
            let seen = input::infer_column(name, v, infer)
                .map_err(|e| IngestError::usage(format!("{}: column {name:?}: {e}", s.origin)))?;
            match (seen, cols.iter_mut().find(|(c, _)| c.name == *name)) {
                (Some(seen), Some((c, n))) => {
                    columns::widen(c, &seen, infer.ragged.names(name));
                    *n += 1;
                }
                (Some(seen), None) => cols.push((seen, 1)),
                (None, _) => nulls.push((name.clone(), s.origin.clone())),
            }
        }
    }
    if let Some((name, origin)) = nulls.iter().find(|(n, _)| !cols.iter().any(|(c, _)| c.name == *n)) {
        return Err(IngestError::usage(format!(
            "{origin}: field {name:?} is null in all of the first {} samples, so its type is unknown",
            samples.len()
        ))
        .note(format!("a {} beside the inputs can declare its type", input::SIDECAR)));
    }
    let sources: Vec<String> = cols.iter().map(|(c, _)| edits.source_name(&c.name).to_string()).collect();
    edits.check_renames(&sources.iter().map(String::as_str).collect::<Vec<_>>()).map_err(IngestError::usage)?;
    let out: Vec<Column> = cols.into_iter().map(|(c, n)| if n < samples.len() { c.nullable() } else { c }).collect();
    Ok(out)
}

/// Checks that the input's columns can be appended to the dataset's schema.
pub(crate) fn check_columns(schema: &Schema, cols: &[Column]) -> IngestResult<()> {
    let extra: Vec<&str> = cols.iter().filter(|c| schema.column(&c.name).is_none()).map(|c| c.name.as_str()).collect();
    let missing: Vec<&str> = schema
        .columns
        .iter()
        .filter(|c| !c.nullable && !cols.iter().any(|x| x.name == c.name))
        .map(|c| c.name.as_str())
        .collect();
    if !extra.is_empty() || !missing.is_empty() {
        let have: Vec<&str> = schema.columns.iter().map(|c| c.name.as_str()).collect();
        return Err(IngestError::usage(format!(
            "the inputs do not match the dataset's columns {have:?}: extra {extra:?}, missing {missing:?}"
        )));
    }
    for c in cols {
        if let Some(s) = schema.column(&c.name)
            && matches!(s.kind, Kind::Image { .. })
            && matches!(c.shape.first(), Some(Dim::Ragged))
            && let Some(Dim::Fixed(h)) = s.shape.first()
        {
            return Err(IngestError::usage(format!(
                "column {:?} holds {h}-pixel-high images of one size; pass --size to resize the inputs",
                c.name
            )));
        }
        if let Some(s) = schema.column(&c.name)
            && !input::sidecar_fits(c, s)
        {
            return Err(IngestError::usage(format!(
                "column {:?}: input is {} {}, the dataset has {} {}",
                c.name,
                c.dtype,
                ShapeDisplay(&c.shape),
                s.dtype,
                ShapeDisplay(&s.shape)
            )));
        }
    }
    Ok(())
}
