//! What a message carries besides its text, and which file of it to fetch.

use crate::telegram::{MediaFile, Message, PhotoSize};

/// The media of one message, as clawless reads it.
#[derive(Debug, Clone, PartialEq)]
pub enum Media<'a> {
    /// A photo (the size to fetch), or a document that is an image.
    Image {
        file_id: &'a str,
        size: Option<u64>,
        media_type: String,
    },
    /// A voice note, an audio file or a video note: transcribed.
    Audio {
        file: &'a MediaFile,
        /// The name the transcription service is given (its extension tells the format).
        name: String,
        what: &'static str,
    },
    /// A text file: read into the message.
    Text { file: &'a MediaFile, name: String },
    /// A PDF: given to a model that reads PDFs.
    Pdf { file: &'a MediaFile, name: String },
    /// Anything else (a sticker, a video, an archive …): described, not read.
    Other(String),
}

/// The media of `msg`, if it has any; `max_photo` picks the photo size.
pub fn of(msg: &Message, max_photo: usize) -> Option<Media<'_>> {
    if let Some(p) = photo_size(&msg.photo, max_photo) {
        return Some(Media::Image {
            file_id: &p.file_id,
            size: p.file_size,
            // Telegram re-encodes photos as JPEG.
            media_type: "image/jpeg".into(),
        });
    }
    if let Some(v) = &msg.voice {
        return Some(audio(v, "voice note", "voice.ogg"));
    }
    if let Some(v) = &msg.video_note {
        return Some(audio(v, "video note", "video.mp4"));
    }
    if let Some(a) = &msg.audio {
        return Some(audio(a, "audio file", "audio.mp3"));
    }
    if let Some(d) = &msg.document {
        return Some(document(d));
    }
    None
}

/// The largest size at most `max` bytes; the smallest when none says its size is that small.
fn photo_size(sizes: &[PhotoSize], max: usize) -> Option<&PhotoSize> {
    let fits = |p: &&PhotoSize| p.file_size.is_some_and(|s| s <= max as u64);
    sizes
        .iter()
        .filter(fits)
        .max_by_key(|p| (u64::from(p.width) * u64::from(p.height), p.file_size))
        .or_else(|| sizes.iter().min_by_key(|p| p.file_size.unwrap_or(u64::MAX)))
}

fn audio<'a>(file: &'a MediaFile, what: &'static str, default_name: &str) -> Media<'a> {
    let name = match (&file.file_name, file.mime_type.as_deref()) {
        (Some(n), _) if extension(n).is_some() => clean_name(n),
        (_, Some(m)) => match audio_extension(m) {
            Some(ext) => format!("{}.{ext}", stem(default_name)),
            None => default_name.to_owned(),
        },
        _ => default_name.to_owned(),
    };
    Media::Audio { file, name, what }
}

fn document(d: &MediaFile) -> Media<'_> {
    let name = d
        .file_name
        .as_deref()
        .map_or_else(|| "file".into(), clean_name);
    let mime = d.mime_type.as_deref().unwrap_or("").to_ascii_lowercase();
    let ext = extension(&name).map(str::to_ascii_lowercase);
    let ext = ext.as_deref().unwrap_or("");
    if let Some(t) = image_type(&mime, ext) {
        return Media::Image {
            file_id: &d.file_id,
            size: d.file_size,
            media_type: t.into(),
        };
    }
    if mime == "application/pdf" || ext == "pdf" {
        return Media::Pdf { file: d, name };
    }
    if is_text(&mime, ext) {
        return Media::Text { file: d, name };
    }
    if mime.starts_with("audio/") {
        return audio(d, "audio file", "audio.mp3");
    }
    Media::Other(if mime.is_empty() {
        format!("the file {name:?}")
    } else {
        format!("the file {name:?} ({mime})")
    })
}

/// The image types every provider takes.
fn image_type(mime: &str, ext: &str) -> Option<&'static str> {
    match (mime, ext) {
        ("image/jpeg", _) | (_, "jpg" | "jpeg") => Some("image/jpeg"),
        ("image/png", _) | (_, "png") => Some("image/png"),
        ("image/webp", _) | (_, "webp") => Some("image/webp"),
        ("image/gif", _) | (_, "gif") => Some("image/gif"),
        _ => None,
    }
}

/// Text files by type, or by extension (Telegram often says `application/octet-stream`).
fn is_text(mime: &str, ext: &str) -> bool {
    const TYPES: &[&str] = &[
        "application/json",
        "application/xml",
        "application/x-yaml",
        "application/yaml",
        "application/toml",
        "application/javascript",
        "application/x-sh",
        "application/sql",
    ];
    const EXTENSIONS: &[&str] = &[
        "txt", "md", "markdown", "csv", "tsv", "json", "jsonl", "yaml", "yml", "toml", "xml",
        "html", "htm", "css", "log", "ini", "cfg", "conf", "env", "rs", "py", "js", "ts", "tsx",
        "jsx", "go", "java", "kt", "c", "h", "cc", "cpp", "hpp", "cs", "rb", "php", "swift", "sh",
        "bash", "zsh", "sql", "lua", "pl", "r", "scala", "dart", "vue", "svelte", "tex", "org",
        "rst", "adoc", "srt", "vtt",
    ];
    mime.starts_with("text/") || TYPES.contains(&mime) || EXTENSIONS.contains(&ext)
}

fn audio_extension(mime: &str) -> Option<&'static str> {
    Some(match mime {
        "audio/ogg" | "audio/opus" => "ogg",
        "audio/mpeg" | "audio/mp3" => "mp3",
        "audio/mp4" | "audio/m4a" | "audio/x-m4a" => "m4a",
        "audio/wav" | "audio/x-wav" => "wav",
        "audio/webm" => "webm",
        "audio/flac" | "audio/x-flac" => "flac",
        "video/mp4" => "mp4",
        _ => return None,
    })
}

fn extension(name: &str) -> Option<&str> {
    name.rsplit_once('.')
        .map(|(_, e)| e)
        .filter(|e| !e.is_empty() && e.len() <= 8)
}

fn stem(name: &str) -> &str {
    name.rsplit_once('.').map_or(name, |(s, _)| s)
}

/// A file name as the model and services see it: printable, without paths, at most 100
/// characters.
fn clean_name(name: &str) -> String {
    let base = name.rsplit(['/', '\\']).next().unwrap_or(name);
    let clean: String = base.chars().filter(|c| !c.is_control()).take(100).collect();
    if clean.trim().is_empty() {
        "file".into()
    } else {
        clean
    }
}

#[cfg(test)]
mod tests;
