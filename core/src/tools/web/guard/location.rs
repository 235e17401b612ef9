//! A redirect's `Location` resolved against the URL it came from (RFC 3986 §5.2), then
//! checked like any URL: a public page may not send the fetch into private space.
//!
//! Forms: absolute (`https://…`, any scheme, checked as is), scheme-relative (`//host/…`, the
//! scheme kept), absolute-path (`/x`), query-only (`?q`, the path kept), fragment-only or
//! empty (the same URL), and relative paths (`x/y`, `../x`, merged with the directory of the
//! current path). Dot segments are removed from resolved paths. A `Location` whose leading
//! slashes include a backslash (`/\host`, `\\host`) is refused: browsers read it as
//! `//host`, another host.

use super::{check, quoted, refused, split_scheme, Checked, Policy, Refusal, MAX_URL_BYTES};

/// A redirect's `Location` resolved against the URL it came from, then [`check`]ed. The
/// refusal says it came from a redirect.
pub fn redirect(from: &Checked, location: &str, policy: &Policy) -> Result<Checked, Refusal> {
    resolve(from, location)
        .and_then(|url| check(&url, policy))
        .map_err(|r| {
            let reason = r.0.strip_prefix("refused: ").unwrap_or(&r.0);
            Refusal(format!("refused (redirect): {reason}"))
        })
}

/// The absolute URL `location` means on the page `from`.
fn resolve(from: &Checked, location: &str) -> Result<String, Refusal> {
    if location.len() > MAX_URL_BYTES {
        return Err(refused(format_args!(
            "the Location is {} bytes long (at most {MAX_URL_BYTES})",
            location.len()
        )));
    }
    let location = location.trim_matches(|c: char| c <= ' ');
    let slashes = location.len() - location.trim_start_matches(['/', '\\']).len();
    if location[..slashes].contains('\\') {
        return Err(refused(format_args!(
            "the Location {} has a backslash among its leading slashes (browsers read it as \
             `/`, which can name another host)",
            quoted(location)
        )));
    }
    if split_scheme(location).is_some() {
        return Ok(location.to_owned());
    }
    let scheme = if from.https { "https:" } else { "http:" };
    if location.starts_with("//") {
        return Ok(format!("{scheme}{location}"));
    }
    let origin = from.origin();
    let current = from.path_and_query();
    let current_path = current.split('?').next().unwrap_or("/");
    if location.is_empty() || location.starts_with('#') {
        return Ok(format!("{origin}{current}"));
    }
    if location.starts_with('?') {
        return Ok(format!("{origin}{current_path}{location}"));
    }
    let end = location.find(['?', '#']).unwrap_or(location.len());
    let (path, rest) = location.split_at(end);
    let path = if path.starts_with('/') {
        remove_dot_segments(path)
    } else {
        let dir = current_path.rfind('/').map_or("/", |i| &current_path[..=i]);
        remove_dot_segments(&format!("{dir}{path}"))
    };
    Ok(format!("{origin}{path}{rest}"))
}

/// RFC 3986 §5.2.4 on a path that starts with `/`: `.` segments dropped, `..` dropping the
/// one before, never above the root.
fn remove_dot_segments(path: &str) -> String {
    let segments: Vec<&str> = path.split('/').skip(1).collect();
    let mut out: Vec<&str> = Vec::with_capacity(segments.len());
    for (i, segment) in segments.iter().enumerate() {
        let last = i + 1 == segments.len();
        match *segment {
            "." => {}
            ".." => {
                out.pop();
            }
            s => {
                out.push(s);
                continue;
            }
        }
        if last {
            out.push("");
        }
    }
    format!("/{}", out.join("/"))
}
