//! Printing what the API answered, as kubectl does: a table (more columns with `wide`),
//! the JSON or YAML of the answer, or one `kind/name` a line.

use std::fmt::Display;
use std::io::Write as _;

use serde::Serialize;

use super::{refused, Failed};
use crate::args::Output;

/// A column of a table: its header, how to read a cell, whether only `wide` shows it.
pub(super) struct Column<T> {
    pub header: &'static str,
    pub cell: fn(&T) -> String,
    pub wide: bool,
}

/// A list of items as `format` says; `name` gives an item's `kind/name`.
pub(super) fn print_list<T: Serialize>(
    format: Output,
    items: &[T],
    columns: &[Column<T>],
    name: fn(&T) -> String,
) -> Result<(), Failed> {
    match format {
        Output::Json => print_json(&items),
        Output::Yaml => print_yaml(&items)?,
        Output::Name => {
            let names: String = items
                .iter()
                .map(|item| format!("{}\n", name(item)))
                .collect();
            emit(&names);
        }
        Output::Table | Output::Wide => {
            let shown: Vec<&Column<T>> = columns
                .iter()
                .filter(|c| !c.wide || format == Output::Wide)
                .collect();
            let rows = items
                .iter()
                .map(|item| shown.iter().map(|c| (c.cell)(item)).collect())
                .collect();
            let header: Vec<&str> = shown.iter().map(|c| c.header).collect();
            emit(&table(&header, rows));
        }
    }
    Ok(())
}

/// Printed whole; a closed pipe (`| head`) ends the command quietly, where `println!`
/// would panic.
pub(super) fn emit(out: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = stdout
        .write_all(out.as_bytes())
        .and_then(|()| stdout.flush());
}

/// As JSON, its keys sorted (through a `Value`) as the API's answer reads.
pub(super) fn print_json(value: &impl Serialize) {
    let value = serde_json::to_value(value).unwrap_or_default();
    let mut text = serde_json::to_string_pretty(&value).unwrap_or_default();
    text.push('\n');
    emit(&text);
}

pub(super) fn print_yaml(value: &impl Serialize) -> Result<(), Failed> {
    let value = serde_json::to_value(value).unwrap_or_default();
    let text = serde_saphyr::to_string(&value)
        .map_err(|e| refused(format!("cannot write the answer as YAML: {e}")))?;
    emit(&text);
    Ok(())
}

/// Left-aligned columns, three spaces apart, as kubectl prints them.
pub(super) fn table(header: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: Vec<String>| {
        let cells: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        out.push_str(cells.join("   ").trim_end());
        out.push('\n');
    };
    line(header.iter().map(|h| h.to_string()).collect());
    for row in rows {
        line(row);
    }
    out
}

/// A cell that may be absent: the value, or `<none>` / `<unknown>` as kubectl writes.
pub(super) fn or<T: Display>(value: &Option<T>, absent: &str) -> String {
    match value {
        Some(value) => value.to_string(),
        None => absent.to_owned(),
    }
}
