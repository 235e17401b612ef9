//! The text exposition's pieces: label sets rendered, escaped and cut, bounded per metric,
//! and sample values.

use super::{MAX_LABEL, MAX_SERIES};

/// The series key for `labels`, or the `other` one when the metric has [`MAX_SERIES`] already.
pub(super) fn bounded(len: usize, rendered: String, labels: &[(&str, &str)]) -> String {
    if len < MAX_SERIES || labels.is_empty() {
        return rendered;
    }
    render_labels(&other(labels))
}

/// `labels` with every value `other`.
pub(super) fn other<'a>(labels: &[(&'a str, &str)]) -> Vec<(&'a str, &'static str)> {
    labels.iter().map(|(k, _)| (*k, "other")).collect()
}

/// `a="x",b="y"`, values cut to [`MAX_LABEL`] characters and escaped.
pub(super) fn render_labels(labels: &[(&str, &str)]) -> String {
    let mut out = String::new();
    render_into(&mut out, labels);
    out
}

/// [`render_labels`] into `out` (cleared first), reusing its allocation.
pub(super) fn render_into(out: &mut String, labels: &[(&str, &str)]) {
    out.clear();
    for (i, (k, v)) in labels.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(k);
        out.push_str("=\"");
        for c in v.chars().take(MAX_LABEL) {
            match c {
                '\\' => out.push_str("\\\\"),
                '"' => out.push_str("\\\""),
                '\n' => out.push_str("\\n"),
                c => out.push(c),
            }
        }
        out.push('"');
    }
}

pub(super) fn join(labels: &str, more: &str) -> String {
    match labels.is_empty() {
        true => more.to_owned(),
        false => format!("{labels},{more}"),
    }
}

pub(super) fn braces(labels: &str) -> String {
    match labels.is_empty() {
        true => String::new(),
        false => format!("{{{labels}}}"),
    }
}

/// A sample value as the format writes it.
pub(super) fn number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}
