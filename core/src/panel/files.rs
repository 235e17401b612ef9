//! The panel's static files (`core/panel/app`), embedded with the `panel-files` feature.
//! Without it (the Worker, which serves them as static assets) nothing is embedded.

/// The file at `path` (`/app/`, `/app/panel.js`, …) and its content type.
#[cfg(feature = "panel-files")]
pub fn file(path: &str) -> Option<(&'static str, &'static str)> {
    Some(match path {
        "/app/" | "/app/index.html" => (
            include_str!("../../panel/app/index.html"),
            "text/html; charset=utf-8",
        ),
        "/app/panel.js" => (
            include_str!("../../panel/app/panel.js"),
            "text/javascript; charset=utf-8",
        ),
        "/app/panel.css" => (
            include_str!("../../panel/app/panel.css"),
            "text/css; charset=utf-8",
        ),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn cloudflare_serves_the_files_with_the_same_policy() {
        let headers = include_str!("../../panel/_headers");
        assert!(
            headers.contains(&format!("Content-Security-Policy: {}", super::super::CSP)),
            "core/panel/_headers and panel::CSP differ"
        );
    }
}

/// Nothing embedded: the shell serves the files.
#[cfg(not(feature = "panel-files"))]
pub fn file(_path: &str) -> Option<(&'static str, &'static str)> {
    None
}
