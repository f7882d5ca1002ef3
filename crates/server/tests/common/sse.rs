//! A Server-Sent Events reader for the live stream: a real HTTP response read chunk by chunk and
//! cut into events as an `EventSource` would.

use std::time::Duration;

use reqwest::Response;

/// One event, or one comment line (`comment` set, the rest empty).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SseEvent {
    pub event: Option<String>,
    pub id: Option<String>,
    pub data: String,
    pub comment: Option<String>,
}

impl SseEvent {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.data).unwrap_or_else(|_| panic!("not JSON: {}", self.data))
    }

    pub fn name(&self) -> &str {
        self.event.as_deref().unwrap_or("message")
    }
}

/// An open stream.
pub struct SseReader {
    response: Response,
    buffer: String,
    ended: bool,
}

impl SseReader {
    /// Takes a 200 `text/event-stream` answer.
    pub fn new(response: Response) -> SseReader {
        assert_eq!(response.status(), 200);
        let content_type = response.headers()["content-type"].to_str().unwrap().to_string();
        assert!(content_type.starts_with("text/event-stream"), "{content_type}");
        SseReader {
            response,
            buffer: String::new(),
            ended: false,
        }
    }

    /// The next event or comment; `None` once the server ended the stream. Panics after
    /// `wait` without one.
    pub async fn next_within(&mut self, wait: Duration) -> Option<SseEvent> {
        tokio::time::timeout(wait, self.next())
            .await
            .unwrap_or_else(|_| panic!("nothing on the stream within {wait:?}"))
    }

    /// The next event or comment; `None` once the server ended the stream.
    pub async fn next(&mut self) -> Option<SseEvent> {
        loop {
            if let Some(event) = self.take() {
                return Some(event);
            }
            if self.ended {
                return None;
            }
            match self.response.chunk().await {
                Ok(Some(bytes)) => self.buffer.push_str(std::str::from_utf8(&bytes).unwrap()),
                Ok(None) | Err(_) => self.ended = true,
            }
        }
    }

    /// The next event that is not a comment, within 10 s.
    pub async fn record(&mut self) -> Option<SseEvent> {
        loop {
            let event = self.next_within(Duration::from_secs(10)).await?;
            if event.comment.is_none() {
                return Some(event);
            }
        }
    }

    /// The events that are not comments arriving within `wait` (the stream staying open).
    pub async fn records_for(&mut self, wait: Duration) -> Vec<SseEvent> {
        let mut seen = Vec::new();
        let deadline = tokio::time::Instant::now() + wait;
        while let Ok(Some(event)) = tokio::time::timeout_at(deadline, self.next()).await {
            if event.comment.is_none() {
                seen.push(event);
            }
        }
        seen
    }

    /// Cuts the first complete block (a comment line, or an event ending with a blank line).
    fn take(&mut self) -> Option<SseEvent> {
        if self.buffer.starts_with(':') {
            let end = self.buffer.find('\n')?;
            let line: String = self.buffer.drain(..=end).collect();
            // A comment may be followed by the blank line of its own block.
            if self.buffer.starts_with('\n') {
                self.buffer.remove(0);
            }
            return Some(SseEvent {
                comment: Some(line[1..].trim().to_string()),
                ..SseEvent::default()
            });
        }
        let end = self.buffer.find("\n\n")?;
        let block: String = self.buffer.drain(..end + 2).collect();
        Some(parse(&block))
    }
}

/// One event block.
pub fn parse(block: &str) -> SseEvent {
    let mut event = SseEvent::default();
    let mut data = Vec::new();
    for line in block.lines().filter(|l| !l.is_empty()) {
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "event" => event.event = Some(value.to_string()),
            "id" => event.id = Some(value.to_string()),
            "data" => data.push(value),
            "" => event.comment = Some(value.to_string()),
            _ => {}
        }
    }
    event.data = data.join("\n");
    event
}
