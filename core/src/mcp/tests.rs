//! Unit tests of the MCP client's reading of what a server says.

use serde_json::json;

use super::call_result;

#[test]
fn a_result_is_its_text_else_its_structured_content() {
    let text = json!({"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
        "structuredContent": {"x": 1}});
    assert_eq!(call_result(&text).unwrap(), "a\nb");
    let structured = json!({"content": [], "structuredContent": {"x": 1}});
    assert_eq!(call_result(&structured).unwrap(), r#"{"x":1}"#);
    let other = json!({"content": [{"type": "image", "data": "AAAA", "mimeType": "image/png"},
        {"type": "resource", "resource": {"uri": "file:///a", "text": "inside"}},
        {"type": "resource_link", "uri": "https://x.test/r"}]});
    assert_eq!(
        call_result(&other).unwrap(),
        "[image content (image/png), not shown]\ninside\n[a link: https://x.test/r]"
    );
    let failed = json!({"content": [{"type": "text", "text": "nope"}], "isError": true});
    assert_eq!(call_result(&failed).unwrap_err().0, "nope");
    let silent = json!({"isError": true});
    assert!(call_result(&silent)
        .unwrap_err()
        .0
        .contains("without saying why"));
}
