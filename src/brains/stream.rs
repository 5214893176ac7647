//! Incremental parsers for the two streaming framings providers use:
//! Server-Sent Events (OpenAI, Anthropic, Gemini) and newline-delimited JSON
//! (Ollama). Bytes go in as they arrive, in pieces of any size; complete
//! events come out. Lines are split on bytes, so a UTF-8 character cut
//! between two reads is never mangled.

/// Longest line accepted before the stream is called malformed (a server
/// sending megabytes without a newline is not streaming).
pub const MAX_LINE_BYTES: usize = 4 << 20;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, if the server named the event.
    pub event: Option<String>,
    pub data: String,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FramingError {
    #[error("a line of the stream is not UTF-8")]
    NotUtf8,
    #[error("a line of the stream is longer than {MAX_LINE_BYTES} bytes")]
    LineTooLong,
}

/// Splits bytes into lines (`\n`, `\r\n`).
#[derive(Default)]
struct Lines {
    pending: Vec<u8>,
}

impl Lines {
    fn feed(&mut self, bytes: &[u8], mut line: impl FnMut(&str) -> Result<(), FramingError>) -> Result<(), FramingError> {
        self.pending.extend_from_slice(bytes);
        let mut start = 0;
        while let Some(offset) = self.pending[start..].iter().position(|b| *b == b'\n') {
            let end = start + offset;
            let raw = &self.pending[start..end];
            let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
            let text = std::str::from_utf8(raw).map_err(|_| FramingError::NotUtf8)?;
            line(text)?;
            start = end + 1;
        }
        self.pending.drain(..start);
        if self.pending.len() > MAX_LINE_BYTES {
            return Err(FramingError::LineTooLong);
        }
        Ok(())
    }

    /// What is left after the last newline (a final line without one).
    fn rest(&mut self) -> Result<Option<String>, FramingError> {
        if self.pending.is_empty() {
            return Ok(None);
        }
        let rest = std::mem::take(&mut self.pending);
        String::from_utf8(rest).map(Some).map_err(|_| FramingError::NotUtf8)
    }
}

#[derive(Default)]
pub struct SseParser {
    lines: Lines,
    event: Option<String>,
    data: Vec<String>,
}

impl SseParser {
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Vec<SseEvent>, FramingError> {
        let mut out = Vec::new();
        let (event, data) = (&mut self.event, &mut self.data);
        self.lines.feed(bytes, |line| {
            Self::line(line, event, data, &mut out);
            Ok(())
        })?;
        Ok(out)
    }

    /// The stream ended: a last event not followed by a blank line still counts.
    pub fn finish(&mut self) -> Result<Vec<SseEvent>, FramingError> {
        let mut out = Vec::new();
        if let Some(line) = self.lines.rest()? {
            Self::line(&line, &mut self.event, &mut self.data, &mut out);
        }
        Self::line("", &mut self.event, &mut self.data, &mut out);
        Ok(out)
    }

    fn line(line: &str, event: &mut Option<String>, data: &mut Vec<String>, out: &mut Vec<SseEvent>) {
        if line.is_empty() {
            if !data.is_empty() {
                out.push(SseEvent { event: event.take(), data: data.join("\n") });
                data.clear();
            }
            *event = None;
            return;
        }
        if line.starts_with(':') {
            return; // a comment (keep-alive)
        }
        let (field, value) = line.split_once(':').map_or((line, ""), |(f, v)| (f, v.strip_prefix(' ').unwrap_or(v)));
        match field {
            "data" => data.push(value.to_owned()),
            "event" => *event = Some(value.to_owned()),
            _ => {} // id, retry: not needed
        }
    }
}

/// Newline-delimited JSON: one value per non-empty line.
#[derive(Default)]
pub struct NdjsonParser {
    lines: Lines,
}

impl NdjsonParser {
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Vec<String>, FramingError> {
        let mut out = Vec::new();
        self.lines.feed(bytes, |line| {
            if !line.trim().is_empty() {
                out.push(line.to_owned());
            }
            Ok(())
        })?;
        Ok(out)
    }

    pub fn finish(&mut self) -> Result<Vec<String>, FramingError> {
        Ok(self.lines.rest()?.filter(|l| !l.trim().is_empty()).into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_events_survive_any_split_including_inside_a_utf8_character() {
        let stream = "event: message_start\ndata: {\"a\":1}\n\n: keep-alive\r\ndata: héllo\r\ndata: wörld\r\n\r\ndata: [DONE]\n\n";
        let bytes = stream.as_bytes();
        for cut in 0..bytes.len() {
            let mut parser = SseParser::default();
            let mut events = parser.feed(&bytes[..cut]).unwrap();
            events.extend(parser.feed(&bytes[cut..]).unwrap());
            events.extend(parser.finish().unwrap());
            assert_eq!(
                events,
                vec![
                    SseEvent { event: Some("message_start".into()), data: "{\"a\":1}".into() },
                    SseEvent { event: None, data: "héllo\nwörld".into() },
                    SseEvent { event: None, data: "[DONE]".into() },
                ],
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn a_last_event_without_a_blank_line_and_ndjson_without_a_newline_count() {
        let mut sse = SseParser::default();
        assert!(sse.feed(b"data: tail").unwrap().is_empty());
        assert_eq!(sse.finish().unwrap()[0].data, "tail");
        let mut nd = NdjsonParser::default();
        assert_eq!(nd.feed(b"{\"a\":1}\n\n{\"b\"").unwrap(), vec!["{\"a\":1}"]);
        assert_eq!(nd.feed(b":2}").unwrap(), Vec::<String>::new());
        assert_eq!(nd.finish().unwrap(), vec!["{\"b\":2}"]);
        assert_eq!(SseParser::default().feed(b"data: \xff\xfe\n"), Err(FramingError::NotUtf8));
    }
}
