//! Which media a message carries and which file of it is fetched.

use serde_json::json;

use super::*;

fn msg(extra: serde_json::Value) -> Message {
    let mut m = json!({"message_id": 1, "chat": {"id": 1, "type": "private"}});
    if let (Some(m), Some(extra)) = (m.as_object_mut(), extra.as_object()) {
        m.extend(extra.clone());
    }
    serde_json::from_value(m).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn the_largest_photo_under_the_cap_is_picked() {
    let m = msg(json!({"photo": [
        {"file_id": "s", "width": 90, "height": 90, "file_size": 1_000},
        {"file_id": "m", "width": 320, "height": 320, "file_size": 20_000},
        {"file_id": "l", "width": 1280, "height": 1280, "file_size": 200_000},
    ]}));
    let file = |max| match of(&m, max) {
        Some(Media::Image { file_id, .. }) => file_id.to_owned(),
        other => panic!("{other:?}"),
    };
    assert_eq!(file(1_000_000), "l");
    assert_eq!(file(100_000), "m");
    assert_eq!(file(20_000), "m");
    // None fits: the smallest, which the download then finds too large.
    assert_eq!(file(10), "s");
}

#[test]
fn voice_audio_and_video_notes_are_audio_named_by_their_format() {
    let name = |m: &Message| match of(m, 1) {
        Some(Media::Audio { name, what, .. }) => format!("{what}: {name}"),
        other => panic!("{other:?}"),
    };
    let voice = msg(json!({"voice": {"file_id": "v", "duration": 3, "mime_type": "audio/ogg"}}));
    assert_eq!(name(&voice), "voice note: voice.ogg");
    let note = msg(json!({"video_note": {"file_id": "n", "duration": 3}}));
    assert_eq!(name(&note), "video note: video.mp4");
    let song = msg(
        json!({"audio": {"file_id": "a", "duration": 3, "mime_type": "audio/mpeg", "file_name": "../../etc/Song.m4a"}}),
    );
    assert_eq!(name(&song), "audio file: Song.m4a", "no path in the name");
    let untyped = msg(json!({"audio": {"file_id": "a", "mime_type": "audio/x-wav"}}));
    assert_eq!(name(&untyped), "audio file: audio.wav");
}

#[test]
fn documents_are_images_pdfs_text_or_other() {
    let doc = |name: &str, mime: &str| {
        msg(json!({"document": {"file_id": "d", "file_name": name, "mime_type": mime}}))
    };
    let kind = |m: &Message| match of(m, 1) {
        Some(Media::Image { media_type, .. }) => format!("image {media_type}"),
        Some(Media::Pdf { name, .. }) => format!("pdf {name}"),
        Some(Media::Text { name, .. }) => format!("text {name}"),
        Some(Media::Audio { name, .. }) => format!("audio {name}"),
        Some(Media::Other(what)) => format!("other {what}"),
        None => "none".into(),
    };
    assert_eq!(kind(&doc("scan.png", "image/png")), "image image/png");
    assert_eq!(
        kind(&doc("a.JPG", "application/octet-stream")),
        "image image/jpeg"
    );
    assert_eq!(
        kind(&doc("report.pdf", "application/pdf")),
        "pdf report.pdf"
    );
    assert_eq!(
        kind(&doc("notes.md", "application/octet-stream")),
        "text notes.md"
    );
    assert_eq!(kind(&doc("data", "application/json")), "text data");
    assert_eq!(kind(&doc("main.rs", "text/x-rust")), "text main.rs");
    assert_eq!(kind(&doc("memo.mp3", "audio/mpeg")), "audio memo.mp3");
    assert_eq!(
        kind(&doc("a.zip", "application/zip")),
        "other the file \"a.zip\" (application/zip)"
    );
    assert_eq!(kind(&msg(json!({"text": "hi"}))), "none");
}

#[test]
fn names_lose_paths_and_control_characters() {
    assert_eq!(clean_name("a/b\\c\u{0}d.txt"), "cd.txt");
    assert_eq!(clean_name("dir/"), "file");
    assert_eq!(clean_name(&"x".repeat(300)).len(), 100);
}
