//! Finding any of many byte strings (the skeletons of the secrets' forms) in a text in one
//! pass, whatever their number: a form's first 8 bytes are its anchor; at each position of
//! the text the 8 bytes ending there go through a bit filter of the anchors' hashes, which
//! lets through almost only real candidates, and a candidate is compared whole. A couple of
//! milliseconds a megabyte (release build), where a search per form would cost one pass
//! per form.

/// Bits of the filter: 8 KB, so a few hundred anchors leave it almost empty.
const FILTER_BITS: u32 = 16;

#[derive(Default)]
pub(super) struct Index {
    /// Bit `slot(anchor)` is set for each form's anchor.
    filter: Vec<u64>,
    /// `(anchor, form)`, sorted.
    anchors: Vec<(u64, usize)>,
    forms: Vec<Vec<u8>>,
}

/// The first 8 bytes of `form`, big-endian, as the scan builds them.
fn anchor(form: &[u8]) -> u64 {
    form.iter()
        .take(8)
        .fold(0u64, |a, &b| (a << 8) | u64::from(b))
}

fn slot(anchor: u64) -> usize {
    (anchor.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - FILTER_BITS)) as usize
}

impl Index {
    /// An index of `forms`; those shorter than 8 bytes are left out.
    pub fn new(forms: Vec<Vec<u8>>) -> Index {
        let forms: Vec<Vec<u8>> = forms.into_iter().filter(|f| f.len() >= 8).collect();
        let mut filter = vec![0u64; 1 << (FILTER_BITS - 6)];
        let mut anchors: Vec<(u64, usize)> = forms
            .iter()
            .enumerate()
            .map(|(i, f)| (anchor(f), i))
            .collect();
        anchors.sort_unstable();
        for &(a, _) in &anchors {
            let s = slot(a);
            filter[s / 64] |= 1 << (s % 64);
        }
        Index {
            filter,
            anchors,
            forms,
        }
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.forms.len()
    }

    /// Whether any form occurs in `text`.
    pub fn found_in(&self, text: &[u8]) -> bool {
        if self.forms.is_empty() {
            return false;
        }
        let mut window = 0u64;
        for (i, &b) in text.iter().enumerate() {
            window = (window << 8) | u64::from(b);
            if i < 7 {
                continue;
            }
            let s = slot(window);
            if self.filter[s / 64] & (1 << (s % 64)) == 0 {
                continue;
            }
            let at = &text[i - 7..];
            let from = self.anchors.partition_point(|&(a, _)| a < window);
            let hit = self.anchors[from..]
                .iter()
                .take_while(|&&(a, _)| a == window)
                .any(|&(_, f)| at.starts_with(&self.forms[f]));
            if hit {
                return true;
            }
        }
        false
    }
}
