//! Splitting Markdown memory files into chunks for the index: at headings first, then by a
//! window of about `target` tokens with `overlap` tokens shared between neighbours.
//!
//! Tokens are estimated as 4 characters each, which is close for English prose and errs on
//! the small side elsewhere.

/// A piece of a file, with the 1-based line range it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    pub text: String,
    pub start_line: usize,
    pub end_line: usize,
    /// The heading the chunk sits under, if any (kept for context in results).
    pub heading: Option<String>,
}

pub const CHARS_PER_TOKEN: usize = 4;

/// Estimated tokens in `s`.
pub fn tokens(s: &str) -> usize {
    s.chars().count().div_ceil(CHARS_PER_TOKEN)
}

/// Chunks `markdown`: one section per heading; a section longer than `target` tokens is cut
/// into windows of `target` tokens that overlap by `overlap`, at line boundaries where lines
/// allow (a single over-long line is cut inside). Blank sections are dropped.
pub fn chunk(markdown: &str, target: usize, overlap: usize) -> Vec<Chunk> {
    chunks(markdown, target, overlap).collect()
}

/// [`chunk`] as an iterator that reads `markdown` a section at a time, so a caller can pause
/// between chunks of a large file.
pub fn chunks(markdown: &str, target: usize, overlap: usize) -> Chunks<'_> {
    let target = target.max(16);
    Chunks {
        lines: markdown.lines().enumerate(),
        in_fence: false,
        section: Section {
            heading: None,
            lines: Vec::new(),
        },
        ready: std::collections::VecDeque::new(),
        target,
        overlap: overlap.min(target / 2),
        done: false,
    }
}

/// The iterator of [`chunks`].
pub struct Chunks<'a> {
    lines: std::iter::Enumerate<std::str::Lines<'a>>,
    in_fence: bool,
    /// The section being read.
    section: Section,
    /// Chunks of the last finished section not returned yet.
    ready: std::collections::VecDeque<Chunk>,
    target: usize,
    overlap: usize,
    done: bool,
}

impl Chunks<'_> {
    /// Windows the section read so far (unless blank) into `ready`, and starts `next`.
    fn finish_section(&mut self, next: Section) {
        let section = std::mem::replace(&mut self.section, next);
        if section.lines.iter().any(|(_, l)| !l.trim().is_empty()) {
            let mut out = Vec::new();
            window(&section, self.target, self.overlap, &mut out);
            self.ready.extend(out);
        }
    }
}

impl Iterator for Chunks<'_> {
    type Item = Chunk;

    fn next(&mut self) -> Option<Chunk> {
        loop {
            if let Some(c) = self.ready.pop_front() {
                return Some(c);
            }
            if self.done {
                return None;
            }
            match self.lines.next() {
                Some((i, line)) => {
                    let t = line.trim_start();
                    if t.starts_with("```") {
                        self.in_fence = !self.in_fence;
                    }
                    if !self.in_fence
                        && t.starts_with('#')
                        && t.trim_start_matches('#').starts_with(' ')
                    {
                        self.finish_section(Section {
                            heading: Some(t.trim_start_matches('#').trim().to_owned()),
                            lines: Vec::new(),
                        });
                    }
                    self.section.lines.push((i + 1, line.to_owned()));
                }
                None => {
                    self.done = true;
                    self.finish_section(Section {
                        heading: None,
                        lines: Vec::new(),
                    });
                }
            }
        }
    }
}

struct Section {
    heading: Option<String>,
    /// (1-based line number, text)
    lines: Vec<(usize, String)>,
}

fn window(section: &Section, target: usize, overlap: usize, out: &mut Vec<Chunk>) {
    let max_chars = target * CHARS_PER_TOKEN;
    let overlap_chars = overlap * CHARS_PER_TOKEN;
    // Lines longer than a window are cut into window-sized pieces first.
    let mut pieces: Vec<(usize, String)> = Vec::new();
    for (n, line) in &section.lines {
        let chars: Vec<char> = line.chars().collect();
        if chars.len() <= max_chars {
            pieces.push((*n, line.clone()));
        } else {
            let step = max_chars - overlap_chars;
            let mut at = 0;
            while at < chars.len() {
                pieces.push((
                    *n,
                    chars[at..(at + max_chars).min(chars.len())]
                        .iter()
                        .collect(),
                ));
                if at + max_chars >= chars.len() {
                    break;
                }
                at += step;
            }
        }
    }
    let mut start = 0;
    while start < pieces.len() {
        let mut end = start;
        let mut size = 0;
        while end < pieces.len()
            && (end == start || size + pieces[end].1.chars().count() < max_chars)
        {
            size += pieces[end].1.chars().count() + 1;
            end += 1;
        }
        let text = pieces[start..end]
            .iter()
            .map(|(_, l)| l.as_str())
            .collect::<Vec<_>>()
            .join("\n");
        if !text.trim().is_empty() {
            out.push(Chunk {
                text: text.trim().to_owned(),
                start_line: pieces[start].0,
                end_line: pieces[end - 1].0,
                heading: section.heading.clone(),
            });
        }
        if end >= pieces.len() {
            break;
        }
        // Step back over the last pieces that fit in the overlap.
        let mut back = end;
        let mut kept = 0;
        while back > start + 1 && kept + pieces[back - 1].1.chars().count() <= overlap_chars {
            kept += pieces[back - 1].1.chars().count() + 1;
            back -= 1;
        }
        start = back;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_at_headings() {
        let md = "intro line\n\n# Work\nI work at Acme.\n\n## Pets\nA cat named Miso.\n";
        let chunks = chunk(md, 400, 80);
        assert_eq!(chunks.len(), 3);
        assert_eq!(chunks[1].heading.as_deref(), Some("Work"));
        assert_eq!((chunks[2].start_line, chunks[2].end_line), (6, 7));
        assert!(chunks[2].text.contains("Miso"));
    }

    #[test]
    fn long_sections_are_windowed_with_overlap() {
        let md: String = (0..200)
            .map(|i| format!("Line {i} says something about the day.\n"))
            .collect();
        let chunks = chunk(&md, 100, 20);
        assert!(chunks.len() > 3);
        for c in &chunks {
            assert!(tokens(&c.text) <= 100 + 10, "{} tokens", tokens(&c.text));
        }
        for pair in chunks.windows(2) {
            assert!(pair[1].start_line <= pair[0].end_line, "neighbours overlap");
            assert!(pair[1].start_line > pair[0].start_line, "progress");
        }
        assert_eq!(
            chunks.last().unwrap().end_line,
            200,
            "nothing lost at the end"
        );
    }

    #[test]
    fn headings_inside_code_fences_do_not_split() {
        let md = "# Notes\n```sh\n# not a heading\necho hi\n```\n";
        assert_eq!(chunk(md, 400, 80).len(), 1);
    }

    #[test]
    fn one_huge_line_is_cut() {
        let md = "x".repeat(10_000);
        let chunks = chunk(&md, 400, 80);
        assert!(chunks.len() >= 6);
        assert!(chunks.iter().all(|c| c.text.len() <= 1600));
    }
}
