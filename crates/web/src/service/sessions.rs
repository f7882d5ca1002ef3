//! Data sessions (docs/api.md, "Data sessions"): the CSV download of a session's raw points,
//! streamed window by window so that memory stays flat whatever the session's size.

use devicecloud_store::Db;
use devicecloud_store::session_collection::{self as store, CsvPoint};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::{Result, access};
use crate::caller::Caller;
use crate::state::AppState;
use devicecloud_engine::auth::Role;

/// CSV rows per window the download aims at: large enough to amortise a query, small enough
/// to keep memory flat.
const CSV_TARGET_ROWS: usize = 20_000;

/// Most points read at once: a window that holds more (many points in one second) is read in
/// pages of the size a window aims at.
const CSV_PAGE_ROWS: u64 = CSV_TARGET_ROWS as u64;

/// A session's CSV: its id (for the file name) and its lines, header first, as they are read.
pub struct SessionCsv {
    pub id_data_session: String,
    pub lines: ReceiverStream<Result<String, std::io::Error>>,
}

/// The CSV of session `id` as the caller may read it (viewer at least): the header
/// `timestamp,microseconds,source_device,serial_hardware,datatype,value`, then one line per raw
/// point, time ascending.
pub async fn csv(state: &AppState, caller: &Caller, id: &str) -> Result<SessionCsv> {
    let session = access::session(state, caller, id, Role::Viewer).await?;
    let range = store::time_range(&state.db, session.session_key).await?;
    let (tx, rx) = mpsc::channel::<Result<String, std::io::Error>>(4);
    let db = state.db.clone();
    tokio::spawn(async move {
        let header = "timestamp,microseconds,source_device,serial_hardware,datatype,value\n".to_string();
        if tx.send(Ok(header)).await.is_err() {
            return;
        }
        let Some((first, last)) = range else { return };
        stream_points(&db, session.session_key, first, last, &tx).await;
    });
    Ok(SessionCsv {
        id_data_session: session.id_data_session,
        lines: ReceiverStream::new(rx),
    })
}

/// Sends the session's points window by window, adapting the window's width so that each
/// holds about [`CSV_TARGET_ROWS`], and a window by pages of at most [`CSV_PAGE_ROWS`] (keyset on
/// time and series), so that memory stays flat also when one second holds millions of points;
/// stops when the client goes away. A store error ends the body with an error, so the client
/// sees a broken transfer rather than a short file.
async fn stream_points(
    db: &Db,
    session_key: i64,
    first: i64,
    last: i64,
    tx: &mpsc::Sender<Result<String, std::io::Error>>,
) {
    let mut from = first;
    let mut width: i64 = 60;
    while from <= last {
        let to = from.saturating_add(width);
        let mut after = None;
        let mut rows = 0;
        loop {
            let points = match store::points_between(db, session_key, (from, to), after, CSV_PAGE_ROWS).await {
                Ok(points) => points,
                Err(e) => {
                    tracing::warn!(error = %e, "CSV download failed");
                    let _ = tx.send(Err(std::io::Error::other("store error"))).await;
                    return;
                }
            };
            rows += points.len();
            let full = points.len() as u64 == CSV_PAGE_ROWS;
            after = points.last().map(CsvPoint::cursor);
            if !points.is_empty() && tx.send(Ok(csv_lines(&points))).await.is_err() {
                return;
            }
            if !full {
                break;
            }
        }
        from = to;
        width = next_width(width, rows);
    }
}

/// The CSV lines of a page of points.
fn csv_lines(points: &[CsvPoint]) -> String {
    use std::fmt::Write;
    let mut chunk = String::with_capacity(points.len() * 80);
    for p in points {
        let _ = writeln!(
            chunk,
            "{},{},{},{},{},{}",
            p.seconds,
            p.microseconds,
            p.source_device,
            csv_text(&p.serial_hardware),
            p.datatype,
            p.value
        );
    }
    chunk
}

/// The next window width from how full this one was.
fn next_width(width: i64, rows: usize) -> i64 {
    if rows < CSV_TARGET_ROWS / 4 {
        width.saturating_mul(4).min(86_400 * 365)
    } else if rows > CSV_TARGET_ROWS * 2 {
        (width / 2).max(1)
    } else {
        width
    }
}

/// A text cell of the CSV. A cell starting with `=`, `+`, `-`, `@`, a tab or a carriage return
/// would run as a formula when the file is opened in a spreadsheet, so it gets a leading `'`
/// (docs/api.md, "Data sessions"); the cell is quoted when it holds a comma, a quote or a line
/// break (RFC 4180).
fn csv_text(text: &str) -> std::borrow::Cow<'_, str> {
    let text: std::borrow::Cow<'_, str> = if text.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{text}").into()
    } else {
        text.into()
    };
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\"")).into()
    } else {
        text
    }
}

#[cfg(test)]
mod tests;
