//! A cross-site scripting corpus: texts that would run script, load a resource or change the
//! page if a page put them in as markup. Each that can reaches `canary` (an HTTP server the test
//! watches) or opens a dialog; shown as text, none does anything.

/// The payloads, each naming `canary` (`http://127.0.0.1:PORT`) where it would call out.
pub fn corpus(canary: &str) -> Vec<String> {
    let c = canary;
    vec![
        format!("<script>fetch('{c}/script')</script>"),
        format!("<img src=x onerror=\"fetch('{c}/img')\">"),
        format!("<img src='{c}/img-src'>"),
        format!("<svg onload=\"fetch('{c}/svg')\"></svg>"),
        format!("<svg><script>fetch('{c}/svg-script')</script></svg>"),
        format!("<iframe src=\"{c}/iframe\"></iframe>"),
        format!("<iframe srcdoc=\"<script>fetch('{c}/srcdoc')</script>\"></iframe>"),
        format!("<a href=\"javascript:fetch('{c}/js-link')\">click</a>"),
        format!("<body onload=\"fetch('{c}/body')\">"),
        format!("<input autofocus onfocus=\"fetch('{c}/focus')\">"),
        format!("<details open ontoggle=\"fetch('{c}/toggle')\">"),
        format!("<video><source onerror=\"fetch('{c}/video')\"></video>"),
        format!("<audio src=x onerror=\"fetch('{c}/audio')\">"),
        format!("<object data=\"{c}/object\"></object>"),
        format!("<embed src=\"{c}/embed\">"),
        format!("<link rel=stylesheet href=\"{c}/css\">"),
        format!("<style>@import '{c}/import';</style>"),
        format!("<div style=\"background:url({c}/style)\">x</div>"),
        format!("<meta http-equiv=\"refresh\" content=\"0;url={c}/refresh\">"),
        format!("<base href=\"{c}/base/\">"),
        format!("<form action=\"{c}/form\"><button>go</button></form>"),
        format!("\"><script>fetch('{c}/attr')</script>"),
        format!("'><img src=x onerror=fetch('{c}/quote')>"),
        format!("</textarea><script>fetch('{c}/textarea')</script>"),
        format!("</pre><img src=x onerror=fetch('{c}/pre')>"),
        format!("<scr<script>ipt>fetch('{c}/nested')</scr</script>ipt>"),
        format!("<img src=x onerror=&#102;&#101;&#116;&#99;&#104;('{c}/entities')>"),
        format!("<math><mtext><table><mglyph><style><img src=x onerror=fetch('{c}/mxss')>"),
        format!("<noscript><p title=\"</noscript><img src=x onerror=fetch('{c}/noscript')>\">"),
        format!("\u{202e}<img src=x onerror=fetch('{c}/rtl')>"),
        "<script>alert(1)</script>".to_owned(),
        "<img src=x onerror=alert(2)>".to_owned(),
        "<svg/onload=confirm(3)>".to_owned(),
        "javascript:alert(4)".to_owned(),
        "{{constructor.constructor('alert(5)')()}}".to_owned(),
        "<b>bold?</b> <i unclosed".to_owned(),
    ]
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_corpus_is_large_and_each_payload_differs() {
        let c = super::corpus("http://127.0.0.1:1");
        assert!(c.len() >= 30);
        let mut sorted = c.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), c.len());
    }
}
