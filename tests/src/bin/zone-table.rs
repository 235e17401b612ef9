//! `zone-table [ZONEINFO] > core/src/schedule/zones.txt`: the time zone table the core embeds,
//! from a compiled tz database (default `/usr/share/zoneinfo`): each zone name with the POSIX
//! TZ rule its TZif file ends with (the rule for every time after the last listed transition,
//! which is what reminders need: now and the future). Run it again when tzdata changes.

use std::path::Path;

fn main() {
    let root = std::env::args_os()
        .nth(1)
        .unwrap_or_else(|| "/usr/share/zoneinfo".into());
    let root = Path::new(&root);
    let version = std::fs::read_to_string(root.join("tzdata.zi"))
        .ok()
        .and_then(|t| {
            t.lines()
                .next()
                .and_then(|l| l.strip_prefix("# version "))
                .map(str::to_owned)
        })
        .unwrap_or_else(|| "unknown".into());
    let mut rows = Vec::new();
    walk(root, root, &mut rows);
    rows.sort();
    println!(
        "# IANA time zone → POSIX TZ rule, from tzdata {version} (tests/src/bin/zone-table.rs)"
    );
    for (name, rule) in rows {
        println!("{name}\t{rule}");
    }
}

fn walk(root: &Path, dir: &Path, rows: &mut Vec<(String, String)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(name) = path.strip_prefix(root) else {
            continue;
        };
        let name = name.to_string_lossy().into_owned();
        // `posix/` and `right/` repeat the tree; these three are not zones one would pick.
        if ["posix", "right", "posixrules", "localtime", "Factory"].contains(&name.as_str()) {
            continue;
        }
        if path.is_dir() {
            walk(root, &path, rows);
            continue;
        }
        let Ok(bytes) = std::fs::read(&path) else {
            continue;
        };
        if !bytes.starts_with(b"TZif") {
            continue;
        }
        let text = String::from_utf8_lossy(&bytes);
        let Some(rule) = text.trim_end_matches('\n').rsplit('\n').next() else {
            continue;
        };
        if !rule.is_empty() && rule.is_ascii() && !rule.contains('\0') {
            rows.push((name, rule.to_owned()));
        }
    }
}
