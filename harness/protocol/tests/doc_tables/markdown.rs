//! Finding the marked tables in a Markdown page and reading their rows.

use std::ops::Range;

/// One body row of a table, with its line number in the page.
pub struct Row {
    pub line: usize,
    pub cells: Vec<String>,
}

/// A cell's text without surrounding blanks and backticks.
pub fn strip(cell: &str) -> String {
    cell.trim().trim_matches('`').trim().to_string()
}

/// The body rows of the hand-written table opened by `<!-- table:NAME ...-->`
/// and closed by `<!-- table:end -->` (header and separator skipped).
pub fn table(doc: &str, name: &str) -> Result<Vec<Row>, String> {
    let open = format!("<!-- table:{name} ");
    let mut lines = doc.lines().enumerate();
    lines
        .by_ref()
        .find(|(_, l)| l.starts_with(&open))
        .ok_or_else(|| format!("no table marked `{open}...-->`"))?;
    let mut rows = Vec::new();
    for (n, line) in lines {
        if line.starts_with("<!-- table:end -->") {
            // Header and separator first.
            if rows.len() < 2 {
                return Err(format!("table `{name}` has no body rows"));
            }
            return Ok(rows.split_off(2));
        }
        if let Some(inner) = line.trim().strip_prefix('|') {
            let inner = inner.strip_suffix('|').unwrap_or(inner);
            rows.push(Row {
                line: n + 1,
                cells: inner.split('|').map(|c| c.trim().to_string()).collect(),
            });
        }
    }
    Err(format!(
        "table `{name}` is not closed by `<!-- table:end -->`"
    ))
}

/// The byte range and text between `<!-- table:NAME:begin ...-->` and `<!-- table:NAME:end -->`.
pub fn generated_block<'a>(doc: &'a str, name: &str) -> Result<(Range<usize>, &'a str), String> {
    let begin = format!("<!-- table:{name}:begin");
    let end = format!("<!-- table:{name}:end -->");
    let start = doc
        .find(&begin)
        .ok_or_else(|| format!("no `{begin} ...-->` marker"))?;
    let start = start
        + doc[start..]
            .find("-->")
            .ok_or_else(|| format!("`{begin}` is not closed"))?
        + "-->".len();
    let stop = start
        + doc[start..]
            .find(&end)
            .ok_or_else(|| format!("no `{end}` marker after `{begin}`"))?;
    Ok((start..stop, &doc[start..stop]))
}
