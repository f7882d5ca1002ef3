//! Data sessions (docs/api.md, "Data sessions"): the CSV download of a session's raw points,
//! streamed a batch at a time so that memory stays flat whatever the session's size.

use devicecloud_store::chunks::Point;
use devicecloud_store::session_collection::{self as store, SessionPoints};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::{Result, access};
use crate::caller::Caller;
use crate::state::AppState;
use devicecloud_engine::auth::Role;

/// Points read at a time: a few megabytes, whatever the session's size and however many
/// points share one second.
const CSV_BATCH_POINTS: usize = 65_536;

/// Lines a piece sent to the client holds: about a megabyte.
const LINES_PER_PIECE: usize = 16_384;

/// A session's CSV: its id (for the file name) and its lines, header first, as they are read.
pub struct SessionCsv {
    pub id_data_session: String,
    pub lines: ReceiverStream<Result<String, std::io::Error>>,
}

/// The CSV of session `id` as the caller may read it (viewer at least): the header
/// `timestamp,microseconds,source_device,serial_hardware,datatype,value`, then one line per raw
/// point, time ascending (ties by series). Streamed a batch at a time; stops when the client
/// goes away. A store error ends the body with an error, so the client sees a broken transfer
/// rather than a short file.
pub async fn csv(state: &AppState, caller: &Caller, id: &str) -> Result<SessionCsv> {
    let session = access::session(state, caller, id, Role::Viewer).await?;
    let mut points = store::points(&state.db, session.session_key, CSV_BATCH_POINTS).await?;
    let (tx, rx) = mpsc::channel::<Result<String, std::io::Error>>(4);
    tokio::spawn(async move {
        let header = "timestamp,microseconds,source_device,serial_hardware,datatype,value\n".to_string();
        if tx.send(Ok(header)).await.is_err() {
            return;
        }
        loop {
            let batch = match points.next_batch().await {
                Ok(Some(batch)) => batch,
                Ok(None) => return,
                Err(e) => {
                    tracing::warn!(error = %e, "CSV download failed");
                    let _ = tx.send(Err(std::io::Error::other("store error"))).await;
                    return;
                }
            };
            for part in batch.chunks(LINES_PER_PIECE) {
                if tx.send(Ok(csv_lines(&points, part))).await.is_err() {
                    return;
                }
            }
        }
    });
    Ok(SessionCsv {
        id_data_session: session.id_data_session,
        lines: ReceiverStream::new(rx),
    })
}

/// The CSV lines of some points.
fn csv_lines(session: &SessionPoints, points: &[Point]) -> String {
    use std::fmt::Write;
    let mut chunk = String::with_capacity(points.len() * 80);
    for p in points {
        let Some(s) = session.series(p.key) else { continue };
        let _ = writeln!(
            chunk,
            "{},{},{},{},{},{}",
            p.time_us.div_euclid(1_000_000),
            p.time_us.rem_euclid(1_000_000),
            s.source_device,
            csv_text(&s.serial_hardware),
            s.datatype,
            p.value
        );
    }
    chunk
}

/// A text cell of the CSV. A cell starting with `=`, `+`, `-`, `@`, a tab or a carriage return
/// would run as a formula when the file is opened in a spreadsheet, so it gets a leading `'`
/// (docs/api.md, "Data sessions"); the cell is quoted when it holds a comma, a quote or a line
/// break (RFC 4180). The export's CSV writes its cells with it too.
pub(crate) fn csv_text(text: &str) -> std::borrow::Cow<'_, str> {
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
