//! `multipart/form-data` bodies: one file and text fields, as the Bot API's uploads
//! (`sendDocument`, `sendVoice`, `sendPhoto`) and the transcription service take them.

/// The file of a [`multipart`] body.
#[derive(Debug, Clone, Copy)]
pub struct FilePart<'a> {
    /// The form field.
    pub field: &'a str,
    /// The file's name (characters other than printable ASCII are dropped).
    pub name: &'a str,
    pub content_type: &'a str,
    pub bytes: &'a [u8],
}

/// A `multipart/form-data` body of text `fields` and one file:
/// the content type (with its boundary) and the body. The boundary is chosen so that it
/// occurs nowhere in the content.
pub fn multipart(fields: &[(&str, String)], file: FilePart<'_>) -> (String, Vec<u8>) {
    let FilePart {
        field: file_field,
        name: filename,
        content_type,
        bytes,
    } = file;
    let mut boundary = String::from("clawless-form-boundary");
    while contains(bytes, boundary.as_bytes())
        || fields.iter().any(|(_, v)| v.contains(boundary.as_str()))
    {
        boundary.push('x');
    }
    let mut body = Vec::with_capacity(bytes.len() + 512);
    for (name, value) in fields {
        body.extend_from_slice(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n")
                .as_bytes(),
        );
    }
    let safe_name: String = filename
        .chars()
        .filter(|c| c.is_ascii_graphic() && *c != '"' && *c != '\\')
        .collect();
    body.extend_from_slice(
        format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{file_field}\"; filename=\"{safe_name}\"\r\nContent-Type: {content_type}\r\n\r\n")
            .as_bytes(),
    );
    body.extend_from_slice(bytes);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}
